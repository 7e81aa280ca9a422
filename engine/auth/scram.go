// Package auth is how kaas knows who a client is: SCRAM credentials
// (RFC 5802, RFC 7677) kept on the control-plane volume, never a password;
// the server side of the SASL mechanisms that check them (SCRAM-SHA-256,
// SCRAM-SHA-512, and PLAIN against the same stored credential); and
// OAUTHBEARER tokens (RFC 7628) verified against a JSON Web Key Set. The
// Kafka framing (SaslHandshake, SaslAuthenticate) is wire's; the principal
// a conversation ends with is what authorization will use.
package auth

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"errors"
	"fmt"
	"hash"
)

// Mechanism is a SCRAM mechanism: its SASL name and its hash.
type Mechanism struct {
	Name string
	hash func() hash.Hash
	size int
}

var (
	ScramSHA256 = Mechanism{Name: "SCRAM-SHA-256", hash: sha256.New, size: sha256.Size}
	ScramSHA512 = Mechanism{Name: "SCRAM-SHA-512", hash: sha512.New, size: sha512.Size}
)

// Mechanisms lists the SCRAM mechanisms kaas serves, strongest first.
var Mechanisms = []Mechanism{ScramSHA512, ScramSHA256}

// MechanismNamed returns the SCRAM mechanism called name.
func MechanismNamed(name string) (Mechanism, bool) {
	for _, m := range Mechanisms {
		if m.Name == name {
			return m, true
		}
	}
	return Mechanism{}, false
}

// Kafka's bounds on a SCRAM credential's iterations.
const (
	MinIterations     = 4096
	MaxIterations     = 16384
	DefaultIterations = 4096
	saltBytes         = 32
)

// ErrInvalidCredential refuses a credential kaas will not store.
var ErrInvalidCredential = errors.New("invalid credential")

// Credential is what a server keeps of a user's password for one
// mechanism: enough to verify a proof of it, never the password.
type Credential struct {
	User       string `json:"user"`
	Mechanism  string `json:"mechanism"`
	Salt       []byte `json:"salt"`
	Iterations int    `json:"iterations"`
	StoredKey  []byte `json:"storedKey"`
	ServerKey  []byte `json:"serverKey"`
}

// FromSaltedPassword is the credential for a password already salted and
// hashed (Hi(password, salt, iterations)), as AlterUserScramCredentials
// sends it.
func (m Mechanism) FromSaltedPassword(user string, salt, salted []byte, iterations int) (Credential, error) {
	if iterations < MinIterations || iterations > MaxIterations {
		return Credential{}, fmt.Errorf("%w: %d iterations, want %d to %d", ErrInvalidCredential, iterations, MinIterations, MaxIterations)
	}
	if len(salt) == 0 {
		return Credential{}, fmt.Errorf("%w: an empty salt", ErrInvalidCredential)
	}
	if len(salted) != m.size {
		return Credential{}, fmt.Errorf("%w: a salted password of %d bytes for %s, want %d", ErrInvalidCredential, len(salted), m.Name, m.size)
	}
	if user == "" {
		return Credential{}, fmt.Errorf("%w: an empty user name", ErrInvalidCredential)
	}
	return Credential{User: user, Mechanism: m.Name, Salt: append([]byte(nil), salt...), Iterations: iterations,
		StoredKey: m.sum(m.mac(salted, "Client Key")), ServerKey: m.mac(salted, "Server Key")}, nil
}

// FromPassword is the credential for password with a new random salt.
func (m Mechanism) FromPassword(user, password string, iterations int) (Credential, error) {
	salt := make([]byte, saltBytes)
	if _, err := rand.Read(salt); err != nil {
		return Credential{}, err
	}
	salted, err := m.saltPassword(password, salt, iterations)
	if err != nil {
		return Credential{}, err
	}
	return m.FromSaltedPassword(user, salt, salted, iterations)
}

// saltPassword is RFC 5802's Hi(password, salt, iterations): PBKDF2 with
// HMAC of the mechanism's hash.
func (m Mechanism) saltPassword(password string, salt []byte, iterations int) ([]byte, error) {
	if iterations < MinIterations || iterations > MaxIterations {
		return nil, fmt.Errorf("%w: %d iterations, want %d to %d", ErrInvalidCredential, iterations, MinIterations, MaxIterations)
	}
	return pbkdf2.Key(m.hash, password, salt, iterations, m.size)
}

// VerifyPassword reports whether password is the one c was made from (the
// PLAIN mechanism checks a password this way). It costs c.Iterations
// rounds of the hash.
func (m Mechanism) VerifyPassword(c Credential, password string) bool {
	salted, err := m.saltPassword(password, c.Salt, c.Iterations)
	if err != nil {
		return false
	}
	return subtle.ConstantTimeCompare(m.sum(m.mac(salted, "Client Key")), c.StoredKey) == 1
}

func (m Mechanism) mac(key []byte, msg string) []byte {
	h := hmac.New(m.hash, key)
	h.Write([]byte(msg))
	return h.Sum(nil)
}

func (m Mechanism) sum(b []byte) []byte {
	h := m.hash()
	h.Write(b)
	return h.Sum(nil)
}

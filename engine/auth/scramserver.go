package auth

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

var (
	// ErrAuthentication is a failed authentication. Its text is the same
	// whether the user is unknown or the proof wrong, so that a client
	// learns nothing about which users exist.
	ErrAuthentication = errors.New("authentication failed: invalid credentials")
	// ErrMalformed is a SASL message that does not parse, or arrives out
	// of order.
	ErrMalformed = errors.New("malformed SASL message")
)

// Lookup finds user's credential for mechanism m; ok is false for a user
// without one.
type Lookup func(user string, m Mechanism) (c Credential, ok bool, err error)

// ScramServer is the server side of one SCRAM exchange (RFC 5802): the
// client's first message is answered with the salt, iterations and nonce,
// its final message (the proof) with the server's signature. It does no
// hashing of passwords: the stored key checks the proof.
//
// An unknown user gets a made-up salt (stable for the name, from secret)
// and fails at the proof with the same error as a wrong password, as Kafka
// requires of a broker that must not reveal which users exist.
type ScramServer struct {
	m      Mechanism
	lookup Lookup
	secret []byte
	// newNonce makes the server's part of the nonce (tests fix it).
	newNonce func() (string, error)

	step            int // messages taken
	gs2Header       string
	clientFirstBare string
	serverFirst     string
	nonce           string
	cred            Credential
	known           bool
	user            string
}

// NewScramServer starts an exchange for mechanism m.
func NewScramServer(m Mechanism, lookup Lookup, secret []byte) *ScramServer {
	return &ScramServer{m: m, lookup: lookup, secret: secret, newNonce: randomNonce}
}

// randomNonce is 24 random bytes, base64url: printable and without ','.
func randomNonce() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// User is the authenticated user, once Step has answered done with no
// error.
func (s *ScramServer) User() string { return s.user }

// Step takes the client's next message and returns the answer. done is
// true after the final message: with a nil error the client is
// authenticated as User().
func (s *ScramServer) Step(msg []byte) (reply []byte, done bool, err error) {
	switch s.step {
	case 0:
		s.step++
		reply, err = s.clientFirst(string(msg))
		return reply, err != nil, err
	case 1:
		s.step++
		reply, err = s.clientFinal(string(msg))
		return reply, true, err
	}
	return nil, true, fmt.Errorf("%w: the SCRAM exchange has ended", ErrMalformed)
}

func (s *ScramServer) clientFirst(msg string) ([]byte, error) {
	// gs2-header: a channel-binding flag, an optional authzid, then the
	// bare message. kaas offers no channel binding ("p=" is refused; "y"
	// says the client could have used it but believes we cannot).
	flag, rest, ok := strings.Cut(msg, ",")
	if !ok || (flag != "n" && flag != "y") {
		return nil, fmt.Errorf("%w: channel binding %q is not supported", ErrMalformed, flag)
	}
	authzid, bare, ok := strings.Cut(rest, ",")
	if !ok {
		return nil, fmt.Errorf("%w: no gs2 header", ErrMalformed)
	}
	s.gs2Header = flag + "," + authzid + ","
	attrs, err := parseAttrs(bare)
	if err != nil {
		return nil, err
	}
	if len(attrs) < 2 || attrs[0].key != 'n' || attrs[1].key != 'r' {
		return nil, fmt.Errorf("%w: the client's first message needs n= and r= first", ErrMalformed)
	}
	user, err := decodeSaslName(attrs[0].value)
	if err != nil {
		return nil, err
	}
	if authzid != "" {
		az, err := decodeSaslName(strings.TrimPrefix(authzid, "a="))
		if err != nil || !strings.HasPrefix(authzid, "a=") || az != user {
			return nil, fmt.Errorf("%w: an authorization identity other than the user", ErrAuthentication)
		}
	}
	for _, a := range attrs[2:] {
		// Delegation tokens (Kafka's tokenauth extension) are not served.
		if a.ext == "tokenauth" && strings.EqualFold(a.value, "true") {
			return nil, ErrAuthentication
		}
	}
	clientNonce := attrs[1].value
	if clientNonce == "" {
		return nil, fmt.Errorf("%w: an empty client nonce", ErrMalformed)
	}
	cred, known, err := s.lookup(user, s.m)
	if err != nil {
		return nil, fmt.Errorf("look up the credential of %q: %w", user, err)
	}
	if !known {
		cred = s.madeUp(user)
	}
	serverNonce, err := s.newNonce()
	if err != nil {
		return nil, err
	}
	s.cred, s.known, s.user, s.clientFirstBare = cred, known, user, bare
	s.nonce = clientNonce + serverNonce
	s.serverFirst = "r=" + s.nonce + ",s=" + base64.StdEncoding.EncodeToString(cred.Salt) + ",i=" + strconv.Itoa(cred.Iterations)
	return []byte(s.serverFirst), nil
}

func (s *ScramServer) clientFinal(msg string) ([]byte, error) {
	withoutProof, proofAttr, ok := cutLast(msg, ",p=")
	if !ok {
		return nil, fmt.Errorf("%w: the client's final message has no proof", ErrMalformed)
	}
	attrs, err := parseAttrs(withoutProof)
	if err != nil {
		return nil, err
	}
	if len(attrs) < 2 || attrs[0].key != 'c' || attrs[1].key != 'r' {
		return nil, fmt.Errorf("%w: the client's final message needs c= and r= first", ErrMalformed)
	}
	binding, err := base64.StdEncoding.DecodeString(attrs[0].value)
	if err != nil || string(binding) != s.gs2Header {
		return nil, fmt.Errorf("%w: channel binding does not repeat the gs2 header", ErrMalformed)
	}
	// The nonce must end with the one this exchange began with, as
	// Kafka checks it: librdkafka (through 2.x at least) sends its own
	// nonce again in front of the combined one. What comes before is
	// covered by the proof, as all of this message is.
	got := attrs[1].value
	if len(got) < len(s.nonce) || subtle.ConstantTimeCompare([]byte(got[len(got)-len(s.nonce):]), []byte(s.nonce)) != 1 {
		return nil, fmt.Errorf("%w: the nonce is not the one this exchange began with", ErrMalformed)
	}
	proof, err := base64.StdEncoding.DecodeString(proofAttr)
	if err != nil || len(proof) != s.m.size {
		return nil, fmt.Errorf("%w: a proof of the wrong form", ErrMalformed)
	}
	authMessage := s.clientFirstBare + "," + s.serverFirst + "," + withoutProof
	// ClientKey = proof XOR HMAC(StoredKey, AuthMessage); the proof is
	// good when H(ClientKey) is the stored key.
	clientKey := s.m.mac(s.cred.StoredKey, authMessage)
	for i := range clientKey {
		clientKey[i] ^= proof[i]
	}
	good := subtle.ConstantTimeCompare(s.m.sum(clientKey), s.cred.StoredKey) == 1
	if !good || !s.known {
		s.user = ""
		return nil, ErrAuthentication
	}
	return []byte("v=" + base64.StdEncoding.EncodeToString(s.m.mac(s.cred.ServerKey, authMessage))), nil
}

// madeUp is the credential an unknown user is answered with: its salt is
// stable for the name (an attacker asking twice sees the same one, as for
// a real user) and its keys match no password.
func (s *ScramServer) madeUp(user string) Credential {
	h := hmac.New(s.m.hash, s.secret)
	h.Write([]byte("kaas unknown user salt\x00" + user))
	sum := h.Sum(nil)
	return Credential{User: user, Mechanism: s.m.Name, Salt: sum[:min(saltBytes, len(sum))], Iterations: DefaultIterations,
		StoredKey: bytes.Repeat([]byte{0}, s.m.size), ServerKey: bytes.Repeat([]byte{0}, s.m.size)}
}

// attr is one SCRAM attribute: a one-letter key and its value; ext is the
// name of an extension (key 0).
type attr struct {
	key   byte
	ext   string
	value string
}

// parseAttrs splits a SCRAM message into its attributes. A mandatory
// extension (m=) is refused, as RFC 5802 requires of a server that knows
// none.
func parseAttrs(msg string) ([]attr, error) {
	if !utf8.ValidString(msg) {
		return nil, fmt.Errorf("%w: not UTF-8", ErrMalformed)
	}
	var out []attr
	for part := range strings.SplitSeq(msg, ",") {
		k, v, ok := strings.Cut(part, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%w: attribute %q", ErrMalformed, part)
		}
		if len(k) == 1 {
			if k == "m" {
				return nil, fmt.Errorf("%w: a mandatory extension", ErrMalformed)
			}
			out = append(out, attr{key: k[0], value: v})
			continue
		}
		out = append(out, attr{ext: k, value: v})
	}
	return out, nil
}

// decodeSaslName undoes SCRAM's escaping of ',' (=2C) and '=' (=3D).
func decodeSaslName(s string) (string, error) {
	if s == "" {
		return "", fmt.Errorf("%w: an empty user name", ErrMalformed)
	}
	if !strings.Contains(s, "=") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", fmt.Errorf("%w: a user name with a bare '='", ErrMalformed)
		}
		i += 2
	}
	return b.String(), nil
}

// cutLast is strings.Cut at the last sep.
func cutLast(s, sep string) (before, after string, ok bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

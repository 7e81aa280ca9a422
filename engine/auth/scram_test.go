package auth

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// TestScramRFC7677 runs the SCRAM-SHA-256 exchange of RFC 7677 §3 and
// answers exactly the server messages it gives.
func TestScramRFC7677(t *testing.T) {
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	salted, err := ScramSHA256.saltPassword("pencil", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	cred, err := ScramSHA256.FromSaltedPassword("user", salt, salted, 4096)
	if err != nil {
		t.Fatal(err)
	}
	srv := NewScramServer(ScramSHA256, lookupOf(cred), []byte("secret"))
	srv.newNonce = func() (string, error) { return "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0", nil }
	first, done, err := srv.Step([]byte("n,,n=user,r=rOprNGfwEbeRWgbNEkqO"))
	if want := "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"; err != nil || done || string(first) != want {
		t.Fatalf("server-first = %q, %v, %v; want %q", first, done, err, want)
	}
	final, done, err := srv.Step([]byte("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="))
	if want := "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="; err != nil || !done || string(final) != want {
		t.Fatalf("server-final = %q, %v, %v; want %q", final, done, err, want)
	}
	if srv.User() != "user" {
		t.Fatalf("user %q", srv.User())
	}
}

func lookupOf(creds ...Credential) Lookup {
	return func(user string, m Mechanism) (Credential, bool, error) {
		for _, c := range creds {
			if c.User == user && c.Mechanism == m.Name {
				return c, true, nil
			}
		}
		return Credential{}, false, nil
	}
}

// converse runs franz-go's SCRAM client against a ScramServer to the end
// and returns the server's error, or the client's if the server accepted.
func converse(t *testing.T, m Mechanism, lookup Lookup, user, password string) (steps int, err error) {
	t.Helper()
	a := scram.Auth{User: user, Pass: password}
	mech := a.AsSha256Mechanism()
	if m.Name == ScramSHA512.Name {
		mech = a.AsSha512Mechanism()
	}
	sess, msg, err := mech.Authenticate(context.Background(), "127.0.0.1:9092")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewScramServer(m, lookup, []byte("secret"))
	for {
		reply, done, err := srv.Step(msg)
		steps++
		if err != nil {
			return steps, err
		}
		var clientDone bool
		clientDone, msg, err = sess.Challenge(reply)
		if err != nil {
			return steps, err // the client refused the server's signature
		}
		if done || clientDone {
			if !done || !clientDone || srv.User() != user {
				t.Fatalf("server done %v, client done %v, user %q", done, clientDone, srv.User())
			}
			return steps, nil
		}
	}
}

// TestScramWithFranzGo: franz-go's client authenticates with the right
// password for both mechanisms; a wrong password and an unknown user fail
// at the same step with the same error.
func TestScramWithFranzGo(t *testing.T) {
	for _, m := range Mechanisms {
		t.Run(m.Name, func(t *testing.T) {
			cred, err := m.FromPassword("alice", "s3cret, with = signs", DefaultIterations)
			if err != nil {
				t.Fatal(err)
			}
			lookup := lookupOf(cred)
			if _, err := converse(t, m, lookup, "alice", "s3cret, with = signs"); err != nil {
				t.Fatalf("right password: %v", err)
			}
			wrongAt, wrong := converse(t, m, lookup, "alice", "guess")
			unknownAt, unknown := converse(t, m, lookup, "mallory", "guess")
			if !errors.Is(wrong, ErrAuthentication) || !errors.Is(unknown, ErrAuthentication) ||
				wrong.Error() != unknown.Error() || wrongAt != unknownAt {
				t.Fatalf("wrong password: step %d %v; unknown user: step %d %v", wrongAt, wrong, unknownAt, unknown)
			}
			// The other mechanism's credential does not stand in for this one.
			other := ScramSHA256
			if m.Name == other.Name {
				other = ScramSHA512
			}
			if _, err := converse(t, other, lookup, "alice", "s3cret, with = signs"); !errors.Is(err, ErrAuthentication) {
				t.Fatalf("%s with only a %s credential: %v", other.Name, m.Name, err)
			}
		})
	}
}

// TestScramFinalNonce: the client's final nonce must end with the
// combined nonce, as Kafka checks it, so that librdkafka's final message
// (its own nonce again, then the combined one) authenticates; any other
// nonce is refused even with a proof made for it.
func TestScramFinalNonce(t *testing.T) {
	const password = "pw"
	cred, err := ScramSHA512.FromPassword("u", password, DefaultIterations)
	if err != nil {
		t.Fatal(err)
	}
	salted, err := ScramSHA512.saltPassword(password, cred.Salt, cred.Iterations)
	if err != nil {
		t.Fatal(err)
	}
	const clientNonce, serverNonce = "fyko+d2lbbFgONRv9qkxdawL", "3rfcNHYJY1ZVvWVs7j"
	cases := []struct {
		name, nonce string
		ok          bool
	}{
		{"the combined nonce (RFC 5802)", clientNonce + serverNonce, true},
		{"librdkafka: the client nonce, then the combined nonce", clientNonce + clientNonce + serverNonce, true},
		{"the client nonce only", clientNonce, false},
		{"the server nonce only", serverNonce, false},
		{"the combined nonce, then more", clientNonce + serverNonce + "x", false},
		{"another server nonce", clientNonce + "3rfcNHYJY1ZVvWVs7k", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := NewScramServer(ScramSHA512, lookupOf(cred), nil)
			srv.newNonce = func() (string, error) { return serverNonce, nil }
			clientFirstBare := "n=u,r=" + clientNonce
			serverFirst, _, err := srv.Step([]byte("n,," + clientFirstBare))
			if err != nil {
				t.Fatal(err)
			}
			withoutProof := "c=biws,r=" + c.nonce
			clientKey := ScramSHA512.mac(salted, "Client Key")
			sig := ScramSHA512.mac(ScramSHA512.sum(clientKey), clientFirstBare+","+string(serverFirst)+","+withoutProof)
			for i := range sig {
				sig[i] ^= clientKey[i]
			}
			final, done, err := srv.Step([]byte(withoutProof + ",p=" + base64.StdEncoding.EncodeToString(sig)))
			if !done || (err == nil) != c.ok {
				t.Fatalf("nonce %q: done %v, err %v; want accepted %v", c.nonce, done, err, c.ok)
			}
			if c.ok && (!strings.HasPrefix(string(final), "v=") || srv.User() != "u") {
				t.Fatalf("server-final %q, user %q", final, srv.User())
			}
			if !c.ok && !errors.Is(err, ErrMalformed) {
				t.Fatalf("refused with %v, want ErrMalformed", err)
			}
		})
	}
}

// TestScramRefusesMalformed: every malformed or out-of-order message is
// refused, and none panics.
func TestScramRefusesMalformed(t *testing.T) {
	cred, err := ScramSHA256.FromPassword("u", "p", DefaultIterations)
	if err != nil {
		t.Fatal(err)
	}
	firsts := []struct{ name, msg string }{
		{"empty", ""},
		{"channel binding", "p=tls-unique,,n=u,r=abc"},
		{"no gs2 header", "n=u,r=abc"},
		{"no nonce", "n,,n=u"},
		{"empty nonce", "n,,n=u,r="},
		{"attributes out of order", "n,,r=abc,n=u"},
		{"bare equals in name", "n,,n=u=x,r=abc"},
		{"mandatory extension", "n,,m=x,n=u,r=abc"},
		{"other authzid", "n,a=root,n=u,r=abc"},
		{"delegation token", "n,,n=u,r=abc,tokenauth=true"},
		{"not utf-8", "n,,n=\xff,r=abc"},
	}
	for _, c := range firsts {
		srv := NewScramServer(ScramSHA256, lookupOf(cred), nil)
		if _, done, err := srv.Step([]byte(c.msg)); err == nil || !done {
			t.Errorf("client-first %s (%q): done %v, err %v; want refused", c.name, c.msg, done, err)
		}
	}
	finals := []struct{ name, msg string }{
		{"no proof", "c=biws,r=abcXYZ"},
		{"wrong binding", "c=eSws,r=abcXYZ,p=AAAA"},
		{"wrong nonce", "c=biws,r=other,p=AAAA"},
		{"short proof", "c=biws,r=abcXYZ,p=AAAA"},
		{"proof not base64", "c=biws,r=abcXYZ,p=!!"},
	}
	for _, c := range finals {
		srv := NewScramServer(ScramSHA256, lookupOf(cred), nil)
		srv.newNonce = func() (string, error) { return "XYZ", nil }
		if _, _, err := srv.Step([]byte("n,,n=u,r=abc")); err != nil {
			t.Fatal(err)
		}
		if _, done, err := srv.Step([]byte(c.msg)); err == nil || !done {
			t.Errorf("client-final %s (%q): done %v, err %v; want refused", c.name, c.msg, done, err)
		}
		if _, _, err := srv.Step([]byte("n,,n=u,r=abc")); !errors.Is(err, ErrMalformed) {
			t.Errorf("a third message after %s: %v, want ErrMalformed", c.name, err)
		}
	}
}

// TestSaslNames: SCRAM's escapes of ',' and '=' in user names.
func TestSaslNames(t *testing.T) {
	for in, want := range map[string]string{"alice": "alice", "a=2Cb": "a,b", "a=3Db": "a=b", "=3D=2C": "=,"} {
		if got, err := decodeSaslName(in); err != nil || got != want {
			t.Errorf("decodeSaslName(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "a=", "a=2", "a=41"} {
		if _, err := decodeSaslName(bad); err == nil {
			t.Errorf("decodeSaslName(%q) accepted", bad)
		}
	}
}

// TestCredentialBounds: iterations outside Kafka's 4096..16384, an empty
// salt or user, and a salted password of the wrong size are refused.
func TestCredentialBounds(t *testing.T) {
	salted := make([]byte, ScramSHA512.size)
	cases := []struct {
		name       string
		user       string
		salt       []byte
		salted     []byte
		iterations int
	}{
		{"too few iterations", "u", []byte("s"), salted, MinIterations - 1},
		{"too many iterations", "u", []byte("s"), salted, MaxIterations + 1},
		{"empty salt", "u", nil, salted, DefaultIterations},
		{"empty user", "", []byte("s"), salted, DefaultIterations},
		{"short salted password", "u", []byte("s"), salted[:32], DefaultIterations},
	}
	for _, c := range cases {
		if _, err := ScramSHA512.FromSaltedPassword(c.user, c.salt, c.salted, c.iterations); !errors.Is(err, ErrInvalidCredential) {
			t.Errorf("%s: %v, want ErrInvalidCredential", c.name, err)
		}
	}
}

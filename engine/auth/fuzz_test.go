package auth

import (
	"errors"
	"testing"
	"time"
)

// FuzzScramServer feeds a SCRAM server any two client messages: it never
// panics, and it never authenticates without a proof made from the stored
// credential's password.
func FuzzScramServer(f *testing.F) {
	f.Add([]byte("n,,n=user,r=abc"), []byte("c=biws,r=abcXYZ,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="))
	f.Add([]byte("y,a=user,n=user,r=r,ext=1"), []byte("c=eSxhPXVzZXIs,r=rXYZ,p="))
	f.Add([]byte("n,,n=us=2Cer,r=\x00"), []byte(",p=,p="))
	cred, err := ScramSHA256.FromPassword("user", "pencil", DefaultIterations)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, first, final []byte) {
		srv := NewScramServer(ScramSHA256, lookupOf(cred), []byte("secret"))
		srv.newNonce = func() (string, error) { return "XYZ", nil }
		if _, done, err := srv.Step(first); err != nil || done {
			return
		}
		if _, _, err := srv.Step(final); err == nil {
			t.Fatalf("authenticated %q from %q, %q without the password", srv.User(), first, final)
		} else if !errors.Is(err, ErrAuthentication) && !errors.Is(err, ErrMalformed) {
			t.Fatalf("unexpected error %v", err)
		}
	})
}

// FuzzPlain: any PLAIN message is refused or names a user whose password
// it carries; none panics.
func FuzzPlain(f *testing.F) {
	f.Add([]byte("\x00user\x00pencil"))
	f.Add([]byte("user\x00user\x00pencil\x00"))
	f.Add([]byte{0, 0})
	cred, err := ScramSHA256.FromPassword("user", "pencil", DefaultIterations)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		user, err := Plain(msg, lookupOf(cred))
		if err == nil && (user != "user" || string(msg[len(msg)-len("pencil"):]) != "pencil") {
			t.Fatalf("Plain(%q) = %q", msg, user)
		}
	})
}

// FuzzOAuthBearer: no client response or token panics the parser or the
// verifier, and none verifies against a key set it was not signed for.
func FuzzOAuthBearer(f *testing.F) {
	f.Add([]byte("n,,\x01auth=Bearer eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln\x01\x01"))
	f.Add([]byte("n,a=x,\x01auth=Bearer a.b.c\x01\x01"))
	ks, err := ParseJWKS([]byte(`{"keys":[{"kty":"EC","kid":"e1","crv":"P-256",` +
		`"x":"MKBCTNIcKUSDii11ySs3526iDZ8AiTo7Tu6KPAqv7D4","y":"4Etl6SRW2YiLUrN5vfvVHuhp7x8PxltmWWlbbM4IFyM"}]}`))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		tok, err := OAuthBearerToken(msg)
		if err != nil {
			return
		}
		if _, err := VerifyToken(tok, ks, TokenRules{}, time.Unix(1_800_000_000, 0)); err == nil {
			t.Fatalf("token %q verified", tok)
		}
	})
}

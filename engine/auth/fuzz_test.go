package auth

import (
	"errors"
	"testing"
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

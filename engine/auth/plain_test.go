package auth

import (
	"errors"
	"testing"
)

// TestPlain: PLAIN checks the password against the strongest stored SCRAM
// credential; a wrong password and an unknown user get the same error.
func TestPlain(t *testing.T) {
	strong, err := ScramSHA512.FromPassword("alice", "pw-512", DefaultIterations)
	if err != nil {
		t.Fatal(err)
	}
	weak, err := ScramSHA256.FromPassword("alice", "pw-256", DefaultIterations)
	if err != nil {
		t.Fatal(err)
	}
	only256, err := ScramSHA256.FromPassword("bob", "pw", DefaultIterations)
	if err != nil {
		t.Fatal(err)
	}
	lookup := lookupOf(strong, weak, only256)
	cases := []struct {
		name, msg, user string
		err             error
	}{
		{"the strongest credential", "\x00alice\x00pw-512", "alice", nil},
		{"authzid equal to the user", "alice\x00alice\x00pw-512", "alice", nil},
		{"only a weaker credential", "\x00bob\x00pw", "bob", nil},
		{"a weaker credential's password", "\x00alice\x00pw-256", "", ErrAuthentication},
		{"wrong password", "\x00alice\x00guess", "", ErrAuthentication},
		{"unknown user", "\x00mallory\x00guess", "", ErrAuthentication},
		{"empty password", "\x00alice\x00", "", ErrAuthentication},
		{"another authzid", "root\x00alice\x00pw-512", "", ErrAuthentication},
		{"two parts", "alice\x00pw-512", "", ErrMalformed},
		{"four parts", "\x00alice\x00pw\x00x", "", ErrMalformed},
	}
	for _, c := range cases {
		user, err := Plain([]byte(c.msg), lookup)
		if user != c.user || !errors.Is(err, c.err) || (c.err == nil) != (err == nil) {
			t.Errorf("%s: Plain = %q, %v; want %q, %v", c.name, user, err, c.user, c.err)
		}
	}
	_, wrong := Plain([]byte("\x00alice\x00guess"), lookup)
	_, unknown := Plain([]byte("\x00mallory\x00guess"), lookup)
	if wrong.Error() != unknown.Error() {
		t.Errorf("wrong password %q and unknown user %q read differently", wrong, unknown)
	}
}

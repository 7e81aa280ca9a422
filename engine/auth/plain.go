package auth

import (
	"bytes"
	"fmt"
)

// Plain checks a SASL PLAIN message (RFC 4616: authzid NUL authcid NUL
// password) against the user's stored SCRAM credential, the strongest the
// user has, and returns the user. There is one credential store: a user
// that can log in with SCRAM can log in with PLAIN, over TLS.
//
// An unknown user costs the same hashing as a known one and gets the same
// error as a wrong password.
func Plain(msg []byte, lookup Lookup) (string, error) {
	parts := bytes.Split(msg, []byte{0})
	if len(parts) != 3 {
		return "", fmt.Errorf("%w: a PLAIN message has three parts, not %d", ErrMalformed, len(parts))
	}
	authzid, user, password := string(parts[0]), string(parts[1]), string(parts[2])
	if user == "" || password == "" {
		return "", ErrAuthentication
	}
	if authzid != "" && authzid != user {
		return "", fmt.Errorf("%w: an authorization identity other than the user", ErrAuthentication)
	}
	for _, m := range Mechanisms {
		c, ok, err := lookup(user, m)
		if err != nil {
			return "", fmt.Errorf("look up the credential of %q: %w", user, err)
		}
		if ok {
			if !m.VerifyPassword(c, password) {
				return "", ErrAuthentication
			}
			return user, nil
		}
	}
	// Hash as a known user would, so that timing does not tell.
	_, _ = Mechanisms[0].saltPassword(password, []byte(user), DefaultIterations)
	return "", ErrAuthentication
}

// Package sasl is a connection's SASL authentication as Kafka runs it:
// SaslHandshake picks a mechanism, SaslAuthenticate carries its messages
// until the client is authenticated or refused, and until then only
// ApiVersions, SaslHandshake and SaslAuthenticate are served. The
// mechanisms themselves (SCRAM, PLAIN, OAUTHBEARER) are engine/auth's.
package sasl

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kaas-dev/kaas/engine/auth"
)

// The mechanism names, as clients send them.
const (
	Plain       = "PLAIN"
	ScramSHA256 = "SCRAM-SHA-256"
	ScramSHA512 = "SCRAM-SHA-512"
	OAuthBearer = "OAUTHBEARER"
)

// Config is what a listener's sessions share.
type Config struct {
	// Mechanisms are the enabled mechanisms, in the order SaslHandshake
	// lists them.
	Mechanisms []string
	// Lookup finds SCRAM credentials (PLAIN checks passwords against them).
	Lookup auth.Lookup
	// Secret makes up the salt of unknown SCRAM users (stable per broker).
	Secret []byte
	// Keys and Rules verify OAUTHBEARER tokens.
	Keys  func() auth.KeySet
	Rules auth.TokenRules
	// MaxReauth bounds a session without a token expiry
	// (connections.max.reauth.ms); 0: sessions do not expire.
	MaxReauth time.Duration
	Now       func() time.Time
}

// Session is one connection's authentication.
type Session struct {
	cfg       *Config
	mechanism string
	scram     *auth.ScramServer
	// failedOAuth is set when an OAUTHBEARER token was refused: the client
	// answers the error with one \x01, and then the session fails.
	failedOAuth bool
	principal   string
	expires     time.Time // zero: no expiry
}

// NewSession starts a connection's authentication. cfg is shared by the
// listener's sessions and never written.
func NewSession(cfg *Config) *Session { return &Session{cfg: cfg} }

func (s *Session) now() time.Time {
	if s.cfg.Now != nil {
		return s.cfg.Now()
	}
	return time.Now()
}

// Allowed reports whether a request of apiKey may be served now: before
// authentication only ApiVersions (18), SaslHandshake (17) and
// SaslAuthenticate (36).
func (s *Session) Allowed(apiKey int16) bool {
	return s.principal != "" || apiKey == 18 || apiKey == 17 || apiKey == 36
}

// Principal is the authenticated user ("" before authentication).
func (s *Session) Principal() string { return s.principal }

// Expired reports whether the session has outlived its token or the
// re-authentication bound without re-authenticating (KIP-368): the
// connection is then closed.
func (s *Session) Expired() bool {
	return !s.expires.IsZero() && !s.now().Before(s.expires)
}

// Handshake answers SaslHandshake: the error code (0 when mechanism is
// enabled) and the enabled mechanisms. A handshake starts a new exchange,
// which is how a client re-authenticates.
func (s *Session) Handshake(mechanism string) (errCode int16, enabled []string) {
	if !slices.Contains(s.cfg.Mechanisms, mechanism) {
		return kerr.UnsupportedSaslMechanism.Code, s.cfg.Mechanisms
	}
	s.mechanism, s.scram, s.failedOAuth = mechanism, nil, false
	switch mechanism {
	case ScramSHA256:
		s.scram = auth.NewScramServer(auth.ScramSHA256, s.cfg.Lookup, s.cfg.Secret)
	case ScramSHA512:
		s.scram = auth.NewScramServer(auth.ScramSHA512, s.cfg.Lookup, s.cfg.Secret)
	}
	return 0, s.cfg.Mechanisms
}

// Result is SaslAuthenticate's answer.
type Result struct {
	ErrCode int16
	// Message is the error message: the same for an unknown user as for
	// a wrong password.
	Message string
	Reply   []byte
	// Done: the exchange has ended; with ErrCode 0 the client is
	// authenticated, otherwise the connection is closed (after Kafka's
	// failed-authentication delay).
	Done bool
	// Lifetime is the session's remaining lifetime, for v1+ answers
	// (0: no limit).
	Lifetime time.Duration
	// Err is why the exchange failed, for the broker's log only: the
	// client is told Message.
	Err error
	// Mechanism is the exchange's mechanism.
	Mechanism string
}

// Authenticate answers one SaslAuthenticate message.
func (s *Session) Authenticate(msg []byte) Result {
	switch s.mechanism {
	case "":
		return Result{ErrCode: kerr.IllegalSaslState.Code, Message: "SaslAuthenticate before SaslHandshake", Done: true}
	case Plain:
		user, err := auth.Plain(msg, s.cfg.Lookup)
		return s.end(user, time.Time{}, nil, err)
	case ScramSHA256, ScramSHA512:
		if s.scram == nil {
			return Result{ErrCode: kerr.IllegalSaslState.Code, Message: "the SCRAM exchange has ended: send SaslHandshake to start another", Done: true}
		}
		reply, done, err := s.scram.Step(msg)
		if !done {
			return Result{Reply: reply}
		}
		user := s.scram.User()
		s.scram = nil
		return s.end(user, time.Time{}, reply, err)
	case OAuthBearer:
		if s.failedOAuth {
			s.failedOAuth = false
			return s.end("", time.Time{}, nil, auth.ErrInvalidToken)
		}
		tok, err := s.oauth(msg)
		if err != nil {
			// RFC 7628: the error is a JSON challenge the client answers
			// with \x01; the exchange fails then.
			s.failedOAuth = true
			return Result{Reply: []byte(`{"status":"invalid_token"}`)}
		}
		return s.end(tok.Principal, tok.Expires, nil, nil)
	}
	return Result{ErrCode: kerr.IllegalSaslState.Code, Message: fmt.Sprintf("mechanism %s", s.mechanism), Done: true}
}

func (s *Session) oauth(msg []byte) (auth.Token, error) {
	raw, err := auth.OAuthBearerToken(msg)
	if err != nil {
		return auth.Token{}, err
	}
	if s.cfg.Keys == nil {
		return auth.Token{}, errors.New("no key set for OAUTHBEARER")
	}
	return auth.VerifyToken(raw, s.cfg.Keys(), s.cfg.Rules, s.now())
}

// end closes an exchange: on success the principal and the session's
// expiry (the token's, bounded by MaxReauth); on failure a message that
// says no more than that the credentials were not accepted.
func (s *Session) end(user string, tokenExpiry time.Time, reply []byte, err error) Result {
	mech := s.mechanism
	s.mechanism = ""
	if err != nil || user == "" {
		if s.principal != "" {
			s.expires = s.now() // a failed re-authentication ends the session
		}
		if err == nil {
			err = errors.New("no user")
		}
		return Result{ErrCode: kerr.SaslAuthenticationFailed.Code,
			Message: "Authentication failed during authentication due to invalid credentials with SASL mechanism " + mech, Done: true, Err: err, Mechanism: mech}
	}
	if s.principal != "" && s.principal != user {
		s.expires = s.now()
		return Result{ErrCode: kerr.SaslAuthenticationFailed.Code,
			Message: "re-authentication as another principal is not allowed", Done: true, Mechanism: mech}
	}
	s.principal = user
	now := s.now()
	s.expires = tokenExpiry
	if s.cfg.MaxReauth > 0 && (s.expires.IsZero() || now.Add(s.cfg.MaxReauth).Before(s.expires)) {
		s.expires = now.Add(s.cfg.MaxReauth)
	}
	var lifetime time.Duration
	if !s.expires.IsZero() {
		lifetime = max(s.expires.Sub(now), time.Millisecond)
	}
	return Result{Reply: reply, Done: true, Lifetime: lifetime, Mechanism: mech}
}

package sasl

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kaas-dev/kaas/engine/auth"
)

// world is one broker's credentials and token keys.
type world struct {
	cfg *Config
	ec  *ecdsa.PrivateKey
	now time.Time
}

func newWorld(t *testing.T) *world {
	t.Helper()
	var creds []auth.Credential
	for _, m := range auth.Mechanisms {
		c, err := m.FromPassword("alice", "pw", auth.DefaultIterations)
		if err != nil {
			t.Fatal(err)
		}
		creds = append(creds, c)
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	pub, _ := key.PublicKey.Bytes()
	b64 := base64.RawURLEncoding
	jwks, _ := json.Marshal(map[string]any{"keys": []map[string]string{{"kty": "EC", "kid": "k", "crv": "P-256",
		"x": b64.EncodeToString(pub[1:33]), "y": b64.EncodeToString(pub[33:])}}})
	ks, err := auth.ParseJWKS(jwks)
	if err != nil {
		t.Fatal(err)
	}
	w := &world{ec: key, now: time.Unix(1_800_000_000, 0)}
	w.cfg = &Config{
		Mechanisms: []string{ScramSHA512, ScramSHA256, Plain, OAuthBearer},
		Lookup: func(user string, m auth.Mechanism) (auth.Credential, bool, error) {
			for _, c := range creds {
				if c.User == user && c.Mechanism == m.Name {
					return c, true, nil
				}
			}
			return auth.Credential{}, false, nil
		},
		Secret: []byte("s"), Keys: func() auth.KeySet { return ks }, Rules: auth.TokenRules{Audience: "kaas"},
		MaxReauth: time.Hour, Now: func() time.Time { return w.now },
	}
	return w
}

func (w *world) token(sub string, exp time.Time) string {
	b64 := base64.RawURLEncoding
	h, _ := json.Marshal(map[string]string{"alg": "ES256", "kid": "k"})
	c, _ := json.Marshal(map[string]any{"sub": sub, "aud": "kaas", "exp": exp.Unix()})
	signed := b64.EncodeToString(h) + "." + b64.EncodeToString(c)
	d := crypto.SHA256.New()
	d.Write([]byte(signed))
	r, s, _ := ecdsa.Sign(rand.Reader, w.ec, d.Sum(nil))
	return signed + "." + b64.EncodeToString(append(r.FillBytes(make([]byte, 32)), s.FillBytes(make([]byte, 32))...))
}

// login runs a franz-go client mechanism through SaslHandshake and
// SaslAuthenticate against s, as the broker's framing would.
func login(t *testing.T, s *Session, mech sasl.Mechanism) Result {
	t.Helper()
	if code, _ := s.Handshake(mech.Name()); code != 0 {
		return Result{ErrCode: code, Done: true}
	}
	sess, msg, err := mech.Authenticate(context.Background(), "127.0.0.1:9092")
	if err != nil {
		t.Fatal(err)
	}
	for {
		res := s.Authenticate(msg)
		if res.ErrCode != 0 {
			return res
		}
		done, next, err := sess.Challenge(res.Reply)
		if err != nil {
			t.Fatalf("%s client refused the server's answer: %v", mech.Name(), err)
		}
		if res.Done {
			if !done {
				t.Fatalf("%s: the server ended the exchange, the client did not", mech.Name())
			}
			return res
		}
		msg = next
	}
}

// TestMechanisms: franz-go's clients log in with each mechanism; wrong
// passwords, unknown users and bad tokens get SASL_AUTHENTICATION_FAILED
// with one message whatever went wrong.
func TestMechanisms(t *testing.T) {
	w := newWorld(t)
	good := []sasl.Mechanism{
		scram.Auth{User: "alice", Pass: "pw"}.AsSha512Mechanism(),
		scram.Auth{User: "alice", Pass: "pw"}.AsSha256Mechanism(),
		plain.Auth{User: "alice", Pass: "pw"}.AsMechanism(),
		oauth.Auth{Token: w.token("alice", w.now.Add(10*time.Minute))}.AsMechanism(),
	}
	for _, m := range good {
		s := NewSession(w.cfg)
		if s.Allowed(3) {
			t.Fatal("Metadata allowed before authentication")
		}
		res := login(t, s, m)
		if res.ErrCode != 0 || s.Principal() != "alice" || !s.Allowed(3) {
			t.Errorf("%s: %+v, principal %q", m.Name(), res, s.Principal())
		}
	}
	bad := []sasl.Mechanism{
		scram.Auth{User: "alice", Pass: "guess"}.AsSha512Mechanism(),
		scram.Auth{User: "mallory", Pass: "guess"}.AsSha256Mechanism(),
		plain.Auth{User: "alice", Pass: "guess"}.AsMechanism(),
		plain.Auth{User: "mallory", Pass: "pw"}.AsMechanism(),
	}
	for _, m := range bad {
		s := NewSession(w.cfg)
		res := login(t, s, m)
		if res.ErrCode != kerr.SaslAuthenticationFailed.Code || !res.Done || s.Principal() != "" ||
			res.Message != "Authentication failed during authentication due to invalid credentials with SASL mechanism "+m.Name() {
			t.Errorf("%s: %+v", m.Name(), res)
		}
	}
	for name, tok := range map[string]string{"expired": w.token("alice", w.now.Add(-time.Minute)), "garbage": "a.b.c"} {
		s := NewSession(w.cfg)
		if code, _ := s.Handshake(OAuthBearer); code != 0 {
			t.Fatal(code)
		}
		sess, msg, _ := oauth.Auth{Token: tok}.AsMechanism().Authenticate(context.Background(), "h")
		res := s.Authenticate(msg)
		if res.ErrCode != 0 || res.Done || len(res.Reply) == 0 {
			t.Fatalf("%s token: first answer %+v, want the error challenge", name, res)
		}
		_, next, _ := sess.Challenge(res.Reply)
		if res := s.Authenticate(next); res.ErrCode != kerr.SaslAuthenticationFailed.Code || s.Principal() != "" {
			t.Errorf("%s token: %+v", name, res)
		}
	}
}

// TestProtocolErrors: an unknown mechanism, SaslAuthenticate before the
// handshake or after the exchange ended.
func TestProtocolErrors(t *testing.T) {
	w := newWorld(t)
	s := NewSession(w.cfg)
	if res := s.Authenticate([]byte("x")); res.ErrCode != kerr.IllegalSaslState.Code {
		t.Errorf("before the handshake: %+v", res)
	}
	if code, enabled := s.Handshake("GSSAPI"); code != kerr.UnsupportedSaslMechanism.Code || len(enabled) != 4 {
		t.Errorf("GSSAPI: %d %v", code, enabled)
	}
	w.cfg.Mechanisms = []string{ScramSHA512}
	if code, _ := NewSession(w.cfg).Handshake(Plain); code != kerr.UnsupportedSaslMechanism.Code {
		t.Errorf("a mechanism not enabled: %d", code)
	}
	res := login(t, s, scram.Auth{User: "alice", Pass: "pw"}.AsSha512Mechanism())
	if res.ErrCode != 0 {
		t.Fatal(res)
	}
	if res := s.Authenticate([]byte("n,,n=alice,r=x")); res.ErrCode != kerr.IllegalSaslState.Code {
		t.Errorf("after the exchange: %+v", res)
	}
}

// TestReauthentication (KIP-368): a session lives until its token expires,
// bounded by MaxReauth; re-authenticating as the same principal extends
// it, as another principal ends it.
func TestReauthentication(t *testing.T) {
	w := newWorld(t)
	s := NewSession(w.cfg)
	res := login(t, s, oauth.Auth{Token: w.token("alice", w.now.Add(10*time.Minute))}.AsMechanism())
	if res.ErrCode != 0 || res.Lifetime != 10*time.Minute {
		t.Fatalf("token session: %+v", res)
	}
	w.now = w.now.Add(9 * time.Minute)
	if s.Expired() {
		t.Fatal("expired before its token")
	}
	res = login(t, s, scram.Auth{User: "alice", Pass: "pw"}.AsSha256Mechanism())
	if res.ErrCode != 0 || res.Lifetime != time.Hour {
		t.Fatalf("re-authentication: %+v", res)
	}
	w.now = w.now.Add(time.Hour)
	if !s.Expired() {
		t.Fatal("a session outlived connections.max.reauth.ms")
	}
	s2 := NewSession(w.cfg)
	login(t, s2, plain.Auth{User: "alice", Pass: "pw"}.AsMechanism())
	other := oauth.Auth{Token: w.token("bob", w.now.Add(time.Hour))}.AsMechanism()
	if res := login(t, s2, other); res.ErrCode != kerr.SaslAuthenticationFailed.Code || !s2.Expired() {
		t.Errorf("re-authentication as another principal: %+v, expired %v", res, s2.Expired())
	}
}

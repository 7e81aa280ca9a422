package sasl

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/kaas-dev/kaas/engine/auth"
)

// idp is an identity provider's signing key.
type idp struct {
	kid string
	key *ecdsa.PrivateKey
}

func newIDP(t *testing.T, kid string) idp {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return idp{kid: kid, key: key}
}

func (p idp) jwks() []byte {
	pub, _ := p.key.PublicKey.Bytes()
	b64 := base64.RawURLEncoding
	b, _ := json.Marshal(map[string]any{"keys": []map[string]string{{"kty": "EC", "kid": p.kid, "crv": "P-256",
		"x": b64.EncodeToString(pub[1:33]), "y": b64.EncodeToString(pub[33:])}}})
	return b
}

func (p idp) token(sub string, exp time.Time) string {
	b64 := base64.RawURLEncoding
	h, _ := json.Marshal(map[string]string{"alg": "ES256", "kid": p.kid})
	c, _ := json.Marshal(map[string]any{"sub": sub, "exp": exp.Unix()})
	signed := b64.EncodeToString(h) + "." + b64.EncodeToString(c)
	d := crypto.SHA256.New()
	d.Write([]byte(signed))
	r, s, _ := ecdsa.Sign(rand.Reader, p.key, d.Sum(nil))
	return signed + "." + b64.EncodeToString(append(r.FillBytes(make([]byte, 32)), s.FillBytes(make([]byte, 32))...))
}

// TestJWKSFileReload: a rewritten JWKS file verifies tokens of its new key
// once CheckEvery has passed (and not before), a broken or missing file
// keeps the keys loaded before, and LoadJWKSFile refuses a broken file.
func TestJWKSFileReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "jwks.json")
	t0 := time.Unix(1_800_000_000, 0)
	write := func(b []byte, mod time.Time) {
		t.Helper()
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, mod, mod); err != nil {
			t.Fatal(err)
		}
	}
	oldKey, newKey := newIDP(t, "old"), newIDP(t, "new")
	write(oldKey.jwks(), t0)
	now := t0
	f, err := LoadJWKSFile(JWKSFileConfig{Path: path, Now: func() time.Time { return now }, Logger: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	verifies := func(p idp) bool {
		_, err := auth.VerifyToken(p.token("alice", t0.Add(time.Hour)), f.Keys(), auth.TokenRules{}, t0)
		return err == nil
	}
	steps := []struct {
		name             string
		write            []byte // nil: leave the file
		remove           bool
		advance          time.Duration
		wantOld, wantNew bool
	}{
		{name: "loaded", wantOld: true},
		{name: "rotated, looked at too soon", write: newKey.jwks(), advance: 500 * time.Millisecond, wantOld: true},
		{name: "rotated, looked at after CheckEvery", advance: time.Second, wantNew: true},
		{name: "broken file", write: []byte("{not json"), advance: 2 * time.Second, wantNew: true},
		{name: "file removed", remove: true, advance: 2 * time.Second, wantNew: true},
		{name: "the old key back", write: oldKey.jwks(), advance: 2 * time.Second, wantOld: true},
	}
	for i, s := range steps {
		now = now.Add(s.advance)
		switch {
		case s.remove:
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		case s.write != nil:
			write(s.write, t0.Add(time.Duration(i)*time.Minute))
		}
		if gotOld, gotNew := verifies(oldKey), verifies(newKey); gotOld != s.wantOld || gotNew != s.wantNew {
			t.Fatalf("%s: old key verifies %v, new %v; want %v, %v", s.name, gotOld, gotNew, s.wantOld, s.wantNew)
		}
	}
	write([]byte("{not json"), t0.Add(time.Hour))
	if _, err := LoadJWKSFile(JWKSFileConfig{Path: path}); err == nil {
		t.Fatal("LoadJWKSFile accepted a broken file")
	}
}

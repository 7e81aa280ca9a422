package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"
)

var b64 = base64.RawURLEncoding

// signer makes tokens as an identity provider would.
type signer struct {
	rsa *rsa.PrivateKey
	ec  *ecdsa.PrivateKey
}

func newSigner(t *testing.T) signer {
	t.Helper()
	r, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	e, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return signer{rsa: r, ec: e}
}

func (s signer) jwks() []byte {
	ecPub, _ := s.ec.PublicKey.Bytes() // 0x04 || x || y
	doc := map[string]any{"keys": []map[string]string{
		{"kty": "RSA", "kid": "r1", "use": "sig", "n": b64.EncodeToString(s.rsa.N.Bytes()), "e": b64.EncodeToString(big.NewInt(int64(s.rsa.E)).Bytes())},
		{"kty": "EC", "kid": "e1", "crv": "P-256", "x": b64.EncodeToString(ecPub[1:33]), "y": b64.EncodeToString(ecPub[33:])},
		{"kty": "oct", "kid": "h1", "k": "c2VjcmV0"},
	}}
	b, _ := json.Marshal(doc)
	return b
}

func (s signer) token(t *testing.T, alg, kid string, claims map[string]any) string {
	t.Helper()
	h, _ := json.Marshal(map[string]string{"alg": alg, "kid": kid, "typ": "JWT"})
	c, _ := json.Marshal(claims)
	signed := b64.EncodeToString(h) + "." + b64.EncodeToString(c)
	var sig []byte
	var err error
	switch alg {
	case "RS256":
		sig, err = rsa.SignPKCS1v15(rand.Reader, s.rsa, crypto.SHA256, digestOf(crypto.SHA256, []byte(signed)))
	case "PS384":
		sig, err = rsa.SignPSS(rand.Reader, s.rsa, crypto.SHA384, digestOf(crypto.SHA384, []byte(signed)), &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash})
	case "ES256":
		var r, ss *big.Int
		r, ss, err = ecdsa.Sign(rand.Reader, s.ec, digestOf(crypto.SHA256, []byte(signed)))
		sig = append(r.FillBytes(make([]byte, 32)), ss.FillBytes(make([]byte, 32))...)
	default:
		sig = []byte("x")
	}
	if err != nil {
		t.Fatal(err)
	}
	return signed + "." + b64.EncodeToString(sig)
}

// TestVerifyToken: a token signed by a key of the set, for the issuer and
// audience, unexpired, names its subject; every other token is refused.
func TestVerifyToken(t *testing.T) {
	s := newSigner(t)
	ks, err := ParseJWKS(s.jwks())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	rules := TokenRules{Issuer: "https://idp", Audience: "kaas", Skew: 30 * time.Second}
	good := func() map[string]any {
		return map[string]any{"sub": "svc-orders", "iss": "https://idp", "aud": []string{"other", "kaas"}, "exp": now.Unix() + 600}
	}
	with := func(k string, v any) map[string]any { c := good(); c[k] = v; return c }
	without := func(k string) map[string]any { c := good(); delete(c, k); return c }
	for _, alg := range []struct{ alg, kid string }{{"RS256", "r1"}, {"PS384", "r1"}, {"ES256", "e1"}} {
		tok, err := VerifyToken(s.token(t, alg.alg, alg.kid, good()), ks, rules, now)
		if err != nil || tok.Principal != "svc-orders" || !tok.Expires.Equal(now.Add(600*time.Second)) {
			t.Errorf("%s: %+v, %v", alg.alg, tok, err)
		}
	}
	if _, err := VerifyToken(s.token(t, "RS256", "r1", with("aud", "kaas")), ks, rules, now); err != nil {
		t.Errorf("a single audience string: %v", err)
	}
	other := newSigner(t)
	bad := []struct {
		name, token string
	}{
		{"expired", s.token(t, "RS256", "r1", with("exp", now.Unix()-31))},
		{"not yet valid", s.token(t, "RS256", "r1", with("nbf", now.Unix()+31))},
		{"no exp", s.token(t, "RS256", "r1", without("exp"))},
		{"no sub", s.token(t, "RS256", "r1", without("sub"))},
		{"another issuer", s.token(t, "RS256", "r1", with("iss", "https://evil"))},
		{"another audience", s.token(t, "RS256", "r1", with("aud", "billing"))},
		{"signed by another key", other.token(t, "RS256", "r1", good())},
		{"unknown key", s.token(t, "RS256", "r9", good())},
		{"alg none", s.token(t, "none", "r1", good())},
		{"HMAC with the RSA key", s.token(t, "HS256", "r1", good())},
		{"ES256 with the RSA key", s.tokenWithKid(t, "ES256", "r1")},
		{"two segments", "a.b"},
		{"garbage", "!!.!!.!!"},
	}
	for _, c := range bad {
		if _, err := VerifyToken(c.token, ks, rules, now); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("%s: %v, want ErrInvalidToken", c.name, err)
		}
	}
	if _, err := VerifyToken(s.token(t, "RS256", "r1", with("exp", now.Unix()-29)), ks, rules, now); err != nil {
		t.Errorf("expired within the skew: %v", err)
	}
}

// tokenWithKid signs with the EC key but names another key ID.
func (s signer) tokenWithKid(t *testing.T, alg, kid string) string {
	tok := s.token(t, alg, "e1", map[string]any{"sub": "x", "exp": time.Now().Unix() + 600})
	h, _ := json.Marshal(map[string]string{"alg": alg, "kid": kid})
	return b64.EncodeToString(h) + tok[strings.Index(tok, "."):]
}

// TestParseJWKS refuses sets with no signing key and malformed keys.
func TestParseJWKS(t *testing.T) {
	for _, doc := range []string{`{}`, `{"keys":[]}`, `{"keys":[{"kty":"oct","k":"x"}]}`, `not json`,
		`{"keys":[{"kty":"RSA","n":"AQAB","e":"AQAB"}]}`,
		`{"keys":[{"kty":"EC","crv":"P-256","x":"AQ","y":"AQ"}]}`,
		fmt.Sprintf(`{"keys":[{"kty":"EC","crv":"P-999","x":"%s","y":"%s"}]}`, "AQ", "AQ")} {
		if _, err := ParseJWKS([]byte(doc)); err == nil {
			t.Errorf("ParseJWKS(%s) accepted", doc)
		}
	}
}

// TestOAuthBearerToken reads the token from RFC 7628 client responses.
func TestOAuthBearerToken(t *testing.T) {
	if tok, err := OAuthBearerToken([]byte("n,,\x01auth=Bearer abc.def.ghi\x01\x01")); err != nil || tok != "abc.def.ghi" {
		t.Fatalf("%q, %v", tok, err)
	}
	if tok, err := OAuthBearerToken([]byte("n,a=svc,\x01host=h\x01auth=bearer t\x01\x01")); err != nil || tok != "t" {
		t.Fatalf("with authzid and another key: %q, %v", tok, err)
	}
	for _, bad := range []string{"", "auth=Bearer t", "n,,\x01auth=Basic t\x01\x01", "n,,\x01auth=Bearer t", "n,,\x01host=h\x01\x01", "y,,\x01auth=Bearer t\x01\x01"} {
		if _, err := OAuthBearerToken([]byte(bad)); !errors.Is(err, ErrMalformed) {
			t.Errorf("OAuthBearerToken(%q) = %v, want ErrMalformed", bad, err)
		}
	}
}

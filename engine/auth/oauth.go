package auth

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"
)

// ErrInvalidToken is an OAUTHBEARER token kaas does not accept: malformed,
// badly signed, expired, not yet valid, or for another issuer or audience.
var ErrInvalidToken = errors.New("invalid token")

// KeySet is the public keys tokens are verified with, by key ID (a JWKS).
type KeySet struct {
	keys map[string]crypto.PublicKey
	// only is the one key of a set with one key, used for a token whose
	// header names no key ID.
	only crypto.PublicKey
}

// ParseJWKS reads a JSON Web Key Set (RFC 7517): RSA and EC (P-256, P-384,
// P-521) public keys. Keys of other types, or for encryption, are skipped.
func ParseJWKS(b []byte) (KeySet, error) {
	var doc struct {
		Keys []struct {
			Kty string `json:"kty"`
			Kid string `json:"kid"`
			Use string `json:"use"`
			N   string `json:"n"`
			E   string `json:"e"`
			Crv string `json:"crv"`
			X   string `json:"x"`
			Y   string `json:"y"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return KeySet{}, fmt.Errorf("JWKS: %w", err)
	}
	ks := KeySet{keys: map[string]crypto.PublicKey{}}
	n := 0
	for _, k := range doc.Keys {
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		var pub crypto.PublicKey
		switch k.Kty {
		case "RSA":
			nb, err1 := base64.RawURLEncoding.DecodeString(k.N)
			eb, err2 := base64.RawURLEncoding.DecodeString(k.E)
			if err1 != nil || err2 != nil || len(nb) < 256 || len(eb) == 0 || len(eb) > 4 {
				return KeySet{}, fmt.Errorf("JWKS: RSA key %q: a malformed or short (< 2048-bit) key", k.Kid)
			}
			pub = &rsa.PublicKey{N: new(big.Int).SetBytes(nb), E: int(new(big.Int).SetBytes(eb).Int64())}
		case "EC":
			curve := map[string]elliptic.Curve{"P-256": elliptic.P256(), "P-384": elliptic.P384(), "P-521": elliptic.P521()}[k.Crv]
			xb, err1 := base64.RawURLEncoding.DecodeString(k.X)
			yb, err2 := base64.RawURLEncoding.DecodeString(k.Y)
			if curve == nil || err1 != nil || err2 != nil {
				return KeySet{}, fmt.Errorf("JWKS: EC key %q: curve %q or coordinates malformed", k.Kid, k.Crv)
			}
			// Through the uncompressed point encoding, so that a point
			// off the curve is refused here.
			size := (curve.Params().BitSize + 7) / 8
			if len(xb) > size || len(yb) > size {
				return KeySet{}, fmt.Errorf("JWKS: EC key %q: coordinates too long", k.Kid)
			}
			point := append([]byte{4}, append(pad(xb, size), pad(yb, size)...)...)
			key, err := ecdsa.ParseUncompressedPublicKey(curve, point)
			if err != nil {
				return KeySet{}, fmt.Errorf("JWKS: EC key %q: %w", k.Kid, err)
			}
			pub = key
		default:
			continue
		}
		ks.keys[k.Kid] = pub
		ks.only = pub
		n++
	}
	if n == 0 {
		return KeySet{}, errors.New("JWKS: no signing key")
	}
	if n > 1 {
		ks.only = nil
	}
	return ks, nil
}

func pad(b []byte, size int) []byte {
	return append(make([]byte, size-len(b)), b...)
}

// TokenRules is what a token must satisfy besides its signature.
type TokenRules struct {
	// Issuer, when set, must be the token's iss; Audience, when set, one
	// of its aud.
	Issuer, Audience string
	// Skew is the clock difference allowed on exp and nbf (Kafka's
	// sasl.oauthbearer.clock.skew.seconds, 30 s by default).
	Skew time.Duration
}

// Token is a verified token: its principal (the sub claim) and when it
// expires, which ends the session.
type Token struct {
	Principal string
	Expires   time.Time
}

// VerifyToken checks a compact JWS token (RFC 7515, 7519): the signature by
// a key of ks (RS256/384/512, PS256/384/512, ES256/384/512; never none or
// an HMAC), then exp, nbf, iss, aud and a non-empty sub.
func VerifyToken(raw string, ks KeySet, rules TokenRules, now time.Time) (Token, error) {
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return Token{}, fmt.Errorf("%w: not a signed JWT", ErrInvalidToken)
	}
	var header struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
	}
	if err := decodeSegment(parts[0], &header); err != nil {
		return Token{}, err
	}
	key := ks.only
	if header.Kid != "" || key == nil {
		key = ks.keys[header.Kid]
	}
	if key == nil {
		return Token{}, fmt.Errorf("%w: no key %q", ErrInvalidToken, header.Kid)
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return Token{}, fmt.Errorf("%w: signature encoding", ErrInvalidToken)
	}
	if err := verifySignature(header.Alg, key, []byte(parts[0]+"."+parts[1]), sig); err != nil {
		return Token{}, err
	}
	var claims struct {
		Sub string          `json:"sub"`
		Iss string          `json:"iss"`
		Aud json.RawMessage `json:"aud"`
		Exp *json.Number    `json:"exp"`
		Nbf *json.Number    `json:"nbf"`
	}
	if err := decodeSegment(parts[1], &claims); err != nil {
		return Token{}, err
	}
	if claims.Exp == nil {
		return Token{}, fmt.Errorf("%w: no exp claim", ErrInvalidToken)
	}
	exp, err := claimTime(*claims.Exp)
	if err != nil {
		return Token{}, err
	}
	if !now.Before(exp.Add(rules.Skew)) {
		return Token{}, fmt.Errorf("%w: expired at %s", ErrInvalidToken, exp.UTC().Format(time.RFC3339))
	}
	if claims.Nbf != nil {
		nbf, err := claimTime(*claims.Nbf)
		if err != nil {
			return Token{}, err
		}
		if now.Add(rules.Skew).Before(nbf) {
			return Token{}, fmt.Errorf("%w: not valid before %s", ErrInvalidToken, nbf.UTC().Format(time.RFC3339))
		}
	}
	if rules.Issuer != "" && claims.Iss != rules.Issuer {
		return Token{}, fmt.Errorf("%w: issuer %q", ErrInvalidToken, claims.Iss)
	}
	if rules.Audience != "" && !hasAudience(claims.Aud, rules.Audience) {
		return Token{}, fmt.Errorf("%w: not for audience %q", ErrInvalidToken, rules.Audience)
	}
	if claims.Sub == "" {
		return Token{}, fmt.Errorf("%w: no sub claim", ErrInvalidToken)
	}
	return Token{Principal: claims.Sub, Expires: exp}, nil
}

func decodeSegment(seg string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return fmt.Errorf("%w: segment encoding", ErrInvalidToken)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidToken, err)
	}
	return nil
}

// claimTime reads a NumericDate: seconds since the epoch.
func claimTime(n json.Number) (time.Time, error) {
	f, err := n.Float64()
	if err != nil || f < 0 || f > 1<<40 {
		return time.Time{}, fmt.Errorf("%w: a time claim of %q", ErrInvalidToken, n)
	}
	return time.Unix(int64(f), 0), nil
}

func hasAudience(raw json.RawMessage, want string) bool {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return one == want
	}
	var many []string
	if json.Unmarshal(raw, &many) == nil {
		for _, a := range many {
			if a == want {
				return true
			}
		}
	}
	return false
}

func verifySignature(alg string, key crypto.PublicKey, signed, sig []byte) error {
	var h crypto.Hash
	switch alg[min(2, len(alg)):] {
	case "256":
		h = crypto.SHA256
	case "384":
		h = crypto.SHA384
	case "512":
		h = crypto.SHA512
	default:
		return fmt.Errorf("%w: algorithm %q", ErrInvalidToken, alg)
	}
	digest := digestOf(h, signed)
	bad := fmt.Errorf("%w: bad signature", ErrInvalidToken)
	switch k := key.(type) {
	case *rsa.PublicKey:
		switch alg[:2] {
		case "RS":
			if rsa.VerifyPKCS1v15(k, h, digest, sig) != nil {
				return bad
			}
			return nil
		case "PS":
			if rsa.VerifyPSS(k, h, digest, sig, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash}) != nil {
				return bad
			}
			return nil
		}
	case *ecdsa.PublicKey:
		size := (k.Curve.Params().BitSize + 7) / 8
		if alg[:2] != "ES" || len(sig) != 2*size {
			break
		}
		r, s := new(big.Int).SetBytes(sig[:size]), new(big.Int).SetBytes(sig[size:])
		if !ecdsa.Verify(k, digest, r, s) {
			return bad
		}
		return nil
	}
	return fmt.Errorf("%w: algorithm %q does not fit the key", ErrInvalidToken, alg)
}

func digestOf(h crypto.Hash, b []byte) []byte {
	switch h {
	case crypto.SHA384:
		s := sha512.Sum384(b)
		return s[:]
	case crypto.SHA512:
		s := sha512.Sum512(b)
		return s[:]
	}
	s := sha256.Sum256(b)
	return s[:]
}

// OAuthBearerToken reads the token from an OAUTHBEARER client's initial
// response (RFC 7628: gs2 header, then \x01-separated key=value pairs,
// one of them auth=Bearer <token>, ending in \x01\x01).
func OAuthBearerToken(msg []byte) (string, error) {
	s := string(msg)
	gs2, rest, ok := strings.Cut(s, "\x01")
	if !ok || !strings.HasPrefix(gs2, "n,") || !strings.HasSuffix(gs2, ",") {
		return "", fmt.Errorf("%w: an OAUTHBEARER message needs a gs2 header", ErrMalformed)
	}
	if !strings.HasSuffix(rest, "\x01\x01") && rest != "\x01" {
		return "", fmt.Errorf("%w: an OAUTHBEARER message ends in \\x01\\x01", ErrMalformed)
	}
	for kv := range strings.SplitSeq(strings.TrimSuffix(rest, "\x01\x01"), "\x01") {
		k, v, _ := strings.Cut(kv, "=")
		if k == "auth" {
			scheme, token, ok := strings.Cut(v, " ")
			if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
				return "", fmt.Errorf("%w: auth is not a bearer token", ErrMalformed)
			}
			return token, nil
		}
	}
	return "", fmt.Errorf("%w: no auth=Bearer token", ErrMalformed)
}

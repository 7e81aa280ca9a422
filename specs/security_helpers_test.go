package specs

// Helpers of the security spec: franz-go clients on TLS and SASL
// listeners, OAUTHBEARER tokens and their key set made with Go's crypto,
// certificate files rotated in place, and the broker's resource use.

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/wire/tlsfiles/tlstest"
)

// newSecureClient is a franz-go client of addr over TLS trusting ca, with
// opts (a SASL mechanism, a client certificate), closed at cleanup. It
// retries little, so that a refusal is seen at once.
func newSecureClient(addr string, tc *tls.Config, opts ...kgo.Opt) *kgo.Client {
	GinkgoHelper()
	all := []kgo.Opt{kgo.SeedBrokers(addr), kgo.ClientID("kaas-specs"), kgo.DialTLSConfig(tc),
		kgo.WithLogger(kgo.BasicLogger(GinkgoWriter, kgo.LogLevelWarn, func() string { return "[kgo] " })),
		kgo.RequestRetries(2), kgo.RetryTimeout(10 * time.Second)}
	cl, err := kgo.NewClient(append(all, opts...)...)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(cl.Close)
	return cl
}

// roundTrip produces one record to a new topic through a client built
// with opts and consumes it back.
func roundTrip(ctx context.Context, addr string, tc *tls.Config, opts ...kgo.Opt) {
	GinkgoHelper()
	topic := UniqueName("secure")
	cl := newSecureClient(addr, tc, append(opts, kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation(),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	Expect(cl.ProduceSync(cctx, &kgo.Record{Value: []byte(topic)}).FirstErr()).To(Succeed(), "produce to %s", topic)
	var got []string
	for len(got) == 0 {
		fs := cl.PollFetches(cctx)
		Expect(fs.Err()).NotTo(HaveOccurred(), "consume %s", topic)
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	Expect(got).To(Equal([]string{topic}))
	cl.Close()
}

// dialRaw opens a raw Kafka connection to addr, over TLS when tc is set.
func dialRaw(addr string, tc *tls.Config) (*hostileConn, error) {
	d := &net.Dialer{Timeout: 5 * time.Second}
	var nc net.Conn
	var err error
	if tc != nil {
		nc, err = tls.DialWithDialer(d, "tcp", addr, tc)
	} else {
		nc, err = d.Dial("tcp", addr)
	}
	if err != nil {
		return nil, err
	}
	return &hostileConn{nc: nc, fm: kmsg.NewRequestFormatter(kmsg.FormatterClientID("kaas-specs-raw"))}, nil
}

// kmsgApiVersions is an ApiVersions v0 request, the first thing a
// Kafka client sends.
func kmsgApiVersions() *kmsg.ApiVersionsRequest {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 0
	return req
}

// badPlainLogin runs one SASL PLAIN exchange with a wrong password on a
// raw connection and returns the error code the broker answered; the
// broker then closes the connection.
func badPlainLogin(addr string, tc *tls.Config, user string) (int16, error) {
	c, err := dialRaw(addr, tc)
	if err != nil {
		return 0, err
	}
	defer c.close()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "PLAIN"
	if err := c.send(hs); err != nil {
		return 0, err
	}
	resp, err := c.read(hs, 20*time.Second)
	if err != nil {
		return 0, fmt.Errorf("handshake: %w", err)
	}
	if code := resp.(*kmsg.SASLHandshakeResponse).ErrorCode; code != 0 {
		return code, fmt.Errorf("handshake answered %d", code)
	}
	auth := kmsg.NewPtrSASLAuthenticateRequest()
	auth.Version, auth.SASLAuthBytes = 1, []byte("\x00"+user+"\x00not-the-password")
	if err := c.send(auth); err != nil {
		return 0, err
	}
	aresp, err := c.read(auth, 20*time.Second)
	if err != nil {
		return 0, fmt.Errorf("authenticate: %w", err)
	}
	if !c.waitClosed(10 * time.Second) {
		return 0, fmt.Errorf("the connection stayed open after a failed login")
	}
	return aresp.(*kmsg.SASLAuthenticateResponse).ErrorCode, nil
}

// servedSerial is the serial of the certificate addr serves to a new
// connection.
func servedSerial(addr string, tc *tls.Config) (*big.Int, error) {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, tc)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber, nil
}

// rotateServerCert writes a new server certificate from ca over certFile
// and keyFile, each by a rename (as cert-manager's volume does), key first.
func rotateServerCert(ca tlstest.CA, certFile, keyFile string) {
	GinkgoHelper()
	certPEM, keyPEM := ca.Issue(GinkgoTB(), pkix.Name{CommonName: "broker"}, false)
	for _, f := range []struct {
		path string
		b    []byte
	}{{keyFile, keyPEM}, {certFile, certPEM}} {
		tmp := f.path + ".new"
		Expect(os.WriteFile(tmp, f.b, 0o600)).To(Succeed())
		Expect(os.Rename(tmp, f.path)).To(Succeed())
	}
}

// tokenIssuer signs OAUTHBEARER tokens (ES256 JWTs) with its key.
type tokenIssuer struct {
	key      *ecdsa.PrivateKey
	kid      string
	issuer   string
	audience string
}

func newTokenIssuer(kid, issuer, audience string) tokenIssuer {
	GinkgoHelper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	Expect(err).NotTo(HaveOccurred())
	return tokenIssuer{key: key, kid: kid, issuer: issuer, audience: audience}
}

// writeJWKS writes the issuer's public key as a JSON Web Key Set.
func (ti tokenIssuer) writeJWKS(path string) {
	GinkgoHelper()
	point, err := ti.key.PublicKey.Bytes() // 0x04 || X || Y
	Expect(err).NotTo(HaveOccurred())
	b64 := base64.RawURLEncoding.EncodeToString
	doc := map[string]any{"keys": []map[string]string{{
		"kty": "EC", "kid": ti.kid, "use": "sig", "alg": "ES256", "crv": "P-256",
		"x": b64(point[1:33]), "y": b64(point[33:]),
	}}}
	b, err := json.Marshal(doc)
	Expect(err).NotTo(HaveOccurred())
	Expect(os.WriteFile(path, b, 0o600)).To(Succeed())
}

// token is a JWT for sub expiring at exp.
func (ti tokenIssuer) token(sub string, exp time.Time) string {
	GinkgoHelper()
	b64 := base64.RawURLEncoding.EncodeToString
	header, err := json.Marshal(map[string]string{"alg": "ES256", "typ": "JWT", "kid": ti.kid})
	Expect(err).NotTo(HaveOccurred())
	claims, err := json.Marshal(map[string]any{"sub": sub, "iss": ti.issuer, "aud": ti.audience,
		"iat": time.Now().Add(-time.Hour).Unix(), "exp": exp.Unix()})
	Expect(err).NotTo(HaveOccurred())
	signed := b64(header) + "." + b64(claims)
	digest := sha256.Sum256([]byte(signed))
	r, s, err := ecdsa.Sign(rand.Reader, ti.key, digest[:])
	Expect(err).NotTo(HaveOccurred())
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return signed + "." + b64(sig)
}

// brokerUse is what a broker process holds: resident memory and
// goroutines.
type brokerUse struct {
	rssKiB     int64
	goroutines int
}

func (u brokerUse) String() string {
	return fmt.Sprintf("RSS %d KiB, %d goroutines", u.rssKiB, u.goroutines)
}

// resourceUse reads the broker's RSS from /proc and its goroutines from
// the admin address's /debug/pprof/goroutine.
func resourceUse(b *Broker) brokerUse {
	GinkgoHelper()
	var u brokerUse
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(b.Pid()), "status"))
	Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			u.rssKiB, err = strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			Expect(err).NotTo(HaveOccurred())
		}
	}
	resp, err := httpClient.Get("http://" + b.AdminAddr + "/debug/pprof/goroutine?debug=1")
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	first, err := bufio.NewReader(io.LimitReader(resp.Body, 4096)).ReadString('\n')
	Expect(err).NotTo(HaveOccurred())
	total, ok := strings.CutPrefix(strings.TrimSpace(first), "goroutine profile: total ")
	Expect(ok).To(BeTrue(), "goroutine profile starts %q", first)
	u.goroutines, err = strconv.Atoi(total)
	Expect(err).NotTo(HaveOccurred())
	return u
}

// Package tlstest makes certificate authorities and certificates for tests
// of TLS listeners: a CA, server certificates for 127.0.0.1 and client
// certificates, as PEM, and writes them to files.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// CA is a test certificate authority.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// PEM is the CA certificate.
	PEM []byte
}

var serial atomic.Int64

// NewCA makes a CA called name, valid for an hour either side of now.
func NewCA(t testing.TB, name string) CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return CA{cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// Issue makes a certificate with subject (a server certificate for
// 127.0.0.1, or with client a client certificate) and returns it and its
// key as PEM.
func (c CA) Issue(t testing.TB, subject pkix.Name, client bool) (certPEM, keyPEM []byte) {
	t.Helper()
	usage := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	if client {
		usage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	return c.issue(t, subject, usage)
}

// IssueBroker makes a broker's certificate: a server certificate for
// 127.0.0.1 that also authenticates it as a client of the other brokers'
// SSL listeners.
func (c CA) IssueBroker(t testing.TB, subject pkix.Name) (certPEM, keyPEM []byte) {
	t.Helper()
	return c.issue(t, subject, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth})
}

func (c CA) issue(t testing.TB, subject pkix.Name, usage []x509.ExtKeyUsage) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial.Add(1)), Subject: subject,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: usage}
	if usage[0] == x509.ExtKeyUsageServerAuth {
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// Pair is Issue as a tls.Certificate (for a client).
func (c CA) Pair(t testing.TB, subject pkix.Name) tls.Certificate {
	t.Helper()
	cp, kp := c.Issue(t, subject, true)
	pair, err := tls.X509KeyPair(cp, kp)
	if err != nil {
		t.Fatal(err)
	}
	return pair
}

// Pool is a pool holding the CA, for a client's RootCAs.
func (c CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AppendCertsFromPEM(c.PEM)
	return p
}

// ServerFiles writes a server certificate for 127.0.0.1 (CN broker), its
// key and the CA into dir, and returns their paths.
func (c CA) ServerFiles(t testing.TB, dir string) (certFile, keyFile, caFile string) {
	t.Helper()
	cp, kp := c.Issue(t, pkix.Name{CommonName: "broker"}, false)
	return c.writeFiles(t, dir, cp, kp)
}

// BrokerFiles is ServerFiles with IssueBroker's certificate (CN cn).
func (c CA) BrokerFiles(t testing.TB, dir, cn string) (certFile, keyFile, caFile string) {
	t.Helper()
	cp, kp := c.IssueBroker(t, pkix.Name{CommonName: cn})
	return c.writeFiles(t, dir, cp, kp)
}

func (c CA) writeFiles(t testing.TB, dir string, cp, kp []byte) (certFile, keyFile, caFile string) {
	t.Helper()
	certFile, keyFile, caFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "ca.crt")
	for p, b := range map[string][]byte{certFile: cp, keyFile: kp, caFile: c.PEM} {
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return certFile, keyFile, caFile
}

package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/kaas-dev/kaas/wire/tlsfiles/tlstest"
)

// tcpPair is a connected pair over 127.0.0.1: unlike net.Pipe it buffers,
// so a side that refuses the handshake can send its alert and return.
func tcpPair(t *testing.T) (server, client net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	_ = server.SetDeadline(time.Now().Add(10 * time.Second))
	_ = client.SetDeadline(time.Now().Add(10 * time.Second))
	return server, client
}

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// handshake connects a client trusting roots (with an optional client
// certificate) to a server with cfg, and returns the server certificate's
// CN the client saw and the client's CN the server saw.
func handshake(t *testing.T, cfg *tls.Config, roots []byte, clientCert *tls.Certificate) (serverCN, clientCN string, err error) {
	t.Helper()
	a, b := tcpPair(t)
	defer a.Close()
	defer b.Close()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(roots)
	ccfg := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
	if clientCert != nil {
		ccfg.Certificates = []tls.Certificate{*clientCert}
	}
	srv := tls.Server(a, cfg)
	done := make(chan error, 1)
	go func() { done <- srv.Handshake() }()
	cl := tls.Client(b, ccfg)
	cerr := cl.Handshake()
	if cerr != nil {
		_ = b.Close()
	}
	serr := <-done
	if cerr != nil || serr != nil {
		if cerr == nil {
			cerr = serr
		}
		return "", "", cerr
	}
	serverCN = cl.ConnectionState().PeerCertificates[0].Subject.CommonName
	if pc := srv.ConnectionState().PeerCertificates; len(pc) > 0 {
		clientCN = pc[0].Subject.CommonName
	}
	return serverCN, clientCN, nil
}

func write(t *testing.T, path string, b []byte, mod time.Time) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, mod, mod); err != nil {
		t.Fatal(err)
	}
}

// TestReload: a rotated certificate serves the next handshake, a broken
// one is ignored for the old, and an unchanged file is not re-read before
// CheckEvery.
func TestReload(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	root := tlstest.NewCA(t, "root")
	c1, k1 := root.Issue(t, pkix.Name{CommonName: "broker-v1"}, false)
	t0 := time.Unix(1_800_000_000, 0)
	write(t, certFile, c1, t0)
	write(t, keyFile, k1, t0)
	clk := &clock{t: t0}
	f, err := Load(Config{CertFile: certFile, KeyFile: keyFile, Now: clk.now, Logger: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	cfg := f.ServerConfig()
	if cn, _, err := handshake(t, cfg, root.PEM, nil); err != nil || cn != "broker-v1" {
		t.Fatalf("first handshake: %q, %v", cn, err)
	}
	c2, k2 := root.Issue(t, pkix.Name{CommonName: "broker-v2"}, false)
	write(t, certFile, c2, t0.Add(time.Minute))
	write(t, keyFile, k2, t0.Add(time.Minute))
	if cn, _, _ := handshake(t, cfg, root.PEM, nil); cn != "broker-v1" {
		t.Fatalf("re-read before CheckEvery: %q", cn)
	}
	clk.t = clk.t.Add(2 * time.Second)
	if cn, _, err := handshake(t, cfg, root.PEM, nil); err != nil || cn != "broker-v2" {
		t.Fatalf("after the rotation: %q, %v", cn, err)
	}
	write(t, certFile, []byte("not a certificate"), t0.Add(2*time.Minute))
	clk.t = clk.t.Add(2 * time.Second)
	if cn, _, err := handshake(t, cfg, root.PEM, nil); err != nil || cn != "broker-v2" {
		t.Fatalf("after a broken rotation: %q, %v; want the old certificate", cn, err)
	}
	if _, err := Load(Config{CertFile: certFile, KeyFile: keyFile}); err == nil {
		t.Fatal("Load accepted a broken certificate")
	}
}

// TestClientAuth: required refuses a client without a certificate and one
// from another CA; requested lets one without a certificate in.
func TestClientAuth(t *testing.T) {
	dir := t.TempDir()
	root, rogue := tlstest.NewCA(t, "root"), tlstest.NewCA(t, "rogue")
	sc, sk := root.Issue(t, pkix.Name{CommonName: "broker"}, false)
	certFile, keyFile, caFile := filepath.Join(dir, "c"), filepath.Join(dir, "k"), filepath.Join(dir, "ca")
	write(t, certFile, sc, time.Now())
	write(t, keyFile, sk, time.Now())
	write(t, caFile, root.PEM, time.Now())
	client := func(c tlstest.CA) *tls.Certificate {
		cp, kp := c.Issue(t, pkix.Name{CommonName: "app"}, true)
		pair, err := tls.X509KeyPair(cp, kp)
		if err != nil {
			t.Fatal(err)
		}
		return &pair
	}
	req, err := Load(Config{CertFile: certFile, KeyFile: keyFile, ClientCAFile: caFile, ClientAuth: ClientAuthRequired, Logger: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	if _, cn, err := handshake(t, req.ServerConfig(), root.PEM, client(root)); err != nil || cn != "app" {
		t.Fatalf("a client of the CA: %q, %v", cn, err)
	}
	if _, _, err := handshake(t, req.ServerConfig(), root.PEM, nil); err == nil {
		t.Fatal("required: a client without a certificate got in")
	}
	if _, _, err := handshake(t, req.ServerConfig(), root.PEM, client(rogue)); err == nil {
		t.Fatal("required: a client of another CA got in")
	}
	opt, err := Load(Config{CertFile: certFile, KeyFile: keyFile, ClientCAFile: caFile, ClientAuth: ClientAuthRequested, Logger: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	if _, cn, err := handshake(t, opt.ServerConfig(), root.PEM, nil); err != nil || cn != "" {
		t.Fatalf("requested, no certificate: %q, %v", cn, err)
	}
	if _, err := Load(Config{CertFile: certFile, KeyFile: keyFile, ClientAuth: ClientAuthRequired}); err == nil {
		t.Fatal("required client auth without a CA file was accepted")
	}
	if _, err := Load(Config{CertFile: certFile, KeyFile: keyFile, ClientAuth: "sometimes"}); err == nil {
		t.Fatal("an unknown client auth was accepted")
	}
	// TLS 1.1 is refused.
	a, b := tcpPair(t)
	defer a.Close()
	defer b.Close()
	go func() { _ = tls.Server(a, opt.ServerConfig()).Handshake() }()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(root.PEM)
	if err := tls.Client(b, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MaxVersion: tls.VersionTLS11}).Handshake(); err == nil {
		t.Fatal("a TLS 1.1 handshake succeeded")
	}
}

// TestClientConfig: a broker dialing another's SSL listener (client
// authentication required) verifies it against ServerCAFile and presents
// its own certificate; against another CA it refuses the server.
func TestClientConfig(t *testing.T) {
	root, rogue := tlstest.NewCA(t, "root"), tlstest.NewCA(t, "rogue")
	certFile, keyFile, caFile := root.BrokerFiles(t, t.TempDir(), "broker-1")
	rogueCA := filepath.Join(t.TempDir(), "rogue.crt")
	write(t, rogueCA, rogue.PEM, time.Now())
	srv, err := Load(Config{CertFile: certFile, KeyFile: keyFile, ClientCAFile: caFile, ClientAuth: ClientAuthRequired, Logger: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		serverCA string
		withCert bool
		wantCN   string // the client CN the server saw; "" means the handshake fails
	}{
		{"trusted, with its certificate", caFile, true, "broker-1"},
		{"trusted, without a certificate", caFile, false, ""},
		{"server of another CA", rogueCA, true, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dialer, err := Load(Config{CertFile: certFile, KeyFile: keyFile, ServerCAFile: c.serverCA, Logger: logr.Discard()})
			if err != nil {
				t.Fatal(err)
			}
			if got := dialer.Certificate().Subject.CommonName; got != "broker-1" {
				t.Fatalf("Certificate CN = %q", got)
			}
			a, b := tcpPair(t)
			defer a.Close()
			defer b.Close()
			s := tls.Server(a, srv.ServerConfig())
			done := make(chan error, 1)
			go func() { done <- s.Handshake() }()
			cerr := tls.Client(b, dialer.ClientConfig("127.0.0.1", c.withCert)).Handshake()
			if cerr != nil {
				_ = b.Close()
			}
			serr := <-done
			var cn string
			if pc := s.ConnectionState().PeerCertificates; serr == nil && len(pc) > 0 {
				cn = pc[0].Subject.CommonName
			}
			if c.wantCN == "" && cerr == nil && serr == nil {
				t.Fatalf("handshake succeeded (server saw %q)", cn)
			}
			if c.wantCN != "" && (cerr != nil || serr != nil || cn != c.wantCN) {
				t.Fatalf("handshake: client %v, server %v, CN %q; want %q", cerr, serr, cn, c.wantCN)
			}
		})
	}
}

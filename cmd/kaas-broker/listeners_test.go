package main

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"errors"
	"net"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kaas-dev/kaas/engine/auth"
	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/wire/tlsfiles/tlstest"
)

// freePorts returns n ports free on 127.0.0.1 now.
func freePorts(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		out = append(out, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
	}
	for _, ln := range lns {
		_ = ln.Close()
	}
	return out
}

// TestListeners: one broker process with PLAINTEXT, SASL_SSL and SSL
// (mTLS) listeners serves franz-go clients on each; a wrong password and a
// certificate from another CA are refused.
func TestListeners(t *testing.T) {
	data := t.TempDir()
	cred, err := auth.ScramSHA512.FromPassword("alice", "pw", auth.DefaultIterations)
	if err != nil {
		t.Fatal(err)
	}
	if err := auth.SaveCredential(volume.OS(), filepath.Join(data, "__cluster"), cred); err != nil {
		t.Fatal(err)
	}
	root, rogue := tlstest.NewCA(t, "root"), tlstest.NewCA(t, "rogue")
	certFile, keyFile, caFile := root.ServerFiles(t, t.TempDir())
	p := freePorts(t, 3)
	plain, saslSSL, ssl := "127.0.0.1:"+p[0], "127.0.0.1:"+p[1], "127.0.0.1:"+p[2]
	b := startBrokerProcess(t, "--data", data, "--admin", "", "--lease", "2s",
		"--listeners", "PLAINTEXT://"+plain+",SASL_SSL://"+saslSSL+",SSL://"+ssl,
		"--tls-cert-file", certFile, "--tls-key-file", keyFile, "--tls-client-ca-file", caFile, "--tls-client-auth", "required",
		"--sasl-mechanisms", "SCRAM-SHA-512,PLAIN")
	b.waitLog(t, "kaas broker started", 20*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	clientCert := root.Pair(t, pkix.Name{CommonName: "app"})
	cases := []struct {
		name string
		opts []kgo.Opt
	}{
		{"PLAINTEXT", []kgo.Opt{kgo.SeedBrokers(plain)}},
		{"SASL_SSL", []kgo.Opt{kgo.SeedBrokers(saslSSL), kgo.DialTLSConfig(&tls.Config{RootCAs: root.Pool()}),
			kgo.SASL(scram.Auth{User: "alice", Pass: "pw"}.AsSha512Mechanism())}},
		{"SSL", []kgo.Opt{kgo.SeedBrokers(ssl), kgo.DialTLSConfig(&tls.Config{RootCAs: root.Pool(), Certificates: []tls.Certificate{clientCert}})}},
	}
	for _, c := range cases {
		topic := "listener-" + c.name
		cl, err := kgo.NewClient(append(c.opts, kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation(),
			kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(c.name)}).FirstErr(); err != nil {
			t.Fatalf("%s: produce: %v\n%s", c.name, err, b.out)
		}
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil || fs.NumRecords() != 1 {
			t.Fatalf("%s: fetch: %d records, %v", c.name, fs.NumRecords(), err)
		}
		cl.Close()
	}
	wrong, _ := kgo.NewClient(kgo.SeedBrokers(saslSSL), kgo.DialTLSConfig(&tls.Config{RootCAs: root.Pool()}),
		kgo.SASL(scram.Auth{User: "alice", Pass: "guess"}.AsSha512Mechanism()))
	defer wrong.Close()
	if err := wrong.Ping(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("wrong password: %v", err)
	}
	rogueCert := rogue.Pair(t, pkix.Name{CommonName: "mallory"})
	conn, err := tls.Dial("tcp", ssl, &tls.Config{RootCAs: root.Pool(), Certificates: []tls.Certificate{rogueCert}})
	if err == nil {
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = conn.Read(make([]byte, 1)) // TLS 1.3: the refusal arrives after the client's handshake
		_ = conn.Close()
	}
	if err == nil {
		t.Fatal("a client certificate from another CA got in")
	}
}

package wire

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kaas-dev/kaas/engine/auth"
	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/wire/listeners"
	"github.com/kaas-dev/kaas/wire/sasl"
)

// serveSASL adds a SASL_PLAINTEXT listener to b, with a user alice
// (password pw, SCRAM-SHA-512) in the credential store, and returns its
// address.
func serveSASL(t *testing.T, b *testBroker) string {
	t.Helper()
	clusterDir := filepath.Join(b.dir, "__cluster")
	cred, err := auth.ScramSHA512.FromPassword("alice", "pw", auth.DefaultIterations)
	if err != nil {
		t.Fatal(err)
	}
	if err := auth.SaveCredential(volume.OS(), clusterDir, cred); err != nil {
		t.Fatal(err)
	}
	return serveSASLListener(t, b, clusterDir, sasl.ScramSHA512, sasl.Plain)
}

// serveSASLListener adds a SASL_PLAINTEXT listener with mechanisms to b,
// checking passwords against the credential store in clusterDir, and
// returns its address.
func serveSASLListener(t testing.TB, b *testBroker, clusterDir string, mechanisms ...string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := Listener{Name: "CLIENTS", Protocol: listeners.SASLPlaintext, Advertise: ln.Addr().String(),
		SASL: &sasl.Config{Mechanisms: mechanisms, Lookup: auth.StoreLookup(volume.OS(), clusterDir), Secret: []byte("s")}}
	done := make(chan error, 1)
	go func() { done <- b.srv.ServeListener(ln, l) }()
	t.Cleanup(func() {
		b.shutdown(context.Background())
		if err := <-done; err != nil {
			t.Errorf("ServeListener: %v", err)
		}
	})
	return ln.Addr().String()
}

// TestSASLListener: franz-go clients with SCRAM and PLAIN produce and
// consume through a SASL listener, whose Metadata names its own address;
// a wrong password is SASL_AUTHENTICATION_FAILED.
func TestSASLListener(t *testing.T) {
	b := startBroker(t, nil)
	addr := serveSASL(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for name, mech := range map[string]kgo.Opt{
		"scram": kgo.SASL(scram.Auth{User: "alice", Pass: "pw"}.AsSha512Mechanism()),
		"plain": kgo.SASL(plain.Auth{User: "alice", Pass: "pw"}.AsMechanism()),
	} {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), mech, kgo.DefaultProduceTopic("sasl-"+name), kgo.AllowAutoTopicCreation(),
			kgo.ConsumeTopics("sasl-"+name), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("hello " + name)}).FirstErr(); err != nil {
			t.Fatalf("%s: produce: %v", name, err)
		}
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil || fs.NumRecords() != 1 {
			t.Fatalf("%s: fetch: %d records, %v", name, fs.NumRecords(), err)
		}
		var md kmsg.MetadataRequest
		resp, err := md.RequestWith(ctx, cl)
		if err != nil || len(resp.Brokers) != 1 || net.JoinHostPort(resp.Brokers[0].Host, itoa(resp.Brokers[0].Port)) != addr {
			t.Fatalf("%s: metadata through the SASL listener: %+v, %v; want %s", name, resp, err, addr)
		}
		cl.Close()
	}
	bad, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(scram.Auth{User: "alice", Pass: "guess"}.AsSha512Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	if err := bad.Ping(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("wrong password: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
}

// TestSASLGate: before authentication a SASL listener answers only
// ApiVersions, SaslHandshake and SaslAuthenticate, and closes on anything
// else or on a frame over 512 KiB; off a SASL listener SaslHandshake is
// ILLEGAL_SASL_STATE.
func TestSASLGate(t *testing.T) {
	b := startBroker(t, nil)
	addr := serveSASL(t, b)
	dial := func() *rawConn {
		nc, err := net.DialTimeout("tcp", addr, ioTimeout)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = nc.Close() })
		return &rawConn{t: t, nc: nc, fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID("wire-test"))}
	}
	c := dial()
	av := kmsg.NewPtrApiVersionsRequest()
	if resp := c.do(av).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
		t.Fatalf("ApiVersions before authentication: %d", resp.ErrorCode)
	}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = "GSSAPI"
	if resp := c.do(hs).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != kerr.UnsupportedSaslMechanism.Code || len(resp.SupportedMechanisms) != 2 {
		t.Fatalf("GSSAPI: %+v", resp)
	}
	md := kmsg.NewPtrMetadataRequest()
	md.SetVersion(9)
	c.send(md)
	c.expectClosed()

	big := dial()
	big.write(append([]byte{0, 0x09, 0, 0}, make([]byte, 1024)...)) // a 576 KiB frame announced
	big.expectClosed()

	plainConn := b.dial(t)
	hs.Mechanism = "PLAIN"
	if resp := plainConn.do(hs).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("SaslHandshake on PLAINTEXT: %+v", resp)
	}
	b.checkServing(t)
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

package wire

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

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/engine"
	"github.com/kaas-dev/kaas/engine/auth"
	"github.com/kaas-dev/kaas/engine/txns"
	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/wire/listeners"
	"github.com/kaas-dev/kaas/wire/sasl"
	"github.com/kaas-dev/kaas/wire/tlsfiles"
	"github.com/kaas-dev/kaas/wire/tlsfiles/tlstest"
)

func TestInterBrokerOnly(t *testing.T) {
	apt := func(v int16) kmsg.Request {
		r := kmsg.NewPtrAddPartitionsToTxnRequest()
		r.SetVersion(v)
		return r
	}
	for _, c := range []struct {
		req  kmsg.Request
		want bool
	}{
		{kmsg.NewPtrWriteTxnMarkersRequest(), true},
		{apt(3), false}, // what clients send
		{apt(4), true},
		{apt(5), true},
		{kmsg.NewPtrEndTxnRequest(), false},
		{kmsg.NewPtrProduceRequest(), false},
	} {
		if got := interBrokerOnly(c.req); got != c.want {
			t.Errorf("%s v%d: inter-broker-only = %v, want %v", kmsg.NameForKey(c.req.Key()), c.req.GetVersion(), got, c.want)
		}
	}
}

// serveListener serves l on a new 127.0.0.1 socket of b and returns the
// broker as a peer at that address.
func serveListener(t *testing.T, b *testBroker, l Listener) engine.BrokerInfo {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l.Advertise = ln.Addr().String()
	done := make(chan error, 1)
	go func() { done <- b.srv.ServeListener(ln, l) }()
	t.Cleanup(func() {
		b.shutdown(context.Background())
		if err := <-done; err != nil {
			t.Errorf("ServeListener %s: %v", l.Name, err)
		}
	})
	return peerAt(t, ln.Addr().String())
}

func peerAt(t *testing.T, addr string) engine.BrokerInfo {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	return engine.BrokerInfo{ID: 0, Host: host, Port: int32(p)}
}

// TestInterBrokerRefusal: on a broker that authenticates clients, only the
// broker principal (and a super user) may send WriteTxnMarkers and a
// verify-only AddPartitionsToTxn; SASL users, certificate principals and
// anonymous clients get CLUSTER_AUTHORIZATION_FAILED. The peers reach the
// broker over SASL_PLAINTEXT, SASL_SSL and SSL with client certificates.
func TestInterBrokerRefusal(t *testing.T) {
	b := startBroker(t, func(c *Config) { c.BrokerPrincipals = []string{"User:broker", "User:admin"} })
	clusterDir := filepath.Join(b.dir, "__cluster")
	saslAddr := serveSASL(t, b) // alice, pw
	for user, pw := range map[string]string{"broker": "bpw", "admin": "apw"} {
		cred, err := auth.ScramSHA512.FromPassword(user, pw, auth.DefaultIterations)
		if err != nil {
			t.Fatal(err)
		}
		if err := auth.SaveCredential(volume.OS(), clusterDir, cred); err != nil {
			t.Fatal(err)
		}
	}
	root := tlstest.NewCA(t, "root")
	certFile, keyFile, caFile := root.ServerFiles(t, t.TempDir())
	files, err := tlsfiles.Load(tlsfiles.Config{CertFile: certFile, KeyFile: keyFile, ClientCAFile: caFile,
		ClientAuth: tlsfiles.ClientAuthRequired, Logger: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	ssl := serveListener(t, b, Listener{Name: "SSL", Protocol: listeners.SSL, TLS: files.ServerConfig()})
	saslSSL := serveListener(t, b, Listener{Name: "SASL_SSL", Protocol: listeners.SASLSSL, TLS: files.SASLServerConfig(),
		SASL: &sasl.Config{Mechanisms: []string{sasl.ScramSHA512}, Lookup: auth.StoreLookup(volume.OS(), clusterDir), Secret: []byte("s")}})
	trust := func(cn string) func(string) *tls.Config {
		return func(host string) *tls.Config {
			cfg := &tls.Config{RootCAs: root.Pool(), ServerName: host}
			if cn != "" {
				cfg.Certificates = []tls.Certificate{root.Pair(t, pkix.Name{CommonName: cn})}
			}
			return cfg
		}
	}
	scram := func(user, pw string) PeerSecurity {
		m, err := PeerSASL("SCRAM-SHA-512", user, func() (string, error) { return pw, nil })
		if err != nil {
			t.Fatal(err)
		}
		return PeerSecurity{SASL: m}
	}
	withTLS := func(s PeerSecurity, cn string) PeerSecurity { s.TLS = trust(cn); return s }
	cases := []struct {
		name   string
		to     engine.BrokerInfo
		sec    PeerSecurity
		served bool
	}{
		{"anonymous on PLAINTEXT", peerAt(t, b.addr), PeerSecurity{}, false},
		{"SASL user alice", peerAt(t, saslAddr), scram("alice", "pw"), false},
		{"SASL broker principal", peerAt(t, saslAddr), scram("broker", "bpw"), true},
		{"SASL super user", peerAt(t, saslAddr), scram("admin", "apw"), true},
		{"SASL_SSL broker principal", saslSSL, withTLS(scram("broker", "bpw"), ""), true},
		{"SASL_SSL user alice", saslSSL, withTLS(scram("alice", "pw"), ""), false},
		{"certificate of app", ssl, PeerSecurity{TLS: trust("app")}, false},
		{"certificate of the broker", ssl, PeerSecurity{TLS: trust("broker")}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			peers := NewPeers("test", c.sec)
			defer peers.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			parts := []txns.TopicPartition{{Topic: "missing", Partition: 0}, {Topic: "missing", Partition: 1}}
			failed, err := peers.WriteMarkers(ctx, c.to, engine.MarkerWrite{ProducerID: 1, Parts: parts})
			if err != nil {
				t.Fatalf("write markers: %v", err)
			}
			want := kerr.ClusterAuthorizationFailed
			if c.served {
				want = kerr.UnknownTopicOrPartition // served: the topic does not exist
			}
			if len(failed) != len(parts) {
				t.Fatalf("write markers: failed %+v, want every partition %v", failed, want)
			}
			for _, f := range failed {
				if f.Err != want {
					t.Fatalf("write markers: %s/%d %v, want %v", f.Topic, f.Partition, f.Err, want)
				}
			}
			err = peers.VerifyInTransaction(ctx, c.to, "no-such-txn", 1, 0, parts[0])
			if refused := errors.Is(err, kerr.ClusterAuthorizationFailed); refused == c.served || err == nil {
				t.Fatalf("verify: %v (served %v)", err, c.served)
			}
		})
	}
	b.checkServing(t)
}

package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kaas-dev/kaas/engine/auth"
	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/wire"
	"github.com/kaas-dev/kaas/wire/listeners"
	"github.com/kaas-dev/kaas/wire/sasl"
	"github.com/kaas-dev/kaas/wire/tlsfiles"
	"github.com/kaas-dev/kaas/wire/tlsfiles/tlstest"
)

func TestParseSuperUsers(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
		ok   bool
	}{
		{"", nil, true},
		{"User:a", []string{"User:a"}, true},
		{" User:a ; User:b;", []string{"User:a", "User:b"}, true},
		{"a", nil, false},
		{"User:", nil, false},
		{"Group:ops", nil, false},
	} {
		got, err := parseSuperUsers(c.in)
		if (err == nil) != c.ok || len(got) != len(c.want) {
			t.Errorf("parseSuperUsers(%q) = %v, %v; want %v (ok %v)", c.in, got, err, c.want, c.ok)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("parseSuperUsers(%q) = %v, want %v", c.in, got, c.want)
			}
		}
	}
}

// TestInterBrokerSASLSSL: two broker processes whose only listener,
// SASL_SSL, is also the inter-broker one, reach each other as the broker
// principal: a transaction over partitions of both brokers commits, its
// markers and verifications crossing between them, and a read_committed
// consumer reads it. A client that is not the broker gets
// CLUSTER_AUTHORIZATION_FAILED for WriteTxnMarkers.
func TestInterBrokerSASLSSL(t *testing.T) {
	data := t.TempDir()
	for user, pw := range map[string]string{"alice": "pw", "kaas-broker": "broker-secret"} {
		cred, err := auth.ScramSHA512.FromPassword(user, pw, auth.DefaultIterations)
		if err != nil {
			t.Fatal(err)
		}
		if err := auth.SaveCredential(volume.OS(), filepath.Join(data, "__cluster"), cred); err != nil {
			t.Fatal(err)
		}
	}
	secrets := t.TempDir()
	pwFile := filepath.Join(secrets, "broker-password")
	if err := os.WriteFile(pwFile, []byte("broker-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	root := tlstest.NewCA(t, "root")
	certFile, keyFile, caFile := root.ServerFiles(t, secrets)
	ports := freePorts(t, 2)
	var seeds []string
	var procs []*brokerProcess
	for i, p := range ports {
		addr := "127.0.0.1:" + p
		seeds = append(seeds, addr)
		procs = append(procs, startBrokerProcess(t, "--data", data, "--id", []string{"1", "2"}[i], "--admin", "",
			"--heartbeat-interval", "200ms", "--lease", "5s",
			"--listeners", "SASL_SSL://"+addr, "--inter-broker-listener", "SASL_SSL",
			"--tls-cert-file", certFile, "--tls-key-file", keyFile, "--tls-client-ca-file", caFile,
			"--sasl-mechanisms", "SCRAM-SHA-512",
			"--inter-broker-username", "kaas-broker", "--inter-broker-password-file", pwFile))
	}
	for _, b := range procs {
		b.waitLog(t, "kaas broker started", 20*time.Second)
	}
	logs := func() string {
		tail := func(s string) string { return s[max(0, len(s)-8000):] }
		return tail(procs[0].out.String()) + "\n----\n" + tail(procs[1].out.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	client := func(opts ...kgo.Opt) *kgo.Client {
		t.Helper()
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.DialTLSConfig(&tls.Config{RootCAs: root.Pool()}),
			kgo.SASL(scram.Auth{User: "alice", Pass: "pw"}.AsSha512Mechanism())}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	alice := client()
	adm := kadm.NewClient(alice)
	const partitions = 4
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for !ok() {
			if ctx.Err() != nil {
				t.Fatalf("no %s in time; logs:\n%s", what, logs())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitFor("two brokers", func() bool {
		bs, err := adm.ListBrokers(ctx)
		return err == nil && len(bs) == 2
	})
	// A topic's partitions are spread over the brokers the controller saw
	// live when it was created, and stay there: one created while a broker
	// was briefly unseen (a loaded machine) is left for another.
	var topic string
	for attempt := 0; topic == ""; attempt++ {
		name := fmt.Sprintf("ib-txn-%d", attempt)
		if _, err := adm.CreateTopic(ctx, partitions, 1, nil, name); err != nil {
			t.Fatalf("create topic: %v", err)
		}
		spread := time.Now().Add(10 * time.Second)
		waitFor("partitions of "+name+" assigned", func() bool {
			md, err := adm.Metadata(ctx, name)
			if err != nil {
				return false
			}
			leaders := map[int32]bool{}
			for _, p := range md.Topics[name].Partitions {
				if p.Err == nil {
					leaders[p.Leader] = true
				}
			}
			if len(md.Topics[name].Partitions) == partitions && len(leaders) == 2 {
				topic = name
				return true
			}
			return time.Now().After(spread)
		})
	}

	producer := client(kgo.TransactionalID("ib-txn-1"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := producer.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for p := range int32(partitions) {
		if err := producer.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatalf("produce to partition %d: %v\n%s", p, err, logs())
		}
	}
	if err := producer.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit: %v\n%s", err, logs())
	}
	consumer := client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	got := 0
	for got < partitions {
		fs := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d committed records; logs:\n%s", got, partitions, logs())
		}
		fs.EachRecord(func(*kgo.Record) { got++ })
	}

	req := kmsg.NewPtrWriteTxnMarkersRequest()
	mk := kmsg.NewWriteTxnMarkersRequestMarker()
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = topic, []int32{0}
	mk.ProducerID, mk.Topics = 1, []kmsg.WriteTxnMarkersRequestMarkerTopic{mt}
	req.Markers = append(req.Markers, mk)
	kresp, err := alice.Broker(1).Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	resp := kresp.(*kmsg.WriteTxnMarkersResponse)
	if code := resp.Markers[0].Topics[0].Partitions[0].ErrorCode; code != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("WriteTxnMarkers from alice: %v, want CLUSTER_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}
}

// TestInterBrokerSecurity: the broker principal and the peers' security
// follow the inter-broker listener's protocol, and nobody is a broker
// principal (everyone may send inter-broker requests) while no listener
// authenticates.
func TestInterBrokerSecurity(t *testing.T) {
	root := tlstest.NewCA(t, "root")
	dir := t.TempDir()
	certFile, keyFile, caFile := root.BrokerFiles(t, dir, "broker-7")
	pwFile := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwFile, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if pw, err := readPassword(pwFile); err != nil || pw != "secret" {
		t.Fatalf("readPassword = %q, %v", pw, err)
	}
	files, err := tlsfiles.Load(tlsfiles.Config{CertFile: certFile, KeyFile: keyFile, ClientCAFile: caFile,
		ClientAuth: tlsfiles.ClientAuthRequired, ServerCAFile: caFile, Logger: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	saslCfg := &sasl.Config{Mechanisms: []string{sasl.ScramSHA512, sasl.Plain}}
	rules, err := auth.ParsePrincipalRules("RULE:^CN=(broker)-[0-9]+$/$1/")
	if err != nil {
		t.Fatal(err)
	}
	plain := wire.Listener{Name: "PLAINTEXT", Protocol: listeners.Plaintext}
	saslSSL := wire.Listener{Name: "SASL_SSL", Protocol: listeners.SASLSSL}
	ssl := wire.Listener{Name: "SSL", Protocol: listeners.SSL}
	mapped := wire.Listener{Name: "SSL", Protocol: listeners.SSL, Principals: rules}
	bound := func(ls ...wire.Listener) []boundListener {
		var out []boundListener
		for _, l := range ls {
			out = append(out, boundListener{wl: l})
		}
		return out
	}
	broker := interBrokerAuth{mechanism: "scram-sha-512", user: "kaas-broker", passwordFile: pwFile}
	cases := []struct {
		name       string
		auth       interBrokerAuth
		clientAuth string
		ib         wire.Listener
		bound      []boundListener
		authorizer bool
		want       []string // the broker principals
		tls, sasl  bool
		err        bool
	}{
		{name: "PLAINTEXT only", ib: plain, bound: bound(plain)},
		{name: "PLAINTEXT only, credential unused", auth: broker, ib: plain, bound: bound(plain)},
		{name: "PLAINTEXT only with the authorizer", auth: interBrokerAuth{superUsers: "User:admin"}, authorizer: true, ib: plain,
			bound: bound(plain), want: []string{"User:ANONYMOUS", "User:admin"}},
		{name: "SSL without client certificates", clientAuth: "none", ib: ssl, bound: bound(ssl), tls: true},
		{name: "PLAINTEXT inter-broker beside SASL_SSL", auth: interBrokerAuth{superUsers: "User:ops"}, ib: plain,
			bound: bound(plain, saslSSL), want: []string{"User:ANONYMOUS", "User:ops"}},
		{name: "SASL_SSL inter-broker", auth: broker, ib: saslSSL, bound: bound(saslSSL), want: []string{"User:kaas-broker"}, tls: true, sasl: true},
		{name: "SASL_SSL without a user", auth: interBrokerAuth{mechanism: "SCRAM-SHA-512", passwordFile: pwFile}, ib: saslSSL, bound: bound(saslSSL), err: true},
		{name: "SASL_SSL with a missing password file", auth: interBrokerAuth{mechanism: "SCRAM-SHA-512", user: "b", passwordFile: filepath.Join(dir, "none")}, ib: saslSSL, bound: bound(saslSSL), err: true},
		{name: "SASL mechanism not enabled", auth: interBrokerAuth{mechanism: "SCRAM-SHA-256", user: "b", passwordFile: pwFile}, ib: saslSSL, bound: bound(saslSSL), err: true},
		{name: "SSL with client certificates", clientAuth: "required", ib: ssl, bound: bound(ssl), want: []string{"User:broker-7"}, tls: true},
		{name: "SSL with mapping rules", clientAuth: "requested", ib: mapped, bound: bound(mapped), want: []string{"User:broker"}, tls: true},
		{name: "bad super users", auth: interBrokerAuth{superUsers: "ops"}, ib: saslSSL, bound: bound(saslSSL), err: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := listenerOptions{tlsClientAuth: c.clientAuth, interBrokerAuth: c.auth}
			if c.auth.mechanism == "" && c.ib.Protocol.SASL() {
				l.interBrokerAuth.mechanism = sasl.ScramSHA512
			}
			sec, principals, err := l.interBrokerSecurity(logr.Discard(), c.ib, c.bound, files, saslCfg, c.authorizer)
			if (err != nil) != c.err {
				t.Fatalf("err = %v, want an error: %v", err, c.err)
			}
			if err != nil {
				return
			}
			if !slices.Equal(principals, c.want) {
				t.Fatalf("broker principals = %v, want %v", principals, c.want)
			}
			if (sec.TLS != nil) != c.tls || (sec.SASL != nil) != c.sasl {
				t.Fatalf("peer TLS %v, SASL %v; want %v, %v", sec.TLS != nil, sec.SASL != nil, c.tls, c.sasl)
			}
			if c.tls {
				withCert := len(sec.TLS("127.0.0.1").Certificates) > 0
				if want := c.ib.Protocol == listeners.SSL && len(c.want) > 0; withCert != want {
					t.Fatalf("peer presents its certificate: %v, want %v", withCert, want)
				}
			}
		})
	}
}

package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kaas-dev/kaas/engine/auth"
	"github.com/kaas-dev/kaas/volume"
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

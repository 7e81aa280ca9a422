package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestGroupsAgainstKfake: a group with one live member that consumed and
// committed 30 records of a 3-partition topic is listed with its
// coordinator, state and member count, and described with its member's
// assignment and each partition's committed offset, end and lag 0.
func TestGroupsAgainstKfake(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "orders"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	prod, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("orders"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	for i := range 30 {
		if err := prod.ProduceSync(ctx, &kgo.Record{Partition: int32(i % 3), Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID("lagcheck"), kgo.ConsumerGroup("billing"),
		kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	for n := 0; n < 30; {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		n += fs.NumRecords()
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	memberID, _ := cons.GroupMetadata()

	var out bytes.Buffer
	if err := run([]string{"groups", "--bootstrap", addr, "-o", "json"}, &out); err != nil {
		t.Fatal(err)
	}
	var rows []groupRow
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if len(rows) != 1 || rows[0].Group != "billing" || rows[0].State != "Stable" || rows[0].ProtocolType != "consumer" ||
		rows[0].Members != 1 {
		t.Fatalf("groups list: %s", out.String())
	}

	out.Reset()
	if err := run([]string{"groups", "describe", "billing", "--bootstrap", addr, "-o", "json"}, &out); err != nil {
		t.Fatal(err)
	}
	var d groupDetail
	if err := json.Unmarshal(out.Bytes(), &d); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if d.State != "Stable" || d.Protocol == "" || len(d.Members) != 1 || d.Members[0].MemberID != memberID ||
		d.Members[0].ClientID != "lagcheck" || len(d.Members[0].Assigned["orders"]) != 3 || len(d.Partitions) != 3 {
		t.Fatalf("groups describe: %s", out.String())
	}
	for i, p := range d.Partitions {
		if p.Topic != "orders" || p.Partition != int32(i) || p.Committed != 10 || p.LogEnd != 10 || p.Lag != 0 ||
			p.Member != memberID || p.Error != "" {
			t.Fatalf("partition %d: %+v", i, p)
		}
	}

	out.Reset()
	if err := run([]string{"groups", "describe", "billing", "--bootstrap", addr}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"state Stable", "CLIENT ID", "lagcheck", "orders:0,1,2", "COMMITTED", "LAG"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("table output lacks %q:\n%s", want, out.String())
		}
	}
	t.Logf("kaasctl groups describe billing:\n%s", out.String())
}

func TestGroupsUsage(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"groups"}, &out); err == nil || !strings.Contains(err.Error(), "--bootstrap") {
		t.Fatalf("no --bootstrap: %v", err)
	}
	if err := run([]string{"groups", "frobnicate", "--bootstrap", "127.0.0.1:1"}, &out); err == nil || !strings.Contains(err.Error(), "usage") {
		t.Fatalf("bad subcommand: %v", err)
	}
	if err := run([]string{"groups", "--bootstrap", "127.0.0.1:1", "-o", "yaml"}, &out); err == nil {
		t.Fatal("-o yaml accepted")
	}
}

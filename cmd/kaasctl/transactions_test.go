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

// TestTransactionsPrinting: rows built by hand print as tables with their
// unknowns ("?") and nones ("-") spelled out, and as JSON with the documented
// keys.
func TestTransactionsPrinting(t *testing.T) {
	start := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC).UnixMilli()
	started := time.UnixMilli(start).Format(time.RFC3339)
	rows := []txnRow{
		{TransactionalID: "payments-1", Coordinator: 2, ProducerID: 4001, State: "Ongoing", ProducerEpoch: 3,
			TimeoutMs: 60000, StartTimestamp: start, DurationMs: 95500, Partitions: 4},
		{TransactionalID: "payments-2", Coordinator: 0, ProducerID: 4002, State: "Empty", ProducerEpoch: 0,
			TimeoutMs: 1500, StartTimestamp: -1, DurationMs: -1, Partitions: 0},
		{TransactionalID: "payments-3", Coordinator: 1, ProducerID: 4003, State: "Ongoing", ProducerEpoch: -1,
			TimeoutMs: -1, StartTimestamp: -1, DurationMs: -1, Partitions: -1, Error: "NOT_COORDINATOR"},
	}
	detail := txnDetail{TransactionalID: "payments-1", Coordinator: 2, State: "Ongoing", ProducerID: 4001,
		ProducerEpoch: 3, TimeoutMs: 60000, StartTimestamp: start, DurationMs: 95500,
		Partitions: map[string][]int32{"orders": {0, 2}, "audit": {1}}}
	idle := txnDetail{TransactionalID: "payments-2", State: "Empty", ProducerID: 4002, TimeoutMs: 1500,
		StartTimestamp: -1, DurationMs: -1, Partitions: map[string][]int32{}}
	parts := []producerPartition{
		{Topic: "orders", Partition: 0, Leader: 1, Producers: []producerState{
			{ProducerID: 4001, ProducerEpoch: 3, LastSequence: 41, LastTimestamp: start, CoordinatorEpoch: 7, CurrentTxnStartOffset: 120},
			{ProducerID: 5000, ProducerEpoch: 0, LastSequence: 9, LastTimestamp: start, CoordinatorEpoch: -1, CurrentTxnStartOffset: -1},
		}},
		{Topic: "orders", Partition: 1, Leader: 2, Producers: []producerState{}},
		{Topic: "orders", Partition: 2, Leader: 0, Producers: []producerState{}, Error: "NOT_LEADER_OR_FOLLOWER: moved"},
	}

	for _, tc := range []struct {
		name  string
		table func(*bytes.Buffer) error
		json  any
		lines []string // whole table lines, spaces collapsed
		keys  []string // keys of the JSON (first element's, for arrays)
	}{
		{
			name:  "list",
			table: func(b *bytes.Buffer) error { return printTxnRows(b, rows) },
			json:  rows,
			lines: []string{
				"TRANSACTIONAL ID COORDINATOR PRODUCER ID EPOCH STATE TIMEOUT STARTED DURATION PARTITIONS",
				"payments-1 2 4001 3 Ongoing 1m0s " + started + " 1m36s 4",
				"payments-2 0 4002 0 Empty 1.5s - - 0",
				"payments-3 1 4003 ? Ongoing ? ? ? ?",
			},
			keys: []string{"transactionalId", "coordinator", "producerId", "state", "producerEpoch", "timeoutMs",
				"startTimestamp", "durationMs", "partitions"},
		},
		{
			name:  "describe",
			table: func(b *bytes.Buffer) error { return printTxnDetail(b, detail) },
			json:  detail,
			lines: []string{
				"transaction payments-1 coordinator 2 state Ongoing producer ID 4001 epoch 3 timeout 1m0s",
				"started " + started + " running 1m36s",
				"TOPIC PARTITIONS",
				"audit 1",
				"orders 0,2",
			},
			keys: []string{"transactionalId", "coordinator", "state", "producerId", "producerEpoch", "timeoutMs",
				"startTimestamp", "durationMs", "partitions"},
		},
		{
			name:  "describe idle",
			table: func(b *bytes.Buffer) error { return printTxnDetail(b, idle) },
			json:  idle,
			lines: []string{
				"transaction payments-2 coordinator 0 state Empty producer ID 4002 epoch 0 timeout 1.5s",
				"no transaction open",
				"TOPIC PARTITIONS",
			},
			keys: []string{"transactionalId", "partitions"},
		},
		{
			name:  "producers",
			table: func(b *bytes.Buffer) error { return printProducers(b, "orders", parts) },
			json:  parts,
			lines: []string{
				"topic orders partitions 3 active producers 2 open transactions 1",
				"PARTITION LEADER PRODUCER ID EPOCH LAST SEQUENCE LAST TIMESTAMP COORDINATOR EPOCH TXN START OFFSET",
				"0 1 4001 3 41 " + started + " 7 120",
				"0 1 5000 0 9 " + started + " -1 -",
				"2 0 ? ? (NOT_LEADER_OR_FOLLOWER: moved)",
			},
			keys: []string{"topic", "partition", "leader", "producers"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := tc.table(&out); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
				if l = strings.Join(strings.Fields(l), " "); l != "" {
					got = append(got, l)
				}
			}
			if strings.Join(got, "\n") != strings.Join(tc.lines, "\n") {
				t.Fatalf("table:\n%s\nwant (spaces collapsed):\n%s", out.String(), strings.Join(tc.lines, "\n"))
			}

			out.Reset()
			if err := printJSON(&out, tc.json); err != nil {
				t.Fatal(err)
			}
			var v any
			if err := json.Unmarshal(out.Bytes(), &v); err != nil {
				t.Fatalf("%v\n%s", err, out.String())
			}
			if a, ok := v.([]any); ok {
				v = a[0]
			}
			m, _ := v.(map[string]any)
			for _, k := range tc.keys {
				if _, ok := m[k]; !ok {
					t.Fatalf("JSON lacks %q:\n%s", k, out.String())
				}
			}
		})
	}

	// The JSON of producers keeps -1 (not "-") for "no open transaction",
	// and an empty list (not null) for a partition without producers.
	var out bytes.Buffer
	if err := printJSON(&out, parts); err != nil {
		t.Fatal(err)
	}
	var back []producerPartition
	if err := json.Unmarshal(out.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back[0].Producers[1].CurrentTxnStartOffset != -1 || back[1].Producers == nil || back[2].Error == "" {
		t.Fatalf("producers JSON: %s", out.String())
	}
	if !strings.Contains(out.String(), `"producers": []`) {
		t.Fatalf("empty producers not []: %s", out.String())
	}
}

func TestTxnDuration(t *testing.T) {
	now := time.UnixMilli(10_000)
	for _, tc := range []struct {
		start, want int64
	}{
		{-1, -1}, // none open
		{4_000, 6_000},
		{12_000, 0}, // the coordinator's clock is ahead of ours
	} {
		if got := txnDuration(tc.start, now); got != tc.want {
			t.Errorf("txnDuration(%d) = %d, want %d", tc.start, got, tc.want)
		}
	}
	for ms, want := range map[int64]string{250: "250ms", 1500: "1.5s", 60000: "1m0s", 95500: "1m36s", 3_723_400: "1h2m3s"} {
		if got := msString(ms); got != want {
			t.Errorf("msString(%d) = %q, want %q", ms, got, want)
		}
	}
}

func TestTransactionsUsage(t *testing.T) {
	var out bytes.Buffer
	t.Setenv("KAAS_BOOTSTRAP", "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"transactions"}, "--bootstrap"},
		{[]string{"transactions", "describe", "x"}, "--bootstrap"},
		{[]string{"transactions", "frobnicate", "--bootstrap", "127.0.0.1:1"}, "usage"},
		{[]string{"transactions", "describe", "--bootstrap", "127.0.0.1:1"}, "usage"},
		{[]string{"transactions", "producers", "--bootstrap", "127.0.0.1:1"}, "usage"},
		{[]string{"transactions", "describe", "a", "b", "--bootstrap", "127.0.0.1:1"}, "usage"},
		{[]string{"transactions", "list", "x", "--bootstrap", "127.0.0.1:1"}, "usage"},
		{[]string{"transactions", "--bootstrap", "127.0.0.1:1", "-o", "yaml"}, "-o must be"},
	} {
		err := run(tc.args, &out)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error with %q", tc.args, err, tc.want)
		}
	}
	out.Reset()
	if err := run([]string{"help"}, &out); err != nil || !strings.Contains(out.String(), "transactions producers TOPIC") {
		t.Fatalf("usage lacks transactions: %v\n%s", err, out.String())
	}
}

// TestTransactionsAgainstKfake: a transactional producer with a transaction
// open on two of three partitions, and one whose transaction committed, are
// listed (Ongoing with 2 partitions; Empty), described, and found among the
// topic's producers with the open transaction's first offsets.
func TestTransactionsAgainstKfake(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "orders"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	txnClient := func(id string) *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("orders"), kgo.TransactionalID(id),
			kgo.TransactionTimeout(45*time.Second), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	produce := func(cl *kgo.Client, partitions ...int32) {
		for _, p := range partitions {
			if err := cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte("v")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	done := txnClient("settled")
	if err := done.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produce(done, 0, 1, 2)
	if err := done.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	hanging := txnClient("hanging")
	if err := hanging.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produce(hanging, 0, 0, 2)

	var out bytes.Buffer
	if err := run([]string{"transactions", "--bootstrap", addr, "-o", "json"}, &out); err != nil {
		t.Fatal(err)
	}
	var rows []txnRow
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if len(rows) != 2 || rows[0].TransactionalID != "hanging" || rows[1].TransactionalID != "settled" {
		t.Fatalf("transactions list: %s", out.String())
	}
	h, s := rows[0], rows[1]
	if h.State != "Ongoing" || h.Partitions != 2 || h.TimeoutMs != 45000 || h.StartTimestamp <= 0 || h.DurationMs < 0 ||
		h.ProducerID < 0 || h.Error != "" {
		t.Fatalf("hanging: %+v", h)
	}
	if s.State != "Empty" || s.Partitions != 0 || s.StartTimestamp != -1 || s.DurationMs != -1 || s.ProducerID == h.ProducerID {
		t.Fatalf("settled: %+v", s)
	}

	out.Reset()
	if err := run([]string{"transactions", "describe", "hanging", "--bootstrap", addr, "-o", "json"}, &out); err != nil {
		t.Fatal(err)
	}
	var d txnDetail
	if err := json.Unmarshal(out.Bytes(), &d); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if d.State != "Ongoing" || d.ProducerID != h.ProducerID || d.ProducerEpoch != h.ProducerEpoch || d.TimeoutMs != 45000 ||
		d.StartTimestamp != h.StartTimestamp || len(d.Partitions) != 1 || len(d.Partitions["orders"]) != 2 ||
		d.Partitions["orders"][0] != 0 || d.Partitions["orders"][1] != 2 {
		t.Fatalf("transactions describe: %s", out.String())
	}

	out.Reset()
	if err := run([]string{"transactions", "producers", "orders", "--bootstrap", addr, "-o", "json"}, &out); err != nil {
		t.Fatal(err)
	}
	var parts []producerPartition
	if err := json.Unmarshal(out.Bytes(), &parts); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if len(parts) != 3 {
		t.Fatalf("transactions producers: %s", out.String())
	}
	// settled wrote offset 0 of every partition and its commit marker 1;
	// hanging's transaction starts after them, at 2.
	for i, want := range []int{1, 0, 1} {
		p := parts[i]
		if p.Topic != "orders" || p.Partition != int32(i) || p.Error != "" || len(p.Producers) != want {
			t.Fatalf("partition %d: %+v", i, p)
		}
		if want == 1 {
			ps := p.Producers[0]
			if ps.ProducerID != h.ProducerID || ps.ProducerEpoch != h.ProducerEpoch || ps.CurrentTxnStartOffset != 2 ||
				ps.LastTimestamp <= 0 {
				t.Fatalf("partition %d producer: %+v", i, ps)
			}
		}
	}

	out.Reset()
	if err := run([]string{"transactions", "--bootstrap", addr}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"TRANSACTIONAL ID", "hanging", "Ongoing", "45s", "settled", "Empty"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("table output lacks %q:\n%s", want, out.String())
		}
	}
	t.Logf("kaasctl transactions:\n%s", out.String())
	out.Reset()
	if err := run([]string{"transactions", "producers", "orders", "--bootstrap", addr}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "open transactions 2") {
		t.Fatalf("producers table:\n%s", out.String())
	}
	t.Logf("kaasctl transactions producers orders:\n%s", out.String())

	if err := run([]string{"transactions", "describe", "nobody", "--bootstrap", addr}, &out); err == nil ||
		!strings.Contains(err.Error(), "nobody") {
		t.Fatalf("unknown transactional ID: %v", err)
	}
	if err := run([]string{"transactions", "producers", "nowhere", "--bootstrap", addr}, &out); err == nil ||
		!strings.Contains(err.Error(), "nowhere") {
		t.Fatalf("unknown topic: %v", err)
	}
}

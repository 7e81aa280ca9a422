package txns

import (
	"maps"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestAddPartitions(t *testing.T) {
	t0, t1, u2 := tp("t", 0), tp("t", 1), tp("u", 2)
	completed := seedMeta("CompleteCommit")
	completed.startMs = 5 // a previous transaction's start
	now := newFakeClock().Now().UnixMilli()
	tests := []struct {
		name      string
		seed      []Record
		txnID     string
		pid       int64
		epoch     int16
		parts     []TopicPartition
		wantCodes []int16
		wantState string
		wantParts []TopicPartition
		wantStart int64
		wantLog   []string
	}{
		{name: "unknown ID", txnID: "nope", pid: 7, epoch: 3, parts: []TopicPartition{t0, t1},
			wantCodes: []int16{kerr.InvalidProducerIDMapping.Code, kerr.InvalidProducerIDMapping.Code}, wantState: "none"},
		{name: "empty ID", txnID: "", pid: 7, epoch: 3, parts: []TopicPartition{t0},
			wantCodes: []int16{kerr.InvalidRequest.Code}, wantState: "none"},
		{name: "another producer ID", seed: seed("tx", seedMeta("Empty")), txnID: "tx", pid: 8, epoch: 3, parts: []TopicPartition{t0},
			wantCodes: []int16{kerr.InvalidProducerIDMapping.Code}, wantState: "Empty", wantStart: -1},
		{name: "an older epoch", seed: seed("tx", seedMeta("Ongoing", t0)), txnID: "tx", pid: 7, epoch: 2, parts: []TopicPartition{t1},
			wantCodes: []int16{kerr.ProducerFenced.Code}, wantState: "Ongoing", wantParts: []TopicPartition{t0}, wantStart: now - 1000},
		{name: "a newer epoch", seed: seed("tx", seedMeta("Empty")), txnID: "tx", pid: 7, epoch: 4, parts: []TopicPartition{t0},
			wantCodes: []int16{kerr.ProducerFenced.Code}, wantState: "Empty", wantStart: -1},
		{name: "PrepareCommit", seed: seed("tx", seedMeta("PrepareCommit", t0)), txnID: "tx", pid: 7, epoch: 3, parts: []TopicPartition{t1},
			wantCodes: []int16{kerr.ConcurrentTransactions.Code}, wantState: "PrepareCommit", wantParts: []TopicPartition{t0}, wantStart: now - 1000},
		{name: "PrepareAbort", seed: seed("tx", seedMeta("PrepareAbort", t0)), txnID: "tx", pid: 7, epoch: 3, parts: []TopicPartition{t0},
			wantCodes: []int16{kerr.ConcurrentTransactions.Code}, wantState: "PrepareAbort", wantParts: []TopicPartition{t0}, wantStart: now - 1000},
		{name: "Empty starts a transaction", seed: seed("tx", seedMeta("Empty")), txnID: "tx", pid: 7, epoch: 3, parts: []TopicPartition{u2, t0},
			wantCodes: []int16{0, 0}, wantState: "Ongoing", wantParts: []TopicPartition{t0, u2}, wantStart: now,
			wantLog: []string{"tx Ongoing 7/3"}},
		{name: "CompleteCommit starts a new one", seed: seed("tx", completed), txnID: "tx", pid: 7, epoch: 3, parts: []TopicPartition{t1},
			wantCodes: []int16{0}, wantState: "Ongoing", wantParts: []TopicPartition{t1}, wantStart: now,
			wantLog: []string{"tx Ongoing 7/3"}},
		{name: "CompleteAbort starts a new one", seed: seed("tx", seedMeta("CompleteAbort")), txnID: "tx", pid: 7, epoch: 3, parts: []TopicPartition{t1},
			wantCodes: []int16{0}, wantState: "Ongoing", wantParts: []TopicPartition{t1}, wantStart: now,
			wantLog: []string{"tx Ongoing 7/3"}},
		{name: "Ongoing adds what is new", seed: seed("tx", seedMeta("Ongoing", t0)), txnID: "tx", pid: 7, epoch: 3, parts: []TopicPartition{t0, t1},
			wantCodes: []int16{0, 0}, wantState: "Ongoing", wantParts: []TopicPartition{t0, t1}, wantStart: now - 1000,
			wantLog: []string{"tx Ongoing 7/3"}},
		{name: "Ongoing with nothing new writes nothing", seed: seed("tx", seedMeta("Ongoing", t0, t1)), txnID: "tx", pid: 7, epoch: 3, parts: []TopicPartition{t1, t1},
			wantCodes: []int16{0, 0}, wantState: "Ongoing", wantParts: []TopicPartition{t0, t1}, wantStart: now - 1000},
		{name: "no partitions still starts a transaction (as Kafka)", seed: seed("tx", seedMeta("Empty")), txnID: "tx", pid: 7, epoch: 3,
			wantCodes: []int16{}, wantState: "Ongoing", wantStart: now,
			wantLog: []string{"tx Ongoing 7/3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.seed, blockMarkers)
			before := len(h.journal.records())
			codes := h.c.AddPartitions(ctx, tt.txnID, tt.pid, tt.epoch, tt.parts)
			if !slices.Equal(codes, tt.wantCodes) {
				t.Fatalf("codes %v, want %v", codes, tt.wantCodes)
			}
			if got := h.state(tt.txnID); got != tt.wantState {
				t.Errorf("state %s, want %s", got, tt.wantState)
			}
			if m, ok := h.meta(tt.txnID); ok {
				if got := m.sortedPartitions(); !slices.Equal(got, tt.wantParts) {
					t.Errorf("partitions %v, want %v", got, tt.wantParts)
				}
				if m.startMs != tt.wantStart {
					t.Errorf("start %d, want %d", m.startMs, tt.wantStart)
				}
			}
			if got := h.logged()[before:]; !slices.Equal(got, tt.wantLog) {
				t.Errorf("appended %q, want %q", got, tt.wantLog)
			}
		})
	}
}

func TestAddOffsets(t *testing.T) {
	tests := []struct {
		name       string
		seed       []Record
		pid        int64
		epoch      int16
		group      string
		want       int16
		wantState  string
		wantGroups []string
		wantLog    []string
	}{
		{name: "unknown ID", pid: 7, epoch: 3, group: "g", want: kerr.InvalidProducerIDMapping.Code, wantState: "none"},
		{name: "empty group", seed: seed("tx", seedMeta("Empty")), pid: 7, epoch: 3, group: "", want: kerr.InvalidGroupID.Code, wantState: "Empty", wantGroups: []string{}},
		{name: "an older epoch", seed: seed("tx", seedMeta("Empty")), pid: 7, epoch: 2, group: "g", want: kerr.ProducerFenced.Code, wantState: "Empty", wantGroups: []string{}},
		{name: "PrepareAbort", seed: seed("tx", seedMeta("PrepareAbort", tp("t", 0))), pid: 7, epoch: 3, group: "g", want: kerr.ConcurrentTransactions.Code, wantState: "PrepareAbort", wantGroups: []string{}},
		{name: "Empty starts a transaction", seed: seed("tx", seedMeta("Empty")), pid: 7, epoch: 3, group: "g",
			wantState: "Ongoing", wantGroups: []string{"g"}, wantLog: []string{"tx Ongoing 7/3"}},
		{name: "Ongoing adds the group", seed: seed("tx", seedMeta("Ongoing", tp("t", 0))), pid: 7, epoch: 3, group: "g",
			wantState: "Ongoing", wantGroups: []string{"g"}, wantLog: []string{"tx Ongoing 7/3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.seed, blockMarkers)
			before := len(h.journal.records())
			if got := h.c.AddOffsets(ctx, "tx", tt.pid, tt.epoch, tt.group); got != tt.want {
				t.Fatalf("code %s, want %s", codeName(got), codeName(tt.want))
			}
			if got := h.state("tx"); got != tt.wantState {
				t.Errorf("state %s, want %s", got, tt.wantState)
			}
			if m, ok := h.meta("tx"); ok {
				if got := m.sortedGroups(); !slices.Equal(got, tt.wantGroups) {
					t.Errorf("groups %v, want %v", got, tt.wantGroups)
				}
			}
			if got := h.logged()[before:]; !slices.Equal(got, tt.wantLog) {
				t.Errorf("appended %q, want %q", got, tt.wantLog)
			}
			// Adding it again writes nothing.
			if tt.want == 0 {
				n := h.journal.batchCount()
				if got := h.c.AddOffsets(ctx, "tx", tt.pid, tt.epoch, tt.group); got != 0 || h.journal.batchCount() != n {
					t.Errorf("second AddOffsets: %s, %d batches", codeName(got), h.journal.batchCount()-n)
				}
			}
		})
	}
}

func TestVerifyPartitions(t *testing.T) {
	t0, t1 := tp("t", 0), tp("t", 1)
	invalid, fenced := kerr.InvalidTxnState.Code, kerr.ProducerFenced.Code
	ongoing := seed("tx", seedMeta("Ongoing", t0))
	tests := []struct {
		name  string
		seed  []Record
		txnID string
		pid   int64
		epoch int16
		want  []int16
	}{
		{name: "in the transaction or not", seed: ongoing, txnID: "tx", pid: 7, epoch: 3, want: []int16{0, invalid}},
		{name: "an older epoch", seed: ongoing, txnID: "tx", pid: 7, epoch: 2, want: []int16{fenced, fenced}},
		{name: "a newer epoch", seed: ongoing, txnID: "tx", pid: 7, epoch: 4, want: []int16{fenced, fenced}},
		{name: "another producer ID", seed: ongoing, txnID: "tx", pid: 8, epoch: 3, want: []int16{invalid, invalid}},
		{name: "unknown ID", txnID: "tx", pid: 7, epoch: 3, want: []int16{invalid, invalid}},
		{name: "Empty", seed: seed("tx", seedMeta("Empty")), txnID: "tx", pid: 7, epoch: 3, want: []int16{invalid, invalid}},
		{name: "PrepareCommit: the transaction is decided", seed: seed("tx", seedMeta("PrepareCommit", t0)), txnID: "tx", pid: 7, epoch: 3, want: []int16{invalid, invalid}},
		{name: "CompleteAbort", seed: seed("tx", seedMeta("CompleteAbort")), txnID: "tx", pid: 7, epoch: 3, want: []int16{invalid, invalid}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.seed, blockMarkers)
			if got := h.c.VerifyPartitions(tt.txnID, tt.pid, tt.epoch, []TopicPartition{t0, t1}); !slices.Equal(got, tt.want) {
				t.Fatalf("codes %v, want %v", got, tt.want)
			}
			if n := h.journal.batchCount(); n != 0 {
				t.Fatalf("%d batches written", n)
			}
		})
	}
}

// A partition is confirmed to its owner only once its addition is
// durable: a new owner would not know of it otherwise, and its data would
// never get a marker.
func TestVerifySeesOnlyDurableAdditions(t *testing.T) {
	h := newHarness(t, nil)
	pid, epoch := h.init("tx")
	h.add("tx", pid, epoch, tp("t", 0))
	h.journal.set(func(j *fakeJournal) { j.hold = true })
	done := make(chan []int16, 1)
	go func() { done <- h.c.AddPartitions(ctx, "tx", pid, epoch, []TopicPartition{tp("t", 1)}) }()
	h.journal.waitBatches(3)
	parts := []TopicPartition{tp("t", 0), tp("t", 1)}
	if got := h.c.VerifyPartitions("tx", pid, epoch, parts); !slices.Equal(got, []int16{0, kerr.InvalidTxnState.Code}) {
		t.Fatalf("while pending: %v", got)
	}
	if got := h.c.AddPartitions(ctx, "tx", pid, epoch, []TopicPartition{tp("t", 2)}); got[0] != kerr.ConcurrentTransactions.Code {
		t.Fatalf("add while pending: %s", codeName(got[0]))
	}
	if got := h.c.EndTxn(ctx, "tx", pid, epoch, false); got != kerr.ConcurrentTransactions.Code {
		t.Fatalf("end while pending: %s", codeName(got))
	}
	h.journal.release(2)
	if got := <-done; got[0] != 0 {
		t.Fatalf("add: %s", codeName(got[0]))
	}
	if got := h.c.VerifyPartitions("tx", pid, epoch, parts); !slices.Equal(got, []int16{0, 0}) {
		t.Fatalf("after: %v", got)
	}
}

// withAdded never changes the sets of the state it starts from.
func TestWithAddedCopies(t *testing.T) {
	m := seedMeta("Ongoing", tp("t", 0))
	m.groups["g"] = struct{}{}
	parts, groups := maps.Clone(m.partitions), maps.Clone(m.groups)
	next, changed := m.withAdded([]TopicPartition{tp("t", 1)}, "h", 99)
	if !changed || len(next.partitions) != 2 || len(next.groups) != 2 {
		t.Fatalf("next %+v", next)
	}
	if !maps.Equal(m.partitions, parts) || !maps.Equal(m.groups, groups) {
		t.Fatal("withAdded changed its receiver's sets")
	}
}

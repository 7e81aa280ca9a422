package txns

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestEndTxn(t *testing.T) {
	t0 := tp("t", 0)
	invalid, busy := kerr.InvalidTxnState.Code, kerr.ConcurrentTransactions.Code
	tests := []struct {
		name        string
		seed        []Record
		txnID       string
		pid         int64
		epoch       int16
		commit      bool
		want        int16
		wantState   string
		wantLog     []string
		wantMarkers bool
	}{
		{name: "unknown ID", txnID: "tx", pid: 7, epoch: 3, commit: true, want: kerr.InvalidProducerIDMapping.Code, wantState: "none"},
		{name: "another producer ID", seed: seed("tx", seedMeta("Ongoing", t0)), txnID: "tx", pid: 8, epoch: 3, commit: true,
			want: kerr.InvalidProducerIDMapping.Code, wantState: "Ongoing"},
		{name: "an older epoch", seed: seed("tx", seedMeta("Ongoing", t0)), txnID: "tx", pid: 7, epoch: 2, commit: true,
			want: kerr.ProducerFenced.Code, wantState: "Ongoing"},
		{name: "Empty: nothing to end", seed: seed("tx", seedMeta("Empty")), txnID: "tx", pid: 7, epoch: 3, commit: false,
			want: invalid, wantState: "Empty"},
		{name: "Ongoing commit", seed: seed("tx", seedMeta("Ongoing", t0)), txnID: "tx", pid: 7, epoch: 3, commit: true,
			wantState: "PrepareCommit", wantLog: []string{"tx PrepareCommit 7/3"}, wantMarkers: true},
		{name: "Ongoing abort", seed: seed("tx", seedMeta("Ongoing", t0)), txnID: "tx", pid: 7, epoch: 3, commit: false,
			wantState: "PrepareAbort", wantLog: []string{"tx PrepareAbort 7/3"}, wantMarkers: true},
		{name: "Ongoing with nothing added completes at once", seed: seed("tx", seedMeta("Ongoing")), txnID: "tx", pid: 7, epoch: 3, commit: true,
			wantState: "CompleteCommit", wantLog: []string{"tx PrepareCommit 7/3", "tx CompleteCommit 7/3"}},
		{name: "PrepareCommit, commit again: retry later", seed: seed("tx", seedMeta("PrepareCommit", t0)), txnID: "tx", pid: 7, epoch: 3, commit: true,
			want: busy, wantState: "PrepareCommit", wantMarkers: true},
		{name: "PrepareCommit, abort", seed: seed("tx", seedMeta("PrepareCommit", t0)), txnID: "tx", pid: 7, epoch: 3, commit: false,
			want: invalid, wantState: "PrepareCommit", wantMarkers: true},
		{name: "PrepareAbort, abort again: retry later", seed: seed("tx", seedMeta("PrepareAbort", t0)), txnID: "tx", pid: 7, epoch: 3, commit: false,
			want: busy, wantState: "PrepareAbort", wantMarkers: true},
		{name: "PrepareAbort, commit", seed: seed("tx", seedMeta("PrepareAbort", t0)), txnID: "tx", pid: 7, epoch: 3, commit: true,
			want: invalid, wantState: "PrepareAbort", wantMarkers: true},
		{name: "CompleteCommit, commit again: done", seed: seed("tx", seedMeta("CompleteCommit")), txnID: "tx", pid: 7, epoch: 3, commit: true,
			wantState: "CompleteCommit"},
		{name: "CompleteCommit, abort", seed: seed("tx", seedMeta("CompleteCommit")), txnID: "tx", pid: 7, epoch: 3, commit: false,
			want: invalid, wantState: "CompleteCommit"},
		{name: "CompleteAbort, abort again: done", seed: seed("tx", seedMeta("CompleteAbort")), txnID: "tx", pid: 7, epoch: 3, commit: false,
			wantState: "CompleteAbort"},
		{name: "CompleteAbort, commit", seed: seed("tx", seedMeta("CompleteAbort")), txnID: "tx", pid: 7, epoch: 3, commit: true,
			want: invalid, wantState: "CompleteAbort"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.seed, blockMarkers)
			before := len(h.journal.records())
			if got := h.c.EndTxn(ctx, tt.txnID, tt.pid, tt.epoch, tt.commit); got != tt.want {
				t.Fatalf("code %s, want %s", codeName(got), codeName(tt.want))
			}
			if got := h.state(tt.txnID); got != tt.wantState {
				t.Errorf("state %s, want %s", got, tt.wantState)
			}
			if got := h.logged()[before:]; !slices.Equal(got, tt.wantLog) {
				t.Errorf("appended %q, want %q", got, tt.wantLog)
			}
			if h.journal.batchCount() > 1 {
				t.Errorf("%d batches, want at most 1", h.journal.batchCount())
			}
			if tt.wantMarkers {
				h.markers.waitCalls(1)
				want := Markers{TransactionalID: "tx", ProducerID: 7, ProducerEpoch: 3, Commit: tt.wantState == "PrepareCommit",
					CoordinatorEpoch: testEpoch, Partitions: []TopicPartition{t0}}
				if got := h.markers.got()[0]; !equalMarkers(got, want) {
					t.Errorf("markers %+v, want %+v", got, want)
				}
			}
		})
	}
}

// The full life of a transactional ID: init, partitions and offsets, a
// commit with its markers and completion, then a second transaction that
// starts from nothing and aborts.
func TestLifecycle(t *testing.T) {
	h := newHarness(t, nil)
	pid, epoch := h.init("tx")
	h.add("tx", pid, epoch, tp("b", 1), tp("a", 0))
	h.add("tx", pid, epoch, tp("a", 2), tp("a", 0))
	for _, g := range []string{"g2", "g1", "g2"} {
		if code := h.c.AddOffsets(ctx, "tx", pid, epoch, g); code != 0 {
			t.Fatalf("AddOffsets(%s): %s", g, codeName(code))
		}
	}
	if code := h.c.EndTxn(ctx, "tx", pid, epoch, true); code != 0 {
		t.Fatalf("EndTxn: %s", codeName(code))
	}
	h.settle()
	want := []Markers{{TransactionalID: "tx", ProducerID: pid, ProducerEpoch: epoch, Commit: true, CoordinatorEpoch: testEpoch,
		Partitions: []TopicPartition{tp("a", 0), tp("a", 2), tp("b", 1)}, Groups: []string{"g1", "g2"}}}
	if got := h.markers.got(); !slices.EqualFunc(got, want, equalMarkers) {
		t.Fatalf("markers %+v\nwant %+v", got, want)
	}
	if code := h.c.EndTxn(ctx, "tx", pid, epoch, true); code != 0 {
		t.Fatalf("retried commit: %s", codeName(code))
	}
	if d := h.c.Describe("tx"); d.State != "CompleteCommit" || len(d.Topics) != 0 {
		t.Fatalf("after commit: %+v", d)
	}

	// The next transaction has only what it adds.
	h.add("tx", pid, epoch, tp("c", 0))
	if got := h.c.VerifyPartitions("tx", pid, epoch, []TopicPartition{tp("a", 0), tp("c", 0)}); !slices.Equal(got, []int16{kerr.InvalidTxnState.Code, 0}) {
		t.Fatalf("verify: %v", got)
	}
	if code := h.c.EndTxn(ctx, "tx", pid, epoch, false); code != 0 {
		t.Fatalf("abort: %s", codeName(code))
	}
	h.settle()
	if got := h.markers.got(); len(got) != 2 || got[1].Commit || !slices.Equal(got[1].Partitions, []TopicPartition{tp("c", 0)}) || len(got[1].Groups) != 0 {
		t.Fatalf("abort markers %+v", got)
	}
	if pid2, epoch2 := h.init("tx"); pid2 != pid || epoch2 != epoch+1 {
		t.Fatalf("re-init: %d/%d", pid2, epoch2)
	}
	wantLog := []string{
		"tx Empty 1000/0",
		"tx Ongoing 1000/0", "tx Ongoing 1000/0", "tx Ongoing 1000/0", "tx Ongoing 1000/0",
		"tx PrepareCommit 1000/0", "tx CompleteCommit 1000/0",
		"tx Ongoing 1000/0", "tx PrepareAbort 1000/0", "tx CompleteAbort 1000/0",
		"tx Empty 1000/1",
	}
	if got := h.logged(); !slices.Equal(got, wantLog) {
		t.Fatalf("log:\n%q\nwant\n%q", got, wantLog)
	}
}

// Markers that fail are retried every MarkerRetry until written; the
// transaction completes once, after they are.
func TestMarkersRetried(t *testing.T) {
	h := newHarness(t, nil)
	h.markers.failures = 2
	pid, epoch := h.init("tx")
	h.add("tx", pid, epoch, tp("t", 0))
	if code := h.c.EndTxn(ctx, "tx", pid, epoch, true); code != 0 {
		t.Fatalf("EndTxn: %s", codeName(code))
	}
	for call := 1; call <= 2; call++ {
		h.markers.waitCalls(call)
		h.clock.waitTimers(2) // the timeout check and the retry
		if got := h.state("tx"); got != "PrepareCommit" {
			t.Fatalf("after %d failed calls: %s", call, got)
		}
		h.clock.Advance(testMarkerRetry)
	}
	h.markers.waitCalls(3)
	h.settle()
	if got := h.state("tx"); got != "CompleteCommit" {
		t.Fatalf("state %s", got)
	}
	if got := h.markers.got(); len(got) != 3 || !equalMarkers(got[0], got[2]) {
		t.Fatalf("calls %+v", got)
	}
	if got := h.logged(); got[len(got)-1] != "tx CompleteCommit 1000/0" || slices.Index(got, "tx CompleteCommit 1000/0") != len(got)-1 {
		t.Fatalf("log %q", got)
	}
}

// Close stops marker writes without completing; a new owner finishes.
func TestCloseStopsMarkersNewOwnerFinishes(t *testing.T) {
	h := newHarness(t, nil, blockMarkers)
	pid, epoch := h.init("tx")
	h.add("tx", pid, epoch, tp("t", 0))
	if code := h.c.EndTxn(ctx, "tx", pid, epoch, false); code != 0 {
		t.Fatalf("EndTxn: %s", codeName(code))
	}
	h.markers.waitCalls(1)
	h.c.Close()
	h.settle() // the blocked call ends with the coordinator's context
	if got := h.logged(); got[len(got)-1] != "tx PrepareAbort 1000/0" {
		t.Fatalf("log after close %q", got)
	}
	if code := h.c.EndTxn(ctx, "tx", pid, epoch, false); code != kerr.NotCoordinator.Code {
		t.Fatalf("after close: %s", codeName(code))
	}

	next := newHarness(t, h.journal.records())
	next.settle()
	want := Markers{TransactionalID: "tx", ProducerID: pid, ProducerEpoch: epoch, CoordinatorEpoch: testEpoch, Partitions: []TopicPartition{tp("t", 0)}}
	if got := next.markers.got(); len(got) != 1 || !equalMarkers(got[0], want) {
		t.Fatalf("new owner's markers %+v", got)
	}
	if code := next.c.EndTxn(ctx, "tx", pid, epoch, false); code != 0 {
		t.Fatalf("retried abort at the new owner: %s", codeName(code))
	}
}

// Close ends a marker retry's backoff.
func TestCloseDuringMarkerBackoff(t *testing.T) {
	h := newHarness(t, nil)
	h.markers.failures = 1
	pid, epoch := h.init("tx")
	h.add("tx", pid, epoch, tp("t", 0))
	if code := h.c.EndTxn(ctx, "tx", pid, epoch, true); code != 0 {
		t.Fatalf("EndTxn: %s", codeName(code))
	}
	h.markers.waitCalls(1)
	h.clock.waitTimers(2)
	h.c.Close()
	h.settle()
	h.clock.Advance(testMarkerRetry)
	if n := len(h.markers.got()); n != 1 {
		t.Fatalf("%d calls after close", n)
	}
	if got := h.logged(); got[len(got)-1] != "tx PrepareCommit 1000/0" {
		t.Fatalf("log %q", got)
	}
}

// With EndWait, adding to the next transaction while the previous one's
// markers are still being written waits for its end instead of answering
// CONCURRENT_TRANSACTIONS; past EndWait it answers CONCURRENT_TRANSACTIONS.
func TestAddWaitsForThePreviousEnd(t *testing.T) {
	h := newHarness(t, nil, blockMarkers, withConfig(func(c *Config) { c.EndWait = time.Second }))
	pid, epoch := h.init("tx")
	h.add("tx", pid, epoch, tp("t", 0))
	if code := h.c.EndTxn(ctx, "tx", pid, epoch, true); code != 0 {
		t.Fatalf("EndTxn: %s", codeName(code))
	}
	h.markers.waitCalls(1)
	timers := h.clock.live()

	// Past EndWait: CONCURRENT_TRANSACTIONS.
	gaveUp := make(chan int16)
	go func() { gaveUp <- h.c.AddPartitions(ctx, "tx", pid, epoch, []TopicPartition{tp("t", 1)})[0] }()
	h.clock.waitTimers(timers + 1)
	h.clock.Advance(time.Second)
	if code := <-gaveUp; code != kerr.ConcurrentTransactions.Code {
		t.Fatalf("after EndWait: %s", codeName(code))
	}

	// Within EndWait: answered once the end completes.
	added := make(chan int16)
	go func() { added <- h.c.AddPartitions(ctx, "tx", pid, epoch, []TopicPartition{tp("t", 1)})[0] }()
	h.clock.waitTimers(timers + 1)
	close(h.markers.block)
	if code := <-added; code != 0 {
		t.Fatalf("after the end completed: %s", codeName(code))
	}
	h.settle()
	if got := h.state("tx"); got != "Ongoing" {
		t.Fatalf("state %s", got)
	}
}

package txns

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestInitProducerID(t *testing.T) {
	withLast := func(m meta, pid int64, epoch int16) meta {
		m.lastProducerID, m.lastEpoch = pid, epoch
		return m
	}
	withEpoch := func(m meta, epoch int16) meta {
		m.epoch = epoch
		return m
	}
	ongoing := seedMeta("Ongoing", tp("t", 0))
	tests := []struct {
		name      string
		seed      []Record
		txnID     string
		timeout   time.Duration // 0: one minute
		pid       int64
		epoch     int16
		wantPID   int64
		wantEpoch int16
		wantCode  int16
		wantState string
		wantLast  [2]int64 // lastProducerID, lastEpoch after
		wantLog   []string // records the call appended
	}{
		{
			name: "new ID", txnID: "tx", pid: -1, epoch: -1,
			wantPID: 1000, wantEpoch: 0, wantState: "Empty", wantLast: [2]int64{-1, -1},
			wantLog: []string{"tx Empty 1000/0"},
		},
		{
			name: "new ID ignores a pair it does not know (expired)", txnID: "tx", pid: 5, epoch: 9,
			wantPID: 1000, wantEpoch: 0, wantState: "Empty", wantLast: [2]int64{-1, -1},
			wantLog: []string{"tx Empty 1000/0"},
		},
		{name: "negative timeout", txnID: "tx", timeout: -time.Millisecond, pid: -1, epoch: -1, wantPID: -1, wantEpoch: -1, wantCode: kerr.InvalidTransactionTimeout.Code, wantState: "none"},
		{name: "timeout over the maximum", txnID: "tx", timeout: 15*time.Minute + time.Millisecond, pid: -1, epoch: -1, wantPID: -1, wantEpoch: -1, wantCode: kerr.InvalidTransactionTimeout.Code, wantState: "none"},
		{
			name: "timeout at the maximum", txnID: "tx", timeout: 15 * time.Minute, pid: -1, epoch: -1,
			wantPID: 1000, wantEpoch: 0, wantState: "Empty", wantLast: [2]int64{-1, -1},
			wantLog: []string{"tx Empty 1000/0"},
		},
		{name: "empty transactional ID", txnID: "", pid: -1, epoch: -1, wantPID: -1, wantEpoch: -1, wantCode: kerr.InvalidRequest.Code, wantState: "none"},
		{
			name: "Empty: a new instance bumps the epoch and leaves no pair to retry", seed: seed("tx", withLast(seedMeta("Empty"), 7, 2)),
			txnID: "tx", pid: -1, epoch: -1,
			wantPID: 7, wantEpoch: 4, wantState: "Empty", wantLast: [2]int64{-1, -1},
			wantLog: []string{"tx Empty 7/4"},
		},
		{
			name: "CompleteCommit: the current pair bumps and is remembered", seed: seed("tx", seedMeta("CompleteCommit")),
			txnID: "tx", pid: 7, epoch: 3,
			wantPID: 7, wantEpoch: 4, wantState: "Empty", wantLast: [2]int64{7, 3},
			wantLog: []string{"tx Empty 7/4"},
		},
		{
			name: "CompleteAbort bumps", seed: seed("tx", seedMeta("CompleteAbort")),
			txnID: "tx", pid: -1, epoch: -1,
			wantPID: 7, wantEpoch: 4, wantState: "Empty", wantLast: [2]int64{-1, -1},
			wantLog: []string{"tx Empty 7/4"},
		},
		{
			name: "an older epoch is fenced", seed: seed("tx", seedMeta("Empty")),
			txnID: "tx", pid: 7, epoch: 2,
			wantPID: -1, wantEpoch: -1, wantCode: kerr.ProducerFenced.Code, wantState: "Empty", wantLast: [2]int64{-1, -1},
		},
		{
			name: "another producer ID is fenced", seed: seed("tx", seedMeta("Empty")),
			txnID: "tx", pid: 8, epoch: 3,
			wantPID: -1, wantEpoch: -1, wantCode: kerr.ProducerFenced.Code, wantState: "Empty", wantLast: [2]int64{-1, -1},
		},
		{
			name: "KIP-360 retry with the last pair gets the current pair, no write", seed: seed("tx", withLast(seedMeta("Empty"), 7, 2)),
			txnID: "tx", pid: 7, epoch: 2,
			wantPID: 7, wantEpoch: 3, wantState: "Empty", wantLast: [2]int64{7, 2},
		},
		{
			name: "a retry after the producer started a transaction is fenced", seed: seed("tx", withLast(ongoing, 7, 2)),
			txnID: "tx", pid: 7, epoch: 2,
			wantPID: -1, wantEpoch: -1, wantCode: kerr.ProducerFenced.Code, wantState: "Ongoing", wantLast: [2]int64{7, 2},
		},
		{
			name: "Ongoing: fenced, aborted at the bumped epoch, retry later", seed: seed("tx", withLast(ongoing, 7, 2)),
			txnID: "tx", pid: -1, epoch: -1,
			wantPID: -1, wantEpoch: -1, wantCode: kerr.ConcurrentTransactions.Code, wantState: "PrepareAbort", wantLast: [2]int64{-1, -1},
			wantLog: []string{"tx PrepareAbort 7/4"},
		},
		{
			name: "Ongoing with the current pair: fenced too (as Kafka)", seed: seed("tx", ongoing),
			txnID: "tx", pid: 7, epoch: 3,
			wantPID: -1, wantEpoch: -1, wantCode: kerr.ConcurrentTransactions.Code, wantState: "PrepareAbort", wantLast: [2]int64{-1, -1},
			wantLog: []string{"tx PrepareAbort 7/4"},
		},
		{
			name: "Ongoing with nothing added: the fence completes the abort at once", seed: seed("tx", seedMeta("Ongoing")),
			txnID: "tx", pid: -1, epoch: -1,
			wantPID: -1, wantEpoch: -1, wantCode: kerr.ConcurrentTransactions.Code, wantState: "CompleteAbort", wantLast: [2]int64{-1, -1},
			wantLog: []string{"tx PrepareAbort 7/4", "tx CompleteAbort 7/4"},
		},
		{
			name: "PrepareCommit: retry later", seed: seed("tx", seedMeta("PrepareCommit", tp("t", 0))),
			txnID: "tx", pid: -1, epoch: -1,
			wantPID: -1, wantEpoch: -1, wantCode: kerr.ConcurrentTransactions.Code, wantState: "PrepareCommit", wantLast: [2]int64{-1, -1},
		},
		{
			name: "PrepareAbort: retry later", seed: seed("tx", seedMeta("PrepareAbort", tp("t", 0))),
			txnID: "tx", pid: 7, epoch: 3,
			wantPID: -1, wantEpoch: -1, wantCode: kerr.ConcurrentTransactions.Code, wantState: "PrepareAbort", wantLast: [2]int64{-1, -1},
		},
		{
			name: "the last epoch before exhaustion is still a bump", seed: seed("tx", withEpoch(seedMeta("Empty"), math.MaxInt16-2)),
			txnID: "tx", pid: -1, epoch: -1,
			wantPID: 7, wantEpoch: math.MaxInt16 - 1, wantState: "Empty", wantLast: [2]int64{-1, -1},
			wantLog: []string{"tx Empty 7/32766"},
		},
		{
			name: "an exhausted epoch rotates to a new producer ID", seed: seed("tx", withEpoch(seedMeta("CompleteCommit"), math.MaxInt16-1)),
			txnID: "tx", pid: 7, epoch: math.MaxInt16 - 1,
			wantPID: 1000, wantEpoch: 0, wantState: "Empty", wantLast: [2]int64{7, math.MaxInt16 - 1},
			wantLog: []string{"tx Empty 1000/0"},
		},
		{
			name: "a fenced epoch (MaxInt16) rotates too", seed: seed("tx", withEpoch(seedMeta("CompleteAbort"), math.MaxInt16)),
			txnID: "tx", pid: -1, epoch: -1,
			wantPID: 1000, wantEpoch: 0, wantState: "Empty", wantLast: [2]int64{-1, -1},
			wantLog: []string{"tx Empty 1000/0"},
		},
		{
			name: "KIP-360 retry of a rotation", seed: seed("tx", withLast(withEpoch(seedMeta("Empty"), 0), 6, math.MaxInt16-1)),
			txnID: "tx", pid: 6, epoch: math.MaxInt16 - 1,
			wantPID: 7, wantEpoch: 0, wantState: "Empty", wantLast: [2]int64{6, math.MaxInt16 - 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.seed, blockMarkers)
			before := len(h.journal.records())
			timeout := tt.timeout
			if timeout == 0 {
				timeout = time.Minute
			}
			pid, epoch, code := h.c.InitProducerID(ctx, tt.txnID, timeout, tt.pid, tt.epoch)
			if pid != tt.wantPID || epoch != tt.wantEpoch || code != tt.wantCode {
				t.Fatalf("got %d/%d %s, want %d/%d %s", pid, epoch, codeName(code), tt.wantPID, tt.wantEpoch, codeName(tt.wantCode))
			}
			if got := h.state(tt.txnID); got != tt.wantState {
				t.Errorf("state %s, want %s", got, tt.wantState)
			}
			if m, ok := h.meta(tt.txnID); ok && (m.lastProducerID != tt.wantLast[0] || int64(m.lastEpoch) != tt.wantLast[1]) {
				t.Errorf("last pair %d/%d, want %v", m.lastProducerID, m.lastEpoch, tt.wantLast)
			}
			if got := h.logged()[before:]; !slices.Equal(got, tt.wantLog) {
				t.Errorf("appended %q, want %q", got, tt.wantLog)
			}
		})
	}
}

// A new instance of a producer fences an ongoing transaction: its
// InitProducerID aborts it at a bumped epoch and answers
// CONCURRENT_TRANSACTIONS until the abort completes; the retry then bumps
// again, and the old instance is fenced everywhere.
func TestInitFencesOngoingThenRetrySucceeds(t *testing.T) {
	h := newHarness(t, nil, blockMarkers)
	pid, epoch := h.init("tx")
	h.add("tx", pid, epoch, tp("t", 1))

	if _, _, code := h.c.InitProducerID(ctx, "tx", time.Minute, -1, -1); code != kerr.ConcurrentTransactions.Code {
		t.Fatalf("fencing init: %s", codeName(code))
	}
	h.markers.waitCalls(1)
	want := Markers{TransactionalID: "tx", ProducerID: pid, ProducerEpoch: epoch + 1, CoordinatorEpoch: testEpoch, Partitions: []TopicPartition{tp("t", 1)}, Groups: []string{}}
	if got := h.markers.got()[0]; !equalMarkers(got, want) {
		t.Fatalf("markers %+v, want %+v", got, want)
	}
	// While the abort is being written, the retry must wait.
	if _, _, code := h.c.InitProducerID(ctx, "tx", time.Minute, -1, -1); code != kerr.ConcurrentTransactions.Code {
		t.Fatalf("init during the abort: %s", codeName(code))
	}
	close(h.markers.block)
	h.settle()
	if got := h.state("tx"); got != "CompleteAbort" {
		t.Fatalf("state %s after the fence's markers", got)
	}
	// The old instance is fenced.
	if code := h.c.EndTxn(ctx, "tx", pid, epoch, true); code != kerr.ProducerFenced.Code {
		t.Errorf("old instance's EndTxn: %s", codeName(code))
	}
	if codes := h.c.AddPartitions(ctx, "tx", pid, epoch, []TopicPartition{tp("t", 2)}); codes[0] != kerr.ProducerFenced.Code {
		t.Errorf("old instance's AddPartitions: %s", codeName(codes[0]))
	}
	if _, _, code := h.c.InitProducerID(ctx, "tx", time.Minute, pid, epoch); code != kerr.ProducerFenced.Code {
		t.Errorf("old instance's InitProducerID with its pair: %s", codeName(code))
	}
	gotPID, gotEpoch, code := h.c.InitProducerID(ctx, "tx", time.Minute, -1, -1)
	if code != 0 || gotPID != pid || gotEpoch != epoch+2 {
		t.Fatalf("retry: %d/%d %s, want %d/%d", gotPID, gotEpoch, codeName(code), pid, epoch+2)
	}
	if n := len(h.markers.got()); n != 1 {
		t.Errorf("%d marker writes, want 1", n)
	}
}

// A producer whose InitProducerID answer was lost retries with the pair it
// still holds (KIP-360) and gets the epoch it was given, even after the
// shard moved to another owner.
func TestInitRetryAcrossRotationAndReload(t *testing.T) {
	exhausted := seedMeta("CompleteCommit")
	exhausted.epoch = math.MaxInt16 - 1
	h := newHarness(t, seed("tx", exhausted))
	pid, epoch, code := h.c.InitProducerID(ctx, "tx", time.Minute, 7, math.MaxInt16-1)
	if code != 0 || pid != 1000 || epoch != 0 {
		t.Fatalf("rotation: %d/%d %s", pid, epoch, codeName(code))
	}
	for _, owner := range []*harness{h, newHarness(t, h.journal.records())} {
		pid, epoch, code := owner.c.InitProducerID(ctx, "tx", time.Minute, 7, math.MaxInt16-1)
		if code != 0 || pid != 1000 || epoch != 0 {
			t.Fatalf("retry: %d/%d %s, want 1000/0", pid, epoch, codeName(code))
		}
	}
	// A retry is no write; a call with the new pair bumps as usual.
	if got := h.logged(); len(got) != 2 {
		t.Errorf("log %q", got)
	}
	if pid, epoch, code := h.c.InitProducerID(ctx, "tx", time.Minute, 1000, 0); code != 0 || pid != 1000 || epoch != 1 {
		t.Fatalf("bump: %d/%d %s", pid, epoch, codeName(code))
	}
	// Now the rotation's pair is two calls old.
	if _, _, code := h.c.InitProducerID(ctx, "tx", time.Minute, 7, math.MaxInt16-1); code != kerr.ProducerFenced.Code {
		t.Fatalf("stale retry: %s", codeName(code))
	}
}

func TestInitProducerIDZeroTimeout(t *testing.T) {
	h := newHarness(t, nil)
	if _, _, code := h.c.InitProducerID(ctx, "tx", 0, -1, -1); code != kerr.InvalidTransactionTimeout.Code {
		t.Fatalf("code %s", codeName(code))
	}
}

func TestInitProducerIDUnavailable(t *testing.T) {
	h := newHarness(t, nil)
	h.ids.err = errors.New("no block")
	if _, _, code := h.c.InitProducerID(ctx, "tx", time.Minute, -1, -1); code != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("code %s", codeName(code))
	}
	if got := h.state("tx"); got != "none" {
		t.Fatalf("state %s", got)
	}
	h.ids.err = nil
	if pid, _ := h.init("tx"); pid != 1000 {
		t.Fatalf("pid %d", pid)
	}
}

// While a change of an ID is on its way to the journal, other changes of
// it answer CONCURRENT_TRANSACTIONS and nothing reads it as done.
func TestInitWhileWritePending(t *testing.T) {
	h := newHarness(t, nil)
	h.journal.set(func(j *fakeJournal) { j.hold = true })
	type result struct {
		pid   int64
		epoch int16
		code  int16
	}
	first := make(chan result, 1)
	go func() {
		pid, epoch, code := h.c.InitProducerID(ctx, "tx", time.Minute, -1, -1)
		first <- result{pid, epoch, code}
	}()
	h.journal.waitBatches(1)
	if _, _, code := h.c.InitProducerID(ctx, "tx", time.Minute, -1, -1); code != kerr.ConcurrentTransactions.Code {
		t.Fatalf("second init: %s", codeName(code))
	}
	if d := h.c.Describe("tx"); d.ErrorCode != kerr.TransactionalIDNotFound.Code {
		t.Fatalf("describe before durable: %s", codeName(d.ErrorCode))
	}
	if l := h.c.List(nil, nil, 0); len(l) != 0 {
		t.Fatalf("list before durable: %+v", l)
	}
	h.journal.release(0)
	if r := <-first; r != (result{1000, 0, 0}) {
		t.Fatalf("first init: %+v", r)
	}
	if d := h.c.Describe("tx"); d.ErrorCode != 0 || d.State != "Empty" {
		t.Fatalf("describe after: %+v", d)
	}
}

// A caller that gives up waiting answers NOT_COORDINATOR, but its write
// still settles: the coordinator's state follows the journal, not the
// caller.
func TestCallerGivesUpWriteStillApplies(t *testing.T) {
	h := newHarness(t, nil)
	pid, epoch := h.init("tx")
	h.add("tx", pid, epoch, tp("t", 0))
	h.journal.set(func(j *fakeJournal) { j.hold = true })
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan int16, 1)
	go func() { done <- h.c.EndTxn(cctx, "tx", pid, epoch, true) }()
	h.journal.waitBatches(3)
	cancel()
	if code := <-done; code != kerr.NotCoordinator.Code {
		t.Fatalf("abandoned EndTxn: %s", codeName(code))
	}
	h.journal.set(func(j *fakeJournal) { j.hold = false })
	h.journal.release(2)
	h.settle()
	if got := h.state("tx"); got != "CompleteCommit" {
		t.Fatalf("state %s", got)
	}
	if got := h.c.EndTxn(ctx, "tx", pid, epoch, true); got != 0 {
		t.Fatalf("retried EndTxn: %s", codeName(got))
	}
}

func TestNotServing(t *testing.T) {
	h := newUnstarted(t, seed("tx", seedMeta("Ongoing", tp("t", 0))))
	calls := func() []int16 {
		_, _, init := h.c.InitProducerID(ctx, "tx", time.Minute, -1, -1)
		return []int16{
			init,
			h.c.AddPartitions(ctx, "tx", 7, 3, []TopicPartition{tp("t", 1)})[0],
			h.c.VerifyPartitions("tx", 7, 3, []TopicPartition{tp("t", 0)})[0],
			h.c.AddOffsets(ctx, "tx", 7, 3, "g"),
			h.c.EndTxn(ctx, "tx", 7, 3, true),
			h.c.Describe("tx").ErrorCode,
		}
	}
	for _, phase := range []struct {
		name string
		code int16
		step func()
	}{
		{"before Start", kerr.CoordinatorLoadInProgress.Code, func() {}},
		{"after Close", kerr.NotCoordinator.Code, h.c.Close},
	} {
		phase.step()
		for i, code := range calls() {
			if code != phase.code {
				t.Errorf("%s: call %d: %s, want %s", phase.name, i, codeName(code), codeName(phase.code))
			}
		}
		if l := h.c.List(nil, nil, 0); l != nil {
			t.Errorf("%s: list %+v", phase.name, l)
		}
	}
	if n := h.journal.batchCount(); n != 0 {
		t.Fatalf("%d batches written", n)
	}
	h.c.Start() // a closed coordinator does not start
	if code := h.c.Describe("tx").ErrorCode; code != kerr.NotCoordinator.Code {
		t.Fatalf("after Start: %s", codeName(code))
	}
}

func equalMarkers(a, b Markers) bool {
	return a.TransactionalID == b.TransactionalID && a.ProducerID == b.ProducerID && a.ProducerEpoch == b.ProducerEpoch &&
		a.Commit == b.Commit && a.CoordinatorEpoch == b.CoordinatorEpoch &&
		slices.Equal(a.Partitions, b.Partitions) && slices.Equal(a.Groups, b.Groups)
}

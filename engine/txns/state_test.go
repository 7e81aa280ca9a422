package txns

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestTransitions(t *testing.T) {
	allowed := map[[2]kmsg.TransactionState]bool{}
	for _, tr := range [][2]kmsg.TransactionState{
		{stateEmpty, stateEmpty}, {stateCompleteCommit, stateEmpty}, {stateCompleteAbort, stateEmpty},
		{stateEmpty, stateOngoing}, {stateOngoing, stateOngoing}, {stateCompleteCommit, stateOngoing}, {stateCompleteAbort, stateOngoing},
		{stateOngoing, statePrepareCommit},
		{stateOngoing, statePrepareAbort}, {statePrepareEpochFence, statePrepareAbort},
		{statePrepareCommit, stateCompleteCommit},
		{statePrepareAbort, stateCompleteAbort},
		{stateEmpty, stateDead}, {stateCompleteCommit, stateDead}, {stateCompleteAbort, stateDead},
		{stateOngoing, statePrepareEpochFence},
	} {
		allowed[tr] = true
	}
	for from := stateEmpty; from <= statePrepareEpochFence; from++ {
		for to := stateEmpty; to <= statePrepareEpochFence; to++ {
			err := checkTransition(from, to)
			if want := allowed[[2]kmsg.TransactionState{from, to}]; (err == nil) != want {
				t.Errorf("%s -> %s: err %v, want allowed %v", from, to, err, want)
			}
		}
	}
}

func TestStateHelpers(t *testing.T) {
	m := seedMeta("Ongoing", tp("t", 0))
	for _, tt := range []struct {
		name  string
		got   meta
		state kmsg.TransactionState
		epoch int16
		parts int
	}{
		{"commit decided", m.decided(true, 5), statePrepareCommit, 3, 1},
		{"abort decided", m.decided(false, 5), statePrepareAbort, 3, 1},
		{"fenced", m.fenced(5), statePrepareAbort, 4, 1},
		{"commit completed", m.decided(true, 5).completed(6), stateCompleteCommit, 3, 0},
		{"abort completed", m.fenced(5).completed(6), stateCompleteAbort, 4, 0},
	} {
		if tt.got.state != tt.state || tt.got.epoch != tt.epoch || len(tt.got.partitions) != tt.parts || tt.got.startMs != m.startMs {
			t.Errorf("%s: %+v", tt.name, tt.got)
		}
	}
}

// A transition outside the table is refused before anything is written,
// and the coordinator keeps serving.
func TestWriteRefusesInvalidTransition(t *testing.T) {
	h := newHarness(t, seed("tx", seedMeta("Empty")))
	h.c.mu.Lock()
	tx := h.c.txns["tx"]
	done := h.c.write("test", change{t: tx, next: tx.decided(true, 0)})
	h.c.mu.Unlock()
	if err := <-done; !errors.Is(err, errInvalidTransition) {
		t.Fatalf("err %v", err)
	}
	if n := h.journal.batchCount(); n != 0 {
		t.Fatalf("%d batches", n)
	}
	if _, epoch := h.init("tx"); epoch != 4 {
		t.Fatalf("epoch %d", epoch)
	}
}

// A journal error fails the shard: the call answers NOT_COORDINATOR and so
// does every call after it, since what the log holds is only known to the
// next owner, which finishes what was decided.
func TestJournalFailure(t *testing.T) {
	tests := []struct {
		name  string
		inAdd bool // fail the AddPartitions write instead of EndTxn's
		fail  func(j *fakeJournal)
	}{
		{"append fails at AddPartitions", true, func(j *fakeJournal) { j.failAppend = errInjected }},
		{"wait fails at AddPartitions", true, func(j *fakeJournal) { j.failWait = errInjected }},
		{"append fails at EndTxn", false, func(j *fakeJournal) { j.failAppend = errInjected }},
		{"wait fails at EndTxn", false, func(j *fakeJournal) { j.failWait = errInjected }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil)
			pid, epoch := h.init("tx")
			if tt.inAdd {
				h.journal.set(tt.fail)
			}
			if got := h.c.AddPartitions(ctx, "tx", pid, epoch, []TopicPartition{tp("t", 0)}); (got[0] == kerr.NotCoordinator.Code) != tt.inAdd {
				t.Fatalf("AddPartitions: %s", codeName(got[0]))
			}
			if !tt.inAdd {
				h.journal.set(tt.fail)
				if got := h.c.EndTxn(ctx, "tx", pid, epoch, true); got != kerr.NotCoordinator.Code {
					t.Fatalf("EndTxn: %s", codeName(got))
				}
			}
			if _, _, code := h.c.InitProducerID(ctx, "other", time.Minute, -1, -1); code != kerr.NotCoordinator.Code {
				t.Fatalf("a call after the failure: %s", codeName(code))
			}
			h.settle()
			if n := len(h.markers.got()); n != 0 {
				t.Fatalf("%d marker writes for an undurable decision", n)
			}
		})
	}
}

// A failed completion write fails the shard; the next owner writes the
// markers again and completes.
func TestCompletionFailureRedrivenByNextOwner(t *testing.T) {
	h := newHarness(t, nil, blockMarkers)
	pid, epoch := h.init("tx")
	h.add("tx", pid, epoch, tp("t", 0))
	if code := h.c.EndTxn(ctx, "tx", pid, epoch, true); code != 0 {
		t.Fatal(codeName(code))
	}
	h.markers.waitCalls(1)
	h.journal.set(func(j *fakeJournal) { j.failAppend = errInjected })
	close(h.markers.block)
	h.settle()
	if code := h.c.Describe("tx").ErrorCode; code != kerr.NotCoordinator.Code {
		t.Fatalf("describe after the failure: %s", codeName(code))
	}

	next := newHarness(t, h.journal.records())
	next.settle()
	if got := next.state("tx"); got != "CompleteCommit" {
		t.Fatalf("next owner: %s", got)
	}
	if got := next.markers.got(); len(got) != 1 || !got[0].Commit {
		t.Fatalf("next owner's markers %+v", got)
	}
}

// A new ID whose first record failed is not left behind.
func TestNewIDFailureLeavesNothing(t *testing.T) {
	for name, fail := range map[string]func(j *fakeJournal){
		"append": func(j *fakeJournal) { j.failAppend = errInjected },
		"wait":   func(j *fakeJournal) { j.failWait = errInjected },
	} {
		h := newHarness(t, nil)
		h.journal.set(fail)
		if _, _, code := h.c.InitProducerID(ctx, "tx", time.Minute, -1, -1); code != kerr.NotCoordinator.Code {
			t.Fatalf("%s: %s", name, codeName(code))
		}
		h.settle()
		if _, ok := h.meta("tx"); ok {
			t.Fatalf("%s: the ID stayed", name)
		}
	}
}

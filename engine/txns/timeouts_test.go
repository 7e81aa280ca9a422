package txns

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// A transaction older than its timeout is aborted at a bumped epoch: the
// producer that let it time out is fenced, the markers carry the new
// epoch, and a new instance's InitProducerID bumps once more.
func TestTimeoutAbortsWithEpochBump(t *testing.T) {
	h := newHarness(t, nil)
	pid, epoch := h.init("tx") // one-minute timeout
	h.add("tx", pid, epoch, tp("t", 0))
	if code := h.c.AddOffsets(ctx, "tx", pid, epoch, "g"); code != 0 {
		t.Fatal(codeName(code))
	}

	h.clock.Advance(time.Minute) // checks at 10 s … 60 s: not older than a minute yet
	if got := h.state("tx"); got != "Ongoing" {
		t.Fatalf("state at the timeout: %s", got)
	}
	h.clock.Advance(testAbortCheck)
	h.settle()
	if got := h.state("tx"); got != "CompleteAbort" {
		t.Fatalf("state after the timeout: %s", got)
	}
	want := []Markers{{TransactionalID: "tx", ProducerID: pid, ProducerEpoch: epoch + 1, CoordinatorEpoch: testEpoch,
		Partitions: []TopicPartition{tp("t", 0)}, Groups: []string{"g"}}}
	if got := h.markers.got(); !slices.EqualFunc(got, want, equalMarkers) {
		t.Fatalf("markers %+v, want %+v", got, want)
	}
	wantLog := []string{"tx Empty 1000/0", "tx Ongoing 1000/0", "tx Ongoing 1000/0", "tx PrepareAbort 1000/1", "tx CompleteAbort 1000/1"}
	if got := h.logged(); !slices.Equal(got, wantLog) {
		t.Fatalf("log %q, want %q", got, wantLog)
	}

	for name, code := range map[string]int16{
		"EndTxn":        h.c.EndTxn(ctx, "tx", pid, epoch, true),
		"AddPartitions": h.c.AddPartitions(ctx, "tx", pid, epoch, []TopicPartition{tp("t", 1)})[0],
		"AddOffsets":    h.c.AddOffsets(ctx, "tx", pid, epoch, "g"),
		"Verify":        h.c.VerifyPartitions("tx", pid, epoch, []TopicPartition{tp("t", 0)})[0],
	} {
		if code != kerr.ProducerFenced.Code {
			t.Errorf("%s of the timed-out producer: %s", name, codeName(code))
		}
	}
	if _, _, code := h.c.InitProducerID(ctx, "tx", time.Minute, pid, epoch); code != kerr.ProducerFenced.Code {
		t.Errorf("InitProducerID of the timed-out producer: %s", codeName(code))
	}
	if pid2, epoch2 := h.init("tx"); pid2 != pid || epoch2 != epoch+2 {
		t.Fatalf("new instance: %d/%d", pid2, epoch2)
	}
}

// A transaction loaded from the log keeps its timeout, counted on this
// coordinator's clock from no earlier than the load: its start was stamped
// by another host.
func TestTimeoutOfLoadedTransaction(t *testing.T) {
	old := seedMeta("Ongoing", tp("t", 0))
	old.startMs -= int64(time.Hour / time.Millisecond)
	h := newHarness(t, seed("tx", old))
	h.clock.Advance(time.Minute)
	if got := h.state("tx"); got != "Ongoing" {
		t.Fatalf("aborted within its timeout of the load: %s", got)
	}
	h.clock.Advance(testAbortCheck)
	h.settle()
	if got := h.state("tx"); got != "CompleteAbort" {
		t.Fatalf("state %s", got)
	}
	if m, _ := h.meta("tx"); m.epoch != 4 {
		t.Fatalf("epoch %d", m.epoch)
	}
}

// Only Ongoing transactions time out; a check skips an ID whose change is
// pending and aborts it at a later check.
func TestTimeoutSkipsPendingAndOtherStates(t *testing.T) {
	recs := append(seed("prepared", seedMeta("PrepareCommit", tp("t", 0))), seed("empty", seedMeta("Empty"))...)
	recs = append(recs, seed("ongoing", seedMeta("Ongoing", tp("t", 1)))...)
	h := newHarness(t, recs, blockMarkers)
	h.journal.set(func(j *fakeJournal) { j.hold = true })
	done := make(chan []int16, 1)
	go func() { done <- h.c.AddPartitions(ctx, "ongoing", 7, 3, []TopicPartition{tp("t", 2)}) }()
	h.journal.waitBatches(1)
	h.clock.Advance(2 * time.Minute)
	if n := h.journal.batchCount(); n != 1 {
		t.Fatalf("%d batches while the ID was pending", n)
	}
	h.journal.set(func(j *fakeJournal) { j.hold = false })
	h.journal.release(0)
	<-done
	h.clock.Advance(testAbortCheck)
	h.markers.waitCalls(2) // the prepared one's, then the abort's, once durable
	for id, want := range map[string]string{"prepared": "PrepareCommit", "empty": "Empty", "ongoing": "PrepareAbort"} {
		if got := h.state(id); got != want {
			t.Errorf("%s: %s, want %s", id, got, want)
		}
	}
}

// IDs idle (Empty, Complete*) longer than IDExpiration are removed with a
// tombstone, in one batch per check; IDs in a transaction stay.
func TestExpiration(t *testing.T) {
	h := newHarness(t, nil, withConfig(func(cfg *Config) { cfg.MaxTimeout = 3 * time.Hour }))
	h.init("idle")
	pid, epoch, _ := h.c.InitProducerID(ctx, "long", 2*time.Hour, -1, -1)
	h.add("long", pid, epoch, tp("t", 0))
	h.clock.Advance(30 * time.Minute)
	cpid, cepoch := h.init("done")
	h.add("done", cpid, cepoch, tp("t", 1))
	if code := h.c.EndTxn(ctx, "done", cpid, cepoch, true); code != 0 {
		t.Fatal(codeName(code))
	}
	h.settle()

	h.clock.Advance(30*time.Minute - time.Second)
	if got := h.state("idle"); got != "Empty" {
		t.Fatalf("expired early: %s", got)
	}
	h.clock.Advance(testAbortCheck)
	h.settle()
	for id, want := range map[string]string{"idle": "none", "long": "Ongoing", "done": "CompleteCommit"} {
		if got := h.state(id); got != want {
			t.Errorf("after an hour: %s is %s, want %s", id, got, want)
		}
	}
	if got := h.logged(); got[len(got)-1] != "idle tombstone" {
		t.Fatalf("log %q", got)
	}
	h.clock.Advance(30 * time.Minute)
	h.settle()
	if got := h.state("done"); got != "none" {
		t.Fatalf("done: %s", got)
	}

	// The next owner does not know them either, and a returning producer
	// starts over with a new producer ID.
	next := newHarness(t, h.journal.records())
	for id, want := range map[string]int16{"idle": kerr.TransactionalIDNotFound.Code, "done": kerr.TransactionalIDNotFound.Code, "long": 0} {
		if got := next.c.Describe(id).ErrorCode; got != want {
			t.Errorf("next owner: %s: %s", id, codeName(got))
		}
	}
	if pid, epoch := h.init("idle"); pid != 1003 || epoch != 0 {
		t.Fatalf("returning producer: %d/%d", pid, epoch)
	}
}

package engine

import (
	"errors"
	"path"
	"syscall"
	"testing"

	"github.com/kaas-dev/kaas/states"
	"github.com/kaas-dev/kaas/volume/faultfs"
	"github.com/kaas-dev/kaas/volume/memfs"
	"github.com/kaas-dev/kaas/volume/partlog"
	"github.com/kaas-dev/kaas/volume/partlog/partlogtest"
)

// TestNoSpaceKeepsPartitionServing: a full data volume refuses a produce
// with ErrNoSpace, but the partition is not failed, not reopened and not
// unpublished: the same handle keeps serving reads, the refused batch left
// no producer state behind, and produce works again once space returns.
func TestNoSpaceKeepsPartitionServing(t *testing.T) {
	ctx := safety(t)
	segGlob := path.Join(states.PartitionDir(testData, "full", 0), "*.log")
	// after: the write lands and then reports ENOSPC, the case to undo.
	fault := newSwitchable(faultfs.FailMatching(faultfs.OpWriteAt, segGlob, syscall.ENOSPC, true, 0))
	fsys := faultfs.New(memfs.New(), fault.inject)
	e := startEngine(t, fsys)
	if _, err := e.CreateTopic(CreateTopicRequest{Name: "full", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	mustServing(t, ctx, e.Engine, "full")
	p := mustPartition(t, e.Engine, "full", 0)
	epoch := p.Epoch()
	pid, err := e.NextProducerID()
	if err != nil {
		t.Fatal(err)
	}
	batch := func(seq int32) []byte { return partlogtest.MakeBatch(2, 32, int64(seq), pid, 0, seq) }
	if _, err := p.Produce(ctx, batch(0)); err != nil {
		t.Fatal(err)
	}

	fault.armed.Store(true)
	for range 3 {
		if _, err := p.Produce(ctx, batch(2)); !errors.Is(err, partlog.ErrNoSpace) || errors.Is(err, partlog.ErrLogFailed) {
			t.Fatalf("produce on a full volume: %v, want ErrNoSpace", err)
		}
	}
	if got, err := e.Partition("full", 0); err != nil || got != p || p.Log().Err() != nil {
		t.Fatalf("after ENOSPC: partition %p (%v), had %p; log err %v", got, err, p, p.Log().Err())
	}
	if _, ok := e.pendingReopen(p.TopicID, "full", 0); ok {
		t.Fatal("a full volume asked for a reopen")
	}
	if hw := p.Log().HighWatermark(); hw != 2 || len(readAllFrom(t, p)) == 0 {
		t.Fatalf("reads while full: high watermark %d", hw)
	}

	fault.armed.Store(false)
	// The refused batch is retried with the same sequence: it was never
	// recorded, so it is appended now, right after the first one.
	res, err := p.Produce(ctx, batch(2))
	if err != nil || res.BaseOffset != 2 {
		t.Fatalf("retry once space returned: %+v, %v; want offset 2", res, err)
	}
	if p.Epoch() != epoch {
		t.Fatalf("epoch moved from %d to %d", epoch, p.Epoch())
	}
}

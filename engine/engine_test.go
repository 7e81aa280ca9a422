package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kaas-dev/kaas/engine/dataplane"
	"github.com/kaas-dev/kaas/engine/desired"
	"github.com/kaas-dev/kaas/states"
	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/faultfs"
	"github.com/kaas-dev/kaas/volume/memfs"
	"github.com/kaas-dev/kaas/volume/partlog/partlogtest"
)

const (
	testData    = "data"
	testCluster = "data/__cluster"
)

// safety is a generous deadline so a hung test fails instead of hanging; no
// test asserts on it.
func safety(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// running is an engine whose Run goroutine the test controls.
type running struct {
	*Engine
	cancel context.CancelFunc
	done   chan error
}

// stop cancels Run and waits for it: every reconcile has finished and every
// partition is closed when it returns.
func (r *running) stop(t *testing.T) {
	t.Helper()
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	if err := <-r.done; err != nil {
		t.Logf("Run returned %v", err)
	}
}

func startEngine(t *testing.T, fsys volume.FS) *running {
	t.Helper()
	return startWith(t, Config{FS: fsys, DataDir: testData, ClusterDir: testCluster, BrokerID: 1})
}

// startWith runs an engine with cfg until the test ends.
func startWith(t *testing.T, cfg Config) *running {
	t.Helper()
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{Engine: e, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- e.Run(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// eventually waits, on the engine's change notifications only, for cond.
func eventually(t *testing.T, ctx context.Context, e *Engine, what string, cond func() bool) {
	t.Helper()
	for i := 0; i < 10000; i++ {
		ch := e.Changed()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("gave up waiting for %s: %v", what, ctx.Err())
		}
	}
	t.Fatalf("%s did not happen within 10000 changes", what)
}

func statusOf(t *testing.T, fsys volume.FS, kind, object string) *states.Record {
	t.Helper()
	recs, err := ReadStatus(fsys, testCluster)
	if err != nil {
		t.Fatal(err)
	}
	for i := range recs {
		if recs[i].Kind == kind && recs[i].Object == object {
			return &recs[i]
		}
	}
	return nil
}

func mustServing(t *testing.T, ctx context.Context, e *Engine, name string) {
	t.Helper()
	if !e.WaitServing(ctx, name) {
		t.Fatalf("topic %s never served", name)
	}
}

func mustPartition(t *testing.T, e *Engine, name string, idx int32) *dataplane.Partition {
	t.Helper()
	p, err := e.Partition(name, idx)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func readAllFrom(t *testing.T, p *dataplane.Partition) []byte {
	t.Helper()
	b, err := p.Log().Read(0, 64<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestTopicLifecycle(t *testing.T) {
	ctx := safety(t)
	fsys := memfs.New()
	e := startEngine(t, fsys)
	spec, err := e.CreateTopic(CreateTopicRequest{Name: "orders", Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	mustServing(t, ctx, e.Engine, "orders")
	var produced [2][][]byte
	for i := 0; i < 3; i++ {
		for idx := int32(0); idx < 2; idx++ {
			b := partlogtest.MakeBatch(2, 16, int64(1000+i), -1, -1, -1)
			res, err := mustPartition(t, e.Engine, "orders", idx).Produce(ctx, b)
			if err != nil {
				t.Fatal(err)
			}
			if res.BaseOffset != int64(2*i) {
				t.Fatalf("partition %d batch %d at %d, want %d", idx, i, res.BaseOffset, 2*i)
			}
			produced[idx] = append(produced[idx], b) // stamped in place by the append
		}
	}
	for idx := int32(0); idx < 2; idx++ {
		if got := readAllFrom(t, mustPartition(t, e.Engine, "orders", idx)); !bytes.Equal(got, bytes.Join(produced[idx], nil)) {
			t.Fatalf("partition %d: read %d bytes, not the %d produced", idx, len(got), len(bytes.Join(produced[idx], nil)))
		}
	}
	// Stopping waits for every reconcile, so the records are final.
	e.stop(t)
	for idx := int32(0); idx < 2; idx++ {
		rec := statusOf(t, fsys, states.PartitionOpen.Kind, states.PartitionObject("orders", idx))
		if rec == nil || rec.State != "serving" || rec.TopicID != spec.ID || rec.Epoch < 1 || rec.LastError != "" {
			t.Fatalf("partition-open record %d = %+v", idx, rec)
		}
	}

	// A restarted engine serves the topic again, then deletes it.
	e = startEngine(t, fsys)
	mustServing(t, ctx, e.Engine, "orders")
	if got := readAllFrom(t, mustPartition(t, e.Engine, "orders", 1)); !bytes.Equal(got, bytes.Join(produced[1], nil)) {
		t.Fatalf("data changed across the restart")
	}
	if _, err := e.DeleteTopic("orders"); err != nil {
		t.Fatal(err)
	}
	if !e.WaitDeleted(ctx, "orders", spec.ID) {
		t.Fatal("never deleted")
	}
	eventually(t, ctx, e.Engine, "topic-delete record deleted", func() bool {
		rec := statusOf(t, fsys, states.TopicDelete.Kind, "orders")
		return rec != nil && rec.State == "deleted"
	})
	for idx := int32(0); idx < 2; idx++ {
		if rec := statusOf(t, fsys, states.PartitionOpen.Kind, states.PartitionObject("orders", idx)); rec != nil {
			t.Fatalf("partition-open record survived the delete: %+v", rec)
		}
	}
	for _, p := range []string{states.TopicDir(testData, "orders"), states.TrashPath(testData, "orders", spec.ID), desired.SpecPath(testCluster, "orders")} {
		if _, err := fsys.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s still exists after the delete (%v)", p, err)
		}
	}
	if _, err := e.Partition("orders", 0); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("Partition after delete: %v", err)
	}

	// Names are not identities: the same name again is a new, empty topic.
	spec2, err := e.CreateTopic(CreateTopicRequest{Name: "orders", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	if spec2.ID == spec.ID {
		t.Fatal("recreated topic reused the topic ID")
	}
	mustServing(t, ctx, e.Engine, "orders")
	p := mustPartition(t, e.Engine, "orders", 0)
	if p.TopicID != spec2.ID || p.Log().LogEndOffset() != 0 {
		t.Fatalf("recreated partition: ID %s, log end %d", p.TopicID, p.Log().LogEndOffset())
	}
}

// switchable is an injector that applies inner only while armed, and counts
// the operations it faulted.
type switchable struct {
	armed atomic.Bool
	hits  chan faultfs.Op
	inner faultfs.Injector
}

func newSwitchable(inner faultfs.Injector) *switchable {
	return &switchable{inner: inner, hits: make(chan faultfs.Op, 10000)}
}

func (s *switchable) inject(op faultfs.Op) faultfs.Action {
	if !s.armed.Load() {
		return faultfs.Proceed
	}
	a := s.inner(op)
	if a != faultfs.Proceed {
		select {
		case s.hits <- op:
		default:
		}
	}
	return a
}

func (s *switchable) waitHits(t *testing.T, ctx context.Context, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		select {
		case <-s.hits:
		case <-ctx.Done():
			t.Fatalf("fault hit %d of %d never came", i, n)
		}
	}
}

func TestDeleteTopicPurgeFailsThenConverges(t *testing.T) {
	ctx := safety(t)
	fault := newSwitchable(faultfs.FailMatching(faultfs.OpRemove, path.Join(testData, states.TrashDir, "*"), syscall.EBUSY, false, 0))
	fsys := faultfs.New(memfs.New(), fault.inject)
	e := startEngine(t, fsys)
	spec, err := e.CreateTopic(CreateTopicRequest{Name: "events", Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	mustServing(t, ctx, e.Engine, "events")
	if _, err := mustPartition(t, e.Engine, "events", 0).Produce(ctx, partlogtest.MakeBatch(3, 100, 1, -1, -1, -1)); err != nil {
		t.Fatal(err)
	}
	fault.armed.Store(true)
	if _, err := e.DeleteTopic("events"); err != nil {
		t.Fatal(err)
	}
	// A failed purge pass removes the trash entry twice (before and after
	// emptying it); a third hit is the next pass, after the failure of the
	// first one was saved.
	fault.waitHits(t, ctx, 3)
	recs, err := e.Status()
	if err != nil {
		t.Fatal(err)
	}
	var rec *states.Record
	for i := range recs {
		if recs[i].Kind == states.TopicDelete.Kind && recs[i].Object == "events" {
			rec = &recs[i]
		}
		if recs[i].Kind == states.PartitionOpen.Kind && strings.HasPrefix(recs[i].Object, "events/") {
			t.Errorf("partition-open record %s kept after release", recs[i].Object)
		}
	}
	if rec == nil || rec.State != "renamed" || rec.Attempts < 1 || !strings.Contains(rec.LastError, "purge") || rec.TopicID != spec.ID {
		t.Fatalf("status while purge fails = %+v, want renamed with attempts and a purge error", rec)
	}
	if _, err := fsys.Stat(states.TopicDir(testData, "events")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("topic dir not renamed aside: %v", err)
	}
	fault.armed.Store(false)
	if !e.WaitDeleted(ctx, "events", spec.ID) {
		t.Fatal("never deleted")
	}
	eventually(t, ctx, e.Engine, "topic-delete converged", func() bool {
		r := statusOf(t, fsys, states.TopicDelete.Kind, "events")
		return r != nil && r.State == "deleted"
	})
	final := statusOf(t, fsys, states.TopicDelete.Kind, "events")
	if final.Attempts < rec.Attempts || final.LastError != "" {
		t.Fatalf("final record %+v: attempts kept, last error cleared", final)
	}
	if _, err := fsys.Stat(states.TrashPath(testData, "events", spec.ID)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("trash entry still there: %v", err)
	}
}

func TestFsyncFailureReopensUnderHigherEpoch(t *testing.T) {
	ctx := safety(t)
	segGlob := path.Join(states.PartitionDir(testData, "pay", 0), "*.log")
	fault := newSwitchable(faultfs.StickySyncError(segGlob, syscall.EIO))
	mem := memfs.New()
	fsys := faultfs.New(mem, fault.inject)
	e := startEngine(t, fsys)
	if _, err := e.CreateTopic(CreateTopicRequest{Name: "pay", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	mustServing(t, ctx, e.Engine, "pay")
	p1 := mustPartition(t, e.Engine, "pay", 0)
	epoch1 := p1.Epoch()
	pid, err := e.NextProducerID()
	if err != nil {
		t.Fatal(err)
	}
	batch := func(seq int32) []byte { return partlogtest.MakeBatch(2, 32, int64(seq), pid, 0, seq) }
	var acked [][]byte
	var ackedAt []int64
	for seq := int32(0); seq < 6; seq += 2 {
		b := batch(seq)
		res, err := p1.Produce(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		acked, ackedAt = append(acked, b), append(ackedAt, res.BaseOffset)
	}

	fault.armed.Store(true)
	if _, err := p1.Produce(ctx, batch(6)); err == nil {
		t.Fatal("produce acknowledged although its fsync failed")
	}
	// The disk is back; the engine must reopen on its own.
	fault.armed.Store(false)
	var p2 *dataplane.Partition
	eventually(t, ctx, e.Engine, "partition reopened under a higher epoch", func() bool {
		p, err := e.Partition("pay", 0)
		if err != nil || p == p1 || p.Epoch() <= epoch1 {
			return false
		}
		p2 = p
		return true
	})
	if _, err := p1.Produce(ctx, batch(6)); err == nil {
		t.Fatal("the failed partition handle still accepts writes")
	}
	all := readAllFrom(t, p2)
	for i, b := range acked {
		if !bytes.Contains(all, b) {
			t.Fatalf("acked batch %d (offset %d) lost after reopen", i, ackedAt[i])
		}
	}
	// Retries of acked batches are still answered as duplicates with their
	// original offsets; the failed one may be retried; then on we go.
	for i := range acked {
		res, err := p2.Produce(ctx, batch(int32(2*i)))
		if err != nil || res.BaseOffset != ackedAt[i] {
			t.Fatalf("retry of acked batch %d: %+v, %v; want offset %d", i, res, err, ackedAt[i])
		}
	}
	retry, err := p2.Produce(ctx, batch(6))
	if err != nil {
		t.Fatalf("retry of the unacknowledged batch: %v", err)
	}
	next, err := p2.Produce(ctx, batch(8))
	if err != nil || next.BaseOffset != retry.BaseOffset+2 {
		t.Fatalf("produce after reopen: %+v, %v (retry at %d)", next, err, retry.BaseOffset)
	}
	epoch2 := p2.Epoch()
	e.stop(t)
	rec := statusOf(t, fsys, states.PartitionOpen.Kind, states.PartitionObject("pay", 0))
	if rec == nil || rec.State != "serving" || rec.Epoch != epoch2 {
		t.Fatalf("partition-open record %+v, want serving at epoch %d", rec, epoch2)
	}
}

// TestProducerStateSurvivesRestart: duplicates of batches acked before a
// restart are still detected afterwards, whether the broker stopped cleanly
// (snapshot at close) or crashed (older snapshot at a roll plus a replay of
// the log after it).
func TestProducerStateSurvivesRestart(t *testing.T) {
	for _, crash := range []bool{false, true} {
		name := "clean"
		if crash {
			name = "crash"
		}
		t.Run(name, func(t *testing.T) {
			ctx := safety(t)
			mem := memfs.New()
			e := startEngine(t, mem)
			if _, err := e.CreateTopic(CreateTopicRequest{Name: "t", Partitions: 1, Configs: map[string]string{"segment.bytes": "1024"}}); err != nil {
				t.Fatal(err)
			}
			mustServing(t, ctx, e.Engine, "t")
			p := mustPartition(t, e.Engine, "t", 0)
			type sent struct {
				pid  int64
				seq  int32
				base int64
			}
			var pids []int64
			for i := 0; i < 3; i++ {
				id, err := e.NextProducerID()
				if err != nil {
					t.Fatal(err)
				}
				pids = append(pids, id)
			}
			mk := func(pid int64, seq int32) []byte { return partlogtest.MakeBatch(3, 60, 1, pid, 0, seq) }
			var log []sent
			for round := 0; round < 9; round++ {
				for _, pid := range pids {
					seq := int32(round * 3)
					res, err := p.Produce(ctx, mk(pid, seq))
					if err != nil {
						t.Fatal(err)
					}
					log = append(log, sent{pid, seq, res.BaseOffset})
				}
			}
			end := p.Log().LogEndOffset()
			fsys := volume.FS(mem)
			if crash {
				offs, err := dataplane.SnapshotOffsets(mem, p.Dir())
				if err != nil || len(offs) == 0 || offs[len(offs)-1] >= end {
					t.Fatalf("want a roll snapshot below the log end %d to replay from, have %v (%v)", end, offs, err)
				}
				fsys = mem.CrashClone()
			}
			e.stop(t)
			e2 := startEngine(t, fsys)
			mustServing(t, ctx, e2.Engine, "t")
			p2 := mustPartition(t, e2.Engine, "t", 0)
			if got := p2.Log().LogEndOffset(); got != end {
				t.Fatalf("log end %d after restart, want %d", got, end)
			}
			// The last five batches of every producer are duplicates.
			for _, s := range log[len(log)-5*len(pids):] {
				res, err := p2.Produce(ctx, mk(s.pid, s.seq))
				if err != nil || res.BaseOffset != s.base {
					t.Fatalf("retry of producer %d seq %d: %+v, %v; want the original offset %d", s.pid, s.seq, res, err, s.base)
				}
			}
			if _, err := p2.Produce(ctx, mk(pids[0], 0)); !errors.Is(err, dataplane.ErrOutOfOrderSequence) {
				t.Fatalf("retry of a batch older than the last five: %v, want ErrOutOfOrderSequence", err)
			}
			if _, err := p2.Produce(ctx, mk(pids[1], 9*3+1)); !errors.Is(err, dataplane.ErrOutOfOrderSequence) {
				t.Fatalf("gap after restart: %v", err)
			}
			res, err := p2.Produce(ctx, mk(pids[2], 9*3))
			if err != nil || res.BaseOffset != end {
				t.Fatalf("next batch after restart: %+v, %v; want offset %d", res, err, end)
			}
		})
	}
}

// TestWatchersHearOnlyTheirPartition: a produce wakes the watchers of its
// partition (before Produce returns), not those of another partition, and
// an unwatched channel hears nothing more.
func TestWatchersHearOnlyTheirPartition(t *testing.T) {
	ctx := safety(t)
	e := startEngine(t, memfs.New())
	if _, err := e.CreateTopic(CreateTopicRequest{Name: "w", Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	mustServing(t, ctx, e.Engine, "w")
	p0, p1 := mustPartition(t, e.Engine, "w", 0), mustPartition(t, e.Engine, "w", 1)
	heard := func(ch chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	ch0, ch1 := make(chan struct{}, 1), make(chan struct{}, 1)
	p0.Watch(ch0)
	p1.Watch(ch1)
	if _, err := p0.Produce(ctx, partlogtest.MakeBatch(1, 8, 1, -1, -1, -1)); err != nil {
		t.Fatal(err)
	}
	if !heard(ch0) || heard(ch1) {
		t.Fatal("a produce to partition 0 must wake its watcher and only its")
	}
	p0.Unwatch(ch0)
	if _, err := p0.Produce(ctx, partlogtest.MakeBatch(1, 8, 2, -1, -1, -1)); err != nil {
		t.Fatal(err)
	}
	if heard(ch0) {
		t.Fatal("an unwatched channel was told")
	}
}

// TestNeverShareAnEpochWithAnotherWriter: a fence that already holds the
// assigned epoch, written by someone else, means the assignment repeats an
// epoch; the broker must not open there but ask for a new epoch. A retry of
// its own open at the epoch it wrote is fine.
func TestNeverShareAnEpochWithAnotherWriter(t *testing.T) {
	ctx := safety(t)
	fsys := memfs.New()
	e := startEngine(t, fsys)
	spec, err := e.CreateTopic(CreateTopicRequest{Name: "x", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	mustServing(t, ctx, e.Engine, "x")
	epoch := mustPartition(t, e.Engine, "x", 0).Epoch()
	dir := states.PartitionDir(testData, "x", 0)
	foreign := epoch + 5
	if err := volume.WriteFileAtomic(fsys, path.Join(dir, "fence"), []byte(fmt.Sprint(foreign))); err != nil {
		t.Fatal(err)
	}
	rec := &states.Record{}
	if err := e.claimFence(spec, 0, foreign, rec); err == nil {
		t.Fatal("fenced at an epoch another writer's fence already holds")
	}
	if r, ok := e.pendingReopen(spec.ID, "x", 0); !ok || r.epoch != foreign {
		t.Fatalf("no request for a new epoch: %+v %v", r, ok)
	}
}

// TestLateOpenOfADeletedTopicCreatesNothing: an open that begins after the
// topic was marked deleted (the broker acted on desired state read before
// the mark) creates no directory the delete machine has already moved away.
func TestLateOpenOfADeletedTopicCreatesNothing(t *testing.T) {
	ctx := safety(t)
	fsys := memfs.New()
	e := startEngine(t, fsys)
	spec := desired.TopicSpec{Name: "gone", ID: "00000000-0000-4000-8000-00000000d00d", Partitions: 1}
	deleted := spec
	deleted.Deleted = true
	if err := desired.WriteTopicSpec(fsys, testCluster, deleted); err != nil {
		t.Fatal(err)
	}
	if err := e.driveOpen(ctx, spec, 0, 1, nil); err == nil {
		t.Fatal("opened a partition of a topic marked deleted")
	}
	if _, err := fsys.Stat(states.TopicDir(testData, "gone")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("topic directory created by a late open: %v", err)
	}
}

package engine

import (
	"errors"
	"io/fs"
	"path"
	"strings"
	"testing"

	"github.com/kaas-dev/kaas/engine/desired"
	"github.com/kaas-dev/kaas/states"
	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/faultfs"
	"github.com/kaas-dev/kaas/volume/memfs"
	"github.com/kaas-dev/kaas/volume/nfsfs"
	"github.com/kaas-dev/kaas/volume/partlog/partlogtest"
)

// TestRecreateUnderTheSameNameReclaims: the desired state of a topic is
// replaced by a new incarnation while the old one's directory, holding
// data, is still on the volume (an operator that recreated its Topic
// resource, a cluster directory restored from a backup). The controller
// reclaims the old directory and the new incarnation starts empty at
// offset 0, with nothing of the old one readable through it.
func TestRecreateUnderTheSameNameReclaims(t *testing.T) {
	for _, restart := range []bool{false, true} {
		name := "running"
		if restart {
			name = "across-a-restart"
		}
		t.Run(name, func(t *testing.T) {
			ctx := safety(t)
			fsys := memfs.New()
			e := startEngine(t, fsys)
			old, err := e.CreateTopic(CreateTopicRequest{Name: "orders", Partitions: 2})
			if err != nil {
				t.Fatal(err)
			}
			mustServing(t, ctx, e.Engine, "orders")
			for idx := int32(0); idx < 2; idx++ {
				if _, err := mustPartition(t, e.Engine, "orders", idx).Produce(ctx, partlogtest.MakeBatch(3, 50, 1, -1, -1, -1)); err != nil {
					t.Fatal(err)
				}
			}
			if restart {
				e.stop(t)
			}
			next := desired.TopicSpec{Name: "orders", ID: "00000000-0000-4000-8000-0000000000b2", Partitions: 1, Generation: 1}
			if err := desired.WriteTopicSpec(fsys, testCluster, next); err != nil {
				t.Fatal(err)
			}
			if restart {
				e = startEngine(t, fsys)
			}
			eventually(t, ctx, e.Engine, "the new incarnation serving", func() bool {
				v, ok := e.Topic("orders")
				return ok && v.Spec.ID == next.ID && v.Epochs[0] >= 0
			})
			p := mustPartition(t, e.Engine, "orders", 0)
			if p.TopicID != next.ID || p.Log().LogEndOffset() != 0 || p.Log().LogStartOffset() != 0 {
				t.Fatalf("new incarnation: ID %s, log [%d, %d)", p.TopicID, p.Log().LogStartOffset(), p.Log().LogEndOffset())
			}
			if got := readAllFrom(t, p); len(got) != 0 {
				t.Fatalf("read %d bytes of the old incarnation through the new one", len(got))
			}
			res, err := p.Produce(ctx, partlogtest.MakeBatch(2, 10, 9, -1, -1, -1))
			if err != nil || res.BaseOffset != 0 {
				t.Fatalf("first produce to the new incarnation: %+v, %v; want base offset 0", res, err)
			}
			e.stop(t)
			rec := statusOf(t, fsys, states.DirectoryReclaim.Kind, "orders")
			if rec == nil || rec.State != "reclaimed" || rec.TopicID != old.ID || rec.LastError != "" {
				t.Fatalf("directory-reclaim record %+v, want reclaimed for the old ID %s", rec, old.ID)
			}
			st, err := states.ReadStamp(fsys, testData, "orders")
			if err != nil || st.TopicID != next.ID {
				t.Fatalf("stamp %+v, %v", st, err)
			}
			if _, err := fsys.Stat(states.TrashPath(testData, "orders", old.ID)); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("old incarnation's trash left: %v", err)
			}
			if _, err := fsys.Stat(states.PartitionDir(testData, "orders", 1)); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("old incarnation's partition 1 left: %v", err)
			}
		})
	}
}

// TestDeleteWaitsForAHandleOnNFS: a segment of the topic held open by
// another host (an NFS client: its removal leaves a .nfsXXXX file that
// keeps the trash non-empty) makes the purge fail; the failures are
// counted and visible in the status with an error naming the file, the
// queue re-drives, and the delete completes once the handle closes.
func TestDeleteWaitsForAHandleOnNFS(t *testing.T) {
	ctx := safety(t)
	mem := memfs.New()
	srv := nfsfs.New(mem, nfsfs.Options{})
	trashGlob := path.Join(testData, states.TrashDir, "*")
	purges := newSwitchable(func(op faultfs.Op) faultfs.Action {
		if op.Kind == faultfs.OpRemove && op.Matches(faultfs.OpRemove, trashGlob) {
			return faultfs.ProceedThen(func() {})
		}
		return faultfs.Proceed
	})
	broker := faultfs.New(srv.View("broker"), purges.inject)
	e := startEngine(t, broker)
	spec, err := e.CreateTopic(CreateTopicRequest{Name: "held", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	mustServing(t, ctx, e.Engine, "held")
	if _, err := mustPartition(t, e.Engine, "held", 0).Produce(ctx, partlogtest.MakeBatch(3, 50, 1, -1, -1, -1)); err != nil {
		t.Fatal(err)
	}
	holder := srv.View("holder")
	dir := states.PartitionDir(testData, "held", 0)
	ents, err := holder.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var seg volume.File
	for _, ent := range ents {
		if strings.HasSuffix(ent.Name(), ".log") {
			if seg, err = holder.Open(path.Join(dir, ent.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	if seg == nil {
		t.Fatalf("no segment in %v", ents)
	}
	purges.armed.Store(true)
	if _, err := e.DeleteTopic("held"); err != nil {
		t.Fatal(err)
	}
	// One failed purge pass removes the trash entry twice; six removals
	// are three passes, each after the previous failure was saved.
	purges.waitHits(t, ctx, 6)
	rec := statusOf(t, mem, states.TopicDelete.Kind, "held")
	if rec == nil || rec.State != "renamed" || rec.Attempts < 2 || !strings.Contains(rec.LastError, "purge") ||
		!strings.Contains(rec.LastError, "directory not empty") || !strings.Contains(rec.LastError, ".nfs") {
		t.Fatalf("status while the handle is open: %+v; want renamed, attempts >= 2, a purge error naming the .nfs file", rec)
	}
	if n := e.queue.Failures(topicKey("held")); n < 2 {
		t.Fatalf("queue failures %d: the purge is not being re-driven with backoff", n)
	}
	if len(srv.Hidden()) != 1 {
		t.Fatalf("hidden files %v", srv.Hidden())
	}
	if err := seg.Close(); err != nil {
		t.Fatal(err)
	}
	if !e.WaitDeleted(ctx, "held", spec.ID) {
		t.Fatal("never deleted")
	}
	e.stop(t)
	final := statusOf(t, mem, states.TopicDelete.Kind, "held")
	if final == nil || final.State != "deleted" || final.LastError != "" || final.Attempts < rec.Attempts {
		t.Fatalf("final record %+v", final)
	}
	if _, err := mem.Stat(states.TrashPath(testData, "held", spec.ID)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("trash left: %v", err)
	}
	if h := srv.Hidden(); len(h) != 0 {
		t.Fatalf("hidden files left: %v", h)
	}
}

// TestTrashSweepRemovesLeftovers: at start-up the controller removes trash
// entries whose machine ended (or was never recorded) and leaves the one
// whose machine is still running to that machine.
func TestTrashSweepRemovesLeftovers(t *testing.T) {
	ctx := safety(t)
	mem := memfs.New()
	const (
		endedID   = "00000000-0000-4000-8000-0000000000e1"
		orphanID  = "00000000-0000-4000-8000-0000000000e2"
		runningID = "00000000-0000-4000-8000-0000000000e3"
	)
	for _, ent := range []struct{ topic, id string }{{"a", endedID}, {"b", orphanID}, {"c", runningID}} {
		p := path.Join(states.TrashPath(testData, ent.topic, ent.id), "0", "00000000000000000000-e1.log")
		if err := volume.MkdirAllSync(mem, path.Dir(p)); err != nil {
			t.Fatal(err)
		}
		if err := volume.WriteFileAtomic(mem, p, []byte("old")); err != nil {
			t.Fatal(err)
		}
	}
	for _, rec := range []*states.Record{
		{Kind: states.TopicDelete.Kind, Object: "a", Desired: "deleted", State: "deleted", TopicID: endedID},
		{Kind: states.DirectoryReclaim.Kind, Object: "c", Desired: "reclaimed", State: "renamed", TopicID: runningID},
	} {
		if err := states.Save(mem, testCluster, rec); err != nil {
			t.Fatal(err)
		}
	}
	entry := func(topic, id string) string { return states.TrashPath(testData, topic, id) }
	removed := newSwitchable(func(op faultfs.Op) faultfs.Action {
		if op.Kind == faultfs.OpRemove && (op.Path == entry("a", endedID) || op.Path == entry("b", orphanID)) {
			return faultfs.ProceedThen(func() {})
		}
		return faultfs.Proceed
	})
	removed.armed.Store(true)
	e := startEngine(t, faultfs.New(mem, removed.inject))
	// Each purge removes its entry twice (before and after emptying it).
	removed.waitHits(t, ctx, 4)
	e.stop(t)
	for _, p := range []string{entry("a", endedID), entry("b", orphanID)} {
		if _, err := mem.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s left by the sweep: %v", p, err)
		}
	}
	if _, err := mem.Stat(entry("c", runningID)); err != nil {
		t.Fatalf("the running machine's entry was swept: %v", err)
	}
}

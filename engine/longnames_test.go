package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/kaas-dev/kaas/engine/desired"
	"github.com/kaas-dev/kaas/states"
	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/faultfs"
	"github.com/kaas-dev/kaas/volume/memfs"
	"github.com/kaas-dev/kaas/volume/nfsfs"
	"github.com/kaas-dev/kaas/volume/partlog/partlogtest"
)

// longTopicName returns a legal topic name of n characters that uses every
// character class Kafka allows.
func longTopicName(n int) string {
	const alphabet = "aZ09._-"
	var b strings.Builder
	b.WriteString("t")
	for i := 1; i < n; i++ {
		b.WriteByte(alphabet[i%len(alphabet)])
	}
	return b.String()
}

// nameSubstrates are the substrates a long-name test runs on: each refuses a
// path component longer than NAME_MAX (osfs on a real directory, memfs, and
// the wrappers over memfs).
func nameSubstrates(t *testing.T) map[string]func() (volume.FS, string) {
	return map[string]func() (volume.FS, string){
		"osfs":    func() (volume.FS, string) { return volume.OS(), t.TempDir() },
		"memfs":   func() (volume.FS, string) { return memfs.New(), testData },
		"nfsfs":   func() (volume.FS, string) { return nfsfs.New(memfs.New(), nfsfs.Options{}).View("broker"), testData },
		"faultfs": func() (volume.FS, string) { return faultfs.New(memfs.New(), nil), testData },
	}
}

// phase is a deadline for one step of a long-name test, so that a name
// that breaks a machine fails the test in seconds, naming the step.
func phase(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// checkNamesFit walks dir and fails on any entry longer than NAME_MAX (a
// substrate that does not enforce it would otherwise hide one).
func checkNamesFit(t *testing.T, fsys volume.FS, dir string) {
	t.Helper()
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return
		}
		t.Fatal(err)
	}
	for _, e := range ents {
		if len(e.Name()) > volume.NameMax {
			t.Fatalf("%s/%s: a %d-byte name", dir, e.Name(), len(e.Name()))
		}
		if e.IsDir() {
			checkNamesFit(t, fsys, path.Join(dir, e.Name()))
		}
	}
}

// recordOf finds a record through ReadStatus (the listing kaasctl uses).
func recordOf(t *testing.T, fsys volume.FS, clusterDir, kind, object string) *states.Record {
	t.Helper()
	recs, err := ReadStatus(fsys, clusterDir)
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

// TestLongTopicNamesThroughEveryMachine: a topic name of any legal length
// (up to Kafka's 249 characters) is created, served, deleted, recreated,
// its directory reclaimed and a trash leftover of it swept, on every
// substrate; every name kaas derives from it fits NAME_MAX.
func TestLongTopicNamesThroughEveryMachine(t *testing.T) {
	for sub, mk := range nameSubstrates(t) {
		for _, n := range []int{218, 220, 230, 249} {
			t.Run(fmt.Sprintf("%s/%d", sub, n), func(t *testing.T) {
				fsys, data := mk()
				cluster := path.Join(data, "__cluster")
				start := func() *running {
					return startWith(t, Config{FS: fsys, DataDir: data, ClusterDir: cluster, BrokerID: 1})
				}
				name := longTopicName(n)
				e := start()

				// partition-open: create and serve.
				spec, err := e.CreateTopic(CreateTopicRequest{Name: name, Partitions: 2})
				if err != nil {
					t.Fatal(err)
				}
				if !e.WaitServing(phase(t), name) {
					rec := recordOf(t, fsys, cluster, states.PartitionOpen.Kind, states.PartitionObject(name, 0))
					t.Fatalf("a %d-character topic never served (partition-open record %+v)", n, rec)
				}
				ctx := phase(t)
				if _, err := mustPartition(t, e.Engine, name, 1).Produce(ctx, partlogtest.MakeBatch(3, 20, 1, -1, -1, -1)); err != nil {
					t.Fatal(err)
				}
				e.stop(t)
				for idx := int32(0); idx < 2; idx++ {
					rec := recordOf(t, fsys, cluster, states.PartitionOpen.Kind, states.PartitionObject(name, idx))
					if rec == nil || rec.State != "serving" || rec.TopicID != spec.ID {
						t.Fatalf("partition-open record %d: %+v", idx, rec)
					}
				}
				checkNamesFit(t, fsys, data)

				// topic-delete, then a new incarnation under the name.
				e = start()
				if !e.WaitServing(phase(t), name) {
					t.Fatal("not served after a restart")
				}
				if _, err := e.DeleteTopic(name); err != nil {
					t.Fatalf("delete a %d-character topic: %v", n, err)
				}
				if !e.WaitDeleted(phase(t), name, spec.ID) {
					rec := recordOf(t, fsys, cluster, states.TopicDelete.Kind, name)
					t.Fatalf("a %d-character topic was never deleted (topic-delete record %+v)", n, rec)
				}
				eventually(t, phase(t), e.Engine, "topic-delete record deleted", func() bool {
					rec := recordOf(t, fsys, cluster, states.TopicDelete.Kind, name)
					return rec != nil && rec.State == "deleted" && rec.TopicID == spec.ID
				})
				if _, err := fsys.Stat(states.TrashPath(data, name, spec.ID)); !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("trash entry left after the delete: %v", err)
				}
				spec2, err := e.CreateTopic(CreateTopicRequest{Name: name, Partitions: 1})
				if err != nil {
					t.Fatal(err)
				}
				if !e.WaitServing(phase(t), name) {
					t.Fatal("the recreated topic never served")
				}
				if p := mustPartition(t, e.Engine, name, 0); p.TopicID != spec2.ID || p.Log().LogEndOffset() != 0 {
					t.Fatalf("recreated partition: ID %s, log end %d", p.TopicID, p.Log().LogEndOffset())
				}
				ctx = phase(t)
				if _, err := mustPartition(t, e.Engine, name, 0).Produce(ctx, partlogtest.MakeBatch(2, 20, 1, -1, -1, -1)); err != nil {
					t.Fatal(err)
				}
				e.stop(t)

				// directory-reclaim: the desired state names a third
				// incarnation while the directory is stamped by the second.
				third := desired.TopicSpec{Name: name, ID: "00000000-0000-4000-8000-0000000000c3", Partitions: 1, Generation: 1}
				if err := desired.WriteTopicSpec(fsys, cluster, third); err != nil {
					t.Fatalf("replace the desired state of a %d-character topic: %v", n, err)
				}
				e = start()
				eventually(t, phase(t), e.Engine, "the third incarnation serving", func() bool {
					v, ok := e.Topic(name)
					return ok && v.Spec.ID == third.ID && v.Epochs[0] >= 0
				})
				if p := mustPartition(t, e.Engine, name, 0); p.Log().LogEndOffset() != 0 {
					t.Fatalf("the reclaimed topic starts at %d, not 0", p.Log().LogEndOffset())
				}
				e.stop(t)
				rec := recordOf(t, fsys, cluster, states.DirectoryReclaim.Kind, name)
				if rec == nil || rec.State != "reclaimed" || rec.TopicID != spec2.ID {
					t.Fatalf("directory-reclaim record %+v, want reclaimed for %s", rec, spec2.ID)
				}

				// trash sweep: a leftover entry of an incarnation no machine
				// names (a crash before the record was written) is purged.
				left := states.TrashPath(data, name, "00000000-0000-4000-8000-0000000000d4")
				if err := fsys.MkdirAll(path.Join(left, "0"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := volume.CreateExclusiveFile(fsys, path.Join(left, states.StampFile),
					[]byte(`{"topic":"`+name+`","topicID":"00000000-0000-4000-8000-0000000000d4"}`)); err != nil {
					t.Fatal(err)
				}
				checkNamesFit(t, fsys, data)
				e = start()
				eventually(t, phase(t), e.Engine, "the trash leftover swept", func() bool {
					_, err := fsys.Stat(left)
					return errors.Is(err, fs.ErrNotExist)
				})
				if v, ok := e.Topic(name); !ok || v.Spec.ID != third.ID {
					t.Fatalf("the live incarnation after the sweep: %+v, %v", v, ok)
				}
				e.stop(t)
				checkNamesFit(t, fsys, data)
			})
		}
	}
}

// TestTrashSweepLongNames is TestTrashSweepRemovesLeftovers for topics whose
// trash entries have the shortened name (which does not carry the topic):
// the sweep finds each entry's machine by the topic ID at the end of the
// name, leaves a running machine's entry to it and purges the others.
func TestTrashSweepLongNames(t *testing.T) {
	ctx := safety(t)
	mem := memfs.New()
	const (
		endedID   = "00000000-0000-4000-8000-0000000000e1"
		orphanID  = "00000000-0000-4000-8000-0000000000e2"
		runningID = "00000000-0000-4000-8000-0000000000e3"
	)
	long := longTopicName(249)
	topics := map[string]string{endedID: long[:248] + "a", orphanID: long[:248] + "b", runningID: long[:248] + "c"}
	entry := func(id string) string { return states.TrashPath(testData, topics[id], id) }
	for id := range topics {
		if _, parsed, ok := states.TrashEntry(path.Base(entry(id))); !ok || parsed != id {
			t.Fatalf("entry %s does not parse", entry(id))
		}
		p := path.Join(entry(id), "0", "00000000000000000000-e1.log")
		if err := volume.MkdirAllSync(mem, path.Dir(p)); err != nil {
			t.Fatal(err)
		}
		if err := volume.WriteFileAtomic(mem, p, []byte("old")); err != nil {
			t.Fatal(err)
		}
	}
	for _, rec := range []*states.Record{
		{Kind: states.TopicDelete.Kind, Object: topics[endedID], Desired: "deleted", State: "deleted", TopicID: endedID},
		{Kind: states.DirectoryReclaim.Kind, Object: topics[runningID], Desired: "reclaimed", State: "renamed", TopicID: runningID},
	} {
		if err := states.Save(mem, testCluster, rec); err != nil {
			t.Fatal(err)
		}
	}
	removed := newSwitchable(func(op faultfs.Op) faultfs.Action {
		if op.Kind == faultfs.OpRemove && (op.Path == entry(endedID) || op.Path == entry(orphanID)) {
			return faultfs.ProceedThen(func() {})
		}
		return faultfs.Proceed
	})
	removed.armed.Store(true)
	e := startEngine(t, faultfs.New(mem, removed.inject))
	removed.waitHits(t, ctx, 4) // each purge removes its entry twice
	// One more sweep, run to its end here: every entry, the running
	// machine's too, has been judged when it returns.
	if err := e.sweepTrash(ctx); err != nil {
		t.Fatal(err)
	}
	e.stop(t)
	for _, id := range []string{endedID, orphanID} {
		if _, err := mem.Stat(entry(id)); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s left by the sweep: %v", entry(id), err)
		}
	}
	if _, err := mem.Stat(entry(runningID)); err != nil {
		t.Fatalf("the running machine's entry was swept: %v", err)
	}
}

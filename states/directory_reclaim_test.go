package states_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"testing"

	"github.com/kaas-dev/kaas/states"
	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/faultfs"
	"github.com/kaas-dev/kaas/volume/memfs"
	"github.com/kaas-dev/kaas/volume/nfsfs"
	"github.com/kaas-dev/kaas/volume/partlog"
)

// sweepNewTopicID is the incarnation that wants the name the old one
// (sweepTopicID) still holds on the volume.
const sweepNewTopicID = "7b0e3c1a-0000-4000-8000-000000000002"

func init() {
	sweepScenarios[states.DirectoryReclaim.Kind] = []sweepScenario{directoryReclaimScenario()}
}

// reclaimHost is the directory-reclaim host of the sweeps: no broker holds
// the old incarnation open.
type reclaimHost struct{}

func (reclaimHost) Release(ctx context.Context) error { return nil }

func reclaimActions(fsys volume.FS) states.Actions {
	return states.DirectoryReclaimActions(fsys, sweepData, sweepTopic, sweepTopicID, reclaimHost{})
}

// directoryReclaimScenario: a topic directory stamped by the old
// incarnation, holding two partition logs, is reclaimed for a new one.
func directoryReclaimScenario() sweepScenario {
	return sweepScenario{
		object: sweepTopic,
		setup:  setupTopic,
		bind: func(fsys volume.FS, _ *states.Record, _ *trial) *run {
			return &run{acts: reclaimActions(fsys)}
		},
		check: func(t *testing.T, fsys volume.FS, rec *states.Record, _ *run, _ *trial) {
			t.Helper()
			checkReclaimed(t, fsys, rec)
		},
	}
}

// checkReclaimed: the old directory and its trash entry are gone, and the
// new incarnation's open (make-dir, stamp) starts in an empty directory.
func checkReclaimed(t *testing.T, fsys volume.FS, rec *states.Record) {
	t.Helper()
	if rec.State != states.DirectoryReclaim.End {
		t.Fatalf("record state %q, want %s", rec.State, states.DirectoryReclaim.End)
	}
	for _, p := range []string{states.TopicDir(sweepData, sweepTopic), states.TrashPath(sweepData, sweepTopic, sweepTopicID)} {
		if _, err := fsys.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s still there after reclaim (stat: %v)", p, err)
		}
	}
	dir := states.PartitionDir(sweepData, sweepTopic, 0)
	if err := volume.MkdirAllSync(fsys, dir); err != nil {
		t.Fatal(err)
	}
	if err := states.EnsureStamp(fsys, sweepData, sweepTopic, sweepNewTopicID); err != nil {
		t.Fatalf("new incarnation's stamp: %v", err)
	}
	ents, err := fsys.ReadDir(dir)
	if err != nil || len(ents) != 0 {
		t.Fatalf("new incarnation's partition dir holds %d entries (%v): the old incarnation leaks through", len(ents), err)
	}
	lg, err := partlog.Open(fsys, dir, partlog.Config{Epoch: 1, Now: sweepNow})
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()
	if lg.LogEndOffset() != 0 || lg.LogStartOffset() != 0 {
		t.Fatalf("new incarnation's log spans [%d, %d), want empty at 0", lg.LogStartOffset(), lg.LogEndOffset())
	}
}

func driveReclaimOnce(fsys, statusFS volume.FS, rec *states.Record) error {
	return states.Drive(context.Background(), states.DirectoryReclaim, rec, reclaimActions(fsys), saver(statusFS), sweepNow)
}

func newReclaimRecord() *states.Record {
	def := states.DirectoryReclaim
	return &states.Record{Kind: def.Kind, Object: sweepTopic, Desired: def.End, State: def.Initial, TopicID: sweepTopicID}
}

// TestDirectoryReclaimNeverMovesAnotherIncarnation: a directory stamped
// with another ID than the one reclaimed, or not stamped at all (adopted,
// never reclaimed), is left in place with everything in it.
func TestDirectoryReclaimNeverMovesAnotherIncarnation(t *testing.T) {
	for _, tc := range []struct {
		name  string
		stamp func(t *testing.T, fsys volume.FS)
	}{
		{"stamped-by-the-new-incarnation", func(t *testing.T, fsys volume.FS) {
			if err := states.EnsureStamp(fsys, sweepData, sweepTopic, sweepNewTopicID); err != nil {
				t.Fatal(err)
			}
		}},
		{"unstamped", func(t *testing.T, fsys volume.FS) {}},
		{"torn-stamp", func(t *testing.T, fsys volume.FS) {
			if err := volume.WriteFileAtomic(fsys, states.StampPath(sweepData, sweepTopic), nil); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := memfs.New()
			seg := path.Join(states.PartitionDir(sweepData, sweepTopic, 0), "00000000000000000000-e1.log")
			if err := volume.MkdirAllSync(mem, path.Dir(seg)); err != nil {
				t.Fatal(err)
			}
			if err := volume.WriteFileAtomic(mem, seg, []byte("new incarnation's data")); err != nil {
				t.Fatal(err)
			}
			tc.stamp(t, mem)
			rec := newReclaimRecord()
			if err := driveReclaimOnce(mem, mem, rec); err != nil {
				t.Fatal(err)
			}
			if b, err := volume.ReadFile(mem, seg); err != nil || string(b) != "new incarnation's data" {
				t.Fatalf("segment after reclaim: %q, %v", b, err)
			}
			if rec.State != "reclaimed" {
				t.Fatalf("record %+v", rec)
			}
		})
	}
}

// TestDirectoryReclaimRaceMovesTheWrongDirectoryBack: should the directory
// be replaced by another incarnation's between the stamp check and the
// rename (a controller that lost its lease mid-step while a newer one
// finished the reclaim), the rename moves the wrong directory, the check at
// the destination catches it, and it is moved back; the step fails and the
// re-drive converges without touching it.
func TestDirectoryReclaimRaceMovesTheWrongDirectoryBack(t *testing.T) {
	sc := directoryReclaimScenario()
	mem := newSweepVolume(t, sc)
	src := states.TopicDir(sweepData, sweepTopic)
	swapped := false
	ffs := faultfs.New(mem, func(op faultfs.Op) faultfs.Action {
		if op.Kind == faultfs.OpRename && op.Path == src && !swapped {
			swapped = true
			// Another actor reclaims and purges the old directory, and
			// the new incarnation stamps a fresh one.
			if err := volume.RemoveAll(mem, src); err != nil {
				t.Error(err)
			}
			if err := volume.MkdirAllSync(mem, states.PartitionDir(sweepData, sweepTopic, 0)); err != nil {
				t.Error(err)
			}
			if err := states.EnsureStamp(mem, sweepData, sweepTopic, sweepNewTopicID); err != nil {
				t.Error(err)
			}
		}
		return faultfs.Proceed
	})
	rec := newReclaimRecord()
	err := driveReclaimOnce(ffs, mem, rec)
	if !errors.Is(err, states.ErrStampMismatch) || rec.State != "released" || rec.Attempts != 1 {
		t.Fatalf("drive: %v, record %+v; want a stamp mismatch at released", err, rec)
	}
	if st, err := states.ReadStamp(mem, sweepData, sweepTopic); err != nil || st.TopicID != sweepNewTopicID {
		t.Fatalf("stamp after the race: %+v, %v: the new incarnation's directory was not moved back", st, err)
	}
	if err := driveReclaimOnce(mem, mem, rec); err != nil {
		t.Fatal(err)
	}
	if st, err := states.ReadStamp(mem, sweepData, sweepTopic); err != nil || st.TopicID != sweepNewTopicID {
		t.Fatalf("stamp after the re-drive: %+v, %v", st, err)
	}
}

// TestPurgeRefusesAnotherIncarnationsTrash: a trash entry stamped with
// another ID than its name says is never removed.
func TestPurgeRefusesAnotherIncarnationsTrash(t *testing.T) {
	mem := memfs.New()
	trash := states.TrashPath(sweepData, sweepTopic, sweepTopicID)
	if err := volume.MkdirAllSync(mem, trash); err != nil {
		t.Fatal(err)
	}
	stamp := fmt.Sprintf(`{"topic":%q,"topicID":%q}`, sweepTopic, sweepNewTopicID)
	if err := volume.WriteFileAtomic(mem, path.Join(trash, states.StampFile), []byte(stamp)); err != nil {
		t.Fatal(err)
	}
	err := states.PurgeTrash(mem, sweepData, sweepTopic, sweepTopicID)
	if !errors.Is(err, states.ErrStampMismatch) {
		t.Fatalf("purge: %v, want a refusal", err)
	}
	if _, err := mem.Stat(trash); err != nil {
		t.Fatalf("trash entry removed: %v", err)
	}
}

// TestPurgeWaitsForHandlesOnNFS: on an NFS-like volume, a segment held
// open by another host survives its removal as a hidden .nfsXXXX file that
// keeps the trash non-empty. Each machine's purge fails with an error that
// names it, counted in attempts and saved, until the handle closes; the
// next drive then completes.
func TestPurgeWaitsForHandlesOnNFS(t *testing.T) {
	for _, tc := range []struct {
		def  states.Definition
		acts func(fsys volume.FS) states.Actions
	}{
		{states.TopicDelete, func(fsys volume.FS) states.Actions {
			return topicDeleteScenario().bind(fsys, nil, nil).acts
		}},
		{states.DirectoryReclaim, reclaimActions},
	} {
		t.Run(tc.def.Kind, func(t *testing.T) {
			mem := memfs.New()
			srv := nfsfs.New(mem, nfsfs.Options{})
			controller, holder := srv.View("controller"), srv.View("holder")
			if err := volume.MkdirAllSync(mem, sweepCluster); err != nil {
				t.Fatal(err)
			}
			setupTopic(t, mem, nil)
			dir := states.PartitionDir(sweepData, sweepTopic, 0)
			ents, err := mem.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			var seg string
			for _, e := range ents {
				if strings.HasSuffix(e.Name(), ".log") {
					seg = path.Join(dir, e.Name())
				}
			}
			if seg == "" {
				t.Fatalf("no segment in %s", dir)
			}
			f, err := holder.Open(seg)
			if err != nil {
				t.Fatal(err)
			}
			rec := &states.Record{Kind: tc.def.Kind, Object: sweepTopic, Desired: tc.def.End, State: tc.def.Initial, TopicID: sweepTopicID}
			for pass := 1; pass <= 3; pass++ {
				err := states.Drive(context.Background(), tc.def, rec, tc.acts(controller), saver(controller), sweepNow)
				if err == nil {
					t.Fatalf("pass %d: drive succeeded while a handle keeps the trash non-empty", pass)
				}
				saved, lerr := states.Load(mem, sweepCluster, tc.def.Kind, sweepTopic)
				if lerr != nil || saved == nil || saved.State != "renamed" || saved.Attempts != pass ||
					!strings.Contains(saved.LastError, "purge") || !strings.Contains(saved.LastError, ".nfs") ||
					!strings.Contains(saved.LastError, "directory not empty") {
					t.Fatalf("pass %d: saved record %+v, %v; want renamed, attempts %d, a purge error naming the .nfs file", pass, saved, lerr, pass)
				}
				rec = saved
			}
			if hidden := srv.Hidden(); len(hidden) != 1 {
				t.Fatalf("hidden files %v, want the one held open", hidden)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			if err := states.Drive(context.Background(), tc.def, rec, tc.acts(controller), saver(controller), sweepNow); err != nil {
				t.Fatalf("drive after the handle closed: %v", err)
			}
			if rec.State != tc.def.End || rec.LastError != "" || rec.Attempts != 3 {
				t.Fatalf("record after convergence %+v", rec)
			}
			if _, err := mem.Stat(states.TrashPath(sweepData, sweepTopic, sweepTopicID)); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("trash entry left: %v", err)
			}
			if hidden := srv.Hidden(); len(hidden) != 0 {
				t.Fatalf("hidden files left: %v", hidden)
			}
		})
	}
}

// TestTrashEntry parses trash entry names.
func TestTrashEntry(t *testing.T) {
	name := path.Base(states.TrashPath(sweepData, "a.b-c_d", sweepTopicID))
	if topic, id, ok := states.TrashEntry(name); !ok || topic != "a.b-c_d" || id != sweepTopicID {
		t.Fatalf("TrashEntry(%q) = %q, %q, %v", name, topic, id, ok)
	}
	for _, bad := range []string{"orders", "~x", "orders~", ".tmp-123"} {
		if _, _, ok := states.TrashEntry(bad); ok {
			t.Errorf("TrashEntry(%q) accepted", bad)
		}
	}
}

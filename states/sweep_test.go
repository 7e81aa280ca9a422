package states_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kaas-dev/kaas/states"
	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/faultfs"
	"github.com/kaas-dev/kaas/volume/memfs"
	"github.com/kaas-dev/kaas/volume/partlog"
)

const (
	sweepData    = "data"
	sweepCluster = "data/__cluster"
	sweepTopic   = "orders"
	sweepTopicID = "7b0e3c1a-0000-4000-8000-000000000001"
)

var sweepNow = func() time.Time { return time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC) }

// run is one drive of a scenario on one FS: the actions, bound to that FS,
// and what they observed.
type run struct {
	acts states.Actions
	// recovered is set when the recover action succeeded in this run
	// (partition-open), and epoch is the epoch it opened the log at.
	recovered bool
	epoch     int32
	// served is set when serve ran after a successful recover in this run.
	served bool
}

// sweepScenario is one machine's crash-sweep workload.
type sweepScenario struct {
	object string
	// setup prepares the volume durably before the workload (not counted).
	setup func(t *testing.T, fsys volume.FS)
	// bind builds the actions on fsys.
	bind func(fsys volume.FS) *run
	// restart turns a record loaded after a crash into what a fresh
	// process drives (nil: as loaded).
	restart func(rec *states.Record)
	// check verifies the end state on the recovered volume.
	check func(t *testing.T, fsys volume.FS, rec *states.Record, r *run)
}

// sweepScenarios must hold one scenario for every machine in
// states.Machines; TestCrashSweep fails for a machine without one.
var sweepScenarios = map[string]sweepScenario{
	states.PartitionOpen.Kind: partitionOpenScenario(),
	states.TopicDelete.Kind:   topicDeleteScenario(),
}

func partitionOpenScenario() sweepScenario {
	dir := states.PartitionDir(sweepData, sweepTopic, 0)
	return sweepScenario{
		object: states.PartitionObject(sweepTopic, 0),
		setup:  func(t *testing.T, fsys volume.FS) {},
		bind: func(fsys volume.FS) *run {
			r := &run{}
			fenceFn := func(ctx context.Context) error {
				fence, err := partlog.ReadFence(fsys, dir)
				if err != nil {
					return err
				}
				// Above the fence, as the engine's assignment gives it.
				_, err = partlog.ClaimFence(fsys, dir, max(fence, 0)+1)
				return err
			}
			recoverFn := func(ctx context.Context) error {
				// The fence holds the epoch the fence step claimed: nobody
				// else writes it in this scenario.
				epoch, err := partlog.ReadFence(fsys, dir)
				if err != nil {
					return err
				}
				if epoch < 1 {
					return errors.New("recover before the fence was claimed")
				}
				lg, err := partlog.Open(fsys, dir, partlog.Config{Epoch: epoch, Now: sweepNow})
				if err != nil {
					return err
				}
				if err := lg.Close(); err != nil {
					return err
				}
				r.recovered, r.epoch = true, epoch
				return nil
			}
			serveFn := func(ctx context.Context) error {
				if !r.recovered {
					return errors.New("serve without a recovered log")
				}
				r.served = true
				return nil
			}
			r.acts = states.PartitionOpenActions(fsys, sweepData, sweepTopic, sweepTopicID, 0, fenceFn, recoverFn, serveFn)
			return r
		},
		// As the engine does: recovered and serving name handles held by a
		// process, and a restarted process holds none.
		restart: func(rec *states.Record) {
			if rec.State == "recovered" || rec.State == "serving" {
				rec.State = "stamped"
			}
		},
		check: func(t *testing.T, fsys volume.FS, rec *states.Record, r *run) {
			t.Helper()
			if st, err := fsys.Stat(dir); err != nil || !st.IsDir() {
				t.Fatalf("partition dir %s: %v", dir, err)
			}
			st, err := states.ReadStamp(fsys, sweepData, sweepTopic)
			if err != nil || st.TopicID != sweepTopicID || st.Topic != sweepTopic {
				t.Fatalf("stamp = %+v, %v; want topic ID %s", st, err, sweepTopicID)
			}
			if !r.recovered || !r.served {
				t.Fatalf("recover/serve did not both succeed in the final drive (recovered %v, served %v)", r.recovered, r.served)
			}
			fence, err := partlog.ReadFence(fsys, dir)
			if err != nil || fence != r.epoch {
				t.Fatalf("fence = %d, %v; want the recovered epoch %d", fence, err, r.epoch)
			}
			if rec.State != "serving" {
				t.Fatalf("record state %q, want serving", rec.State)
			}
		},
	}
}

func desiredFile() string { return path.Join(sweepCluster, "topics", sweepTopic+".json") }

// forgetDesired removes the desired-state file, idempotently.
func forgetDesired(fsys volume.FS) states.Action {
	return func(ctx context.Context) error {
		p := desiredFile()
		if err := fsys.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return fsys.SyncDir(path.Dir(p))
	}
}

// setupTopic makes a durable topic directory with a stamp, two partition
// logs holding data, and a desired-state file.
func setupTopic(t *testing.T, fsys volume.FS) {
	t.Helper()
	for p := int32(0); p < 2; p++ {
		dir := states.PartitionDir(sweepData, sweepTopic, p)
		if err := volume.MkdirAllSync(fsys, dir); err != nil {
			t.Fatal(err)
		}
		lg, err := partlog.Open(fsys, dir, partlog.Config{Epoch: 1, Now: sweepNow})
		if err != nil {
			t.Fatal(err)
		}
		if err := lg.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := states.EnsureStamp(fsys, sweepData, sweepTopic, sweepTopicID); err != nil {
		t.Fatal(err)
	}
	if err := volume.MkdirAllSync(fsys, path.Dir(desiredFile())); err != nil {
		t.Fatal(err)
	}
	if err := volume.WriteFileAtomic(fsys, desiredFile(), []byte(`{"name":"orders"}`)); err != nil {
		t.Fatal(err)
	}
}

func topicDeleteScenario() sweepScenario {
	return sweepScenario{
		object: sweepTopic,
		setup:  setupTopic,
		bind: func(fsys volume.FS) *run {
			release := func(ctx context.Context) error { return nil }
			return &run{acts: states.TopicDeleteActions(fsys, sweepData, sweepTopic, sweepTopicID, release, forgetDesired(fsys))}
		},
		check: checkTopicDeleted,
	}
}

func checkTopicDeleted(t *testing.T, fsys volume.FS, rec *states.Record, _ *run) {
	t.Helper()
	for _, p := range []string{states.TopicDir(sweepData, sweepTopic), states.TrashPath(sweepData, sweepTopic, sweepTopicID), desiredFile()} {
		if _, err := fsys.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s still there after delete (stat: %v)", p, err)
		}
	}
	if rec.State != "deleted" {
		t.Fatalf("record state %q, want deleted", rec.State)
	}
}

// newSweepVolume returns a fresh memfs with the scenario's setup applied.
func newSweepVolume(t *testing.T, sc sweepScenario) *memfs.FS {
	t.Helper()
	mem := memfs.New()
	if err := volume.MkdirAllSync(mem, sweepCluster); err != nil {
		t.Fatal(err)
	}
	sc.setup(t, mem)
	return mem
}

func saver(fsys volume.FS) func(*states.Record) error {
	return func(rec *states.Record) error { return states.Save(fsys, sweepCluster, rec) }
}

// loadOrInitial reloads a record from the volume; a missing one starts at
// the machine's initial state.
func loadOrInitial(t *testing.T, fsys volume.FS, def states.Definition, sc sweepScenario) *states.Record {
	t.Helper()
	rec, err := states.Load(fsys, sweepCluster, def.Kind, sc.object)
	if err != nil {
		t.Fatalf("load record: %v", err)
	}
	if rec == nil {
		rec = &states.Record{Kind: def.Kind, Object: sc.object, Desired: def.End, State: def.Initial}
	}
	if sc.restart != nil {
		sc.restart(rec)
	}
	return rec
}

// redrive drives rec to the end state on fsys, with no faults, in a bounded
// number of passes, reloading the record from the volume before each.
func redrive(t *testing.T, fsys volume.FS, def states.Definition, sc sweepScenario) (*states.Record, *run) {
	t.Helper()
	var lastErr error
	for pass := 0; pass < 3; pass++ {
		rec := loadOrInitial(t, fsys, def, sc)
		r := sc.bind(fsys)
		lastErr = states.Drive(context.Background(), def, rec, r.acts, saver(fsys), sweepNow)
		if lastErr == nil {
			saved, err := states.Load(fsys, sweepCluster, def.Kind, sc.object)
			if err != nil || saved == nil || saved.State != def.End || saved.LastError != "" {
				t.Fatalf("saved record after convergence = %+v, %v", saved, err)
			}
			return rec, r
		}
	}
	t.Fatalf("did not converge after 3 fault-free passes: %v", lastErr)
	return nil, nil
}

// TestCrashSweep crashes every machine at every mutating operation of its
// workload, before and after it is applied, and checks that a fresh process
// re-driving from what survived reaches the end state with its invariants.
func TestCrashSweep(t *testing.T) {
	total := 0
	for _, def := range states.Machines {
		sc, ok := sweepScenarios[def.Kind]
		if !ok {
			t.Errorf("machine %q has no crash-sweep scenario: add one to sweepScenarios", def.Kind)
			continue
		}
		t.Run(def.Kind, func(t *testing.T) {
			// Clean run: learn N and check the workload itself.
			mem := newSweepVolume(t, sc)
			clean := faultfs.New(mem, nil)
			rec := &states.Record{Kind: def.Kind, Object: sc.object, Desired: def.End}
			r := sc.bind(clean)
			if err := states.Drive(context.Background(), def, rec, r.acts, saver(clean), sweepNow); err != nil {
				t.Fatalf("clean run: %v", err)
			}
			sc.check(t, mem, rec, r)
			n := clean.MutatingOps()
			if n == 0 {
				t.Fatal("clean run made no mutating operations")
			}
			covered := 0
			for i := 0; i < n; i++ {
				for _, after := range []bool{false, true} {
					name := fmt.Sprintf("op%03d-before", i)
					if after {
						name = fmt.Sprintf("op%03d-after", i)
					}
					ok := t.Run(name, func(t *testing.T) {
						mem := newSweepVolume(t, sc)
						ffs := faultfs.New(mem, faultfs.CrashAtMutating(i, after))
						rec := &states.Record{Kind: def.Kind, Object: sc.object, Desired: def.End}
						r := sc.bind(ffs)
						err := states.Drive(context.Background(), def, rec, r.acts, saver(ffs), sweepNow)
						if !ffs.Crashed() {
							t.Fatalf("crash point not reached (drive: %v, %d mutating ops)", err, ffs.MutatingOps())
						}
						if err == nil {
							t.Fatalf("drive reported success although the volume crashed")
						}
						if !errors.Is(err, faultfs.ErrCrashed) {
							t.Logf("drive error does not wrap ErrCrashed: %v", err)
						}
						clone := mem.CrashClone()
						rec2, r2 := redrive(t, faultfs.New(clone, nil), def, sc)
						sc.check(t, clone, rec2, r2)
					})
					if ok {
						covered++
					}
				}
			}
			t.Logf("crash sweep %s: %d crash points (%d mutating ops x before/after)", def.Kind, covered, n)
			fmt.Printf("crash sweep %s: %d crash points covered\n", def.Kind, covered)
			total += covered
		})
	}
	t.Logf("crash sweep: %d crash points covered in total over %d machines", total, len(states.Machines))
	fmt.Printf("crash sweep total: %d crash points over %d machines\n", total, len(states.Machines))
}

// TestSweepScenariosMatchMachines keeps the registry honest both ways.
func TestSweepScenariosMatchMachines(t *testing.T) {
	kinds := map[string]bool{}
	for _, def := range states.Machines {
		if kinds[def.Kind] {
			t.Errorf("machine kind %q listed twice", def.Kind)
		}
		kinds[def.Kind] = true
		if _, ok := sweepScenarios[def.Kind]; !ok {
			t.Errorf("machine %q has no crash-sweep scenario", def.Kind)
		}
	}
	for k := range sweepScenarios {
		if !kinds[k] {
			t.Errorf("scenario %q names no machine in states.Machines", k)
		}
	}
}

var errPurge = errors.New("injected: directory not empty")

// TestTopicDeletePurgeTransientFailure: a purge that fails is recorded
// (attempts, last error) and converges once the fault is gone.
func TestTopicDeletePurgeTransientFailure(t *testing.T) {
	def := states.TopicDelete
	sc := sweepScenarios[def.Kind]
	trashGlob := path.Join(sweepData, states.TrashDir, "*")
	// Every purge pass tries the trash entry's Remove twice (the cheap try,
	// then again after emptying it), so f injected failures cost f/2 passes.
	for _, failures := range []int{2, 3, 4, 5} {
		t.Run(fmt.Sprintf("failures=%d", failures), func(t *testing.T) {
			mem := newSweepVolume(t, sc)
			ffs := faultfs.New(mem, faultfs.FailMatching(faultfs.OpRemove, trashGlob, errPurge, false, failures))
			rec := &states.Record{Kind: def.Kind, Object: sc.object, Desired: def.End}
			passes := 0
			for ; passes < 10; passes++ {
				r := sc.bind(ffs)
				err := states.Drive(context.Background(), def, rec, r.acts, saver(ffs), sweepNow)
				if err == nil {
					break
				}
				if !errors.Is(err, errPurge) {
					t.Fatalf("pass %d: %v, want the injected purge error", passes, err)
				}
				if rec.State != "renamed" || rec.Attempts != passes+1 || !strings.Contains(rec.LastError, "purge") {
					t.Fatalf("pass %d: record %+v, want state renamed, attempts %d, a purge error", passes, rec, passes+1)
				}
				saved, lerr := states.Load(mem, sweepCluster, def.Kind, sc.object)
				if lerr != nil || saved == nil || saved.Attempts != rec.Attempts || saved.LastError == "" || saved.State != "renamed" {
					t.Fatalf("pass %d: saved record %+v, %v: the failure must be visible on the volume", passes, saved, lerr)
				}
				// Reload as the reconciler would on its next pass.
				rec = saved
			}
			if passes != failures/2 {
				t.Fatalf("converged after %d failed passes with %d injected failures", passes, failures)
			}
			if rec.Attempts != passes || rec.LastError != "" {
				t.Fatalf("record after convergence %+v: attempts %d and no last error expected", rec, passes)
			}
			checkTopicDeleted(t, mem, rec, nil)
		})
	}
}

// TestTopicDeleteStrayFileInTrash: a file appearing inside the trash entry
// between attempts (a .nfsXXXX leftover released by another host) does not
// stop the re-driven purge.
func TestTopicDeleteStrayFileInTrash(t *testing.T) {
	def := states.TopicDelete
	sc := sweepScenarios[def.Kind]
	trash := states.TrashPath(sweepData, sweepTopic, sweepTopicID)
	for _, stray := range []string{".nfs000000000001", "0/.nfs000000000002", "late-segment.log", "new-subdir/x"} {
		t.Run(strings.ReplaceAll(stray, "/", "_"), func(t *testing.T) {
			mem := newSweepVolume(t, sc)
			ffs := faultfs.New(mem, faultfs.FailMatching(faultfs.OpRemove, trash, syscall.ENOTEMPTY, false, 0))
			rec := &states.Record{Kind: def.Kind, Object: sc.object, Desired: def.End}
			err := states.Drive(context.Background(), def, rec, sc.bind(ffs).acts, saver(ffs), sweepNow)
			if !errors.Is(err, syscall.ENOTEMPTY) || rec.State != "renamed" {
				t.Fatalf("first pass: %v in state %q, want ENOTEMPTY at renamed", err, rec.State)
			}
			p := path.Join(trash, stray)
			if err := mem.MkdirAll(path.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := volume.WriteFileAtomic(mem, p, []byte("held open elsewhere")); err != nil {
				t.Fatal(err)
			}
			// Re-drive twice from the volume: the second pass must be a no-op.
			for pass := 0; pass < 2; pass++ {
				rec, r := redrive(t, mem, def, sc)
				checkTopicDeleted(t, mem, rec, r)
			}
		})
	}
}

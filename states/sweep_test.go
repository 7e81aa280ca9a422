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

	"github.com/kaas-dev/kaas/engine/dataplane"
	"github.com/kaas-dev/kaas/states"
	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/crashtest"
	"github.com/kaas-dev/kaas/volume/faultfs"
	"github.com/kaas-dev/kaas/volume/memfs"
	"github.com/kaas-dev/kaas/volume/partlog"
)

const (
	sweepData    = "data"
	sweepCluster = "data/__cluster"
	sweepTopicID = "7b0e3c1a-0000-4000-8000-000000000001"
)

// sweepTopic is the topic every scenario works on; TestCrashSweepLongTopicName
// replaces it with a name of Kafka's maximum length.
var sweepTopic = "orders"

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
	// part is the partition recover opened (takeover), readable the
	// batches serve read back from its log, by base offset.
	part     *dataplane.Partition
	readable map[int64][]byte
}

// trial is what one crash point's workload keeps outside the volume: what
// was acknowledged, a previous owner still running, the partitions to
// close, and broken invariants seen inside actions.
type trial struct {
	acked    map[int64][]byte // batches acknowledged, by base offset
	wrote    map[int64][][]byte
	zombie   *partlog.Log // the previous owner, until the crash
	oldEpoch int32
	// lastAcked is the previous owner's last acknowledged batch, which its
	// producer re-sends to the new owner (takeover); newOwnerAcked counts
	// the new owner's producer's acknowledged batches.
	lastAcked     takeoverAck
	newOwnerAcked int32
	parts         []*dataplane.Partition
	problems      []string
	// coord is the coordinator-open workload's state (sweep_coordinator_test.go).
	coord *coordTrial
	// compact is the segment-compact workload's state (sweep_compact_test.go).
	compact *compactTrial
}

func newTrial() *trial {
	return &trial{acked: map[int64][]byte{}, wrote: map[int64][][]byte{}}
}

// closeAll closes every partition the trial opened. After a crash they
// fail: the process they belong to is gone.
func (tr *trial) closeAll() {
	for _, p := range tr.parts {
		_ = p.Close()
	}
	tr.parts = nil
	if tr.zombie != nil {
		_ = tr.zombie.Close()
		tr.zombie = nil
	}
	tr.coord.closeAll()
	tr.compact.closeAll()
}

// Host names: setup prepares the volume (the previous owner, for a
// takeover), the workload runs on "owner", and after the crash a fresh
// process on another host re-drives.
const (
	hostSetup     = "old-owner"
	hostOwner     = "owner"
	hostRestarted = "restarted"
)

// sweepScenario is one crash-sweep workload of a machine.
type sweepScenario struct {
	// variant names the workload when a machine has several.
	variant string
	object  string
	// setup prepares the volume durably before the workload (not counted),
	// on the setup host's view.
	setup func(t *testing.T, fsys volume.FS, tr *trial)
	// bind builds the actions on fsys for one drive of rec.
	bind func(fsys volume.FS, rec *states.Record, tr *trial) *run
	// check verifies the end state on the recovered volume.
	check func(t *testing.T, fsys volume.FS, rec *states.Record, r *run, tr *trial)
}

func (sc sweepScenario) name(def states.Definition) string {
	if sc.variant == "" {
		return def.Kind
	}
	return def.Kind + "/" + sc.variant
}

// sweepScenarios must hold at least one scenario for every machine in
// states.Machines; TestCrashSweep fails for a machine without one.
var sweepScenarios = map[string][]sweepScenario{
	states.PartitionOpen.Kind:   {partitionOpenScenario(), takeoverScenario()},
	states.TopicDelete.Kind:     {topicDeleteScenario()},
	states.CoordinatorOpen.Kind: {coordinatorOpenScenario()},
}

func partitionOpenScenario() sweepScenario {
	return sweepScenario{
		variant: "new",
		object:  states.PartitionObject(sweepTopic, 0),
		setup:   func(t *testing.T, fsys volume.FS, tr *trial) {},
		bind: func(fsys volume.FS, rec *states.Record, _ *trial) *run {
			r := &run{}
			r.acts = states.PartitionOpenActions(fsys, sweepData, sweepTopic, sweepTopicID, 0, rec, newPartitionHost{fsys, r})
			return r
		},
		check: func(t *testing.T, fsys volume.FS, rec *states.Record, r *run, _ *trial) {
			t.Helper()
			checkServing(t, fsys, rec, r)
		},
	}
}

// claimAboveFence is the real fence step (Fence.Claim) at the epoch the
// engine's assignment gives a new owner: one above the fence. A sweep's
// process holds no earlier claim (each drive is a fresh process), so the
// fence is never ours already.
func claimAboveFence(fsys volume.FS, fence states.Fence, rec *states.Record) error {
	found, err := partlog.ReadFence(fsys, fence.Dir)
	if err != nil {
		return err
	}
	if _, err := fence.Claim(fsys, max(found, 0)+1, false, rec); err != nil {
		return err
	}
	rec.Owner = hostOwner
	return nil
}

// newPartitionHost is the partition-open host of the "new" scenario: the
// real fence step; recover is the engine's (dataplane.Open at the fenced
// epoch), then closes the partition; serve checks that it was recovered.
type newPartitionHost struct {
	fsys volume.FS
	r    *run
}

func (h newPartitionHost) Fence(ctx context.Context, rec *states.Record) error {
	return claimAboveFence(h.fsys, states.PartitionFence(sweepData, sweepTopic, 0), rec)
}

func (h newPartitionHost) Recover(ctx context.Context, rec *states.Record) error {
	dir := states.PartitionDir(sweepData, sweepTopic, 0)
	// The fence holds the epoch the fence step claimed: nobody else
	// writes it in this scenario.
	epoch, err := partlog.ReadFence(h.fsys, dir)
	if err != nil {
		return err
	}
	if epoch < 1 || epoch != rec.Epoch {
		return fmt.Errorf("recover at epoch %d with the fence at %d: the fence step did not claim it", rec.Epoch, epoch)
	}
	p, err := recoverPartition(h.fsys, rec)
	if err != nil {
		return err
	}
	if err := p.Close(); err != nil {
		return err
	}
	h.r.recovered, h.r.epoch = true, epoch
	return nil
}

func (h newPartitionHost) Serve(ctx context.Context, rec *states.Record) error {
	if !h.r.recovered {
		return errors.New("serve without a recovered log")
	}
	h.r.served = true
	return nil
}

// checkServing checks partition-open's end state: directory, stamp, fence
// at the epoch the final drive recovered with, record serving.
func checkServing(t *testing.T, fsys volume.FS, rec *states.Record, r *run) {
	t.Helper()
	dir := states.PartitionDir(sweepData, sweepTopic, 0)
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
}

func desiredFile() string { return path.Join(sweepCluster, "topics", sweepTopic+".json") }

// deleteHost is the topic-delete host of the sweeps: no broker holds the
// topic open, and forget removes the desired-state file, idempotently.
type deleteHost struct{ fsys volume.FS }

func (deleteHost) Release(ctx context.Context) error { return nil }

func (h deleteHost) Forget(ctx context.Context) error {
	p := desiredFile()
	if err := h.fsys.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return h.fsys.SyncDir(path.Dir(p))
}

// setupTopic makes a durable topic directory with a stamp, two partition
// logs holding data, and a desired-state file.
func setupTopic(t *testing.T, fsys volume.FS, _ *trial) {
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
		bind: func(fsys volume.FS, _ *states.Record, _ *trial) *run {
			return &run{acts: states.TopicDeleteActions(fsys, sweepData, sweepTopic, sweepTopicID, deleteHost{fsys})}
		},
		check: func(t *testing.T, fsys volume.FS, rec *states.Record, _ *run, _ *trial) {
			t.Helper()
			checkTopicDeleted(t, fsys, rec)
		},
	}
}

func checkTopicDeleted(t *testing.T, fsys volume.FS, rec *states.Record) {
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

// newSweepWorld returns a fresh world of sub with the scenario's setup
// applied on the setup host.
func newSweepWorld(t *testing.T, sub substrate, sc sweepScenario) (world, *trial) {
	t.Helper()
	w := sub.Fresh()
	fsys := w.Host(hostSetup)
	if err := volume.MkdirAllSync(fsys, sweepCluster); err != nil {
		t.Fatal(err)
	}
	tr := newTrial()
	sc.setup(t, fsys, tr)
	return w, tr
}

// newSweepVolume is newSweepWorld on a plain memfs, for the tests below
// that inject other faults.
func newSweepVolume(t *testing.T, sc sweepScenario) *memfs.FS {
	t.Helper()
	w, _ := newSweepWorld(t, substrates()[0], sc)
	return w.(crashtest.MemWorld).Mem
}

func saver(fsys volume.FS) func(*states.Record) error {
	return func(rec *states.Record) error { return states.Save(fsys, sweepCluster, rec) }
}

// loadOrInitial reloads a record from the volume, as a fresh process
// would: a missing one starts at the machine's initial state, and a
// persisted state means what the machine's resume rules say to a process
// that holds no claim yet (def.Resume, as the engine calls it).
func loadOrInitial(t *testing.T, fsys volume.FS, def states.Definition, sc sweepScenario) *states.Record {
	t.Helper()
	rec, err := states.Load(fsys, sweepCluster, def.Kind, sc.object)
	if err != nil {
		t.Fatalf("load record: %v", err)
	}
	if rec == nil {
		rec = &states.Record{Kind: def.Kind, Object: sc.object, Desired: def.End, State: def.Initial}
	}
	rec.State = def.Resume(rec.State, false)
	return rec
}

// redrive drives the record on fsys to the end state, with no faults, in a
// bounded number of passes, reloading it from the volume before each.
func redrive(t *testing.T, fsys volume.FS, def states.Definition, sc sweepScenario, tr *trial) (*states.Record, *run) {
	t.Helper()
	var lastErr error
	for pass := 0; pass < 3; pass++ {
		rec := loadOrInitial(t, fsys, def, sc)
		r := sc.bind(fsys, rec, tr)
		lastErr = states.Drive(context.Background(), def, rec, r.acts, saver(fsys), sweepNow)
		if lastErr == nil {
			saved, err := states.Load(fsys, sweepCluster, def.Kind, sc.object)
			if err != nil || saved == nil || saved.State != def.End || saved.LastError != "" {
				t.Fatalf("saved record after convergence = %+v, %v", saved, err)
			}
			return rec, r
		}
		t.Logf("fault-free pass %d: %v", pass, lastErr)
	}
	t.Fatalf("did not converge after 3 fault-free passes: %v", lastErr)
	return nil, nil
}

// sweepOne runs one scenario's crash sweep on one substrate and returns the
// number of crash points covered.
func sweepOne(t *testing.T, def states.Definition, sc sweepScenario, sub substrate) int {
	t.Helper()
	// Clean run: learn N and check the workload itself.
	w, tr := newSweepWorld(t, sub, sc)
	clean := faultfs.New(w.Host(hostOwner), nil)
	rec := loadOrInitial(t, clean, def, sc)
	r := sc.bind(clean, rec, tr)
	err := states.Drive(context.Background(), def, rec, r.acts, saver(clean), sweepNow)
	tr.closeAll()
	if err != nil {
		t.Fatalf("clean run: %v", err)
	}
	sc.check(t, w.Host(hostOwner), rec, r, tr)
	checkProblems(t, tr)
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
				w, tr := newSweepWorld(t, sub, sc)
				defer tr.closeAll()
				ffs := faultfs.New(w.Host(hostOwner), faultfs.CrashAtMutating(i, after))
				rec := loadOrInitial(t, w.Host(hostOwner), def, sc)
				r := sc.bind(ffs, rec, tr)
				err := states.Drive(context.Background(), def, rec, r.acts, saver(ffs), sweepNow)
				if !ffs.Crashed() {
					t.Fatalf("crash point not reached (drive: %v, %d mutating ops)", err, ffs.MutatingOps())
				}
				if err == nil {
					t.Fatalf("drive reported success although the volume crashed")
				}
				// Everything running before the crash is gone with it.
				restarted := w.Crash()
				tr.closeAll()
				fsys := restarted.Host(hostRestarted)
				rec2, r2 := redrive(t, fsys, def, sc, tr)
				tr.closeAll()
				sc.check(t, fsys, rec2, r2, tr)
				checkProblems(t, tr)
			})
			if ok {
				covered++
			}
		}
	}
	t.Logf("crash sweep %s on %s: %d crash points (%d mutating ops x before/after)", sc.name(def), sub.Name, covered, n)
	return covered
}

func checkProblems(t *testing.T, tr *trial) {
	t.Helper()
	for _, p := range tr.problems {
		t.Error(p)
	}
}

// TestCrashSweep crashes every machine at every mutating operation of each
// of its workloads, before and after it is applied, on every substrate, and
// checks that a fresh process re-driving from what survived reaches the end
// state with its invariants.
func TestCrashSweep(t *testing.T) {
	total := map[string]int{}
	subs := substrates()
	for _, def := range states.Machines {
		scs := sweepScenarios[def.Kind]
		if len(scs) == 0 {
			t.Errorf("machine %q has no crash-sweep scenario: add one to sweepScenarios", def.Kind)
			continue
		}
		for _, sub := range subs {
			covered := 0
			for _, sc := range scs {
				t.Run(sub.Name+"/"+sc.name(def), func(t *testing.T) {
					covered += sweepOne(t, def, sc, sub)
				})
			}
			total[sub.Name] += covered
			fmt.Printf("crash sweep %s: %d crash points (%s)\n", def.Kind, covered, sub.Name)
		}
	}
	for _, sub := range subs {
		fmt.Printf("crash sweep total: %d crash points over %d machines (%s)\n", total[sub.Name], len(states.Machines), sub.Name)
	}
}

// TestSweepScenariosMatchMachines keeps the registry honest both ways.
func TestSweepScenariosMatchMachines(t *testing.T) {
	kinds := map[string]bool{}
	for _, def := range states.Machines {
		if kinds[def.Kind] {
			t.Errorf("machine kind %q listed twice", def.Kind)
		}
		kinds[def.Kind] = true
		if len(sweepScenarios[def.Kind]) == 0 {
			t.Errorf("machine %q has no crash-sweep scenario", def.Kind)
		}
		seen := map[string]bool{}
		for _, sc := range sweepScenarios[def.Kind] {
			if seen[sc.variant] {
				t.Errorf("machine %q: scenario variant %q listed twice", def.Kind, sc.variant)
			}
			seen[sc.variant] = true
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
	sc := sweepScenarios[def.Kind][0]
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
				r := sc.bind(ffs, rec, newTrial())
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
			checkTopicDeleted(t, mem, rec)
		})
	}
}

// TestTopicDeleteStrayFileInTrash: a file appearing inside the trash entry
// between attempts (a .nfsXXXX leftover released by another host) does not
// stop the re-driven purge.
func TestTopicDeleteStrayFileInTrash(t *testing.T) {
	def := states.TopicDelete
	sc := sweepScenarios[def.Kind][0]
	trash := states.TrashPath(sweepData, sweepTopic, sweepTopicID)
	for _, stray := range []string{".nfs000000000001", "0/.nfs000000000002", "late-segment.log", "new-subdir/x"} {
		t.Run(strings.ReplaceAll(stray, "/", "_"), func(t *testing.T) {
			mem := newSweepVolume(t, sc)
			ffs := faultfs.New(mem, faultfs.FailMatching(faultfs.OpRemove, trash, syscall.ENOTEMPTY, false, 0))
			rec := &states.Record{Kind: def.Kind, Object: sc.object, Desired: def.End}
			err := states.Drive(context.Background(), def, rec, sc.bind(ffs, rec, newTrial()).acts, saver(ffs), sweepNow)
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
				rec, _ := redrive(t, mem, def, sc, newTrial())
				checkTopicDeleted(t, mem, rec)
			}
		})
	}
}

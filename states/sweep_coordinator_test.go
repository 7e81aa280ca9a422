package states_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"testing"

	"github.com/go-logr/logr"

	"github.com/kaas-dev/kaas/engine/groupstore"
	"github.com/kaas-dev/kaas/states"
	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/partlog"
)

// The coordinator-open workload: shard coordShard, whose previous owner at
// coordOldEpoch is still running when the new owner takes over.
const (
	coordShard    = 5
	coordOldEpoch = 1
	coordLateKey  = "zombie-late"
	absent        = "\x00absent"
)

func coordDir() string    { return states.ShardDir(sweepCluster, coordShard) }
func coordObject() string { return states.PartitionObject(states.GroupsDir, coordShard) }
func coordPut(k, v string) groupstore.Record {
	return groupstore.Record{Key: []byte(k), Value: []byte(v)}
}
func coordTomb(k string) groupstore.Record { return groupstore.Record{Key: []byte(k)} }

// coordTrial is what the coordinator-open workload keeps outside the
// volume for one crash point.
type coordTrial struct {
	zombie *groupstore.Store   // the previous owner, until the crash
	stores []*groupstore.Store // stores the workload opened
	// allowed holds, per key, the values the new owner's table may show:
	// the acknowledged one (or absent), plus what an unacknowledged write
	// made before the fence may have left.
	allowed map[string][]string
	// Set by the serve step of the latest drive: the table the owner left
	// and the log end its final snapshot covers.
	final  map[string]string
	logEnd int64
}

func (c *coordTrial) closeAll() {
	if c == nil {
		return
	}
	for _, s := range c.stores {
		_ = s.Close()
	}
	c.stores = nil
	if c.zombie != nil {
		_ = c.zombie.Close()
		c.zombie = nil
	}
}

func openShard(fsys volume.FS, epoch int32, previous []int32) (*groupstore.Store, groupstore.LoadStats, error) {
	return groupstore.Open(groupstore.Config{FS: fsys, Dir: coordDir(), Index: coordShard, Epoch: epoch,
		PreviousEpochs: previous, Now: sweepNow, Logger: logr.Discard()})
}

func readTable(s *groupstore.Store) (map[string]string, error) {
	out := map[string]string{}
	err := s.Records(func(r groupstore.Record) error {
		out[string(r.Key)] = string(r.Value)
		return nil
	})
	return out, err
}

// applyRecs applies recs to a model table.
func applyRecs(m map[string]string, recs ...groupstore.Record) {
	for _, r := range recs {
		if r.Value == nil {
			delete(m, string(r.Key))
		} else {
			m[string(r.Key)] = string(r.Value)
		}
	}
}

func ackRecs(s *groupstore.Store, recs ...groupstore.Record) error {
	_, wait, err := s.Append(recs)
	if err != nil {
		return err
	}
	return wait(context.Background())
}

// setupPreviousCoordinator leaves the shard as its owner at coordOldEpoch
// does while still running: its record says serving; acknowledged batches
// with overwrites, tombstones and a key written again after its tombstone,
// a snapshot between them; one more batch appended but never waited for.
func setupPreviousCoordinator(t *testing.T, fsys volume.FS, tr *trial) {
	t.Helper()
	dir := coordDir()
	if err := volume.MkdirAllSync(fsys, dir); err != nil {
		t.Fatal(err)
	}
	rec := &states.Record{Kind: states.CoordinatorOpen.Kind, Object: coordObject(), Desired: states.CoordinatorOpen.End,
		State: states.CoordinatorOpen.End, Since: sweepNow(), Owner: hostSetup, Epoch: coordOldEpoch}
	if err := states.Save(fsys, sweepCluster, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := partlog.ClaimFence(fsys, dir, coordOldEpoch); err != nil {
		t.Fatal(err)
	}
	s, _, err := openShard(fsys, coordOldEpoch, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &coordTrial{zombie: s}
	tr.coord = c
	acked := map[string]string{}
	batches := [][]groupstore.Record{
		{coordPut("g1", "meta-1"), coordPut("g1/t/0", "10"), coordPut("g1/t/1", "11"), coordPut("g2", "meta-2")},
		{coordPut("g1/t/0", "20"), coordTomb("g1/t/1"), coordPut("g3", "meta-3")},
		nil, // snapshot here
		{coordTomb("g2"), coordPut("g1/t/1", "31"), coordPut("g1", "meta-1b")},
	}
	for _, b := range batches {
		if b == nil {
			if err := s.Snapshot(context.Background()); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := ackRecs(s, b...); err != nil {
			t.Fatal(err)
		}
		applyRecs(acked, b...)
	}
	unacked := []groupstore.Record{coordPut("g1/t/0", "99-unacked"), coordPut("g4", "meta-4-unacked"), coordTomb("g3")}
	if _, _, err := s.Append(unacked); err != nil {
		t.Fatal(err)
	}
	c.allowed = map[string][]string{}
	for _, k := range []string{"g1", "g1/t/0", "g1/t/1", "g2", "g3", "g4", coordLateKey} {
		v, ok := acked[k]
		if !ok {
			v = absent
		}
		c.allowed[k] = []string{v}
	}
	for _, r := range unacked {
		v := absent
		if r.Value != nil {
			v = string(r.Value)
		}
		c.allowed[string(r.Key)] = append(c.allowed[string(r.Key)], v)
	}
}

// coordinatorOpenScenario is the takeover of a coordinator shard: the new
// owner fences the shard (Fence.Claim), loads it (groupstore.Open)
// and serves. The previous owner, still running, tries to write and
// snapshot after the fence. A restarted owner is a new incarnation with a
// new leader epoch, as the controller gives it.
func coordinatorOpenScenario() sweepScenario {
	return sweepScenario{
		variant: "takeover",
		object:  coordObject(),
		setup:   setupPreviousCoordinator,
		bind: func(fsys volume.FS, rec *states.Record, tr *trial) *run {
			r := &run{}
			r.acts = states.CoordinatorOpenActions(fsys, sweepCluster, coordShard, rec, &coordinatorHost{fsys: fsys, r: r, tr: tr})
			return r
		},
		check: checkCoordinatorTakeover,
	}
}

// coordinatorHost is the coordinator-open host of the takeover scenario:
// the real fence step; load opens the store at the fenced epoch and checks
// its table, after which the previous owner, still running, tries to write
// and snapshot (a zombie). It keeps the store it loaded for serve.
type coordinatorHost struct {
	fsys      volume.FS
	r         *run
	tr        *trial
	store     *groupstore.Store
	loaded    map[string]string
	loadedEnd int64
}

func (h *coordinatorHost) Fence(ctx context.Context, rec *states.Record) error {
	return claimAboveFence(h.fsys, states.ShardFence(sweepCluster, coordShard), rec)
}

func (h *coordinatorHost) Load(ctx context.Context, rec *states.Record) error {
	c := h.tr.coord
	f, err := partlog.ReadFence(h.fsys, coordDir())
	if err != nil {
		return err
	}
	if f != rec.Epoch || f <= coordOldEpoch {
		return fmt.Errorf("load at epoch %d with the fence at %d", rec.Epoch, f)
	}
	var previous []int32
	if rec.FencedFrom != nil {
		previous = append(previous, *rec.FencedFrom)
	}
	s, st, err := openShard(h.fsys, rec.Epoch, previous)
	if err != nil {
		return err
	}
	c.stores = append(c.stores, s)
	h.store = s
	tbl, err := readTable(s)
	if err != nil {
		return err
	}
	checkAllowed(h.tr, tbl)
	if z := c.zombie; z != nil {
		// The previous owner has not noticed yet.
		_, wait, err := z.Append([]groupstore.Record{coordPut(coordLateKey, "x"), coordTomb("g1")})
		if err == nil {
			err = wait(ctx)
		}
		switch {
		case err == nil:
			h.tr.problems = append(h.tr.problems, "the previous owner acknowledged a write after the takeover's fence")
		case !errors.Is(err, partlog.ErrFenced):
			h.tr.problems = append(h.tr.problems, fmt.Sprintf("previous owner's append after the fence: %v, want ErrFenced", err))
		}
		if err := z.Snapshot(ctx); err == nil {
			h.tr.problems = append(h.tr.problems, "the previous owner wrote a snapshot after the takeover's fence")
		}
	}
	h.loaded, h.loadedEnd = tbl, st.LogEnd
	h.r.recovered, h.r.epoch = true, rec.Epoch
	return nil
}

// Serve is a no-op for the machine. The workload then runs the owner's
// term inside the drive, so that the sweep crashes its volume operations
// too: one acknowledged batch, and Close with its final snapshot.
func (h *coordinatorHost) Serve(ctx context.Context, rec *states.Record) error {
	c := h.tr.coord
	if h.store == nil {
		return errors.New("serve without a loaded store")
	}
	owner := []groupstore.Record{coordPut("g1", "meta-1-owner"), coordPut("g7", "meta-7")}
	for _, r := range owner {
		k := string(r.Key)
		if _, ok := c.allowed[k]; !ok {
			c.allowed[k] = []string{absent}
		}
		if !slices.Contains(c.allowed[k], string(r.Value)) {
			c.allowed[k] = append(c.allowed[k], string(r.Value))
		}
	}
	if err := ackRecs(h.store, owner...); err != nil {
		return err
	}
	for _, r := range owner {
		c.allowed[string(r.Key)] = []string{string(r.Value)}
	}
	end := h.store.LogEnd()
	if err := h.store.Close(); err != nil {
		return err
	}
	applyRecs(h.loaded, owner...)
	c.final, c.logEnd = h.loaded, end
	if end <= h.loadedEnd {
		return fmt.Errorf("log end %d after an append, %d before", end, h.loadedEnd)
	}
	h.r.served = true
	return nil
}

// checkAllowed checks a table a new owner loaded: every acknowledged
// record's latest value, nothing written after the fence, and an
// unacknowledged write from before it there or not.
func checkAllowed(tr *trial, tbl map[string]string) {
	c := tr.coord
	keys := slices.Sorted(maps.Keys(c.allowed))
	for k := range tbl {
		if _, ok := c.allowed[k]; !ok {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		got, ok := tbl[k]
		if !ok {
			got = absent
		}
		if !slices.Contains(c.allowed[k], got) {
			tr.problems = append(tr.problems, fmt.Sprintf("key %q is %q in a loaded table, want one of %q", k, got, c.allowed[k]))
		}
	}
}

func checkCoordinatorTakeover(t *testing.T, fsys volume.FS, rec *states.Record, r *run, tr *trial) {
	t.Helper()
	c := tr.coord
	dir := coordDir()
	if st, err := fsys.Stat(dir); err != nil || !st.IsDir() {
		t.Fatalf("shard dir %s: %v", dir, err)
	}
	if rec.State != "serving" || !r.recovered || !r.served {
		t.Fatalf("record %q, loaded %v, served %v: want serving after a load and a serve", rec.State, r.recovered, r.served)
	}
	if fence, err := partlog.ReadFence(fsys, dir); err != nil || fence != r.epoch || r.epoch <= coordOldEpoch {
		t.Fatalf("fence = %d, %v; want the loaded epoch %d, above %d", fence, err, r.epoch, coordOldEpoch)
	}
	// The converged owner closed at the end of serve (a final snapshot at
	// its log end). What every load found is checked in load
	// (checkAllowed); from here the owner's final table is the truth.
	checkAllowed(tr, c.final)
	m := maps.Clone(c.final)
	opens := 0
	next := func(want int64, wantReplayed int) *groupstore.Store {
		t.Helper()
		fence, err := partlog.ReadFence(fsys, dir)
		if err != nil {
			t.Fatal(err)
		}
		s, st, err := openShard(fsys, fence+1, nil)
		if err != nil {
			t.Fatalf("open %d at epoch %d: %v", opens, fence+1, err)
		}
		opens++
		tbl, err := readTable(s)
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(tbl, m) {
			t.Fatalf("open %d at epoch %d: table %v, want %v", opens, fence+1, tbl, m)
		}
		if st.SnapshotOffset != want || (wantReplayed >= 0 && st.ReplayedRecords != wantReplayed) {
			t.Fatalf("open %d at epoch %d: loaded snapshot %d and replayed %d, want %d and %d",
				opens, fence+1, st.SnapshotOffset, st.ReplayedRecords, want, wantReplayed)
		}
		return s
	}
	ack := func(s *groupstore.Store, recs ...groupstore.Record) {
		t.Helper()
		if err := ackRecs(s, recs...); err != nil {
			t.Fatal(err)
		}
		applyRecs(m, recs...)
	}
	// A zombie snapshot of the previous owner's epoch, naming an offset
	// past where the takeover sealed that epoch, and a table that would
	// show if it were used.
	zombieSnapshot := func(offset int64) string {
		t.Helper()
		name := path.Join(dir, groupstore.SnapshotName(offset, coordOldEpoch))
		b := groupstore.EncodeSnapshot(coordShard, offset, coordOldEpoch,
			[]groupstore.Record{coordPut("g1", "zombie-meta"), coordPut(coordLateKey, "x")})
		if err := volume.WriteFileAtomic(fsys, name, b); err != nil {
			t.Fatal(err)
		}
		return name
	}
	gone := func(name string) {
		t.Helper()
		if _, err := volume.ReadFile(fsys, name); err == nil {
			t.Fatalf("rejected zombie snapshot %s is still there", name)
		}
	}

	sa := next(c.logEnd, 0) // the converged owner's final snapshot
	ack(sa, coordPut("g1/t/0", "a1"), coordPut("g5", "meta-5"))
	ack(sa, coordTomb("g5"))
	endA := sa.LogEnd()
	// Fewer: the zombie snapshot lies beyond the log end.
	z1 := zombieSnapshot(endA + 5)
	if err := sa.Close(); err != nil {
		t.Fatal(err)
	}
	sb := next(endA, 0)
	gone(z1)
	// More: the log has grown past the zombie snapshot's offset, so only
	// the epoch rule rejects it. sb is taken over while live, so it leaves
	// no final snapshot that would hide the zombie's.
	oz := sb.LogEnd() + 1
	for i := 0; i < 3; i++ {
		ack(sb, coordPut("g1/t/1", fmt.Sprintf("b%d", i)))
	}
	z2 := zombieSnapshot(oz)
	if oz >= sb.LogEnd() {
		t.Fatalf("zombie snapshot at %d is not below the log end %d", oz, sb.LogEnd())
	}
	sc := next(endA, 3)
	gone(z2)
	if err := sb.Close(); !errors.Is(err, partlog.ErrFenced) {
		t.Fatalf("close of the owner taken over: %v, want ErrFenced", err)
	}
	// The last owner appends, closes with a final snapshot, and the next
	// open loads exactly that.
	ack(sc, coordPut("g6", "meta-6"), coordTomb("g1/t/0"))
	endC := sc.LogEnd()
	if err := sc.Close(); err != nil {
		t.Fatal(err)
	}
	sd := next(endC, 0)
	if err := sd.Close(); err != nil {
		t.Fatal(err)
	}
}

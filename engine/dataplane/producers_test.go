package dataplane

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"path"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/memfs"
	"github.com/kaas-dev/kaas/volume/partlog"
	"github.com/kaas-dev/kaas/volume/partlog/partlogtest"
)

func header(t *testing.T, n int, pid int64, epoch int16, seq int32) partlog.BatchHeader {
	t.Helper()
	h, err := partlog.ParseBatchHeader(partlogtest.MakeBatch(n, 8, 1000, pid, epoch, seq))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// pstep is one batch offered to producer state: n records from (pid, epoch,
// seq). want is "append", "dup" (with the original offsets dupBase and
// dupLast) or an error.
type pstep struct {
	pid     int64
	epoch   int16
	seq     int32
	n       int
	want    string
	wantErr error
	dupBase int64
}

func TestProducerState(t *testing.T) {
	const maxSeq = math.MaxInt32
	cases := []struct {
		name  string
		steps []pstep
	}{
		{"in order", []pstep{{1, 0, 0, 3, "append", nil, 0}, {1, 0, 3, 2, "append", nil, 0}, {1, 0, 5, 1, "append", nil, 0}}},
		{"duplicate returns original offsets", []pstep{
			{1, 0, 0, 3, "append", nil, 0}, {1, 0, 3, 2, "append", nil, 0},
			{1, 0, 0, 3, "dup", nil, 0}, {1, 0, 3, 2, "dup", nil, 3}, {1, 0, 5, 1, "append", nil, 0},
		}},
		{"duplicates per producer", []pstep{
			{1, 0, 0, 2, "append", nil, 0}, {2, 0, 0, 2, "append", nil, 0}, {1, 0, 2, 2, "append", nil, 0},
			{2, 0, 0, 2, "dup", nil, 2}, {1, 0, 2, 2, "dup", nil, 4},
		}},
		{"gap", []pstep{{1, 0, 0, 3, "append", nil, 0}, {1, 0, 4, 1, "", ErrOutOfOrderSequence, 0}, {1, 0, 3, 1, "append", nil, 0}}},
		{"overlap that is not a retry", []pstep{{1, 0, 0, 3, "append", nil, 0}, {1, 0, 1, 3, "", ErrOutOfOrderSequence, 0}}},
		{"old epoch", []pstep{{1, 3, 0, 1, "append", nil, 0}, {1, 2, 1, 1, "", ErrInvalidProducerEpoch, 0}, {1, 2, 0, 1, "", ErrInvalidProducerEpoch, 0}}},
		{"new epoch must start at 0", []pstep{
			{1, 0, 0, 3, "append", nil, 0}, {1, 1, 3, 1, "", ErrOutOfOrderSequence, 0},
			{1, 1, 0, 1, "append", nil, 0}, {1, 0, 3, 1, "", ErrInvalidProducerEpoch, 0}, {1, 1, 1, 1, "append", nil, 0},
		}},
		{"new epoch forgets the old batches", []pstep{{1, 0, 0, 1, "append", nil, 0}, {1, 1, 0, 1, "append", nil, 0}, {1, 1, 0, 1, "dup", nil, 1}}},
		{"unknown producer starts anywhere", []pstep{{9, 4, 1234, 2, "append", nil, 0}, {9, 4, 1236, 1, "append", nil, 0}}},
		{"non-idempotent batches are never deduplicated", []pstep{{-1, -1, -1, 2, "append", nil, 0}, {-1, -1, -1, 2, "append", nil, 0}}},
		{"sequence wraps at MaxInt32", []pstep{
			{1, 0, maxSeq - 1, 1, "append", nil, 0}, {1, 0, maxSeq, 3, "append", nil, 0}, // maxSeq, 0, 1
			{1, 0, maxSeq, 3, "dup", nil, 1}, {1, 0, 2, 1, "append", nil, 0},
		}},
		{"sequence wrap gap", []pstep{{1, 0, maxSeq, 1, "append", nil, 0}, {1, 0, 1, 1, "", ErrOutOfOrderSequence, 0}, {1, 0, 0, 1, "append", nil, 0}}},
		{"keeps the last five batches", []pstep{
			{1, 0, 0, 1, "append", nil, 0}, {1, 0, 1, 1, "append", nil, 0}, {1, 0, 2, 1, "append", nil, 0},
			{1, 0, 3, 1, "append", nil, 0}, {1, 0, 4, 1, "append", nil, 0}, {1, 0, 5, 1, "append", nil, 0},
			{1, 0, 1, 1, "dup", nil, 1}, {1, 0, 5, 1, "dup", nil, 5},
			// The sixth-newest is forgotten: a retry of it is refused, never appended twice.
			{1, 0, 0, 1, "", ErrOutOfOrderSequence, 0},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ps := newProducerState()
			var next int64
			for i, s := range c.steps {
				h := header(t, s.n, s.pid, s.epoch, s.seq)
				dup, isDup, err := ps.check(h)
				switch {
				case s.wantErr != nil:
					if !errors.Is(err, s.wantErr) {
						t.Fatalf("step %d: err %v, want %v", i, err, s.wantErr)
					}
					continue
				case err != nil:
					t.Fatalf("step %d: unexpected %v", i, err)
				case s.want == "dup":
					if !isDup || dup.BaseOffset != s.dupBase || dup.LastOffset != s.dupBase+int64(s.n-1) {
						t.Fatalf("step %d: dup=%v %+v, want a duplicate of [%d,%d]", i, isDup, dup, s.dupBase, s.dupBase+int64(s.n-1))
					}
					continue
				case isDup:
					t.Fatalf("step %d: treated as a duplicate of %+v, want an append", i, dup)
				}
				ps.record(h, next, next+int64(s.n-1))
				next += int64(s.n)
			}
			for pid, e := range ps.m {
				if len(e.Batches) > keepBatches {
					t.Fatalf("producer %d keeps %d batches", pid, len(e.Batches))
				}
			}
		})
	}
}

// TestLoadProducerState rebuilds state from the newest usable snapshot plus
// a replay of the log after it, and matches state built by recording every
// append. Unusable snapshots are passed over: one of the opener's own epoch
// ahead of the log (removed), a torn one, one of a future epoch (left
// alone), and one named in the first format (ignored, and removed by the
// next snapshot's retention).
func TestLoadProducerState(t *testing.T) {
	fsys := memfs.New()
	dir := "p/0"
	if err := volume.MkdirAllSync(fsys, dir); err != nil {
		t.Fatal(err)
	}
	now := func() time.Time { return time.Unix(1700000000, 0) }
	lg, err := partlog.Open(fsys, dir, partlog.Config{Epoch: 1, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	want := newProducerState()
	seqs := map[int64]int32{}
	appendN := func(k int) {
		for i := 0; i < k; i++ {
			pid := int64(100 + i%3)
			b := partlogtest.MakeBatch(2, 10, 1000, pid, 0, seqs[pid])
			h, _ := partlog.ParseBatchHeader(b)
			ar, err := lg.Append(b)
			if err != nil {
				t.Fatal(err)
			}
			want.record(h, ar.BaseOffset, ar.LastOffset)
			seqs[pid] += 2
		}
	}
	appendN(10)
	mid := lg.LogEndOffset()
	// A snapshot of the state at mid.
	if err := writeSnapshot(fsys, dir, want.encodeSnapshot(mid, 1), mid, 1); err != nil {
		t.Fatal(err)
	}
	appendN(11)
	if err := lg.Sync(t.Context(), lg.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	end := lg.LogEndOffset()
	ahead := end + 100
	if err := writeSnapshot(fsys, dir, newProducerState().encodeSnapshot(ahead, 1), ahead, 1); err != nil {
		t.Fatal(err)
	}
	torn := end - 2
	full := newProducerState().encodeSnapshot(torn, 1)
	if err := volume.WriteFileAtomic(fsys, path.Join(dir, snapshotName(torn, 1)), full[:len(full)-9]); err != nil {
		t.Fatal(err)
	}
	if err := volume.WriteFileAtomic(fsys, path.Join(dir, snapshotName(end, 5)), newProducerState().encodeSnapshot(end, 5)); err != nil {
		t.Fatal(err)
	}
	legacy := fmt.Sprintf("%020d.producers", end)
	if err := volume.WriteFileAtomic(fsys, path.Join(dir, legacy), []byte(`{"offset":`+fmt.Sprint(end)+`,"producers":{}}`)); err != nil {
		t.Fatal(err)
	}
	got, replayed, err := loadProducerState(fsys, dir, lg, DefaultMaxProducersPerPartition, nil)
	if err != nil {
		t.Fatal(err)
	}
	if replayed != 11 {
		t.Fatalf("replayed %d batches, want the 11 after the snapshot at %d", replayed, mid)
	}
	if !reflect.DeepEqual(dump(got), dump(want)) {
		t.Fatalf("rebuilt state differs:\n got %v\nwant %v", dump(got), dump(want))
	}
	names := dirNames(t, fsys, dir, snapshotSuffix)
	if slices.Contains(names, snapshotName(ahead, 1)) {
		t.Fatalf("the own-epoch snapshot beyond the log end was not removed: %v", names)
	}
	if !slices.Contains(names, snapshotName(end, 5)) || !slices.Contains(names, legacy) {
		t.Fatalf("a future epoch's snapshot and a first-format one are left alone at load: %v", names)
	}
	// The next snapshot's retention removes the first-format one.
	if err := writeSnapshot(fsys, dir, got.encodeSnapshot(end, 1), end, 1); err != nil {
		t.Fatal(err)
	}
	if names := dirNames(t, fsys, dir, snapshotSuffix); slices.Contains(names, legacy) {
		t.Fatalf("first-format snapshot survived retention: %v", names)
	}
	if err := lg.Close(); err != nil {
		t.Fatal(err)
	}
}

// dirNames lists the names in dir with the suffix.
func dirNames(t testing.TB, fsys volume.FS, dir, suffix string) []string {
	t.Helper()
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), suffix) {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestSnapshotNames: names round-trip; temp files, first-format names and
// near misses are not snapshots.
func TestSnapshotNames(t *testing.T) {
	for _, c := range []struct {
		name   string
		ok     bool
		off    int64
		epoch  int32
		legacy bool
	}{
		{snapshotName(0, 0), true, 0, 0, false},
		{snapshotName(123456, 7), true, 123456, 7, false},
		{"00000000000000000005-e01.producers", false, 0, 0, false},
		{"5-e1.producers", false, 0, 0, false},
		{"." + snapshotName(5, 1) + ".tmp-0123", false, 0, 0, false},
		{"00000000000000000005.producers", false, 0, 0, true},
		{"00000000000000000005-e1.snapshot", false, 0, 0, false},
	} {
		off, epoch, ok := parseSnapshotName(c.name)
		if ok != c.ok || (ok && (off != c.off || epoch != c.epoch)) {
			t.Errorf("parseSnapshotName(%q) = %d, %d, %v", c.name, off, epoch, ok)
		}
		if got := isLegacySnapshotName(c.name); got != c.legacy {
			t.Errorf("isLegacySnapshotName(%q) = %v", c.name, got)
		}
	}
}

// TestSnapshotEncoding: a state with every kind of entry survives a round
// trip, and a damaged file is refused whole.
func TestSnapshotEncoding(t *testing.T) {
	ps := newProducerState()
	ps.m[1] = &producerEntry{Epoch: 3, Batches: []batchRange{{0, 4, 10, 14}, {5, 5, 20, 20}}, LastTimestamp: 1234, CoordinatorEpoch: 9, TxnFirst: 10, Verified: -1}
	ps.m[2] = &producerEntry{Epoch: 0, Batches: []batchRange{{math.MaxInt32, 1, 30, 32}}, LastTimestamp: -1, CoordinatorEpoch: -1, TxnFirst: -1, Verified: -1}
	ps.m[3] = &producerEntry{Epoch: 2, Batches: []batchRange{}, CoordinatorEpoch: 4, TxnFirst: -1, Verified: -1}
	ps.m[4] = newProducerEntry(1) // a verification guard only: not persisted
	ps.m[4].Verified = 1
	ps.aborted = []AbortedTxn{{2, 30, 33}, {1, 5, 40}}
	b := ps.encodeSnapshot(50, 6)
	got, off, epoch, err := decodeSnapshot(b)
	if err != nil || off != 50 || epoch != 6 {
		t.Fatalf("decode: %d %d %v", off, epoch, err)
	}
	delete(ps.m, 4)
	if !reflect.DeepEqual(dump(got), dump(ps)) || !reflect.DeepEqual(got.aborted, ps.aborted) {
		t.Fatalf("round trip:\n got %v %v\nwant %v %v", dump(got), got.aborted, dump(ps), ps.aborted)
	}
	if got.abortMaxSpan != 35 {
		t.Fatalf("max aborted span %d, want 35", got.abortMaxSpan)
	}
	for i := range b {
		bad := bytes.Clone(b)
		bad[i] ^= 0x40
		if _, _, _, err := decodeSnapshot(bad); !errors.Is(err, errBadProducerSnapshot) {
			t.Fatalf("byte %d flipped: %v", i, err)
		}
	}
	if _, _, _, err := decodeSnapshot(b[:len(b)-1]); !errors.Is(err, errBadProducerSnapshot) {
		t.Fatalf("truncated: %v", err)
	}
	// A snapshot naming offsets at or beyond its own is refused.
	ps.m[1].Batches[1].LastOffset = 50
	if _, _, _, err := decodeSnapshot(ps.encodeSnapshot(50, 6)); !errors.Is(err, errBadProducerSnapshot) {
		t.Fatalf("batch beyond the snapshot offset: %v", err)
	}
}

func dump(ps *producerState) map[int64]producerEntry {
	out := map[int64]producerEntry{}
	for id, e := range ps.m {
		if !e.persisted() {
			continue
		}
		c := *e
		c.Verified = -1
		c.pid, c.prev, c.next = 0, nil, nil // the recency list is not state
		if len(c.Batches) == 0 {
			c.Batches = nil
		}
		out[id] = c
	}
	return out
}

// TestExpireProducers: idle producers are forgotten; ones with a
// transaction open, a marker not yet durable, a pending verification or a
// recent write are kept.
func TestExpireProducers(t *testing.T) {
	ps := newProducerState()
	entry := func(pid int64, ts int64) *producerEntry {
		e := newProducerEntry(0)
		e.Batches = append(e.Batches, batchRange{FirstSeq: 0, LastSeq: 0, BaseOffset: pid, LastOffset: pid})
		e.LastTimestamp = ts
		ps.m[pid] = e
		return e
	}
	entry(1, 100)              // idle
	entry(2, 5000)             // recent
	entry(3, 100).TxnFirst = 7 // transaction open
	entry(4, 100).Verified = 0 // verification pending
	entry(5, 100)              // marker written, not yet durable
	ps.ongoing = append(ps.ongoing, ongoingTxn{pid: 5, first: 3, marker: 9})
	entry(6, 4000) // exactly at the cutoff: kept
	if n := ps.expire(4000); n != 1 {
		t.Fatalf("expired %d, want 1", n)
	}
	var left []int64
	for pid := range ps.m {
		left = append(left, pid)
	}
	slices.Sort(left)
	if !slices.Equal(left, []int64{2, 3, 4, 5, 6}) {
		t.Fatalf("left %v", left)
	}
	// A batch of the forgotten producer starts it anew, at any sequence.
	if _, dup, err := ps.check(header(t, 1, 1, 0, 42)); err != nil || dup {
		t.Fatalf("forgotten producer's batch: dup %v, err %v", dup, err)
	}
}

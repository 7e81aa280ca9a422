package engine

import (
	"errors"
	"math"
	"path"
	"reflect"
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
			ps := producerState{}
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
			for pid, e := range ps {
				if len(e.Batches) > keepBatches {
					t.Fatalf("producer %d keeps %d batches", pid, len(e.Batches))
				}
			}
		})
	}
}

// TestLoadProducerState rebuilds state from the newest usable snapshot plus
// a replay of the log after it, and matches state built by recording every
// append.
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
	want := producerState{}
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
	if err := writeSnapshot(fsys, dir, cloneState(want), mid); err != nil {
		t.Fatal(err)
	}
	appendN(11)
	if err := lg.Sync(t.Context(), lg.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	// Unusable snapshots: ahead of the log end (a truncated tail), and torn.
	ahead := lg.LogEndOffset() + 100
	if err := writeSnapshot(fsys, dir, producerState{}, ahead); err != nil {
		t.Fatal(err)
	}
	torn := lg.LogEndOffset() - 2
	if err := volume.WriteFileAtomic(fsys, path.Join(dir, snapshotName(torn)), []byte(`{"offset":`)); err != nil {
		t.Fatal(err)
	}
	got, replayed, err := loadProducerState(fsys, dir, lg)
	if err != nil {
		t.Fatal(err)
	}
	if replayed != 11 {
		t.Fatalf("replayed %d batches, want the 11 after the snapshot at %d", replayed, mid)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("rebuilt state differs:\n got %v\nwant %v", dump(got), dump(want))
	}
	if err := lg.Close(); err != nil {
		t.Fatal(err)
	}
}

func cloneState(ps producerState) producerState {
	out := producerState{}
	for id, e := range ps {
		c := *e
		c.Batches = append([]batchRange(nil), e.Batches...)
		out[id] = &c
	}
	return out
}

func dump(ps producerState) map[int64]producerEntry {
	out := map[int64]producerEntry{}
	for id, e := range ps {
		out[id] = *e
	}
	return out
}

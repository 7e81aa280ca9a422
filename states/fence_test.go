package states_test

import (
	"errors"
	"testing"

	"github.com/kaas-dev/kaas/states"
	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/memfs"
	"github.com/kaas-dev/kaas/volume/partlog"
)

// TestFenceClaim covers the fence step's rules: a new log, a takeover, a
// stale assignment, an epoch another writer holds, and a retry of this
// process's own claim.
func TestFenceClaim(t *testing.T) {
	fence := states.PartitionFence(sweepData, sweepTopic, 0)
	newFence := func(t *testing.T, at int32) volume.FS {
		t.Helper()
		mem := memfs.New()
		if err := volume.MkdirAllSync(mem, fence.Dir); err != nil {
			t.Fatal(err)
		}
		if at >= 0 {
			if _, err := partlog.ClaimFence(mem, fence.Dir, at); err != nil {
				t.Fatal(err)
			}
		}
		return mem
	}
	fencedFrom := func(rec *states.Record) int32 {
		if rec.FencedFrom == nil {
			return -100
		}
		return *rec.FencedFrom
	}
	for _, tc := range []struct {
		name      string
		at, epoch int32
		ours      bool
		want      error
		tookOver  bool
		from      int32 // rec.FencedFrom after the claim; -100: unset
	}{
		{name: "new-log", at: -1, epoch: 1, from: -1},
		{name: "takeover", at: 3, epoch: 4, tookOver: true, from: 3},
		{name: "ours-ignored-below-the-epoch", at: 3, epoch: 4, ours: true, tookOver: true, from: 3},
		{name: "stale-assignment", at: 5, epoch: 4, want: states.ErrStaleAssignment, from: -100},
		{name: "epoch-held-by-another-writer", at: 4, epoch: 4, want: states.ErrEpochHeld, from: -100},
		{name: "own-claim-retried", at: 4, epoch: 4, ours: true, from: -100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := newFence(t, tc.at)
			rec := &states.Record{}
			claim, err := fence.Claim(fsys, tc.epoch, tc.ours, rec)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("claim: %v, want %v", err, tc.want)
			}
			if claim.Cleared != (tc.want == nil) || claim.TookOver() != tc.tookOver {
				t.Fatalf("claim %+v: cleared %v, took over %v; want %v, %v", claim, claim.Cleared, claim.TookOver(), tc.want == nil, tc.tookOver)
			}
			if got := fencedFrom(rec); got != tc.from {
				t.Fatalf("FencedFrom %d, want %d", got, tc.from)
			}
			wantEpoch, wantFence := tc.epoch, tc.epoch
			if tc.want != nil {
				wantEpoch, wantFence = 0, tc.at
			}
			if rec.Epoch != wantEpoch {
				t.Fatalf("record epoch %d, want %d", rec.Epoch, wantEpoch)
			}
			if got, err := partlog.ReadFence(fsys, fence.Dir); err != nil || got != wantFence {
				t.Fatalf("fence %d, %v; want %d", got, err, wantFence)
			}
		})
	}
}

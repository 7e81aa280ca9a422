package partlog

import (
	"context"
	"fmt"
	"path"
	"slices"
	"syscall"
	"testing"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/crashtest"
	"github.com/kaas-dev/kaas/volume/faultfs"
)

// TestUnlistedRule: which segment files of a writer at epoch 3 whose
// active segment starts at 20 are garbage.
func TestUnlistedRule(t *testing.T) {
	keep := map[string]bool{}
	for _, id := range []segID{{10, 2, 0}, {0, 2, 1} /* pinned */, {15, 3, 0}, {20, 3, 0}} {
		keep[id.stem()] = true
	}
	tests := []struct {
		what     string
		id       segID
		cleaning bool
		garbage  bool
	}{
		{"named, an older epoch's", segID{10, 2, 0}, false, false},
		{"dropped but pinned", segID{0, 2, 1}, false, false},
		{"named, own epoch", segID{15, 3, 0}, false, false},
		{"the active segment", segID{20, 3, 0}, false, false},
		{"a newer epoch's", segID{30, 4, 0}, false, false},
		{"a newer epoch's below the active base", segID{5, 4, 0}, false, false},
		{"a newer epoch's cleaned", segID{0, 4, 1}, false, false},
		{"own epoch above the active base: a roll in flight", segID{25, 3, 0}, false, false},
		{"own epoch above the active base, a pass running", segID{25, 3, 0}, true, false},
		{"an older epoch's", segID{5, 2, 0}, false, true},
		{"an older epoch's above the active base: a fenced writer's roll", segID{40, 2, 0}, false, true},
		{"an older epoch's cleaned", segID{0, 2, 7}, false, true},
		{"an older epoch's cleaned, a pass running", segID{0, 2, 7}, true, true},
		{"own epoch cleaned, no pass", segID{0, 3, 1}, false, true},
		{"own epoch cleaned above the active base, no pass", segID{30, 3, 2}, false, true},
		{"own epoch cleaned, a pass running", segID{0, 3, 1}, true, false},
		{"own epoch below the active base: a failed unlink", segID{5, 3, 0}, false, true},
	}
	for _, tt := range tests {
		r := unlistedRule{epoch: 3, activeBase: 20, cleaning: tt.cleaning, keep: keep}
		if got := r.garbage(tt.id); got != tt.garbage {
			t.Errorf("%s (%s): garbage %v, want %v", tt.what, tt.id.stem(), got, tt.garbage)
		}
	}
}

// plant creates empty files in the partition directory, durably.
func plant(t testing.TB, fsys volume.FS, names ...string) {
	t.Helper()
	for _, n := range names {
		if err := volume.WriteFileAtomic(fsys, path.Join(testDir, n), nil); err != nil {
			t.Fatal(err)
		}
	}
}

// present returns which of names are in the partition directory.
func present(t testing.TB, fsys volume.FS, names []string) []string {
	t.Helper()
	return slices.DeleteFunc(dirNames(t, fsys), func(n string) bool { return !slices.Contains(names, n) })
}

// unnamed returns the segment files in the partition directory that the
// manifest recovery would use does not name (all of them if there is none).
func unnamed(t testing.TB, fsys volume.FS) []string {
	t.Helper()
	m, err := readManifest(fsys, testDir)
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	if m != nil {
		for _, s := range m.Segments {
			named[s.id().stem()] = true
		}
	}
	var out []string
	for _, n := range segmentNames(t, fsys) {
		if id, _ := parseAnySegmentFile(n); !named[id.stem()] {
			out = append(out, n)
		}
	}
	return out
}

// sweepNow runs the sweep as a retention pass does (retMu held).
func sweepNow(l *Log, names []string) int {
	l.retMu.Lock()
	defer l.retMu.Unlock()
	return l.sweepUnlisted(names)
}

// TestSweepUnlisted: a retention pass's sweep removes the unlisted files
// the rule calls garbage and keeps every other file: named, pinned (until
// the last unpin), a newer epoch's, this epoch's at or above the active
// base, and this epoch's cleaned ones while a pass runs. A second sweep,
// and one over a stale listing, removes nothing.
func TestSweepUnlisted(t *testing.T) {
	for _, cleaning := range []bool{false, true} {
		t.Run(fmt.Sprintf("cleaning=%v", cleaning), func(t *testing.T) {
			clk := newFakeClock()
			fsys := newMemFS(t)
			l := mustOpen(t, fsys, retConfig(2, clk))
			fillSegments(t, l, 1, []int64{1, 2, 3}, 0)
			mustClose(t, l)
			l = mustOpen(t, fsys, retConfig(3, clk))
			defer l.Close()
			leo := fillSegments(t, l, 1, []int64{4, 5, 6}, 0) // segments 3, 4, 5 of epoch 3
			l.cleaning.Store(cleaning)

			file := func(base int64, epoch int32, gen int64, ext string) string {
				return segID{base, epoch, gen}.stem() + ext
			}
			garbage := []string{
				file(1, 1, 0, segmentExt), file(1, 1, 0, indexExt), // an older epoch's, inside the chain
				file(100, 2, 0, segmentExt),                            // a fenced writer's late roll
				file(0, 2, 1, segmentExt), file(0, 2, 1, timeIndexExt), // an older cleaner's output
				file(2, 3, 0, segmentExt), // own epoch, below the active base
			}
			kept := []string{
				file(100, 4, 0, segmentExt), file(0, 4, 1, segmentExt), // a newer epoch's
				file(leo, 3, 0, segmentExt), file(leo+50, 3, 0, segmentExt), // own epoch at or above the active base
				"00000000000000000000-e1.producers", "x.log",
			}
			ownCleaned := []string{file(3, 3, 1, segmentExt), file(3, 3, 1, indexExt)}
			if cleaning {
				kept = append(kept, ownCleaned...)
			} else {
				garbage = append(garbage, ownCleaned...)
			}
			plant(t, fsys, append(slices.Clone(garbage), kept...)...)
			named := slices.DeleteFunc(segmentNames(t, fsys), func(n string) bool { return slices.Contains(garbage, n) || slices.Contains(kept, n) })

			ref, err := l.ReadRef(0, 1<<20) // pins segment 0
			if err != nil || ref.Len == 0 {
				t.Fatalf("ReadRef(0): %+v, %v", ref, err)
			}
			pinned := file(0, 2, 0, segmentExt)
			if _, err := l.DeleteRecordsBefore(1); err != nil { // drops segment 0 and sweeps
				t.Fatal(err)
			}
			if got := present(t, fsys, garbage); len(got) != 0 {
				t.Errorf("garbage left: %v", got)
			}
			if got := present(t, fsys, kept); len(got) != len(kept) {
				t.Errorf("kept files %v, want all of %v", got, kept)
			}
			if got := present(t, fsys, []string{pinned}); len(got) != 1 {
				t.Errorf("the pinned segment's file is gone")
			}
			if n := sweepNow(l, nil); n != 0 {
				t.Errorf("a second sweep removed %d files", n)
			}
			if n := sweepNow(l, garbage); n != 0 {
				t.Errorf("a sweep over a stale listing removed %d files", n)
			}
			if got := present(t, fsys, []string{pinned}); len(got) != 1 {
				t.Errorf("the pinned segment's file is gone before its release")
			}
			ref.Release()
			if got := present(t, fsys, []string{pinned}); len(got) != 0 {
				t.Errorf("the dropped segment's file stays after its release")
			}
			for _, n := range named {
				if id, _ := parseAnySegmentFile(n); id.base >= 1 && len(present(t, fsys, []string{n})) == 0 {
					t.Errorf("named file %s is gone", n)
				}
			}
			checkStart(t, l, 1)
		})
	}
}

// TestSweepUnlistedFenced: a writer whose fence another writer claimed
// removes nothing, whether the claim comes before a sweep or between
// Open's manifest write and its sweep; the new owner's Open removes it.
func TestSweepUnlistedFenced(t *testing.T) {
	clk := newFakeClock()
	garbage := []string{segID{0, 1, 3}.stem() + segmentExt, segID{5, 1, 0}.stem() + indexExt}

	t.Run("claimed before a sweep", func(t *testing.T) {
		fsys := newMemFS(t)
		l := mustOpen(t, fsys, retConfig(1, clk))
		fillSegments(t, l, 1, []int64{1, 2}, 0)
		mustClose(t, l)
		l = mustOpen(t, fsys, retConfig(2, clk))
		defer l.Close()
		plant(t, fsys, garbage...)
		if _, err := ClaimFence(fsys, testDir, 3); err != nil {
			t.Fatal(err)
		}
		if n := sweepNow(l, nil); n != 0 {
			t.Errorf("a fenced writer removed %d files", n)
		}
		if got := present(t, fsys, garbage); len(got) != len(garbage) {
			t.Errorf("left %v of %v", got, garbage)
		}
	})

	t.Run("claimed during Open", func(t *testing.T) {
		inner := newMemFS(t)
		l := mustOpen(t, inner, retConfig(1, clk))
		fillSegments(t, l, 1, []int64{1, 2}, 0)
		mustClose(t, l)
		plant(t, inner, garbage...)
		fsys := faultfs.New(inner, func(op faultfs.Op) faultfs.Action {
			if op.Kind == faultfs.OpRename && path.Base(op.NewPath) == manifestName(2) {
				return faultfs.ProceedThen(func() {
					if _, err := ClaimFence(inner, testDir, 3); err != nil {
						t.Errorf("claim: %v", err)
					}
				})
			}
			return faultfs.Proceed
		})
		l = mustOpen(t, fsys, retConfig(2, clk))
		if got := present(t, inner, garbage); len(got) != len(garbage) {
			t.Errorf("Open fenced after its manifest write removed files: left %v of %v", got, garbage)
		}
		_ = l.Close()
		l = mustOpen(t, inner, retConfig(3, clk))
		defer l.Close()
		if got := present(t, inner, garbage); len(got) != 0 {
			t.Errorf("the new owner's Open left %v", got)
		}
	})
}

// TestOpenSweepsReplacedEmptyTail: the previous writer's empty active
// segment, which Open replaces with its own at the same base, is removed
// by Open's sweep, and so only while the fence is still ours after the
// manifest that drops it.
func TestOpenSweepsReplacedEmptyTail(t *testing.T) {
	for _, claimed := range []bool{false, true} {
		t.Run(fmt.Sprintf("claimed=%v", claimed), func(t *testing.T) {
			clk := newFakeClock()
			inner := newMemFS(t)
			l := mustOpen(t, inner, retConfig(1, clk))
			fillSegments(t, l, 1, []int64{1}, 0)
			mustClose(t, l)
			mustClose(t, mustOpen(t, inner, retConfig(2, clk))) // leaves its segment at 1 empty
			empty := segID{1, 2, 0}.stem() + segmentExt
			fsys := faultfs.New(inner, func(op faultfs.Op) faultfs.Action {
				if claimed && op.Kind == faultfs.OpRename && path.Base(op.NewPath) == manifestName(3) {
					return faultfs.ProceedThen(func() {
						if _, err := ClaimFence(inner, testDir, 4); err != nil {
							t.Errorf("claim: %v", err)
						}
					})
				}
				return faultfs.Proceed
			})
			l = mustOpen(t, fsys, retConfig(3, clk))
			if stayed := len(present(t, inner, []string{empty})) == 1; stayed != claimed {
				t.Errorf("replaced empty segment stayed: %v, want %v", stayed, claimed)
			}
			_ = l.Close()
			l = mustOpen(t, inner, retConfig(4, clk))
			defer l.Close()
			if got := unnamed(t, inner); len(got) != 0 {
				t.Errorf("unnamed files left: %v", got)
			}
		})
	}
}

// TestSweepUnlistedRetriesFailedUnlinks: a dropped segment whose unlinks
// fail (the drop's and its own pass's sweep) stays as an unlisted file of
// the writer's epoch below the active base, and the next sweep removes it.
func TestSweepUnlistedRetriesFailedUnlinks(t *testing.T) {
	clk := newFakeClock()
	inner := newMemFS(t)
	victim := segID{0, 1, 0}.stem() + segmentExt
	fsys := faultfs.New(inner, faultfs.FailMatching(faultfs.OpRemove, victim, syscall.EIO, false, 2))
	l := mustOpen(t, fsys, retConfig(1, clk))
	defer l.Close()
	fillSegments(t, l, 1, []int64{1, 2, 3}, 0)
	if _, err := l.DeleteRecordsBefore(1); err != nil {
		t.Fatal(err)
	}
	if got := present(t, inner, []string{victim}); len(got) != 1 {
		t.Fatalf("the victim is gone although both its unlinks failed")
	}
	if n := sweepNow(l, nil); n != 1 {
		t.Errorf("the next sweep removed %d files, want 1", n)
	}
	if got := unnamed(t, inner); len(got) != 0 {
		t.Errorf("unnamed segment files left: %v", got)
	}
}

// TestSweepUnlistedCrashConverges crashes a takeover and a retention pass
// that both sweep (an older writer's abandoned cleaner output and
// superseded segment at Open, this writer's abandoned cleaned file at the
// drop) at every mutating operation, before and after it, on every crash
// substrate: the next owner's Open leaves no segment file its manifest
// does not name, and every acknowledged batch above the log start intact.
func TestSweepUnlistedCrashConverges(t *testing.T) {
	setup := func(fsys volume.FS, clk *fakeClock) map[int64][]byte {
		l := mustOpen(t, fsys, retConfig(1, clk))
		fillSegments(t, l, 1, []int64{1, 2, 3, 4}, 0)
		acked := batchesByBase(t, l)
		mustClose(t, l)
		plant(t, fsys, segID{0, 1, 1}.stem()+segmentExt, segID{0, 1, 1}.stem()+indexExt, segID{2, 0, 0}.stem()+segmentExt)
		return acked
	}
	workload := func(fsys volume.FS, clk *fakeClock, acked map[int64][]byte) error {
		l, err := Open(fsys, testDir, retConfig(2, clk))
		if err != nil {
			return err
		}
		defer l.Close()
		for i := range 2 {
			b := retBatch(1, int64(10+i))
			res, err := l.Append(b)
			if err == nil {
				err = l.Sync(context.Background(), res.LastOffset)
			}
			if err != nil {
				return err
			}
			acked[res.BaseOffset] = b
		}
		// A pass of this writer that died before its swap.
		if err := volume.WriteFileAtomic(fsys, path.Join(testDir, segID{1, 2, 1}.stem()+segmentExt), nil); err != nil {
			return err
		}
		if _, err := l.DeleteRecordsBefore(2); err != nil {
			return err
		}
		return l.Close()
	}
	for _, sub := range crashSubstrates() {
		t.Run(sub.Name, func(t *testing.T) {
			run := func(inj faultfs.Injector) (*faultfs.FS, crashWorld) {
				w := sub.fresh(t)
				clk := newFakeClock()
				acked := setup(w.Host("setup"), clk)
				ffs := faultfs.New(w.Host("a"), inj)
				_ = workload(ffs, clk, acked)
				return ffs, crashWorld{w, clk, acked}
			}
			left := 0
			n := crashEachOp(t, 30, run, func(what string, cw crashWorld) {
				disk := cw.w.Crash().Host("b")
				if len(unnamed(t, disk)) > 0 {
					left++
				}
				l, err := Open(disk, testDir, retConfig(3, cw.clk))
				if err != nil {
					t.Fatalf("%s: Open: %v", what, err)
				}
				if got := unnamed(t, disk); len(got) != 0 {
					t.Fatalf("%s: Open left unnamed segment files %v", what, got)
				}
				checkNoFilesBelow(t, disk, l.Segments()[0].Base)
				got := batchesByBase(t, l)
				for base, b := range cw.acked {
					if h, _ := ParseBatchHeader(b); h.NextOffset() > l.LogStartOffset() && string(got[base]) != string(b) {
						t.Fatalf("%s: acknowledged batch at %d lost or changed", what, base)
					}
				}
				if err := l.Close(); err != nil {
					t.Fatalf("%s: close: %v", what, err)
				}
			})
			// The sweep must have met files left for the next Open.
			if left == 0 {
				t.Fatal("no crash point left unnamed segment files")
			}
			t.Logf("%d mutating ops; %d crash points left unnamed files for Open to remove", n, left)
		})
	}
}

// crashWorld is one crash point's world, clock and acknowledged batches.
type crashWorld struct {
	w     crashtest.World
	clk   *fakeClock
	acked map[int64][]byte
}

// crashEachOp runs run once without a crash to count its mutating
// operations (at least minOps), then once per operation with a crash
// before and after it, and hands check each crashed run's world. It
// returns the count.
func crashEachOp(t *testing.T, minOps int, run func(faultfs.Injector) (*faultfs.FS, crashWorld), check func(what string, cw crashWorld)) int {
	t.Helper()
	count, _ := run(nil)
	n := count.MutatingOps()
	if n < minOps {
		t.Fatalf("only %d mutating ops", n)
	}
	for i := 0; i < n; i++ {
		for _, after := range []bool{false, true} {
			ffs, cw := run(faultfs.CrashAtMutating(i, after))
			if !ffs.Crashed() {
				t.Fatalf("op %d: the workload did not reach it", i)
			}
			check(fmt.Sprintf("crash at mutating op %d (after=%v)", i, after), cw)
		}
	}
	return n
}

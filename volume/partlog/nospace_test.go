package partlog

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/faultfs"
	"github.com/kaas-dev/kaas/volume/memfs"
)

// switchedFS is a faultfs whose injector fails operations with ENOSPC
// while armed: those matching kind and glob, count of them (0: all), before
// or after applying them.
type switchedFS struct {
	*faultfs.FS
	mu    sync.Mutex
	inj   faultfs.Injector
	armed atomic.Bool
}

func newSwitchedFS(inner volume.FS) *switchedFS {
	s := &switchedFS{}
	s.FS = faultfs.New(inner, func(op faultfs.Op) faultfs.Action {
		if !s.armed.Load() {
			return faultfs.Proceed
		}
		s.mu.Lock()
		inj := s.inj
		s.mu.Unlock()
		return inj(op)
	})
	return s
}

// arm fails the next count matches (0: all) of kind on glob with ENOSPC.
func (s *switchedFS) arm(kind faultfs.OpKind, glob string, after bool, count int) {
	s.mu.Lock()
	s.inj = faultfs.FailMatching(kind, glob, syscall.ENOSPC, after, count)
	s.mu.Unlock()
	s.armed.Store(true)
}

func (s *switchedFS) disarm() { s.armed.Store(false) }

// checkNoSpace fails unless err is a non-fatal full-volume error and the
// log is still healthy.
func checkNoSpace(t *testing.T, l *Log, err error) {
	t.Helper()
	if !errors.Is(err, ErrNoSpace) || !errors.Is(err, syscall.ENOSPC) || errors.Is(err, ErrLogFailed) {
		t.Fatalf("err = %v, want ErrNoSpace wrapping ENOSPC, not ErrLogFailed", err)
	}
	if l.Err() != nil {
		t.Fatalf("log failed after a full volume: %v", l.Err())
	}
}

// dirNames lists testDir.
func dirNames(t testing.TB, fsys volume.FS) []string {
	t.Helper()
	es, err := fsys.ReadDir(testDir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

// firstTimestamps reads the whole log and returns each batch's first
// timestamp, which the tests use to name their batches.
func firstTimestamps(t *testing.T, l *Log) []int64 {
	t.Helper()
	var out []int64
	hs := readAll(t, l, l.LogStartOffset())
	checkContiguous(t, hs, l.LogStartOffset(), l.HighWatermark())
	for _, h := range hs {
		out = append(out, h.FirstTimestamp)
	}
	return out
}

func TestAppendNoSpaceLeavesLogUsable(t *testing.T) {
	for _, after := range []bool{false, true} {
		t.Run(fmt.Sprintf("after=%v", after), func(t *testing.T) {
			clk := newFakeClock()
			mem := newMemFS(t)
			ffs := newSwitchedFS(mem)
			l := mustOpen(t, ffs, testConfig(t, 1, clk))
			mustAppend(t, l, batch(1, 100, 1))
			mustSync(t, l, 0)
			size := l.Size()

			// after=true: the whole batch reaches the file and only then
			// does the write report ENOSPC, the worst case to undo.
			ffs.arm(faultfs.OpWriteAt, "*"+segmentExt, after, 0)
			for range 3 {
				_, err := l.Append(batch(2, 100, 2))
				checkNoSpace(t, l, err)
			}
			if leo, hw := l.LogEndOffset(), l.HighWatermark(); leo != 1 || hw != 1 || l.Size() != size {
				t.Fatalf("after ENOSPC: LEO %d HW %d size %d, want 1, 1, %d", leo, hw, l.Size(), size)
			}
			logPath, _, _ := segID{base: 0, epoch: 1}.paths(testDir)
			if n, err := fileSize(mem, logPath); err != nil || n != size {
				t.Fatalf("segment file holds %d bytes (%v), want %d: the partial write was not undone", n, err, size)
			}
			// Reads and syncs go on while the volume is full.
			checkContiguous(t, readAll(t, l, 0), 0, 1)
			mustSync(t, l, math.MaxInt64)

			ffs.disarm()
			if res := mustAppend(t, l, batch(2, 100, 3)); res.BaseOffset != 1 {
				t.Fatalf("append after space returned at %d, want 1", res.BaseOffset)
			}
			mustSync(t, l, 2)
			if got := firstTimestamps(t, l); !slices.Equal(got, []int64{1, 3}) {
				t.Fatalf("log holds batches %v, want [1 3]", got)
			}
			mustClose(t, l)

			l = mustOpen(t, mem, testConfig(t, 2, clk))
			defer l.Close()
			if got := firstTimestamps(t, l); !slices.Equal(got, []int64{1, 3}) || l.LogEndOffset() != 3 {
				t.Fatalf("after reopen: batches %v LEO %d, want [1 3] and 3", got, l.LogEndOffset())
			}
		})
	}
}

func TestRollNoSpace(t *testing.T) {
	manifestTemp := ".manifest*"
	cases := []struct {
		name  string
		kind  faultfs.OpKind
		glob  string
		fatal bool // documented as final: an fsync, or a rename that may have happened
	}{
		{"old index write", faultfs.OpWriteAt, "*" + indexExt, false},
		{"old time index write", faultfs.OpWriteAt, "*" + timeIndexExt, false},
		{"create log", faultfs.OpCreate, "*" + segmentExt, false},
		{"create index", faultfs.OpCreate, "*" + indexExt, false},
		{"create time index", faultfs.OpCreate, "*" + timeIndexExt, false},
		{"create manifest temp", faultfs.OpCreateExclusive, manifestTemp, false},
		{"write manifest temp", faultfs.OpWrite, manifestTemp, false},
		{"sync manifest temp", faultfs.OpSync, manifestTemp, false},
		{"old index sync", faultfs.OpSync, "*" + indexExt, true},
		{"segment dir sync", faultfs.OpSyncDir, testDir, true},
		{"manifest rename", faultfs.OpRename, "manifest-e1.json", true},
	}
	for _, tc := range cases {
		for _, after := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/after=%v", tc.name, after), func(t *testing.T) {
				clk := newFakeClock()
				mem := newMemFS(t)
				ffs := newSwitchedFS(mem)
				cfg := testConfig(t, 1, clk)
				cfg.SegmentBytes, cfg.IndexIntervalBytes = 1000, 100
				l := mustOpen(t, ffs, cfg)
				defer func() { _ = l.Close() }()
				mustAppend(t, l, batch(1, 400, 1))
				mustAppend(t, l, batch(1, 400, 2))
				mustSync(t, l, 1)
				names := dirNames(t, mem)

				ffs.arm(tc.kind, tc.glob, after, 1)
				_, err := l.Append(batch(1, 400, 3)) // rolls
				ffs.disarm()
				if tc.fatal {
					if !errors.Is(err, ErrLogFailed) || !errors.Is(err, syscall.ENOSPC) {
						t.Fatalf("err = %v, want ErrLogFailed wrapping ENOSPC", err)
					}
					_ = l.Close()
					l = mustOpen(t, mem, testConfig(t, 2, clk))
					if got := firstTimestamps(t, l); len(got) < 2 || !slices.Equal(got[:2], []int64{1, 2}) {
						t.Fatalf("after reopen: batches %v, want [1 2 ...]", got)
					}
					return
				}
				checkNoSpace(t, l, err)
				if segs := l.Segments(); len(segs) != 1 || segs[0].Sealed || l.LogEndOffset() != 2 {
					t.Fatalf("after a failed roll: segments %+v LEO %d", segs, l.LogEndOffset())
				}
				// The old segment's index files are created by the roll's
				// flush of its entries (createSegment leaves them out): they
				// are the old segment's, not the failed roll's.
				oldIndexes := func(name string) bool {
					return strings.HasPrefix(name, fmt.Sprintf("%020d-", 0)) && (strings.HasSuffix(name, indexExt) || strings.HasSuffix(name, timeIndexExt))
				}
				if got := slices.DeleteFunc(dirNames(t, mem), oldIndexes); !slices.Equal(got, names) {
					t.Fatalf("a failed roll left %v, had %v", got, names)
				}
				checkContiguous(t, readAll(t, l, 0), 0, 2)

				res := mustAppend(t, l, batch(1, 400, 4))
				if !res.Rolled || res.BaseOffset != 2 {
					t.Fatalf("append after space returned: %+v, want a roll at 2", res)
				}
				mustAppend(t, l, batch(1, 400, 5))
				mustSync(t, l, 3)
				if got := firstTimestamps(t, l); !slices.Equal(got, []int64{1, 2, 4, 5}) {
					t.Fatalf("log holds %v", got)
				}
				mustClose(t, l)
				l = mustOpen(t, mem, testConfig(t, 2, clk))
				if got := firstTimestamps(t, l); !slices.Equal(got, []int64{1, 2, 4, 5}) {
					t.Fatalf("after reopen: %v", got)
				}
			})
		}
	}
}

func TestCheckpointNoSpace(t *testing.T) {
	for _, tc := range []struct {
		name string
		kind faultfs.OpKind
		glob string
	}{
		{"manifest temp write", faultfs.OpWrite, ".manifest*"},
		{"manifest temp create", faultfs.OpCreateExclusive, ".manifest*"},
		{"index write", faultfs.OpWriteAt, "*" + indexExt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newFakeClock()
			mem := newMemFS(t)
			ffs := newSwitchedFS(mem)
			cfg := testConfig(t, 1, clk)
			cfg.IndexIntervalBytes = 100
			l := mustOpen(t, ffs, cfg)
			mustAppend(t, l, batch(1, 200, 1))
			clk.Advance(2 * time.Second)
			mustSync(t, l, 0)
			m, err := readManifest(mem, testDir)
			if err != nil || m.Checkpoint.NextOffset != 1 {
				t.Fatalf("checkpoint %+v (%v), want next offset 1", m.Checkpoint, err)
			}

			ffs.arm(tc.kind, tc.glob, false, 0)
			for i := range 3 {
				mustAppend(t, l, batch(1, 200, int64(2+i)))
				clk.Advance(2 * time.Second)
				mustSync(t, l, int64(1+i)) // acknowledged: the data is fsynced
			}
			if l.Err() != nil || l.HighWatermark() != 4 {
				t.Fatalf("err %v HW %d, want healthy at 4", l.Err(), l.HighWatermark())
			}
			if m, err := readManifest(mem, testDir); err != nil || m.Checkpoint.NextOffset != 1 {
				t.Fatalf("checkpoint %+v (%v), want it left at next offset 1", m.Checkpoint, err)
			}
			ffs.disarm()
			mustAppend(t, l, batch(1, 200, 5))
			clk.Advance(2 * time.Second)
			mustSync(t, l, 4)
			if m, err := readManifest(mem, testDir); err != nil || m.Checkpoint.NextOffset != 5 {
				t.Fatalf("checkpoint %+v (%v), want it advanced to 5", m.Checkpoint, err)
			}
			// Close's final checkpoint under a full volume is skipped, not
			// an error.
			mustAppend(t, l, batch(1, 200, 6))
			ffs.arm(tc.kind, tc.glob, false, 0)
			mustClose(t, l)
			l = mustOpen(t, mem, testConfig(t, 2, clk))
			defer l.Close()
			if got := firstTimestamps(t, l); !slices.Equal(got, []int64{1, 2, 3, 4, 5, 6}) {
				t.Fatalf("after reopen: %v", got)
			}
		})
	}
}

func TestSegmentFsyncNoSpaceIsFatal(t *testing.T) {
	clk := newFakeClock()
	ffs := newSwitchedFS(newMemFS(t))
	l := mustOpen(t, ffs, testConfig(t, 1, clk))
	defer l.Close()
	mustAppend(t, l, batch(1, 10, 1))
	ffs.arm(faultfs.OpSync, "*"+segmentExt, false, 0)
	err := l.Sync(context.Background(), 0)
	if !errors.Is(err, ErrLogFailed) || !errors.Is(err, syscall.ENOSPC) || errors.Is(err, ErrNoSpace) {
		t.Fatalf("Sync = %v, want ErrLogFailed wrapping ENOSPC", err)
	}
	ffs.disarm()
	if _, err := l.Append(batch(1, 10, 2)); !errors.Is(err, ErrLogFailed) {
		t.Fatalf("Append after a failed fsync = %v, want the sticky failure", err)
	}
}

// TestNoSpaceThenCrash: a write that reached the file before reporting
// ENOSPC is truncated away before the next fsync, so a crash after that
// fsync recovers no trace of it.
func TestNoSpaceThenCrash(t *testing.T) {
	clk := newFakeClock()
	mem := newMemFS(t)
	ffs := newSwitchedFS(mem)
	l := mustOpen(t, ffs, testConfig(t, 1, clk))
	mustAppend(t, l, batch(1, 100, 1)) // not yet synced
	ffs.arm(faultfs.OpWriteAt, "*"+segmentExt, true, 1)
	_, err := l.Append(batch(3, 100, 2))
	checkNoSpace(t, l, err)
	mustSync(t, l, 0) // fsyncs the segment as it is after the truncate
	disk := mem.CrashClone()
	_ = l.Close()

	l = mustOpen(t, disk, testConfig(t, 2, clk))
	defer l.Close()
	if got := firstTimestamps(t, l); !slices.Equal(got, []int64{1}) || l.LogEndOffset() != 1 {
		t.Fatalf("after crash: batches %v LEO %d, want [1] and 1", got, l.LogEndOffset())
	}
}

// failAtMutating fails the i-th mutating operation with ENOSPC.
func failAtMutating(i int, after bool) faultfs.Injector {
	var mu sync.Mutex
	seen := 0
	return func(op faultfs.Op) faultfs.Action {
		if !op.Kind.Mutating() {
			return faultfs.Proceed
		}
		mu.Lock()
		n := seen
		seen++
		mu.Unlock()
		if n != i {
			return faultfs.Proceed
		}
		if after {
			return faultfs.FailAfter(syscall.ENOSPC)
		}
		return faultfs.FailBefore(syscall.ENOSPC)
	}
}

// noSpaceRun is what the sweep workload did, by batch first timestamp.
type noSpaceRun struct {
	appended []int64 // Append returned nil, in order
	acked    []int64 // a Sync covered them
	refused  []int64 // Append returned ErrNoSpace
	failed   bool    // the log failed (and was reopened) at some point
}

// noSpaceWorkload appends, syncs and rolls (checkpoints due every other
// sync), reopening at a higher epoch whenever the log fails, as the engine
// does.
func noSpaceWorkload(fsys volume.FS, clk *fakeClock) (*noSpaceRun, error) {
	run := &noSpaceRun{}
	epoch := int32(0)
	open := func() (*Log, error) {
		var err error
		for range 3 {
			epoch++
			var l *Log
			cfg := Config{Epoch: epoch, SegmentBytes: 1500, IndexIntervalBytes: 200,
				CheckpointInterval: time.Second, Now: clk.Now, Logger: logr.Discard()}
			if l, err = Open(fsys, testDir, cfg); err == nil {
				return l, nil
			}
		}
		return nil, err
	}
	l, err := open()
	if err != nil {
		return run, err
	}
	var unacked []int64
	ts := int64(100)
	for i := 0; i < 14; i++ {
		ts++
		b := batch(1+i%3, 150+i*20, ts)
		_, err := l.Append(b)
		switch {
		case err == nil:
			run.appended = append(run.appended, ts)
			unacked = append(unacked, ts)
		case errors.Is(err, ErrNoSpace):
			if l.Err() != nil {
				return run, fmt.Errorf("ErrNoSpace from a failed log: %v", err)
			}
			run.refused = append(run.refused, ts)
		default:
			run.failed = true
			_ = l.Close()
			if l, err = open(); err != nil {
				return run, err
			}
			unacked = nil
		}
		if i%2 == 1 {
			clk.Advance(700 * time.Millisecond)
			if err := l.Sync(context.Background(), math.MaxInt64); err != nil {
				run.failed = true
				_ = l.Close()
				if l, err = open(); err != nil {
					return run, err
				}
			} else {
				run.acked = append(run.acked, unacked...)
			}
			unacked = nil
		}
	}
	if err := l.Close(); err != nil {
		run.failed = true
	}
	return run, nil
}

// TestNoSpaceSweep fails each mutating operation of a workload with ENOSPC
// in turn, before and after it is applied. The log either refuses the
// append with ErrNoSpace and stays healthy, or fails and is reopened; in the
// end every acknowledged batch is there, no refused batch ever shows up, and
// a run that never failed holds exactly the batches Append took.
func TestNoSpaceSweep(t *testing.T) {
	clean := faultfs.New(newMemFS(t), nil)
	if _, err := noSpaceWorkload(clean, newFakeClock()); err != nil {
		t.Fatalf("clean run: %v", err)
	}
	n := clean.MutatingOps()
	if n < 40 {
		t.Fatalf("only %d mutating ops", n)
	}
	refusedRuns, failedRuns := 0, 0
	for i := range n {
		for _, after := range []bool{false, true} {
			mem := newMemFS(t)
			clk := newFakeClock()
			run, err := noSpaceWorkload(faultfs.New(mem, failAtMutating(i, after)), clk)
			if err != nil {
				t.Fatalf("op %d after=%v: %v", i, after, err)
			}
			if len(run.refused) > 0 {
				refusedRuns++
			}
			if run.failed {
				failedRuns++
			}
			for _, d := range []*memfs.FS{mem, mem.CrashClone()} {
				l, err := Open(d, testDir, Config{Epoch: 99, Now: clk.Now, Logger: logr.Discard()})
				if err != nil {
					t.Fatalf("op %d after=%v: reopen: %v", i, after, err)
				}
				got := firstTimestamps(t, l)
				_ = l.Close()
				for _, ts := range run.acked {
					if !slices.Contains(got, ts) {
						t.Fatalf("op %d after=%v: acknowledged batch %d lost: log %v", i, after, ts, got)
					}
				}
				for _, ts := range run.refused {
					if slices.Contains(got, ts) {
						t.Fatalf("op %d after=%v: refused batch %d is in the log %v", i, after, ts, got)
					}
				}
				if !slices.IsSorted(got) {
					t.Fatalf("op %d after=%v: batches out of order: %v", i, after, got)
				}
				if d == mem && !run.failed && !slices.Equal(got, run.appended) {
					t.Fatalf("op %d after=%v: log %v, appended %v", i, after, got, run.appended)
				}
			}
		}
	}
	t.Logf("%d mutating ops: %d runs refused an append with ErrNoSpace, %d failed the log", n, refusedRuns, failedRuns)
	if refusedRuns == 0 {
		t.Fatal("no run hit a recoverable ENOSPC")
	}
}

// TestLogAppendTime: with LogAppendTime every batch carries the writer's
// clock as its max timestamp and the LogAppendTime attribute, with a valid
// CRC, and the time index follows the append time.
func TestLogAppendTime(t *testing.T) {
	clk := newFakeClock()
	mem := newMemFS(t)
	cfg := testConfig(t, 1, clk)
	cfg.LogAppendTime = true
	cfg.IndexIntervalBytes = 1
	l := mustOpen(t, mem, cfg)
	var want []int64
	for i := range 4 {
		b := batch(3, 50, 1000+int64(i)) // producer timestamps far in the past
		if _, err := l.Append(b); err != nil {
			t.Fatal(err)
		}
		want = append(want, clk.Now().UnixMilli())
		clk.Advance(10 * time.Second)
	}
	mustSync(t, l, math.MaxInt64)
	check := func(l *Log) {
		t.Helper()
		hs := readAll(t, l, 0) // validates each CRC
		if len(hs) != 4 {
			t.Fatalf("%d batches", len(hs))
		}
		for i, h := range hs {
			if !h.LogAppendTime() || h.MaxTimestamp != want[i] || h.FirstTimestamp != 1000+int64(i) {
				t.Fatalf("batch %d: LogAppendTime %v max %d first %d, want true, %d, %d", i, h.LogAppendTime(), h.MaxTimestamp, h.FirstTimestamp, want[i], 1000+int64(i))
			}
		}
		if off, ts, ok := l.OffsetForTimestamp(want[2]); !ok || off != 6 || ts != want[2] {
			t.Fatalf("OffsetForTimestamp(%d) = %d, %d, %v, want 6", want[2], off, ts, ok)
		}
		if off, ts, ok := l.OffsetForTimestamp(want[1] + 1); !ok || off != 6 || ts != want[2] {
			t.Fatalf("OffsetForTimestamp(%d) = %d, %d, %v, want 6", want[1]+1, off, ts, ok)
		}
		if off, ts, ok := l.MaxTimestamp(); !ok || off != 11 || ts != want[3] {
			t.Fatalf("MaxTimestamp = %d, %d, %v", off, ts, ok)
		}
	}
	check(l)
	mustClose(t, l)
	l = mustOpen(t, mem, testConfig(t, 2, clk)) // recovery rebuilds the time index from the stored batches
	defer l.Close()
	check(l)

	// Without it, the producer's timestamps stay.
	if _, err := l.Append(batch(1, 10, 5)); err != nil {
		t.Fatal(err)
	}
	mustSync(t, l, math.MaxInt64)
	hs := readAll(t, l, 12)
	if hs[0].LogAppendTime() || hs[0].MaxTimestamp != 5 {
		t.Fatalf("without LogAppendTime: %+v", hs[0])
	}
}

package partlog

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path"
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

// fakeTimers is an injected SyncPool timer: a delay is armed (and reported
// on armed) but fires only when the test says so.
type fakeTimers struct {
	mu      sync.Mutex
	pending []*fakeTimer
	armed   chan time.Duration
}

type fakeTimer struct {
	d    time.Duration
	f    func()
	done bool // fired or stopped
}

func newFakeTimers() *fakeTimers { return &fakeTimers{armed: make(chan time.Duration, 64)} }

func (ft *fakeTimers) after(d time.Duration, f func()) func() bool {
	t := &fakeTimer{d: d, f: f}
	ft.mu.Lock()
	ft.pending = append(ft.pending, t)
	ft.mu.Unlock()
	ft.armed <- d
	return func() bool {
		ft.mu.Lock()
		defer ft.mu.Unlock()
		if t.done {
			return false
		}
		t.done = true
		return true
	}
}

// fire runs every armed timer not yet fired or stopped.
func (ft *fakeTimers) fire() {
	ft.mu.Lock()
	var due []func()
	for _, t := range ft.pending {
		if !t.done {
			t.done = true
			due = append(due, t.f)
		}
	}
	ft.pending = nil
	ft.mu.Unlock()
	for _, f := range due {
		f()
	}
}

// fenceFaults fails the opens of the fence with err while failing is set,
// and counts the segment fsyncs.
type fenceFaults struct {
	failing   atomic.Pointer[error]
	segSyncs  atomic.Int64
	fenceOpen atomic.Int64
}

func (ff *fenceFaults) fail(err error) {
	if err == nil {
		ff.failing.Store(nil)
		return
	}
	ff.failing.Store(&err)
}

func (ff *fenceFaults) injector(op faultfs.Op) faultfs.Action {
	switch {
	case op.Kind == faultfs.OpOpen && path.Base(op.Path) == fenceName:
		ff.fenceOpen.Add(1)
		if e := ff.failing.Load(); e != nil {
			return faultfs.FailBefore(*e)
		}
	case op.Kind == faultfs.OpSync && strings.HasSuffix(op.Path, segmentExt):
		ff.segSyncs.Add(1)
	}
	return faultfs.Proceed
}

// syncAsync runs l.Sync(offset) and delivers its result.
func syncAsync(l *Log, offset int64) chan error {
	ch := make(chan error, 1)
	go func() { ch <- l.Sync(context.Background(), offset) }()
	return ch
}

func notYet(t *testing.T, ch chan error, what string) {
	t.Helper()
	select {
	case err := <-ch:
		t.Fatalf("%s returned %v", what, err)
	default:
	}
}

// TestFenceCheckTransientErrorRetried: a fence check that fails with EMFILE
// (ENFILE, ESTALE, EINTR alike) neither fails the log nor acknowledges: the
// round keeps its caller, retries after 10 ms, 20 ms, ... without fsyncing
// again what it fsynced, and acknowledges once a fence read succeeds.
func TestFenceCheckTransientErrorRetried(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ESTALE, syscall.EINTR} {
		t.Run(errno.Error(), func(t *testing.T) {
			clk := newFakeClock()
			ft := newFakeTimers()
			ff := &fenceFaults{}
			cfg := testConfig(t, 1, clk)
			cfg.SyncPool = NewSyncPool(2, ft.after)
			l := mustOpen(t, faultfs.New(newMemFS(t), ff.injector), cfg)
			defer mustClose(t, l)
			mustAppend(t, l, batch(2, 10, 1))
			mustSync(t, l, 1)

			mustAppend(t, l, batch(2, 10, 1))
			ff.fail(&fsPathError{errno})
			syncs := ff.segSyncs.Load()
			done := syncAsync(l, 3)
			for i, want := range []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond} {
				if d := <-ft.armed; d != want {
					t.Fatalf("retry %d after %v, want %v", i, d, want)
				}
				notYet(t, done, "Sync while the fence cannot be read")
				if hw := l.HighWatermark(); hw != 2 {
					t.Fatalf("high watermark %d while the fence cannot be read, want 2", hw)
				}
				if err := l.Err(); err != nil {
					t.Fatalf("the log failed on a transient fence error: %v", err)
				}
				if i < 2 {
					ft.fire()
				}
			}
			if n := ff.segSyncs.Load() - syncs; n != 1 {
				t.Fatalf("%d segment fsyncs over the retried rounds, want 1", n)
			}
			ff.fail(nil)
			ft.fire()
			if err := <-done; err != nil {
				t.Fatalf("Sync once the fence reads again: %v", err)
			}
			if hw := l.HighWatermark(); hw != 4 {
				t.Fatalf("high watermark %d, want 4", hw)
			}
			// The backoff starts again from the bottom.
			mustAppend(t, l, batch(1, 10, 1))
			ff.fail(&fsPathError{errno})
			done = syncAsync(l, 4)
			if d := <-ft.armed; d != 10*time.Millisecond {
				t.Fatalf("first retry of a new failure after %v, want 10ms", d)
			}
			ff.fail(nil)
			ft.fire()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
	}
}

// fsPathError is an errno as an open returns it.
type fsPathError struct{ errno syscall.Errno }

func (e *fsPathError) Error() string { return "open fence: " + e.errno.Error() }
func (e *fsPathError) Unwrap() error { return e.errno }

// TestFenceMissingIsFencedAfterRetries: a fence that is gone is retried a
// few times (another host may be replacing it) and then taken for fencing:
// the directory was replaced under the writer.
func TestFenceMissingIsFencedAfterRetries(t *testing.T) {
	clk := newFakeClock()
	ft := newFakeTimers()
	mem := newMemFS(t)
	cfg := testConfig(t, 1, clk)
	cfg.SyncPool = NewSyncPool(1, ft.after)
	l := mustOpen(t, mem, cfg)
	defer l.Close()
	mustAppend(t, l, batch(1, 10, 1))
	if err := mem.Remove(path.Join(testDir, fenceName)); err != nil {
		t.Fatal(err)
	}
	done := syncAsync(l, 0)
	for i := 0; i < fenceMissingLimit-1; i++ {
		<-ft.armed
		notYet(t, done, "Sync while the fence is missing")
		ft.fire()
	}
	if err := <-done; !errors.Is(err, ErrFenced) {
		t.Fatalf("Sync after %d checks found no fence = %v, want ErrFenced", fenceMissingLimit, err)
	}
	if l.HighWatermark() != 0 || !errors.Is(l.Err(), ErrFenced) {
		t.Fatalf("high watermark %d, Err %v", l.HighWatermark(), l.Err())
	}
}

// TestFenceCheckOtherErrorFails: a fence that cannot be read for another
// reason fails the log as before, and so does a fence fsync error.
func TestFenceCheckOtherErrorFails(t *testing.T) {
	clk := newFakeClock()
	ff := &fenceFaults{}
	cfg := testConfig(t, 1, clk)
	cfg.SyncPool = NewSyncPool(1, newFakeTimers().after)
	l := mustOpen(t, faultfs.New(newMemFS(t), ff.injector), cfg)
	defer l.Close()
	mustAppend(t, l, batch(1, 10, 1))
	ff.fail(syscall.EIO)
	if err := l.Sync(context.Background(), 0); !errors.Is(err, ErrLogFailed) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("Sync with an unreadable fence = %v, want ErrLogFailed wrapping EIO", err)
	}
}

// TestCloseGivesUpOnAnUnreadableFence: Close never hangs on a fence that
// stays unreadable: after a few retries its final sync ends with the
// fence's error, and nothing more is acknowledged.
func TestCloseGivesUpOnAnUnreadableFence(t *testing.T) {
	clk := newFakeClock()
	ft := newFakeTimers()
	ff := &fenceFaults{}
	cfg := testConfig(t, 1, clk)
	cfg.SyncPool = NewSyncPool(1, ft.after)
	l := mustOpen(t, faultfs.New(newMemFS(t), ff.injector), cfg)
	mustAppend(t, l, batch(1, 10, 1))
	ff.fail(syscall.EMFILE)
	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	for i := 0; i < maxCloseRetries; i++ {
		<-ft.armed
		notYet(t, closed, "Close while the fence cannot be read")
		ft.fire()
	}
	if err := <-closed; !errors.Is(err, syscall.EMFILE) {
		t.Fatalf("Close = %v, want the fence's EMFILE", err)
	}
	if l.HighWatermark() != 0 {
		t.Fatalf("high watermark %d after Close gave up", l.HighWatermark())
	}
}

// TestRollWithUnreadableFence: a roll whose fence check fails transiently
// is undone (the new segment's files removed, the old one still active),
// the append refused without failing the log; the next append rolls.
func TestRollWithUnreadableFence(t *testing.T) {
	clk := newFakeClock()
	ff := &fenceFaults{}
	mem := newMemFS(t)
	cfg := testConfig(t, 1, clk)
	cfg.SegmentBytes = 1000
	l := mustOpen(t, faultfs.New(mem, ff.injector), cfg)
	defer mustClose(t, l)
	mustAppend(t, l, batch(1, 600, 1))
	mustSync(t, l, 0)
	ff.fail(syscall.EMFILE)
	if _, err := l.Append(batch(1, 600, 1)); err == nil || errors.Is(err, ErrLogFailed) || !errors.Is(err, syscall.EMFILE) {
		t.Fatalf("Append whose roll cannot read the fence = %v, want a retriable EMFILE", err)
	}
	if err := l.Err(); err != nil {
		t.Fatalf("the log failed: %v", err)
	}
	if n := len(l.Segments()); n != 1 {
		t.Fatalf("%d segments after the undone roll", n)
	}
	ents, _ := mem.ReadDir(testDir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), fmt.Sprintf("%020d", 1)) {
			t.Fatalf("the undone roll left %s", e.Name())
		}
	}
	ff.fail(nil)
	res := mustAppend(t, l, batch(1, 600, 1))
	if !res.Rolled || res.BaseOffset != 1 {
		t.Fatalf("append after the fence reads again: %+v", res)
	}
	mustSync(t, l, 1)
}

// TestCrashWithFlakyFence: a workload whose fence opens fail with EMFILE
// now and then (its rounds retried, its rolls refused), crashed at every
// mutating operation: every batch a Sync acknowledged survives.
func TestCrashWithFlakyFence(t *testing.T) {
	workload := func(fsys volume.FS, clk *fakeClock) (map[int64][]byte, error) {
		var n atomic.Int64
		flaky := faultfs.New(fsys, func(op faultfs.Op) faultfs.Action {
			if op.Kind == faultfs.OpOpen && path.Base(op.Path) == fenceName && n.Add(1)%3 == 0 {
				return faultfs.FailBefore(syscall.EMFILE)
			}
			return faultfs.Proceed
		})
		pool := NewSyncPool(1, func(d time.Duration, f func()) func() bool {
			go f() // retry at once: the clock is the test's
			return func() bool { return false }
		})
		cfg := Config{Epoch: 1, SegmentBytes: 1500, IndexIntervalBytes: 200, CheckpointInterval: time.Second,
			Now: clk.Now, Logger: logr.Discard(), SyncPool: pool}
		return ackedWorkload(flaky, cfg, clk, 10, func(err error) bool {
			return !errors.Is(err, ErrLogFailed) && errors.Is(err, syscall.EMFILE) // a roll refused
		})
	}
	crashSweep(t, 20, workload, func(t *testing.T, disk *memfs.FS, clk *fakeClock, acked map[int64][]byte, i int) {
		l, err := Open(disk, testDir, Config{Epoch: 2, SegmentBytes: 1500, IndexIntervalBytes: 200, Now: clk.Now, Logger: logr.Discard()})
		if err != nil {
			t.Fatalf("Open after crash at op %d: %v", i, err)
		}
		defer mustClose(t, l)
		checkAcked(t, l, acked, fmt.Sprintf("crash at mutating op %d", i))
	})
}

// TestSyncPoolManyLogs: many logs on a pool of two workers, synced at
// random from many goroutines: every Sync is answered, each log's high
// watermark covers what it acknowledged, and once idle the pool keeps at
// most keepIdleWorkers goroutines, however many logs it serves.
func TestSyncPoolManyLogs(t *testing.T) {
	const logs = 24
	clk := newFakeClock()
	pool := NewSyncPool(2, nil)
	mem := memfs.New()
	var ls []*Log
	for i := 0; i < logs; i++ {
		dir := fmt.Sprintf("p%d", i)
		if err := volume.MkdirAllSync(mem, dir); err != nil {
			t.Fatal(err)
		}
		cfg := testConfig(t, 1, clk)
		cfg.Logger = logr.Discard()
		cfg.SyncPool = pool
		l, err := Open(mem, dir, cfg)
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for k := 0; k < 50; k++ {
				l := ls[rng.IntN(logs)]
				res, err := l.Append(batch(1, 50, 1))
				if err != nil {
					t.Error(err)
					return
				}
				if err := l.Sync(context.Background(), res.LastOffset); err != nil {
					t.Error(err)
					return
				}
				if hw := l.HighWatermark(); hw <= res.LastOffset {
					t.Errorf("acknowledged offset %d with the high watermark at %d", res.LastOffset, hw)
				}
			}
		})
	}
	wg.Wait()
	pool.mu.Lock()
	workers, queued := pool.workers, len(pool.queue)-pool.head
	pool.mu.Unlock()
	if workers > keepIdleWorkers || queued != 0 {
		t.Fatalf("idle pool: %d workers, %d queued", workers, queued)
	}
	for _, l := range ls {
		mustClose(t, l)
	}
}

// TestSyncPoolBusyLogDoesNotBlockOthers: with a log's fsync hung, a pool
// of two workers still serves another log's rounds.
func TestSyncPoolBusyLogDoesNotBlockOthers(t *testing.T) {
	clk := newFakeClock()
	pool := NewSyncPool(2, nil)
	mem := memfs.New()
	release := make(chan struct{})
	hung := make(chan struct{})
	var once sync.Once
	stalling := faultfs.New(mem, func(op faultfs.Op) faultfs.Action {
		if op.Kind == faultfs.OpSync && strings.HasPrefix(op.Path, "a/") && strings.HasSuffix(op.Path, segmentExt) {
			once.Do(func() { close(hung) })
			return faultfs.Stall(release)
		}
		return faultfs.Proceed
	})
	open := func(fsys volume.FS, dir string) *Log {
		if err := volume.MkdirAllSync(mem, dir); err != nil {
			t.Fatal(err)
		}
		cfg := testConfig(t, 1, clk)
		cfg.SyncPool = pool
		l, err := Open(fsys, dir, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	a, b := open(stalling, "a"), open(mem, "b")
	mustAppend(t, a, batch(1, 10, 1))
	aDone := syncAsync(a, 0)
	<-hung
	mustAppend(t, b, batch(1, 10, 1))
	mustSync(t, b, 0)
	notYet(t, aDone, "the hung log's Sync")
	close(release)
	if err := <-aDone; err != nil {
		t.Fatal(err)
	}
	mustClose(t, a)
	mustClose(t, b)
}

// TestManifestWriteWithoutDescriptors: a manifest write refused for want
// of descriptors before its rename changes nothing: a checkpoint round
// still acknowledges (the checkpoint waits for the next round), a roll is
// undone and its append refused, and neither fails the log.
func TestManifestWriteWithoutDescriptors(t *testing.T) {
	clk := newFakeClock()
	mem := newMemFS(t)
	var fail atomic.Bool
	fsys := faultfs.New(mem, func(op faultfs.Op) faultfs.Action {
		if op.Kind == faultfs.OpCreateExclusive && strings.HasPrefix(path.Base(op.Path), ".manifest") && fail.Load() {
			return faultfs.FailBefore(syscall.EMFILE)
		}
		return faultfs.Proceed
	})
	cfg := testConfig(t, 1, clk)
	cfg.SegmentBytes = 1000
	l := mustOpen(t, fsys, cfg)
	defer mustClose(t, l)
	mustAppend(t, l, batch(1, 600, 1))
	fail.Store(true)
	clk.Advance(2 * time.Second) // a checkpoint is due
	mustSync(t, l, 0)
	if _, err := l.Append(batch(1, 600, 2)); err == nil || l.Err() != nil || !errors.Is(err, syscall.EMFILE) {
		t.Fatalf("Append whose roll cannot write the manifest = %v (log %v), want a retriable EMFILE", err, l.Err())
	}
	fail.Store(false)
	res := mustAppend(t, l, batch(1, 600, 2))
	if !res.Rolled {
		t.Fatal("the next append did not roll")
	}
	mustSync(t, l, res.LastOffset)
}

// TestSyncLaterRunsRoundsSideBySide: SyncLater asks for each log's round
// before any is waited for, so the rounds of two logs are in flight at
// once (both fsyncs stall together) rather than one after the other.
func TestSyncLaterRunsRoundsSideBySide(t *testing.T) {
	clk := newFakeClock()
	pool := NewSyncPool(2, nil)
	mem := memfs.New()
	release := make(chan struct{})
	var stalled sync.WaitGroup
	stalled.Add(2)
	var seen sync.Map
	stalling := faultfs.New(mem, func(op faultfs.Op) faultfs.Action {
		if op.Kind == faultfs.OpSync && strings.HasSuffix(op.Path, segmentExt) {
			dir, _, _ := strings.Cut(op.Path, "/")
			if _, dup := seen.LoadOrStore(dir, true); !dup {
				stalled.Done()
			}
			return faultfs.Stall(release)
		}
		return faultfs.Proceed
	})
	var logs []*Log
	for _, dir := range []string{"a", "b"} {
		if err := volume.MkdirAllSync(mem, dir); err != nil {
			t.Fatal(err)
		}
		cfg := testConfig(t, 1, clk)
		cfg.SyncPool = pool
		l, err := Open(stalling, dir, cfg)
		if err != nil {
			t.Fatal(err)
		}
		logs = append(logs, l)
	}
	var pending []PendingSync
	for _, l := range logs {
		mustAppend(t, l, batch(1, 10, 1))
		pending = append(pending, l.SyncLater(0))
	}
	stalled.Wait() // both logs' fsyncs are in flight before anyone waits
	close(release)
	for i, p := range pending {
		if err := p.Wait(context.Background()); err != nil {
			t.Fatalf("log %d: %v", i, err)
		}
		if hw := logs[i].HighWatermark(); hw != 1 {
			t.Fatalf("log %d: high watermark %d after its round", i, hw)
		}
	}
	for _, l := range logs {
		mustClose(t, l)
	}
}

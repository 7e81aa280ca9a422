package handles_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/handles"
	"github.com/kaas-dev/kaas/volume/memfs"
)

// counted counts the files open through it (opened, not yet closed) and the
// most ever open at once, and fails a use of a closed file loudly.
type counted struct {
	fsys     volume.FS
	open     atomic.Int64
	most     atomic.Int64
	failNext atomic.Int64 // opens to fail with EMFILE
}

type countedFile struct {
	volume.File
	c      *counted
	closed atomic.Bool
}

func (c *counted) opener(name string) func() (volume.File, error) {
	return func() (volume.File, error) {
		if c.failNext.Add(-1) >= 0 {
			return nil, &volumeErr{syscall.EMFILE}
		}
		c.failNext.Store(0)
		f, err := c.fsys.Open(name)
		if err != nil {
			return nil, err
		}
		n := c.open.Add(1)
		for m := c.most.Load(); n > m && !c.most.CompareAndSwap(m, n); m = c.most.Load() {
		}
		return &countedFile{File: f, c: c}, nil
	}
}

type volumeErr struct{ errno syscall.Errno }

func (e *volumeErr) Error() string { return "open: " + e.errno.Error() }
func (e *volumeErr) Unwrap() error { return e.errno }

func (f *countedFile) ReadAt(p []byte, off int64) (int, error) {
	if f.closed.Load() {
		panic("read of a closed file " + f.Name())
	}
	return f.File.ReadAt(p, off)
}

func (f *countedFile) Close() error {
	if f.closed.Swap(true) {
		panic("file closed twice: " + f.Name())
	}
	f.c.open.Add(-1)
	return f.File.Close()
}

// files creates n small files and returns their names.
func files(t *testing.T, n int) (*counted, []string) {
	t.Helper()
	m := memfs.New()
	var names []string
	for i := range n {
		name := fmt.Sprintf("f%03d", i)
		if err := volume.WriteFileAtomic(m, name, []byte(name)); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	return &counted{fsys: m}, names
}

func mustAcquire(t *testing.T, c *handles.Cache, h *handles.Handle) volume.File {
	t.Helper()
	f, err := c.Acquire(h)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestCapBoundsOpenFiles: however many handles, at most the cap are open
// once released; the least recently used go first.
func TestCapBoundsOpenFiles(t *testing.T) {
	fsys, names := files(t, 20)
	c := handles.NewCache(5, 0, true)
	var hs []*handles.Handle
	for _, n := range names {
		h := c.NewHandle(fsys.opener(n), nil)
		hs = append(hs, h)
		mustAcquire(t, c, h)
		c.Release(h)
	}
	if got := fsys.open.Load(); got != 5 {
		t.Fatalf("%d files open, want the cap 5", got)
	}
	if st := c.Stats(); st.Open != 5 || st.Opens != 20 || st.Evictions != 15 || st.Overflows != 0 {
		t.Fatalf("stats %+v", st)
	}
	// The most recently used stay open: using them opens nothing.
	for _, h := range hs[15:] {
		mustAcquire(t, c, h)
		c.Release(h)
	}
	if st := c.Stats(); st.Opens != 20 {
		t.Fatalf("reusing the last five opened %d more files", st.Opens-20)
	}
}

// TestPinnedNeverClosed: a pinned handle stays open through any pressure;
// when everything is pinned, opens go over the cap and are counted.
func TestPinnedNeverClosed(t *testing.T) {
	fsys, names := files(t, 6)
	c := handles.NewCache(2, 0, true)
	var hs []*handles.Handle
	var fs []volume.File
	for _, n := range names[:3] {
		h := c.NewHandle(fsys.opener(n), nil)
		hs = append(hs, h)
		fs = append(fs, mustAcquire(t, c, h))
	}
	if st := c.Stats(); st.Overflows != 1 || st.Open != 3 {
		t.Fatalf("three pinned on a cap of 2: %+v", st)
	}
	for _, n := range names[3:] {
		h := c.NewHandle(fsys.opener(n), nil)
		mustAcquire(t, c, h)
		c.Release(h)
	}
	for i, f := range fs {
		buf := make([]byte, 4)
		if _, err := f.ReadAt(buf, 0); err != nil || string(buf) != names[i] {
			t.Fatalf("pinned file %s: %q, %v", names[i], buf, err)
		}
		c.Release(hs[i])
	}
}

// TestEvictableVeto: a handle whose owner says no is not closed to make
// room, and is once the owner says yes.
func TestEvictableVeto(t *testing.T) {
	fsys, names := files(t, 3)
	c := handles.NewCache(1, 0, true)
	var clean atomic.Bool
	dirty := c.NewHandle(fsys.opener(names[0]), clean.Load)
	mustAcquire(t, c, dirty)
	c.Release(dirty)
	other := c.NewHandle(fsys.opener(names[1]), nil)
	mustAcquire(t, c, other)
	c.Release(other)
	if st := c.Stats(); st.Open != 2 || st.Overflows != 1 {
		t.Fatalf("a vetoing handle was closed: %+v", st)
	}
	clean.Store(true)
	third := c.NewHandle(fsys.opener(names[2]), nil)
	mustAcquire(t, c, third)
	c.Release(third)
	if st := c.Stats(); st.Open != 1 {
		t.Fatalf("after the veto lifted: %+v", st)
	}
}

// TestForget: a forgotten handle closes at once when unpinned, at its last
// Release when pinned, and cannot be acquired again.
func TestForget(t *testing.T) {
	fsys, names := files(t, 2)
	c := handles.NewCache(10, 0, true)
	a := c.NewHandle(fsys.opener(names[0]), nil)
	mustAcquire(t, c, a)
	c.Release(a)
	if err := c.Forget(a); err != nil {
		t.Fatal(err)
	}
	if fsys.open.Load() != 0 {
		t.Fatal("an unpinned forgotten handle stayed open")
	}
	if _, err := c.Acquire(a); !errors.Is(err, handles.ErrForgotten) {
		t.Fatalf("Acquire after Forget = %v", err)
	}
	b := c.NewHandle(fsys.opener(names[1]), nil)
	f := mustAcquire(t, c, b)
	mustAcquire(t, c, b)
	if err := c.Forget(b); err != nil {
		t.Fatal(err)
	}
	c.Release(b)
	if _, err := f.ReadAt(make([]byte, 1), 0); err != nil || fsys.open.Load() != 1 {
		t.Fatalf("a pinned forgotten handle was closed (%v)", err)
	}
	c.Release(b)
	if fsys.open.Load() != 0 || c.Stats().Open != 0 {
		t.Fatalf("the last Release left it open: %+v", c.Stats())
	}
	// Forget of a handle never opened.
	if err := c.Forget(c.NewHandle(fsys.opener(names[0]), nil)); err != nil {
		t.Fatal(err)
	}
}

// TestIdleSweep: handles unused for two sweeps are closed; used ones and
// pinned ones stay.
func TestIdleSweep(t *testing.T) {
	fsys, names := files(t, 3)
	c := handles.NewCache(10, 1, true)
	var hs []*handles.Handle
	for _, n := range names {
		h := c.NewHandle(fsys.opener(n), nil)
		hs = append(hs, h)
		mustAcquire(t, c, h)
		c.Release(h)
	}
	mustAcquire(t, c, hs[2]) // pinned throughout
	c.Sweep()
	mustAcquire(t, c, hs[1])
	c.Release(hs[1])
	c.Sweep()
	if got := fsys.open.Load(); got != 2 {
		t.Fatalf("after two sweeps %d open, want the recently used and the pinned", got)
	}
	c.Sweep()
	if got := fsys.open.Load(); got != 1 {
		t.Fatalf("after three sweeps %d open, want the pinned one", got)
	}
	c.Release(hs[2])
	if st := c.Stats(); st.IdleCloses != 2 {
		t.Fatalf("stats %+v", st)
	}
}

// TestEMFILELowersCap: an open the OS refuses for want of descriptors
// lowers the cap below what the cache holds, closes what it can and
// retries once.
func TestEMFILELowersCap(t *testing.T) {
	fsys, names := files(t, 40)
	c := handles.NewCache(100, 0, true)
	for _, n := range names[:39] {
		h := c.NewHandle(fsys.opener(n), nil)
		mustAcquire(t, c, h)
		c.Release(h)
	}
	fsys.failNext.Store(1)
	h := c.NewHandle(fsys.opener(names[39]), nil)
	mustAcquire(t, c, h)
	c.Release(h)
	if st := c.Stats(); st.Cap != 40-16 || st.Open > st.Cap {
		t.Fatalf("after EMFILE: %+v", st)
	}
	fsys.failNext.Store(2)
	if _, err := c.Acquire(c.NewHandle(fsys.opener(names[0]), nil)); !errors.Is(err, syscall.EMFILE) {
		t.Fatalf("a second EMFILE in a row = %v, want it returned", err)
	}
}

// TestConcurrentUse: many goroutines reading through a few handles with a
// small cap: no read ever finds its file closed, and the files open stay
// within the cap plus the pins in flight.
func TestConcurrentUse(t *testing.T) {
	fsys, names := files(t, 32)
	c := handles.NewCache(4, 1, true)
	var hs []*handles.Handle
	for _, n := range names {
		hs = append(hs, c.NewHandle(fsys.opener(n), nil))
	}
	const goroutines = 8
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			buf := make([]byte, 4)
			for range 2000 {
				i := rng.IntN(len(hs))
				f, err := c.Acquire(hs[i])
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := f.ReadAt(buf, 0); err != nil || string(buf) != names[i] {
					t.Errorf("read %s: %q, %v", names[i], buf, err)
				}
				c.Release(hs[i])
				if rng.IntN(50) == 0 {
					c.Sweep()
				}
			}
		})
	}
	wg.Wait()
	if most := fsys.most.Load(); most > 4+goroutines {
		t.Fatalf("%d files open at once, cap 4 and %d pins", most, goroutines)
	}
	for _, h := range hs {
		if err := c.Forget(h); err != nil {
			t.Fatal(err)
		}
	}
	if n := fsys.open.Load(); n != 0 {
		t.Fatalf("%d files open after forgetting every handle", n)
	}
}

package partlog

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/kaas-dev/kaas/volume"
)

// materialize reads a Ref's bytes.
func materialize(t testing.TB, r Ref) []byte {
	t.Helper()
	if r.Len == 0 {
		return nil
	}
	b := make([]byte, r.Len)
	if err := readFullAt(r.File, b, r.Pos); err != nil {
		t.Fatalf("read ref %s [%d,+%d): %v", r.File.Name(), r.Pos, r.Len, err)
	}
	return b
}

// TestReadRefMatchesRead checks that ReadRef refers to exactly the bytes
// Read returns, for random batch sizes (so the index skip is exercised
// across many segments) and random offsets and limits, and returns the
// same errors.
func TestReadRefMatchesRead(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		rng := rand.New(rand.NewPCG(seed, 99))
		fsys := newMemFS(t)
		clock := newFakeClock()
		cfg := testConfig(t, 1, clock)
		cfg.IndexIntervalBytes = int32(64 + rng.IntN(2048))
		l := mustOpen(t, fsys, cfg)
		var end int64
		for i := 0; i < 300; i++ {
			size := 1 + rng.IntN(200)
			if rng.IntN(20) == 0 {
				size = 2000 + rng.IntN(6000)
			}
			res := mustAppend(t, l, batch(1+rng.IntN(5), size, int64(i)))
			end = res.LastOffset + 1
		}
		mustSync(t, l, end)
		if len(l.Segments()) < 2 {
			t.Fatalf("want several segments, got %d", len(l.Segments()))
		}
		hw := l.HighWatermark()
		for i := 0; i < 2000; i++ {
			off := rng.Int64N(hw + 2)
			maxBytes := rng.IntN(30000) - 100
			if rng.IntN(4) == 0 {
				maxBytes = rng.IntN(300)
			}
			want, werr := l.Read(off, maxBytes, nil)
			ref, gerr := l.ReadRef(off, maxBytes)
			if (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) {
				t.Fatalf("seed %d ReadRef(%d, %d) error %v, Read error %v", seed, off, maxBytes, gerr, werr)
			}
			got := materialize(t, ref)
			if !bytes.Equal(got, want) {
				t.Fatalf("seed %d ReadRef(%d, %d): %d bytes at %d, Read: %d bytes", seed, off, maxBytes, len(got), ref.Pos, len(want))
			}
			if (ref.Len == 0) != (ref.hold == nil) {
				t.Fatalf("ReadRef(%d, %d): Len %d with hold %v", off, maxBytes, ref.Len, ref.hold != nil)
			}
			ref.Release()
			ref.Release() // idempotent
		}
		if n := l.LiveRefs(); n != 0 {
			t.Fatalf("%d live refs after releasing all", n)
		}
		mustClose(t, l)
	}
}

// trackFS records which files are closed and fails (and counts) reads of a
// closed file: with real descriptors such a read could hit a reused fd.
type trackFS struct {
	volume.FS
	mu         sync.Mutex
	files      []*trackFile
	lateReads  atomic.Int64
	closeCount atomic.Int64
}

type trackFile struct {
	volume.File
	fs     *trackFS
	closed atomic.Bool
}

var errReadAfterClose = errors.New("read after close")

func (f *trackFile) ReadAt(p []byte, off int64) (int, error) {
	if f.closed.Load() {
		f.fs.lateReads.Add(1)
		return 0, errReadAfterClose
	}
	return f.File.ReadAt(p, off)
}

func (f *trackFile) Close() error {
	if f.closed.Swap(true) {
		return errors.New("double close")
	}
	f.fs.closeCount.Add(1)
	return f.File.Close()
}

func (c *trackFS) wrap(f volume.File, err error) (volume.File, error) {
	if err != nil {
		return nil, err
	}
	tf := &trackFile{File: f, fs: c}
	c.mu.Lock()
	c.files = append(c.files, tf)
	c.mu.Unlock()
	return tf, nil
}

func (c *trackFS) Open(name string) (volume.File, error) { return c.wrap(c.FS.Open(name)) }
func (c *trackFS) OpenReadWrite(name string) (volume.File, error) {
	return c.wrap(c.FS.OpenReadWrite(name))
}
func (c *trackFS) Create(name string) (volume.File, error) { return c.wrap(c.FS.Create(name)) }
func (c *trackFS) CreateExclusive(name string) (volume.File, error) {
	return c.wrap(c.FS.CreateExclusive(name))
}

// openSegments lists the segment files not closed yet.
func (c *trackFS) openSegments() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, f := range c.files {
		if strings.HasSuffix(f.Name(), segmentExt) && !f.closed.Load() {
			out = append(out, f.Name())
		}
	}
	return out
}

func TestCloseKeepsHandlesOfLiveRefs(t *testing.T) {
	fsys := &trackFS{FS: newMemFS(t)}
	l := mustOpen(t, fsys, testConfig(t, 1, newFakeClock()))
	var end int64
	for i := 0; i < 50; i++ {
		end = mustAppend(t, l, batch(2, 3000, int64(i))).LastOffset + 1
	}
	mustSync(t, l, end)
	want, err := l.Read(0, 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	r1, err := l.ReadRef(0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := l.ReadRef(end-1, 1<<20) // the active segment's handle
	if err != nil {
		t.Fatal(err)
	}
	if r1.File == r2.File {
		t.Fatal("want refs into two segments")
	}
	mustClose(t, l)
	if _, err := l.ReadRef(0, 100); !errors.Is(err, ErrClosed) {
		t.Fatalf("ReadRef after Close: %v, want ErrClosed", err)
	}
	if got := materialize(t, r1); !bytes.Equal(got, want) {
		t.Fatal("a live Ref's bytes changed after Close")
	}
	if open := fsys.openSegments(); len(open) == 0 {
		t.Fatal("Close closed the handles of live Refs")
	}
	r1.Release()
	r1.Release()
	if len(fsys.openSegments()) == 0 {
		t.Fatal("releasing one Ref closed the handles another still uses")
	}
	materialize(t, r2)
	r2.Release()
	if open := fsys.openSegments(); len(open) != 0 {
		t.Fatalf("segment handles left open after the last Release: %v", open)
	}
	if n := fsys.lateReads.Load(); n != 0 {
		t.Fatalf("%d reads of closed handles", n)
	}

	// Without live Refs, Close closes the handles itself.
	fsys2 := &trackFS{FS: newMemFS(t)}
	l2 := mustOpen(t, fsys2, testConfig(t, 1, newFakeClock()))
	end = mustAppend(t, l2, batch(1, 10, 1)).LastOffset + 1
	mustSync(t, l2, end)
	r, err := l2.ReadRef(0, 100)
	if err != nil {
		t.Fatal(err)
	}
	r.Release()
	mustClose(t, l2)
	if open := fsys2.openSegments(); len(open) != 0 {
		t.Fatalf("Close left %v open", open)
	}
}

// TestRefsRaceClose runs readers taking, reading and releasing Refs while
// the log is closed: no read may ever hit a closed handle, every handle is
// closed exactly once at the end, and refs taken after Close fail.
func TestRefsRaceClose(t *testing.T) {
	for round := 0; round < 20; round++ {
		fsys := &trackFS{FS: newMemFS(t)}
		l := mustOpen(t, fsys, testConfig(t, 1, newFakeClock()))
		var end int64
		for i := 0; i < 40; i++ {
			end = mustAppend(t, l, batch(1, 4000, int64(i))).LastOffset + 1
		}
		mustSync(t, l, end)
		var wg sync.WaitGroup
		start := make(chan struct{})
		var taken atomic.Int64
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				<-start
				for i := 0; ; i++ {
					r, err := l.ReadRef(int64((g*7+i)%int(end)), 9000)
					if errors.Is(err, ErrClosed) {
						return
					}
					if err != nil {
						t.Errorf("ReadRef: %v", err)
						return
					}
					taken.Add(1)
					b := make([]byte, r.Len)
					if _, err := r.File.ReadAt(b, r.Pos); err != nil {
						t.Errorf("reading a live Ref: %v", err)
					}
					r.Release()
				}
			}(g)
		}
		close(start)
		for taken.Load() < int64(round*10) {
			runtime.Gosched() // let the readers get going (round 0 closes at once)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if n := fsys.lateReads.Load(); n != 0 {
			t.Fatalf("round %d: %d reads of closed handles", round, n)
		}
		if open := fsys.openSegments(); len(open) != 0 {
			t.Fatalf("round %d: %v left open", round, open)
		}
		if l.LiveRefs() != 0 {
			t.Fatalf("round %d: %d live refs", round, l.LiveRefs())
		}
	}
}

// TestReadRefBelowStopsAtTheBound checks that ReadRefBelow returns exactly
// ReadRef's batches cut before the first batch at or above the bound, for
// random offsets, limits and bounds (at batch boundaries, as a last stable
// offset always is), across index skips and segments.
func TestReadRefBelowStopsAtTheBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	fsys := newMemFS(t)
	cfg := testConfig(t, 1, newFakeClock())
	cfg.IndexIntervalBytes = 256
	l := mustOpen(t, fsys, cfg)
	var bases []int64
	var end int64
	for i := 0; i < 200; i++ {
		res := mustAppend(t, l, batch(1+rng.IntN(4), 1+rng.IntN(300), int64(i)))
		bases = append(bases, res.BaseOffset)
		end = res.LastOffset + 1
	}
	mustSync(t, l, end)
	for i := 0; i < 2000; i++ {
		off := rng.Int64N(end)
		below := bases[rng.IntN(len(bases))]
		maxBytes := rng.IntN(20000)
		full, err := l.ReadRef(off, maxBytes)
		if err != nil {
			t.Fatal(err)
		}
		cut, err := l.ReadRefBelow(off, maxBytes, below)
		if err != nil {
			t.Fatal(err)
		}
		want := materialize(t, full)
		// Keep ReadRef's batches whose base offset is below the bound.
		var keep int
		for b := want; len(b) > 0; {
			h, err := ParseBatchHeader(b)
			if err != nil {
				t.Fatal(err)
			}
			if h.BaseOffset >= below {
				break
			}
			keep += int(h.Size())
			b = b[h.Size():]
		}
		got := materialize(t, cut)
		if !bytes.Equal(got, want[:keep]) {
			t.Fatalf("offset %d below %d max %d: got %d bytes, want the %d of ReadRef's %d below the bound", off, below, maxBytes, len(got), keep, len(want))
		}
		full.Release()
		cut.Release()
	}
}

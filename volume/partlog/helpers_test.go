package partlog

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/faultfs"
	"github.com/kaas-dev/kaas/volume/memfs"
	"github.com/kaas-dev/kaas/volume/partlog/partlogtest"
)

const testDir = "part"

// fakeClock is an injected clock that moves only when told to.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// newMemFS returns a memfs with the partition directory created durably.
func newMemFS(t testing.TB) *memfs.FS {
	t.Helper()
	m := memfs.New()
	if err := volume.MkdirAllSync(m, testDir); err != nil {
		t.Fatal(err)
	}
	return m
}

// testConfig is a small-segment config on clock c.
func testConfig(t testing.TB, epoch int32, c *fakeClock) Config {
	return Config{
		Epoch:              epoch,
		SegmentBytes:       64 << 10,
		IndexIntervalBytes: 512,
		Now:                c.Now,
		Logger:             testr.NewWithInterface(t, testr.Options{}),
	}
}

func mustOpen(t testing.TB, fsys volume.FS, cfg Config) *Log {
	t.Helper()
	l, err := Open(fsys, testDir, cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return l
}

func mustAppend(t testing.TB, l *Log, batch []byte) AppendResult {
	t.Helper()
	res, err := l.Append(batch)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	return res
}

func mustSync(t testing.TB, l *Log, offset int64) {
	t.Helper()
	if err := l.Sync(context.Background(), offset); err != nil {
		t.Fatalf("Sync(%d): %v", offset, err)
	}
}

func mustClose(t testing.TB, l *Log) {
	t.Helper()
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// batch makes a batch of n records of size bytes at timestamp ts.
func batch(n, size int, ts int64) []byte {
	return partlogtest.MakeBatch(n, size, ts, -1, -1, -1)
}

// readAll reads every batch from offset to the high watermark.
func readAll(t testing.TB, l *Log, from int64) []BatchHeader {
	t.Helper()
	var out []BatchHeader
	for off := from; off < l.HighWatermark(); {
		b, err := l.Read(off, 1<<20, nil)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		if len(b) == 0 {
			t.Fatalf("Read(%d) below HW %d returned nothing", off, l.HighWatermark())
		}
		for len(b) > 0 {
			h, err := ValidateBatch(b[:min(len(b), int(headerSize(b)))])
			if err != nil {
				t.Fatalf("Read(%d) returned a bad batch: %v", off, err)
			}
			out = append(out, h)
			b = b[h.Size():]
			off = h.NextOffset()
		}
	}
	return out
}

func headerSize(b []byte) int64 {
	h, err := ParseBatchHeader(b)
	if err != nil {
		return int64(len(b))
	}
	return h.Size()
}

// checkContiguous fails unless hs are contiguous from start to end.
func checkContiguous(t testing.TB, hs []BatchHeader, start, end int64) {
	t.Helper()
	next := start
	for _, h := range hs {
		if h.BaseOffset != next {
			t.Fatalf("batch at %d, want %d", h.BaseOffset, next)
		}
		next = h.NextOffset()
	}
	if next != end {
		t.Fatalf("batches end at %d, want %d", next, end)
	}
}

// countingFS counts bytes read from segment (.log) files.
type countingFS struct {
	volume.FS
	logBytes atomic.Int64
}

type countingFile struct {
	volume.File
	fs *countingFS
}

func (c *countingFS) wrap(f volume.File, err error) (volume.File, error) {
	if err != nil {
		return nil, err
	}
	return &countingFile{File: f, fs: c}, nil
}

func (c *countingFS) Open(name string) (volume.File, error) { return c.wrap(c.FS.Open(name)) }
func (c *countingFS) OpenReadWrite(name string) (volume.File, error) {
	return c.wrap(c.FS.OpenReadWrite(name))
}
func (c *countingFS) Create(name string) (volume.File, error) { return c.wrap(c.FS.Create(name)) }

func (f *countingFile) count(n int) {
	if strings.HasSuffix(f.Name(), segmentExt) {
		f.fs.logBytes.Add(int64(n))
	}
}

func (f *countingFile) Read(p []byte) (int, error) {
	n, err := f.File.Read(p)
	f.count(n)
	return n, err
}

func (f *countingFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	f.count(n)
	return n, err
}

// appendRaw appends bytes to a file directly (simulating a torn write).
func appendRaw(t testing.TB, fsys volume.FS, name string, data []byte) {
	t.Helper()
	f, err := fsys.OpenReadWrite(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// crashSweep runs workload once on a clean faultfs over memfs to count its
// mutating operations (at least minOps), then once per operation with a
// crash before and after it, and hands check the crash clone of what was
// on disk, the workload's clock and what it acknowledged before dying.
func crashSweep(t *testing.T, minOps int,
	workload func(volume.FS, *fakeClock) (map[int64][]byte, error),
	check func(t *testing.T, disk *memfs.FS, clk *fakeClock, acked map[int64][]byte, op int)) {
	t.Helper()
	clean := faultfs.New(newMemFS(t), nil)
	if _, err := workload(clean, newFakeClock()); err != nil {
		t.Fatalf("clean run: %v", err)
	}
	n := clean.MutatingOps()
	if n < minOps {
		t.Fatalf("only %d mutating ops in the workload", n)
	}
	for i := 0; i < n; i++ {
		for _, after := range []bool{false, true} {
			t.Run(fmt.Sprintf("op%d/after=%v", i, after), func(t *testing.T) {
				mem := newMemFS(t)
				clk := newFakeClock()
				ffs := faultfs.New(mem, faultfs.CrashAtMutating(i, after))
				acked, _ := workload(ffs, clk)
				if !ffs.Crashed() {
					t.Fatalf("workload did not reach mutating op %d", i)
				}
				check(t, mem.CrashClone(), clk, acked, i)
			})
		}
	}
}

package timedfs_test

import (
	"testing"
	"time"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/memfs"
	"github.com/kaas-dev/kaas/volume/timedfs"
)

// stepClock advances one step per reading: a call timed between two
// readings takes exactly one step.
type stepClock struct {
	now  time.Time
	step time.Duration
}

func (c *stepClock) Now() time.Time { t := c.now; c.now = c.now.Add(c.step); return t }

type counts struct {
	n     [timedfs.NumOps]int
	total [timedfs.NumOps]time.Duration
}

func (c *counts) ObserveOp(op timedfs.Op, d time.Duration) { c.n[op]++; c.total[op] += d }

func TestEveryCallTimed(t *testing.T) {
	clock := &stepClock{now: time.Unix(1000, 0), step: 3 * time.Millisecond}
	obs := &counts{}
	fsys := timedfs.Wrap(memfs.New(), obs, clock.Now)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(fsys.MkdirAll("d", 0o755))
	must(fsys.SyncDir("d"))
	f, err := fsys.Create("d/a")
	must(err)
	_, err = f.Write([]byte("hello"))
	must(err)
	_, err = f.WriteAt([]byte("J"), 0)
	must(err)
	must(f.Sync())
	_, err = f.Stat()
	must(err)
	must(f.Truncate(4))
	must(f.Close())
	must(fsys.Rename("d/a", "d/b"))
	g, err := fsys.Open("d/b")
	must(err)
	buf := make([]byte, 2)
	_, err = g.Read(buf)
	must(err)
	_, err = g.ReadAt(buf, 1)
	must(err)
	must(g.Close())
	_, err = fsys.Stat("d/b")
	must(err)
	_, err = fsys.ReadDir("d")
	must(err)
	if _, err := fsys.CreateExclusive("d/b"); err == nil {
		t.Fatal("exclusive create of an existing file succeeded")
	}
	h, err := fsys.OpenReadWrite("d/b")
	must(err)
	must(h.Close())
	must(fsys.Remove("d/b"))

	want := map[timedfs.Op]int{
		timedfs.MkdirAll: 1, timedfs.SyncDir: 1, timedfs.Create: 1, timedfs.Write: 2, timedfs.Fsync: 1,
		timedfs.Fstat: 1, timedfs.Truncate: 1, timedfs.Close: 3, timedfs.Rename: 1, timedfs.Open: 1,
		timedfs.Read: 2, timedfs.Stat: 1, timedfs.ReadDir: 1, timedfs.CreateExclusive: 1,
		timedfs.OpenReadWrite: 1, timedfs.Remove: 1,
	}
	for op := timedfs.Op(0); op < timedfs.NumOps; op++ {
		if obs.n[op] != want[op] {
			t.Errorf("%s: %d observations, want %d", op, obs.n[op], want[op])
		}
		if d := time.Duration(want[op]) * clock.step; obs.total[op] != d {
			t.Errorf("%s: %v in total, want %v", op, obs.total[op], d)
		}
	}
}

func TestFdKeptWhenTheInnerFileHasOne(t *testing.T) {
	dir := t.TempDir()
	fsys := timedfs.Wrap(volume.OS(), &counts{}, nil)
	f, err := fsys.Create(dir + "/x")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, ok := f.(volume.Fder); !ok {
		t.Fatal("a file of the OS filesystem lost its descriptor in the wrapper")
	}
	m, err := timedfs.Wrap(memfs.New(), &counts{}, nil).Create("y")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m.(volume.Fder); ok {
		t.Fatal("a memfs file gained a descriptor in the wrapper")
	}
}

func TestOpNames(t *testing.T) {
	seen := map[string]bool{}
	for op := timedfs.Op(0); op < timedfs.NumOps; op++ {
		s := op.String()
		if s == "" || s == "unknown" || seen[s] {
			t.Errorf("op %d has name %q", op, s)
		}
		seen[s] = true
	}
}

func TestSpacePassesThrough(t *testing.T) {
	wrapped := timedfs.Wrap(volume.OS(), nopObserver{}, nil)
	want, err := volume.SpaceOf(volume.OS(), t.TempDir())
	if err != nil {
		t.Skipf("the OS filesystem tells no size here: %v", err)
	}
	got, err := volume.SpaceOf(wrapped, t.TempDir())
	if err != nil || got.Total != want.Total {
		t.Fatalf("wrapped SpaceOf = %+v, %v; want total %d", got, err, want.Total)
	}
}

type nopObserver struct{}

func (nopObserver) ObserveOp(timedfs.Op, time.Duration) {}

package nfsfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/memfs"
)

// clock is a fake clock the tests move by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// setup returns a server over a fresh memfs holding /d, with the given
// TTLs and a fake clock.
func setup(t *testing.T, opts Options) (*memfs.FS, *Server, *clock) {
	t.Helper()
	m := memfs.New()
	if err := m.MkdirAll("/d", 0); err != nil {
		t.Fatal(err)
	}
	c := &clock{t: time.Unix(1_000_000, 0)}
	opts.Now = c.now
	return m, New(m, opts), c
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func create(t *testing.T, fsys volume.FS, name string) volume.File {
	t.Helper()
	f, err := fsys.Create(name)
	must(t, err)
	return f
}

func write(t *testing.T, f volume.File, s string) {
	t.Helper()
	if _, err := f.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
}

// read opens name afresh and returns its contents, or "<absent>".
func read(t *testing.T, fsys volume.FS, name string) string {
	t.Helper()
	f, err := fsys.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return "<absent>"
	}
	must(t, err)
	defer f.Close()
	b, err := io.ReadAll(f)
	must(t, err)
	return string(b)
}

func size(t *testing.T, fsys volume.FS, name string) int64 {
	t.Helper()
	fi, err := fsys.Stat(name)
	must(t, err)
	return fi.Size()
}

func names(t *testing.T, fsys volume.FS, dir string) []string {
	t.Helper()
	es, err := fsys.ReadDir(dir)
	must(t, err)
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

func TestSameHostSameView(t *testing.T) {
	_, s, _ := setup(t, Options{})
	a1, a2, b := s.View("a"), s.View("a"), s.View("b")
	if a1 != a2 || a1 == b {
		t.Fatal("views are not one per host")
	}
}

// TestCloseToOpen: another host sees a write once the writer flushed it
// (Close or Sync) and it opens the file; the writer sees it at once.
func TestCloseToOpen(t *testing.T) {
	for _, flush := range []string{"close", "sync"} {
		t.Run(flush, func(t *testing.T) {
			m, s, _ := setup(t, Options{})
			a, b := s.View("a"), s.View("b")
			f := create(t, a, "/d/f")
			write(t, f, "hello")
			if got := read(t, b, "/d/f"); got != "" {
				t.Fatalf("other host read %q before the flush", got)
			}
			if got := read(t, m, "/d/f"); got != "" {
				t.Fatalf("backing has %q before the flush", got)
			}
			if got := read(t, a, "/d/f"); got != "hello" {
				t.Fatalf("writer read %q", got)
			}
			if a.DirtyBytes() != 5 || b.DirtyBytes() != 0 {
				t.Fatalf("dirty bytes %d, %d", a.DirtyBytes(), b.DirtyBytes())
			}
			// A handle B opens now may or may not see later data; reading
			// through to the backing, this one does once it is flushed.
			if flush == "close" {
				must(t, f.Close())
			} else {
				must(t, f.Sync())
				defer f.Close()
			}
			if got := read(t, b, "/d/f"); got != "hello" {
				t.Fatalf("other host read %q after %s", got, flush)
			}
			if a.DirtyBytes() != 0 {
				t.Fatalf("dirty bytes %d after %s", a.DirtyBytes(), flush)
			}
		})
	}
}

func TestReadYourWrites(t *testing.T) {
	_, s, _ := setup(t, Options{AttrTTL: time.Minute})
	a, b := s.View("a"), s.View("b")
	f := create(t, a, "/d/f")
	write(t, f, "0123456789")
	must(t, f.Close())
	if size(t, a, "/d/f") != 10 || size(t, b, "/d/f") != 10 {
		t.Fatal("sizes after close")
	}
	// Reopen, overwrite in the middle, append past a gap, truncate: the
	// writer's reads, Stat and file Stat see it; the other host does not,
	// and its cached attributes stay put.
	g, err := a.OpenReadWrite("/d/f")
	must(t, err)
	defer g.Close()
	_, err = g.WriteAt([]byte("ab"), 3)
	must(t, err)
	_, err = g.WriteAt([]byte("Z"), 14)
	must(t, err)
	if got, want := read(t, a, "/d/f"), "012ab56789\x00\x00\x00\x00Z"; got != want {
		t.Fatalf("writer read %q, want %q", got, want)
	}
	if size(t, a, "/d/f") != 15 {
		t.Fatalf("writer's Stat size %d", size(t, a, "/d/f"))
	}
	if fi, err := g.Stat(); err != nil || fi.Size() != 15 {
		t.Fatalf("writer's file Stat %v, %v", fi, err)
	}
	if n, err := g.Seek(0, io.SeekEnd); err != nil || n != 15 {
		t.Fatalf("seek end %d, %v", n, err)
	}
	must(t, g.Truncate(4))
	if got := read(t, a, "/d/f"); got != "012a" {
		t.Fatalf("after truncate writer read %q", got)
	}
	if got := read(t, b, "/d/f"); got != "0123456789" {
		t.Fatalf("other host read %q", got)
	}
	if got := size(t, b, "/d/f"); got != 10 {
		t.Fatalf("other host's size %d", got)
	}
	must(t, g.Sync())
	if got := size(t, b, "/d/f"); got != 10 {
		t.Fatalf("other host's cached size %d, want the stale 10", got)
	}
	// Its open revalidates (close-to-open), and so refreshes the size.
	if got := read(t, b, "/d/f"); got != "012a" {
		t.Fatalf("after sync other host read %q", got)
	}
	if got := size(t, b, "/d/f"); got != 4 {
		t.Fatalf("other host's size after open %d", got)
	}
}

// TestDirtyMatchesReference applies random writes, truncates and flushes
// through a view and the same to a plain memfs file, comparing what the
// writer reads at every step and what the backing holds after each flush.
func TestDirtyMatchesReference(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 1))
			m, s, _ := setup(t, Options{})
			ref := memfs.New()
			a := s.View("a")
			f, g := create(t, a, "/d/f"), create(t, ref, "/f")
			defer f.Close()
			other := s.View("b")
			var flushed string
			for step := range 300 {
				var what string
				switch r := rng.IntN(20); {
				case r < 12:
					off := rng.Int64N(200)
					p := bytes.Repeat([]byte{byte('a' + rng.IntN(26))}, 1+rng.IntN(40))
					what = fmt.Sprintf("write %d@%d", len(p), off)
					_, err1 := f.WriteAt(p, off)
					_, err2 := g.WriteAt(p, off)
					must(t, errors.Join(err1, err2))
				case r < 15:
					// Append at the end, as a log does.
					p := bytes.Repeat([]byte{byte('A' + rng.IntN(26))}, 1+rng.IntN(40))
					what = fmt.Sprintf("append %d", len(p))
					_, err1 := f.Seek(0, io.SeekEnd)
					_, err2 := g.Seek(0, io.SeekEnd)
					must(t, errors.Join(err1, err2))
					_, err1 = f.Write(p)
					_, err2 = g.Write(p)
					must(t, errors.Join(err1, err2))
				case r < 18:
					n := rng.Int64N(250)
					what = fmt.Sprintf("truncate %d", n)
					must(t, errors.Join(f.Truncate(n), g.Truncate(n)))
				default:
					what = "sync"
					must(t, f.Sync())
					flushed = read(t, ref, "/f")
					if a.DirtyBytes() != 0 {
						t.Fatalf("step %d: %d dirty bytes after sync", step, a.DirtyBytes())
					}
				}
				want := read(t, ref, "/f")
				if got := read(t, a, "/d/f"); got != want {
					t.Fatalf("step %d (%s): writer read\n%q, want\n%q", step, what, got, want)
				}
				if got := size(t, a, "/d/f"); got != int64(len(want)) {
					t.Fatalf("step %d (%s): writer's size %d, want %d", step, what, got, len(want))
				}
				// Random reads through the writing handle.
				off, n := rng.Int64N(260), rng.IntN(60)
				buf := make([]byte, n)
				k, err := f.ReadAt(buf, off)
				wk, werr := g.ReadAt(make([]byte, n), off)
				if k != wk || (err == nil) != (werr == nil) {
					t.Fatalf("step %d: ReadAt(%d@%d) = %d, %v; want %d, %v", step, n, off, k, err, wk, werr)
				}
				if got := read(t, m, "/d/f"); got != flushed {
					t.Fatalf("step %d (%s): backing holds %q, want the last flush %q", step, what, got, flushed)
				}
				if got := read(t, other, "/d/f"); got != flushed {
					t.Fatalf("step %d: other host reads %q", step, got)
				}
			}
		})
	}
}

// TestCrash drops what was not flushed and keeps what was synced or
// closed; the crashed host's files fail, and the host then works again.
func TestCrash(t *testing.T) {
	m, s, _ := setup(t, Options{AttrTTL: time.Hour, DirTTL: time.Hour, NegTTL: time.Hour})
	a := s.View("a")
	synced := create(t, a, "/d/synced")
	write(t, synced, "kept")
	must(t, synced.Sync())
	write(t, synced, "+lost")
	closed := create(t, a, "/d/closed")
	write(t, closed, "kept")
	must(t, closed.Close())
	open := create(t, a, "/d/open")
	write(t, open, "lost")
	reader, err := a.Open("/d/closed")
	must(t, err)
	if _, err := a.Stat("/d/missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	must(t, m.MkdirAll("/d/missing", 0)) // behind the view's back

	a.Crash()
	if a.DirtyBytes() != 0 {
		t.Fatalf("%d dirty bytes after crash", a.DirtyBytes())
	}
	for name, want := range map[string]string{"/d/synced": "kept", "/d/closed": "kept", "/d/open": ""} {
		if got := read(t, m, name); got != want {
			t.Errorf("backing %s = %q, want %q", name, got, want)
		}
	}
	for _, f := range []volume.File{synced, open, reader} {
		_, werr := f.Write([]byte("x"))
		_, rerr := f.ReadAt(make([]byte, 1), 0)
		_, serr := f.Stat()
		for _, err := range []error{werr, rerr, serr, f.Sync(), f.Truncate(0), f.Close()} {
			if !errors.Is(err, ErrCrashed) {
				t.Errorf("%s: %v, want ErrCrashed", f.Name(), err)
			}
		}
	}
	// The rebooted host starts with empty caches and works normally.
	if _, err := a.Stat("/d/missing"); err != nil {
		t.Fatalf("negative cache survived the crash: %v", err)
	}
	if got := read(t, a, "/d/synced"); got != "kept" {
		t.Fatalf("after reboot read %q", got)
	}
	f := create(t, a, "/d/new")
	write(t, f, "x")
	must(t, f.Close())
	if got := read(t, s.View("b"), "/d/new"); got != "x" {
		t.Fatalf("after reboot other host read %q", got)
	}
}

// TestCaches checks that each cache answers until its TTL and not at it,
// that zero TTLs cache nothing, and that a host's own changes bypass its
// caches.
func TestCaches(t *testing.T) {
	const ttl = 10 * time.Second
	type env struct {
		t    *testing.T
		m    *memfs.FS
		a, b *View
	}
	cases := []struct {
		name string
		opts Options
		// prime reads through a, change changes the volume through b,
		// probe reads through a again and reports whether it saw the
		// change.
		prime, change func(e env)
		probe         func(e env) bool
	}{
		{"attributes", Options{AttrTTL: ttl},
			func(e env) { size(e.t, e.a, "/d/f") },
			func(e env) { f := create(e.t, e.b, "/d/f"); write(e.t, f, "grown"); must(e.t, f.Close()) },
			func(e env) bool { return size(e.t, e.a, "/d/f") == 5 }},
		{"directory", Options{DirTTL: ttl},
			func(e env) { names(e.t, e.a, "/d") },
			func(e env) { must(e.t, create(e.t, e.b, "/d/g").Close()) },
			func(e env) bool { return slices.Contains(names(e.t, e.a, "/d"), "g") }},
		{"negative stat", Options{NegTTL: ttl},
			func(e env) { _, _ = e.a.Stat("/d/g") },
			func(e env) { must(e.t, create(e.t, e.b, "/d/g").Close()) },
			func(e env) bool { _, err := e.a.Stat("/d/g"); return err == nil }},
		{"negative open", Options{NegTTL: ttl},
			func(e env) { _, _ = e.a.Open("/d/g") },
			func(e env) { must(e.t, create(e.t, e.b, "/d/g").Close()) },
			func(e env) bool {
				f, err := e.a.Open("/d/g")
				if err == nil {
					f.Close()
				} else if !errors.Is(err, fs.ErrNotExist) {
					e.t.Fatal(err)
				}
				return err == nil
			}},
		{"negative open rw", Options{NegTTL: ttl},
			func(e env) { _, _ = e.a.Stat("/d/g") },
			func(e env) { must(e.t, create(e.t, e.b, "/d/g").Close()) },
			func(e env) bool {
				f, err := e.a.OpenReadWrite("/d/g")
				if err == nil {
					f.Close()
				}
				return err == nil
			}},
	}
	for _, tc := range cases {
		for _, cached := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/cached=%v", tc.name, cached), func(t *testing.T) {
				opts := tc.opts
				if !cached {
					opts = Options{}
				}
				m, s, c := setup(t, opts)
				must(t, create(t, m, "/d/f").Close())
				e := env{t, m, s.View("a"), s.View("b")}
				tc.prime(e)
				tc.change(e)
				c.add(ttl - time.Nanosecond)
				if got := tc.probe(e); got == cached {
					t.Fatalf("just before the TTL saw the change: %v", got)
				}
				c.add(time.Nanosecond)
				if !tc.probe(e) {
					t.Fatal("at the TTL still did not see the change")
				}
			})
		}
	}
}

func TestOwnChangesBypassCaches(t *testing.T) {
	all := Options{AttrTTL: time.Hour, DirTTL: time.Hour, NegTTL: time.Hour}
	_, s, _ := setup(t, all)
	a, b := s.View("a"), s.View("b")
	// Negative entries: the host's own create, mkdir and rename clear them.
	for _, p := range []string{"/d/f", "/d/sub", "/d/sub/x", "/d/g"} {
		if _, err := a.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
	}
	names(t, a, "/d")
	f := create(t, a, "/d/f")
	write(t, f, "abc")
	must(t, f.Close())
	must(t, a.MkdirAll("/d/sub/x", 0))
	must(t, a.Rename("/d/f", "/d/g"))
	if size(t, a, "/d/g") != 3 {
		t.Fatal("own rename target")
	}
	if _, err := a.Stat("/d/sub/x"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Stat("/d/f"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("renamed source: %v", err)
	}
	if got := names(t, a, "/d"); !slices.Equal(got, []string{"g", "sub"}) {
		t.Fatalf("own listing %v", got)
	}
	// An open revalidates attributes cached before another host's change.
	fi, err := a.Stat("/d/g")
	must(t, err)
	g := create(t, b, "/d/g")
	write(t, g, "longer")
	must(t, g.Close())
	if size(t, a, "/d/g") != fi.Size() {
		t.Fatal("attribute cache not used")
	}
	if got := read(t, a, "/d/g"); got != "longer" {
		t.Fatalf("open read %q", got)
	}
	if size(t, a, "/d/g") != 6 {
		t.Fatal("open did not revalidate attributes")
	}
	// Flushing own writes refreshes the own cached size.
	h, err := a.OpenReadWrite("/d/g")
	must(t, err)
	_, err = h.WriteAt([]byte("!"), 6)
	must(t, err)
	must(t, h.Close())
	if size(t, a, "/d/g") != 7 {
		t.Fatal("own flushed write not in own Stat")
	}
}

// TestSillyRenameOnRemove: removing a file that any host holds open hides
// it until the last handle closes, and keeps its directory non-empty.
func TestSillyRenameOnRemove(t *testing.T) {
	for _, holder := range []string{"other host", "same host", "both"} {
		t.Run(holder, func(t *testing.T) {
			m, s, _ := setup(t, Options{})
			a, b := s.View("a"), s.View("b")
			must(t, m.MkdirAll("/d/p", 0))
			f := create(t, a, "/d/p/seg")
			write(t, f, "data")
			must(t, f.Close())
			var handles []volume.File
			if holder != "same host" {
				h, err := b.Open("/d/p/seg")
				must(t, err)
				handles = append(handles, h)
			}
			if holder != "other host" {
				h, err := a.Open("/d/p/seg")
				must(t, err)
				handles = append(handles, h)
			}
			must(t, a.Remove("/d/p/seg"))
			hidden := s.Hidden()
			if len(hidden) != 1 || !strings.HasPrefix(hidden[0], "/d/p/.nfs") || len(hidden[0]) != len("/d/p/.nfs")+16 {
				t.Fatalf("hidden %v", hidden)
			}
			for _, v := range []volume.FS{a, b, m} {
				if _, err := v.Stat("/d/p/seg"); !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("removed name still there: %v", err)
				}
				if got := names(t, v, "/d/p"); len(got) != 1 || !strings.HasPrefix(got[0], ".nfs") {
					t.Fatalf("listing %v", got)
				}
			}
			if err := a.Remove("/d/p"); !errors.Is(err, syscall.ENOTEMPTY) {
				t.Fatalf("rmdir with a hidden file: %v", err)
			}
			for i, h := range handles {
				buf := make([]byte, 4)
				if _, err := h.ReadAt(buf, 0); err != nil || string(buf) != "data" {
					t.Fatalf("hidden file read %q, %v", buf, err)
				}
				must(t, h.Close())
				if left := len(s.Hidden()); left != min(1, len(handles)-1-i) {
					t.Fatalf("after %d closes %d hidden", i+1, left)
				}
			}
			if got := names(t, m, "/d/p"); len(got) != 0 {
				t.Fatalf("after the last close %v", got)
			}
			must(t, a.Remove("/d/p"))
		})
	}
}

// TestSillyRenameOnRenameOver: replacing a file someone holds open keeps
// the old inode as a hidden file for the holder, and the new one under the
// name for everyone who opens it.
func TestSillyRenameOnRenameOver(t *testing.T) {
	m, s, _ := setup(t, Options{})
	a, b := s.View("a"), s.View("b")
	must(t, volume.WriteFileAtomic(a, "/d/manifest", []byte("v1")))
	h, err := b.Open("/d/manifest")
	must(t, err)
	must(t, volume.WriteFileAtomic(a, "/d/manifest", []byte("v2")))
	if len(s.Hidden()) != 1 {
		t.Fatalf("hidden %v", s.Hidden())
	}
	if got := read(t, b, "/d/manifest"); got != "v2" {
		t.Fatalf("reopen read %q", got)
	}
	b1, err := io.ReadAll(h)
	if err != nil || string(b1) != "v1" {
		t.Fatalf("held handle read %q, %v", b1, err)
	}
	// Replacing the hidden file's holder again leaves a second one.
	h2, err := a.Open("/d/manifest")
	must(t, err)
	must(t, volume.WriteFileAtomic(b, "/d/manifest", []byte("v3")))
	if len(s.Hidden()) != 2 {
		t.Fatalf("hidden %v", s.Hidden())
	}
	must(t, h.Close())
	must(t, h2.Close())
	if got := names(t, m, "/d"); !slices.Equal(got, []string{"manifest"}) {
		t.Fatalf("after closes %v", got)
	}
	if read(t, m, "/d/manifest") != "v3" {
		t.Fatal("final contents")
	}
}

// TestRenameFailureKeepsTarget: a rename onto an open file that then fails
// leaves the target where it was.
func TestRenameFailureKeepsTarget(t *testing.T) {
	m, s, _ := setup(t, Options{})
	a := s.View("a")
	must(t, volume.WriteFileAtomic(a, "/d/f", []byte("x")))
	h, err := a.Open("/d/f")
	must(t, err)
	defer h.Close()
	if err := a.Rename("/d/nope", "/d/f"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("rename of a missing file: %v", err)
	}
	if got := names(t, m, "/d"); !slices.Equal(got, []string{"f"}) || len(s.Hidden()) != 0 {
		t.Fatalf("after a failed rename: %v, hidden %v", got, s.Hidden())
	}
	// The node is still tracked under its name: a remove hides it.
	must(t, a.Remove("/d/f"))
	if len(s.Hidden()) != 1 {
		t.Fatalf("hidden %v", s.Hidden())
	}
}

// TestOpenFilesFollowDirectoryRename: handles follow their file when its
// directory is renamed (the trash move of a topic delete), so removing it
// under the new name still hides it.
func TestOpenFilesFollowDirectoryRename(t *testing.T) {
	m, s, _ := setup(t, Options{})
	a, b := s.View("a"), s.View("b")
	must(t, m.MkdirAll("/d/topic/0", 0))
	must(t, m.MkdirAll("/trash", 0))
	f := create(t, a, "/d/topic/0/seg")
	write(t, f, "unflushed")
	must(t, b.Rename("/d/topic", "/trash/topic"))
	must(t, b.Remove("/trash/topic/0/seg"))
	hidden := s.Hidden()
	if len(hidden) != 1 || !strings.HasPrefix(hidden[0], "/trash/topic/0/.nfs") {
		t.Fatalf("hidden %v", hidden)
	}
	if err := b.Remove("/trash/topic/0"); !errors.Is(err, syscall.ENOTEMPTY) {
		t.Fatalf("rmdir: %v", err)
	}
	must(t, f.Close()) // flushes into the hidden file, then removes it
	must(t, b.Remove("/trash/topic/0"))
	must(t, b.Remove("/trash/topic"))
}

// TestCrashReleasesHandles: a crashed host's handles no longer keep hidden
// files alive.
func TestCrashReleasesHandles(t *testing.T) {
	m, s, _ := setup(t, Options{})
	a, b := s.View("a"), s.View("b")
	must(t, volume.WriteFileAtomic(b, "/d/f", []byte("x")))
	h, err := a.Open("/d/f")
	must(t, err)
	other, err := b.Open("/d/f")
	must(t, err)
	must(t, b.Remove("/d/f"))
	a.Crash()
	if len(s.Hidden()) != 1 {
		t.Fatalf("the other host's handle should keep it: %v", s.Hidden())
	}
	must(t, other.Close())
	if len(s.Hidden()) != 0 || len(names(t, m, "/d")) != 0 {
		t.Fatalf("hidden %v, listing %v", s.Hidden(), names(t, m, "/d"))
	}
	if err := h.Close(); !errors.Is(err, ErrCrashed) {
		t.Fatalf("close after crash: %v", err)
	}
	// The last holder crashing removes it too.
	must(t, volume.WriteFileAtomic(b, "/d/g", []byte("x")))
	_, err = a.Open("/d/g")
	must(t, err)
	must(t, b.Remove("/d/g"))
	a.Crash()
	if len(s.Hidden()) != 0 || len(names(t, m, "/d")) != 0 {
		t.Fatalf("hidden %v, listing %v", s.Hidden(), names(t, m, "/d"))
	}
	must(t, m.Remove("/d"))
}

func TestErrorsWrapPaths(t *testing.T) {
	_, s, _ := setup(t, Options{NegTTL: time.Minute})
	a := s.View("a")
	for i := range 2 { // the second answer comes from the negative cache
		_, err := a.Open("/d/nope")
		var pe *fs.PathError
		if !errors.As(err, &pe) || pe.Path != "/d/nope" || !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("open %d: %v", i, err)
		}
		_, err = a.Stat("/d/nope")
		if !errors.As(err, &pe) || pe.Path != "/d/nope" || !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("stat %d: %v", i, err)
		}
	}
	f, err := a.Open("/d")
	must(t, err)
	if _, err := f.Write([]byte("x")); !errors.Is(err, syscall.EBADF) {
		t.Fatalf("write to read-only: %v", err)
	}
	must(t, f.Close())
	if err := f.Close(); !errors.Is(err, fs.ErrClosed) {
		t.Fatalf("second close: %v", err)
	}
}

// TestConcurrent runs writers, readers and crashes of several hosts at
// once, for the race detector.
func TestConcurrent(t *testing.T) {
	_, s, _ := setup(t, Options{AttrTTL: time.Second, DirTTL: time.Second, NegTTL: time.Second})
	var wg sync.WaitGroup
	for h := range 4 {
		v := s.View(fmt.Sprint("host", h))
		wg.Go(func() {
			for i := range 50 {
				name := fmt.Sprintf("/d/f%d", i%5)
				f, err := v.Create(name)
				if err != nil {
					continue
				}
				for range 5 {
					_, _ = f.Write([]byte("0123456789"))
				}
				buf := make([]byte, 8)
				_, _ = f.ReadAt(buf, 3)
				_ = f.Sync()
				if r, err := v.Open(name); err == nil {
					_, _ = io.ReadAll(r)
					_ = r.Close()
				}
				_, _ = v.Stat(name)
				_, _ = v.ReadDir("/d")
				_ = v.DirtyBytes()
				switch i % 7 {
				case 3:
					_ = v.Remove(name)
				case 5:
					_ = v.Rename(name, fmt.Sprintf("/d/f%d", (i+1)%5))
				case 6:
					v.Crash()
				}
				_ = f.Close()
			}
		})
	}
	wg.Wait()
	if h := s.Hidden(); len(h) != 0 {
		t.Fatalf("hidden files left with no handle open: %v", h)
	}
}

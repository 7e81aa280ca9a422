package memfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"sync"
	"testing"
)

// Steps of a crash scenario. Each fails the test on error.
type step func(t *testing.T, m *FS)

func write(name, data string, sync bool) step {
	return func(t *testing.T, m *FS) {
		t.Helper()
		f, err := m.OpenReadWrite(name)
		if errors.Is(err, fs.ErrNotExist) {
			f, err = m.Create(name)
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Seek(0, io.SeekEnd); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte(data)); err != nil {
			t.Fatal(err)
		}
		if sync {
			if err := f.Sync(); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func syncDir(name string) step {
	return func(t *testing.T, m *FS) {
		t.Helper()
		if err := m.SyncDir(name); err != nil {
			t.Fatal(err)
		}
	}
}

func mkdir(name string) step {
	return func(t *testing.T, m *FS) {
		t.Helper()
		if err := m.MkdirAll(name, 0); err != nil {
			t.Fatal(err)
		}
	}
}

func rename(oldname, newname string) step {
	return func(t *testing.T, m *FS) {
		t.Helper()
		if err := m.Rename(oldname, newname); err != nil {
			t.Fatal(err)
		}
	}
}

func remove(name string) step {
	return func(t *testing.T, m *FS) {
		t.Helper()
		if err := m.Remove(name); err != nil {
			t.Fatal(err)
		}
	}
}

// contents returns name's contents, or "<absent>".
func contents(t *testing.T, m *FS, name string) string {
	t.Helper()
	f, err := m.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return "<absent>"
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestCrashClone(t *testing.T) {
	cases := []struct {
		name  string
		steps []step
		want  map[string]string // path -> contents after the crash
	}{
		{"created file vanishes if dir not synced",
			[]step{write("/f", "data", true)},
			map[string]string{"/f": "<absent>"}},
		{"unsynced data dropped",
			[]step{write("/f", "data", false), syncDir("/")},
			map[string]string{"/f": ""}},
		{"synced file in synced dir survives",
			[]step{write("/f", "data", true), syncDir("/")},
			map[string]string{"/f": "data"}},
		{"only the synced prefix survives",
			[]step{write("/f", "one", true), syncDir("/"), write("/f", "two", false)},
			map[string]string{"/f": "one"}},
		{"renamed synced file survives under new name",
			[]step{write("/tmp", "new", true), rename("/tmp", "/f"), syncDir("/")},
			map[string]string{"/f": "new", "/tmp": "<absent>"}},
		{"rename without dir sync is undone",
			[]step{write("/old", "old", true), syncDir("/"), write("/tmp", "new", true), rename("/tmp", "/old")},
			map[string]string{"/old": "old", "/tmp": "<absent>"}},
		{"rename of unsynced file over synced one loses data",
			[]step{write("/f", "old", true), syncDir("/"), write("/tmp", "new", false), rename("/tmp", "/f"), syncDir("/")},
			map[string]string{"/f": ""}},
		{"unsynced remove is undone",
			[]step{write("/f", "data", true), syncDir("/"), remove("/f")},
			map[string]string{"/f": "data"}},
		{"synced remove sticks",
			[]step{write("/f", "data", true), syncDir("/"), remove("/f"), syncDir("/")},
			map[string]string{"/f": "<absent>"}},
		{"directory not synced in its parent vanishes with its subtree",
			[]step{mkdir("/a/b"), write("/a/b/f", "data", true), syncDir("/a/b"), syncDir("/a")},
			map[string]string{"/a/b/f": "<absent>", "/a": "<absent>"}},
		{"fully synced chain survives",
			[]step{mkdir("/a/b"), write("/a/b/f", "data", true), syncDir("/a/b"), syncDir("/a"), syncDir("/")},
			map[string]string{"/a/b/f": "data"}},
		{"cross-directory rename, only source dir synced, loses the file",
			[]step{mkdir("/a"), mkdir("/b"), syncDir("/"), write("/a/f", "data", true), syncDir("/a"),
				rename("/a/f", "/b/f"), syncDir("/a")},
			map[string]string{"/a/f": "<absent>", "/b/f": "<absent>"}},
		{"relative and absolute paths are one tree",
			[]step{write("x", "data", true), syncDir(".")},
			map[string]string{"/x": "data", "./x": "data"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := New()
			for _, s := range tc.steps {
				s(t, m)
			}
			c := m.CrashClone()
			for p, want := range tc.want {
				if got := contents(t, c, p); got != want {
					t.Errorf("%s: got %q, want %q", p, got, want)
				}
			}
		})
	}
}

func TestCrashCloneIsIndependent(t *testing.T) {
	m := New()
	write("/f", "one", true)(t, m)
	syncDir("/")(t, m)
	c := m.CrashClone()
	write("/f", "two", true)(t, c)
	write("/g", "g", true)(t, c)
	syncDir("/")(t, c)
	if got := contents(t, m, "/f"); got != "one" {
		t.Fatalf("original changed to %q", got)
	}
	if got := contents(t, m, "/g"); got != "<absent>" {
		t.Fatalf("original gained /g: %q", got)
	}
	// The clone's state is durable as it stands: cloning it again keeps it.
	if got := contents(t, c.CrashClone(), "/f"); got != "onetwo" {
		t.Fatalf("clone of clone: %q", got)
	}
}

func TestSyncOnOpenDirectory(t *testing.T) {
	m := New()
	mkdir("/d")(t, m)
	syncDir("/")(t, m)
	write("/d/f", "x", true)(t, m)
	d, err := m.Open("/d")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if got := contents(t, m.CrashClone(), "/d/f"); got != "x" {
		t.Fatalf("got %q", got)
	}
}

func TestPathsShareOneRoot(t *testing.T) {
	m := New()
	write("a", "data", false)(t, m)
	names := []string{"a", "/a", "./a", "//a", "/../a", "b/../a"}
	for _, n := range names {
		if got := contents(t, m, n); got != "data" {
			t.Errorf("%q: got %q", n, got)
		}
	}
	for _, root := range []string{"/", ".", ""} {
		es, err := m.ReadDir(root)
		if err != nil || len(es) != 1 || es[0].Name() != "a" {
			t.Errorf("ReadDir(%q) = %v, %v", root, es, err)
		}
	}
}

func TestRootRefusesRemoveAndRename(t *testing.T) {
	m := New()
	if err := m.Remove("/"); err == nil {
		t.Fatal("removed the root")
	}
	if err := m.Rename("/", "/x"); err == nil {
		t.Fatal("renamed the root")
	}
	if err := m.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
}

// TestConcurrentUse runs writers, readers and directory calls at once; run
// with -race. The outcome is deterministic because each goroutine owns its
// file.
func TestConcurrentUse(t *testing.T) {
	m := New()
	mkdir("/d")(t, m)
	const workers, writes = 8, 50
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			name := fmt.Sprintf("/d/f%d", w)
			f, err := m.Create(name)
			if err != nil {
				errs <- err
				return
			}
			for i := range writes {
				if _, err := f.WriteAt([]byte{byte(i)}, int64(i)); err != nil {
					errs <- err
					return
				}
				buf := make([]byte, 1)
				if _, err := f.ReadAt(buf, int64(i)); err != nil || buf[0] != byte(i) {
					errs <- fmt.Errorf("%s: read back %v, %v", name, buf, err)
					return
				}
				if _, err := m.ReadDir("/d"); err != nil {
					errs <- err
					return
				}
			}
			if err := f.Sync(); err != nil {
				errs <- err
				return
			}
			errs <- f.Close()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	syncDir("/d")(t, m)
	syncDir("/")(t, m)
	c := m.CrashClone()
	es, err := c.ReadDir("/d")
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != workers {
		t.Fatalf("%d files survived, want %d", len(es), workers)
	}
	for _, e := range es {
		fi, err := e.Info()
		if err != nil || fi.Size() != writes {
			t.Fatalf("%s: %v, %v", e.Name(), fi, err)
		}
	}
}

func TestReadDirSortedAndTyped(t *testing.T) {
	m := New()
	for _, n := range []string{"/z", "/m", "/a"} {
		write(n, "", false)(t, m)
	}
	mkdir("/k")(t, m)
	es, err := m.ReadDir("/")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range es {
		got = append(got, fmt.Sprintf("%s:%v", e.Name(), e.IsDir()))
	}
	if want := []string{"a:false", "k:true", "m:false", "z:false"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

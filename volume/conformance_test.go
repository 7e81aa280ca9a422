package volume_test

import (
	"errors"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/memfs"
)

// fsUnderTest names an implementation and gives each subtest a fresh FS and
// the directory it may use.
type fsUnderTest struct {
	name string
	make func(t *testing.T) (volume.FS, string)
}

func implementations() []fsUnderTest {
	return []fsUnderTest{
		{"os", func(t *testing.T) (volume.FS, string) { return volume.OS(), t.TempDir() }},
		{"memfs", func(t *testing.T) (volume.FS, string) {
			m := memfs.New()
			if err := m.MkdirAll("/work", 0); err != nil {
				t.Fatal(err)
			}
			return m, "/work"
		}},
	}
}

func mustWrite(t *testing.T, fsys volume.FS, name, data string) {
	t.Helper()
	f, err := fsys.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte(data)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func mustRead(t *testing.T, fsys volume.FS, name string) string {
	t.Helper()
	b, err := volume.ReadFile(fsys, name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got error %v, want %v", what, err, want)
	}
}

// TestConformance runs the same cases against the OS and memfs, so that
// memfs fails the way the OS does.
func TestConformance(t *testing.T) {
	cases := []struct {
		name string
		run  func(t *testing.T, fsys volume.FS, p func(string) string)
	}{
		{"open missing", func(t *testing.T, fsys volume.FS, p func(string) string) {
			_, err := fsys.Open(p("nope"))
			wantErr(t, "open", err, fs.ErrNotExist)
			_, err = fsys.OpenReadWrite(p("nope"))
			wantErr(t, "open rw", err, fs.ErrNotExist)
			_, err = fsys.Stat(p("nope"))
			wantErr(t, "stat", err, fs.ErrNotExist)
		}},
		{"create in missing dir", func(t *testing.T, fsys volume.FS, p func(string) string) {
			_, err := fsys.Create(p("no/such"))
			wantErr(t, "create", err, fs.ErrNotExist)
		}},
		{"path through a file", func(t *testing.T, fsys volume.FS, p func(string) string) {
			mustWrite(t, fsys, p("f"), "x")
			_, err := fsys.Open(p("f/g"))
			wantErr(t, "open", err, syscall.ENOTDIR)
			wantErr(t, "mkdir", fsys.MkdirAll(p("f/g"), 0o755), syscall.ENOTDIR)
			_, err = fsys.ReadDir(p("f"))
			wantErr(t, "readdir", err, syscall.ENOTDIR)
		}},
		{"name longer than NAME_MAX", func(t *testing.T, fsys volume.FS, p func(string) string) {
			fits, long := strings.Repeat("n", volume.NameMax), strings.Repeat("n", volume.NameMax+1)
			mustWrite(t, fsys, p(fits), "x")
			if got := mustRead(t, fsys, p(fits)); got != "x" {
				t.Fatalf("read %q", got)
			}
			_, err := fsys.Create(p(long))
			wantErr(t, "create", err, syscall.ENAMETOOLONG)
			_, err = fsys.CreateExclusive(p(long))
			wantErr(t, "create exclusive", err, syscall.ENAMETOOLONG)
			_, err = fsys.Open(p(long))
			wantErr(t, "open", err, syscall.ENAMETOOLONG)
			_, err = fsys.Stat(p(long))
			wantErr(t, "stat", err, syscall.ENAMETOOLONG)
			wantErr(t, "mkdir", fsys.MkdirAll(p(long+"/sub"), 0o755), syscall.ENAMETOOLONG)
			wantErr(t, "rename", fsys.Rename(p(fits), p(long)), syscall.ENAMETOOLONG)
			wantErr(t, "remove", fsys.Remove(p(long)), syscall.ENAMETOOLONG)
			_, err = fsys.ReadDir(p(long))
			wantErr(t, "readdir", err, syscall.ENAMETOOLONG)
		}},
		{"create exclusive", func(t *testing.T, fsys volume.FS, p func(string) string) {
			f, err := fsys.CreateExclusive(p("claim"))
			if err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			_, err = fsys.CreateExclusive(p("claim"))
			wantErr(t, "second create", err, fs.ErrExist)
			if err := fsys.MkdirAll(p("d"), 0o755); err != nil {
				t.Fatal(err)
			}
			_, err = fsys.CreateExclusive(p("d"))
			wantErr(t, "create over dir", err, fs.ErrExist)
		}},
		{"directories refuse file calls", func(t *testing.T, fsys volume.FS, p func(string) string) {
			if err := fsys.MkdirAll(p("d"), 0o755); err != nil {
				t.Fatal(err)
			}
			_, err := fsys.Create(p("d"))
			wantErr(t, "create", err, syscall.EISDIR)
			_, err = fsys.OpenReadWrite(p("d"))
			wantErr(t, "open rw", err, syscall.EISDIR)
			f, err := fsys.Open(p("d"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			_, err = f.Read(make([]byte, 1))
			wantErr(t, "read", err, syscall.EISDIR)
			if err := f.Sync(); err != nil {
				t.Fatalf("sync open dir: %v", err)
			}
		}},
		{"create truncates", func(t *testing.T, fsys volume.FS, p func(string) string) {
			mustWrite(t, fsys, p("f"), "long contents")
			mustWrite(t, fsys, p("f"), "short")
			if got := mustRead(t, fsys, p("f")); got != "short" {
				t.Fatalf("got %q", got)
			}
		}},
		{"remove", func(t *testing.T, fsys volume.FS, p func(string) string) {
			wantErr(t, "missing", fsys.Remove(p("nope")), fs.ErrNotExist)
			if err := fsys.MkdirAll(p("d/e"), 0o755); err != nil {
				t.Fatal(err)
			}
			wantErr(t, "non-empty", fsys.Remove(p("d")), syscall.ENOTEMPTY)
			if err := fsys.Remove(p("d/e")); err != nil {
				t.Fatal(err)
			}
			if err := fsys.Remove(p("d")); err != nil {
				t.Fatal(err)
			}
		}},
		{"rename errors", func(t *testing.T, fsys volume.FS, p func(string) string) {
			mustWrite(t, fsys, p("f"), "x")
			if err := fsys.MkdirAll(p("d/e"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := fsys.MkdirAll(p("empty"), 0o755); err != nil {
				t.Fatal(err)
			}
			wantErr(t, "missing", fsys.Rename(p("nope"), p("x")), fs.ErrNotExist)
			// os.Rename refuses an existing directory as target outright.
			wantErr(t, "file over dir", fsys.Rename(p("f"), p("d")), fs.ErrExist)
			wantErr(t, "dir over empty dir", fsys.Rename(p("empty"), p("d")), fs.ErrExist)
			wantErr(t, "dir over file", fsys.Rename(p("d"), p("f")), syscall.ENOTDIR)
			wantErr(t, "dir into itself", fsys.Rename(p("d"), p("d/e/x")), syscall.EINVAL)
			if err := fsys.Rename(p("f"), p("f")); err != nil {
				t.Fatalf("rename onto itself: %v", err)
			}
			if err := fsys.Rename(p("d"), p("moved")); err != nil {
				t.Fatal(err)
			}
			if _, err := fsys.Stat(p("moved/e")); err != nil {
				t.Fatal(err)
			}
		}},
		{"rename replaces and handles follow inodes", func(t *testing.T, fsys volume.FS, p func(string) string) {
			mustWrite(t, fsys, p("old"), "old")
			mustWrite(t, fsys, p("new"), "new")
			h, err := fsys.Open(p("old"))
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			if err := fsys.Rename(p("new"), p("old")); err != nil {
				t.Fatal(err)
			}
			if got := mustRead(t, fsys, p("old")); got != "new" {
				t.Fatalf("after rename got %q", got)
			}
			if _, err := fsys.Stat(p("new")); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("source still there: %v", err)
			}
			b, err := io.ReadAll(h)
			if err != nil || string(b) != "old" {
				t.Fatalf("open handle read %q, %v; want the replaced inode", b, err)
			}
		}},
		{"open handle survives remove", func(t *testing.T, fsys volume.FS, p func(string) string) {
			mustWrite(t, fsys, p("f"), "data")
			h, err := fsys.Open(p("f"))
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			if err := fsys.Remove(p("f")); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 4)
			if _, err := h.ReadAt(buf, 0); err != nil || string(buf) != "data" {
				t.Fatalf("got %q, %v", buf, err)
			}
		}},
		{"read only refuses writes", func(t *testing.T, fsys volume.FS, p func(string) string) {
			mustWrite(t, fsys, p("f"), "data")
			h, err := fsys.Open(p("f"))
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			_, err = h.Write([]byte("x"))
			wantErr(t, "write", err, syscall.EBADF)
			_, err = h.WriteAt([]byte("x"), 0)
			wantErr(t, "write at", err, syscall.EBADF)
			if err := h.Truncate(0); err == nil {
				t.Fatal("truncate of read-only file succeeded")
			}
		}},
		{"reads at and past EOF", func(t *testing.T, fsys volume.FS, p func(string) string) {
			mustWrite(t, fsys, p("f"), "abc")
			h, err := fsys.Open(p("f"))
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			buf := make([]byte, 5)
			n, err := h.ReadAt(buf, 1)
			if n != 2 || err != io.EOF || string(buf[:n]) != "bc" {
				t.Fatalf("ReadAt(5@1) = %d, %v", n, err)
			}
			n, err = h.ReadAt(buf, 10)
			if n != 0 || err != io.EOF {
				t.Fatalf("ReadAt past EOF = %d, %v", n, err)
			}
			if _, err := h.ReadAt(buf, -1); err == nil {
				t.Fatal("negative offset accepted")
			}
			if n, err = h.Read(buf); n != 3 || err != nil {
				t.Fatalf("Read = %d, %v", n, err)
			}
			if n, err = h.Read(buf); n != 0 || err != io.EOF {
				t.Fatalf("Read at EOF = %d, %v", n, err)
			}
		}},
		{"seek, write at, truncate", func(t *testing.T, fsys volume.FS, p func(string) string) {
			f, err := fsys.Create(p("f"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			steps := []func() error{
				func() error { _, err := f.Write([]byte("hello")); return err },
				func() error { _, err := f.Seek(-2, io.SeekEnd); return err },
				func() error { _, err := f.Write([]byte("LOWORLD")); return err }, // "helLOWORLD"
				func() error { _, err := f.WriteAt([]byte("!"), 12); return err }, // gap zero-filled
				func() error { _, err := f.Seek(1, io.SeekStart); return err },
				func() error { _, err := f.Seek(1, io.SeekCurrent); return err },
				func() error { _, err := f.Write([]byte("L")); return err }, // "heLLOWORLD\x00\x00!"
			}
			for i, s := range steps {
				if err := s(); err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
			}
			if _, err := f.Seek(-1, io.SeekStart); err == nil {
				t.Fatal("seek before start accepted")
			}
			if got, want := mustRead(t, fsys, p("f")), "heLLOWORLD\x00\x00!"; got != want {
				t.Fatalf("got %q, want %q", got, want)
			}
			if err := f.Truncate(4); err != nil {
				t.Fatal(err)
			}
			if err := f.Truncate(6); err != nil {
				t.Fatal(err)
			}
			if got, want := mustRead(t, fsys, p("f")), "heLL\x00\x00"; got != want {
				t.Fatalf("after truncate got %q, want %q", got, want)
			}
			fi, err := f.Stat()
			if err != nil || fi.Size() != 6 || fi.IsDir() {
				t.Fatalf("stat = %v, %v", fi, err)
			}
		}},
		{"closed file", func(t *testing.T, fsys volume.FS, p func(string) string) {
			f, err := fsys.Create(p("f"))
			if err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			wantErr(t, "second close", f.Close(), fs.ErrClosed)
			_, err = f.Write([]byte("x"))
			wantErr(t, "write", err, fs.ErrClosed)
			_, err = f.Read(make([]byte, 1))
			wantErr(t, "read", err, fs.ErrClosed)
			wantErr(t, "sync", f.Sync(), fs.ErrClosed)
		}},
		{"readdir and stat", func(t *testing.T, fsys volume.FS, p func(string) string) {
			for _, n := range []string{"b", "a", "c"} {
				mustWrite(t, fsys, p(n), n+n)
			}
			if err := fsys.MkdirAll(p("sub/deeper"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := fsys.MkdirAll(p("sub"), 0o755); err != nil {
				t.Fatalf("MkdirAll of an existing dir: %v", err)
			}
			es, err := fsys.ReadDir(p(""))
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, e := range es {
				names = append(names, e.Name())
				if e.IsDir() != (e.Name() == "sub") {
					t.Fatalf("%s: IsDir = %v", e.Name(), e.IsDir())
				}
			}
			if want := []string{"a", "b", "c", "sub"}; !slices.Equal(names, want) {
				t.Fatalf("names %v, want %v", names, want)
			}
			fi, err := fsys.Stat(p("b"))
			if err != nil || fi.Size() != 2 || fi.IsDir() || fi.Name() != "b" {
				t.Fatalf("stat = %v, %v", fi, err)
			}
			if err := fsys.SyncDir(p("sub")); err != nil {
				t.Fatal(err)
			}
			wantErr(t, "syncdir missing", fsys.SyncDir(p("nope")), fs.ErrNotExist)
		}},
		{"open read write keeps contents", func(t *testing.T, fsys volume.FS, p func(string) string) {
			mustWrite(t, fsys, p("f"), "abcdef")
			f, err := fsys.OpenReadWrite(p("f"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write([]byte("XY")); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			if got := mustRead(t, fsys, p("f")); got != "XYcdef" {
				t.Fatalf("got %q", got)
			}
		}},
	}
	for _, impl := range implementations() {
		for _, tc := range cases {
			t.Run(impl.name+"/"+tc.name, func(t *testing.T) {
				fsys, root := impl.make(t)
				tc.run(t, fsys, func(rel string) string { return path.Join(root, rel) })
			})
		}
	}
}

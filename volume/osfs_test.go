package volume

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestOSFilesExposeFd(t *testing.T) {
	fsys := OS()
	dir := t.TempDir()
	name := filepath.Join(dir, "f")
	opens := []struct {
		name string
		open func() (File, error)
	}{
		{"create", func() (File, error) { return fsys.Create(name) }},
		{"open", func() (File, error) { return fsys.Open(name) }},
		{"open rw", func() (File, error) { return fsys.OpenReadWrite(name) }},
	}
	for _, o := range opens {
		t.Run(o.name, func(t *testing.T) {
			f, err := o.open()
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			fd, ok := f.(Fder)
			if !ok {
				t.Fatalf("%T does not implement Fder", f)
			}
			if fd.Fd() == ^uintptr(0) {
				t.Fatal("invalid fd")
			}
		})
	}
}

func TestOSFailedOpenReturnsNilFile(t *testing.T) {
	f, err := OS().Open(filepath.Join(t.TempDir(), "missing"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err = %v", err)
	}
	// A typed nil *os.File inside the interface would compare non-nil.
	if f != nil {
		t.Fatalf("file = %#v, want nil interface", f)
	}
}

func TestOSPermissions(t *testing.T) {
	// Pin the umask (process-wide; these tests are not parallel) so that the
	// expected modes are exact.
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	dir := t.TempDir()
	fsys := OS()
	cases := []struct {
		name string
		make func(string) error
		want fs.FileMode
	}{
		{"create", func(p string) error { f, err := fsys.Create(p); closeIf(f); return err }, 0o644},
		{"create exclusive", func(p string) error { f, err := fsys.CreateExclusive(p); closeIf(f); return err }, 0o644},
		{"mkdir default", func(p string) error { return fsys.MkdirAll(p, 0) }, fs.ModeDir | 0o755},
		{"mkdir explicit", func(p string) error { return fsys.MkdirAll(p, 0o700) }, fs.ModeDir | 0o700},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, tc.name)
			if err := tc.make(p); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode() != tc.want {
				t.Fatalf("mode %v, want %v", fi.Mode(), tc.want)
			}
		})
	}
}

func closeIf(f File) {
	if f != nil {
		_ = f.Close()
	}
}

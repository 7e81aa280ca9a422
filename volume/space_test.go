package volume_test

import (
	"errors"
	"runtime"
	"syscall"
	"testing"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/memfs"
)

// TestSpaceOf: the OS filesystem reports statfs's figures; a filesystem
// that cannot tell its size, and a directory that does not exist, are
// errors.
func TestSpaceOf(t *testing.T) {
	if _, err := volume.SpaceOf(memfs.New(), "/d"); !errors.Is(err, volume.ErrSpaceUnknown) {
		t.Fatalf("memfs: %v, want ErrSpaceUnknown", err)
	}
	if runtime.GOOS != "linux" {
		t.Skip("statfs is read on Linux only")
	}
	dir := t.TempDir()
	got, err := volume.SpaceOf(volume.OS(), dir)
	if err != nil {
		t.Fatal(err)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if want := int64(st.Blocks) * int64(st.Bsize); got.Total != want {
		t.Fatalf("Total %d, want %d", got.Total, want)
	}
	if got.Usable <= 0 || got.Usable > got.Total {
		t.Fatalf("Usable %d of Total %d", got.Usable, got.Total)
	}
	if _, err := volume.SpaceOf(volume.OS(), dir+"/missing"); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("missing dir: %v, want ENOENT", err)
	}
}

package fusefs_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/memfs"
)

// TestNameTooLong: through a mount, a component longer than NAME_MAX fails
// with ENAMETOOLONG (the kernel lets FUSE names up to 1024 bytes through;
// the backing refuses them, as ext4 does), and one of NAME_MAX bytes works.
func TestNameTooLong(t *testing.T) {
	m := memfs.New()
	if err := m.MkdirAll("/vol", 0); err != nil {
		t.Fatal(err)
	}
	mnt := mount(t, m, "/vol")
	fits, long := strings.Repeat("n", volume.NameMax), strings.Repeat("n", volume.NameMax+1)
	if err := os.WriteFile(filepath.Join(mnt, fits), []byte("x"), 0o644); err != nil {
		t.Fatalf("create a %d-byte name: %v", len(fits), err)
	}
	if err := os.WriteFile(filepath.Join(mnt, long), []byte("x"), 0o644); !errors.Is(err, syscall.ENAMETOOLONG) {
		t.Fatalf("create a %d-byte name: %v, want ENAMETOOLONG", len(long), err)
	}
	if err := os.Mkdir(filepath.Join(mnt, long), 0o755); !errors.Is(err, syscall.ENAMETOOLONG) {
		t.Fatalf("mkdir a %d-byte name: %v, want ENAMETOOLONG", len(long), err)
	}
	if err := os.Rename(filepath.Join(mnt, fits), filepath.Join(mnt, long)); !errors.Is(err, syscall.ENAMETOOLONG) {
		t.Fatalf("rename to a %d-byte name: %v, want ENAMETOOLONG", len(long), err)
	}
}

package nfsfs

import (
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/memfs"
)

// TestNameTooLong: a component longer than NAME_MAX fails every call with
// ENAMETOOLONG, as a real NFS client does, caches or not; the longest name
// that fits works.
func TestNameTooLong(t *testing.T) {
	clk := &clock{t: time.Unix(0, 0)}
	v := New(memfs.New(), Options{AttrTTL: time.Minute, DirTTL: time.Minute, NegTTL: time.Minute, Now: clk.now}).View("a")
	fits, long := strings.Repeat("n", volume.NameMax), strings.Repeat("n", volume.NameMax+1)
	f, err := v.Create(fits)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, syscall.ENAMETOOLONG) {
			t.Errorf("%s: %v, want ENAMETOOLONG", what, err)
		}
	}
	for range 2 { // the second round would be answered by a cache, if any kept the failure
		_, err = v.Create(long)
		check("create", err)
		_, err = v.CreateExclusive(long)
		check("create exclusive", err)
		_, err = v.Open(long)
		check("open", err)
		_, err = v.Stat(long)
		check("stat", err)
		_, err = v.ReadDir(long)
		check("readdir", err)
		check("mkdir", v.MkdirAll(long+"/x", 0))
		check("rename", v.Rename(fits, long))
		check("remove", v.Remove(long))
	}
}

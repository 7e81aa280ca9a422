package probe

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/memfs"
	"github.com/kaas-dev/kaas/volume/probe/probetest"
)

func TestMain(m *testing.M) {
	ServeChildIfAsked()
	os.Exit(m.Run())
}

func check(t *testing.T, r Result, name string) Check {
	t.Helper()
	for _, c := range r.Checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no check %q in %+v", name, r.Checks)
	return Check{}
}

func noProbeLeft(t *testing.T, fsys volume.FS, dir string) {
	t.Helper()
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".kaas-probe-") {
			t.Errorf("probe left %s behind", e.Name())
		}
	}
}

func TestBlocks(t *testing.T) {
	b := append(block(7, 64), block(8, 64)...)
	vs, err := versions(b, 64)
	if err != nil || len(vs) != 2 || vs[0] != 7 || vs[1] != 8 {
		t.Fatalf("versions = %v, %v", vs, err)
	}
	mixed := append(block(7, 64)[:40], block(8, 64)[40:]...)
	if _, err := versions(mixed, 64); !errors.Is(err, errTorn) {
		t.Fatalf("mixed block: err = %v, want torn", err)
	}
	if _, err := versions(b[:100], 64); !errors.Is(err, errTorn) {
		t.Fatalf("partial block: err = %v, want torn", err)
	}
}

// The local disk keeps every promise, with a child process as a second
// reader and racer.
func TestLocalDisk(t *testing.T) {
	dir := t.TempDir()
	start := time.Now()
	r := Run(context.Background(), Config{Dir: dir, ChildCommand: []string{os.Args[0]}})
	t.Logf("local disk probe took %v", time.Since(start))
	for _, c := range r.Checks {
		t.Logf("%-18s ok=%v %v %s (%v)", c.Name, c.OK, c.Counts, c.Message, c.Duration)
	}
	if !r.OK() || r.Err() != nil {
		t.Fatalf("probe failed: %v", r.Err())
	}
	if c := check(t, r, CheckCloseToOpen); c.Counts["pairs"] != 2 {
		t.Errorf("close-to-open pairs = %d, want 2 (handle and child)", c.Counts["pairs"])
	}
	if c := check(t, r, CheckRename); strings.Contains(c.Message, "no child") {
		t.Errorf("child did not run: %s", c.Message)
	}
	noProbeLeft(t, volume.OS(), dir)
}

// A second local path to the same directory plays the peer mount.
func TestLocalPeer(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(t.TempDir(), "peer")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	r := Run(context.Background(), Config{Dir: dir, PeerDir: link, ChildCommand: []string{os.Args[0]}})
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	if c := check(t, r, CheckCloseToOpen); c.Counts["pairs"] != 4 {
		t.Errorf("close-to-open pairs = %d, want 4", c.Counts["pairs"])
	}
	noProbeLeft(t, volume.OS(), dir)
}

func TestMemFS(t *testing.T) {
	m := memfs.New()
	if err := m.MkdirAll("/v", 0o755); err != nil {
		t.Fatal(err)
	}
	r := Run(context.Background(), Config{Dir: "/v", FS: m, PeerDir: "/v", PeerFS: m})
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	noProbeLeft(t, m, "/v")
}

// A peer mount that serves what it read before, as stock GlusterFS
// caching does, fails close-to-open, and the message says so.
func TestStalePeerFailsCloseToOpen(t *testing.T) {
	m := memfs.New()
	if err := m.MkdirAll("/v", 0o755); err != nil {
		t.Fatal(err)
	}
	peer := probetest.NewStaleView(m)
	peer.SetStale(true)
	r := Run(context.Background(), Config{Dir: "/v", FS: m, PeerDir: "/v", PeerFS: peer})
	c := check(t, r, CheckCloseToOpen)
	if c.OK || r.OK() {
		t.Fatalf("close-to-open passed with a stale peer: %+v", c)
	}
	for _, want := range []string{"close-to-open", "previous contents", "the peer mount", "client caching off"} {
		if !strings.Contains(c.Message, want) || !strings.Contains(r.Err().Error(), want) {
			t.Errorf("message %q lacks %q", c.Message, want)
		}
	}
	if c.Counts["stale"] != 1 {
		t.Errorf("stale = %d, want 1 (the check stops at the first)", c.Counts["stale"])
	}
	for _, name := range []string{CheckRename, CheckExclusive, CheckDirSync} {
		if c := check(t, r, name); !c.OK {
			t.Errorf("%s failed: %s", name, c.Message)
		}
	}
	noProbeLeft(t, m, "/v")
}

// brokenFS breaks one promise of the FS it wraps.
type brokenFS struct {
	volume.FS
	tornRename   bool
	nonExclusive bool
	syncDirErr   error
}

func (b brokenFS) Rename(oldname, newname string) error {
	if !b.tornRename || !strings.HasSuffix(newname, "/replace") {
		return b.FS.Rename(oldname, newname)
	}
	// A copy that stops half way, then removes the source.
	data, err := volume.ReadFile(b.FS, oldname)
	if err != nil {
		return err
	}
	f, err := b.FS.Create(newname)
	if err != nil {
		return err
	}
	_, _ = f.Write(data[:len(data)/2])
	_ = f.Close()
	return b.FS.Remove(oldname)
}

func (b brokenFS) CreateExclusive(name string) (volume.File, error) {
	if b.nonExclusive {
		return b.FS.Create(name)
	}
	return b.FS.CreateExclusive(name)
}

func (b brokenFS) SyncDir(name string) error {
	if b.syncDirErr != nil {
		return &fs.PathError{Op: "fsync", Path: name, Err: b.syncDirErr}
	}
	return b.FS.SyncDir(name)
}

func runBroken(t *testing.T, b brokenFS) Result {
	t.Helper()
	m := memfs.New()
	if err := m.MkdirAll("/v", 0o755); err != nil {
		t.Fatal(err)
	}
	b.FS = m
	r := Run(context.Background(), Config{Dir: "/v", FS: b})
	if r.OK() || r.Err() == nil {
		t.Fatalf("probe passed on a broken FS")
	}
	noProbeLeft(t, m, "/v")
	return r
}

func TestTornRenameFails(t *testing.T) {
	r := runBroken(t, brokenFS{tornRename: true})
	c := check(t, r, CheckRename)
	if c.OK || !strings.Contains(c.Message, "atomic rename") || !strings.Contains(c.Message, "torn or partial") || c.Counts["torn"] == 0 {
		t.Fatalf("rename check: %+v", c)
	}
}

func TestDoubleWinnerFails(t *testing.T) {
	r := runBroken(t, brokenFS{nonExclusive: true})
	c := check(t, r, CheckExclusive)
	if c.OK || !strings.Contains(c.Message, "exclusive create") || c.Counts["double-winners"] != 1 {
		t.Fatalf("exclusive check: %+v", c)
	}
}

func TestDirSyncFails(t *testing.T) {
	r := runBroken(t, brokenFS{syncDirErr: syscall.EINVAL})
	c := check(t, r, CheckDirSync)
	if c.OK || !strings.Contains(c.Message, "directory fsync") {
		t.Fatalf("dir sync check: %+v", c)
	}
}

func TestPeerNotSameVolume(t *testing.T) {
	old := sameVolumeWait
	sameVolumeWait = 50 * time.Millisecond
	defer func() { sameVolumeWait = old }()
	a, b := memfs.New(), memfs.New()
	for _, m := range []*memfs.FS{a, b} {
		if err := m.MkdirAll("/v", 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r := Run(context.Background(), Config{Dir: "/v", FS: a, PeerDir: "/v", PeerFS: b})
	c := check(t, r, CheckSameVolume)
	if c.OK || !strings.Contains(c.Message, "same volume") || len(r.Checks) != 1 {
		t.Fatalf("same-volume check: %+v (%d checks)", c, len(r.Checks))
	}
}

func TestMissingDir(t *testing.T) {
	r := Run(context.Background(), Config{Dir: filepath.Join(t.TempDir(), "nope", "deeper")})
	// MkdirAll creates missing parents, so a missing Dir is made; a file
	// in the way is what fails.
	if !r.OK() {
		t.Fatalf("probe of a missing dir: %v", r.Err())
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r = Run(context.Background(), Config{Dir: file})
	if c := check(t, r, CheckSetup); c.OK || !strings.Contains(c.Message, "probe directory") {
		t.Fatalf("setup: %+v", c)
	}
}

package volume_test

import (
	"errors"
	"fmt"
	"path"
	"sync"
	"syscall"
	"testing"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/faultfs"
	"github.com/kaas-dev/kaas/volume/memfs"
)

const syncTestDir = "/work"

// newSyncTestFS returns a memfs with syncTestDir durable.
func newSyncTestFS(t *testing.T) *memfs.FS {
	t.Helper()
	m := memfs.New()
	if err := volume.MkdirAllSync(m, syncTestDir); err != nil {
		t.Fatal(err)
	}
	return m
}

// touch creates name (an entry only: no SyncDir).
func touch(t *testing.T, fsys volume.FS, name string) {
	t.Helper()
	f, err := fsys.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// durableNames lists what of syncTestDir would survive a crash now.
func durableNames(t *testing.T, m *memfs.FS) map[string]bool {
	t.Helper()
	ents, err := m.CrashClone().ReadDir(syncTestDir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, e := range ents {
		out[e.Name()] = true
	}
	return out
}

// heldSyncs makes the first SyncDir of the FS apply and then block until
// release is closed (telling applied when it has been applied), fails the
// SyncDirs whose 0-based number is in fail, and counts them all.
type heldSyncs struct {
	mu      sync.Mutex
	n       int
	fail    map[int]error
	applied chan struct{}
	release chan struct{}
}

func newHeldSyncs(fail map[int]error) *heldSyncs {
	return &heldSyncs{fail: fail, applied: make(chan struct{}), release: make(chan struct{})}
}

func (h *heldSyncs) injector(op faultfs.Op) faultfs.Action {
	if op.Kind != faultfs.OpSyncDir {
		return faultfs.Proceed
	}
	h.mu.Lock()
	i := h.n
	h.n++
	h.mu.Unlock()
	if err := h.fail[i]; err != nil {
		return faultfs.FailBefore(err)
	}
	if i == 0 {
		return faultfs.ProceedThen(func() {
			close(h.applied)
			<-h.release
		})
	}
	return faultfs.Proceed
}

func (h *heldSyncs) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// joinCounter counts callers that started waiting for a next sync.
func joinCounter(ds *volume.DirSyncer) chan string {
	joined := make(chan string, 16)
	volume.SetDirSyncerJoined(ds, func(dir string) { joined <- dir })
	return joined
}

// TestDirSyncerWaitsForASyncStartedAfterItsChange: a caller arriving while
// a sync runs (one that read the directory before the caller's change) is
// not answered by it: it and every caller arriving meanwhile share the next
// sync, and each one's entry is durable when its SyncDir returns.
func TestDirSyncerWaitsForASyncStartedAfterItsChange(t *testing.T) {
	mem := newSyncTestFS(t)
	held := newHeldSyncs(nil)
	fsys := faultfs.New(mem, held.injector)
	ds := volume.NewDirSyncer(fsys)
	joined := joinCounter(ds)

	touch(t, fsys, path.Join(syncTestDir, "a"))
	aDone := make(chan error, 1)
	go func() { aDone <- ds.SyncDir(syncTestDir) }()
	<-held.applied // a's sync has read the directory: a is durable, b-d are not yet created

	type result struct {
		name string
		err  error
	}
	results := make(chan result, 3)
	for _, name := range []string{"b", "c", "d"} {
		touch(t, fsys, path.Join(syncTestDir, name))
		go func() { results <- result{name, ds.SyncDir(syncTestDir + "/")} }()
		<-joined
	}
	if got := durableNames(t, mem); !got["a"] || got["b"] || got["c"] || got["d"] {
		t.Fatalf("while the first sync runs, durable: %v; want a only", got)
	}
	select {
	case r := <-results:
		t.Fatalf("%s's SyncDir returned (%v) while the only sync that ran predates its create", r.name, r.err)
	default:
	}
	close(held.release)
	if err := <-aDone; err != nil {
		t.Fatal(err)
	}
	for range 3 {
		r := <-results
		if r.err != nil {
			t.Fatalf("%s: %v", r.name, r.err)
		}
		if !durableNames(t, mem)[r.name] {
			t.Fatalf("%s's SyncDir returned, but %s is not durable", r.name, r.name)
		}
	}
	if n := held.count(); n != 2 {
		t.Fatalf("%d directory syncs for four callers, want 2 (the three late ones share one)", n)
	}
	if n := volume.DirSyncerDirs(ds); n != 0 {
		t.Fatalf("the syncer still tracks %d directories when idle", n)
	}
}

// TestDirSyncerErrors: a failed sync's error reaches every caller it
// covers and no other; a caller arriving later gets a sync of its own.
func TestDirSyncerErrors(t *testing.T) {
	mem := newSyncTestFS(t)
	held := newHeldSyncs(map[int]error{1: syscall.EIO})
	fsys := faultfs.New(mem, held.injector)
	ds := volume.NewDirSyncer(fsys)
	joined := joinCounter(ds)

	aDone := make(chan error, 1)
	go func() { aDone <- ds.SyncDir(syncTestDir) }()
	<-held.applied
	late := make(chan error, 2)
	for range 2 {
		go func() { late <- ds.SyncDir(syncTestDir) }()
		<-joined
	}
	close(held.release)
	if err := <-aDone; err != nil {
		t.Fatalf("first sync: %v", err)
	}
	for range 2 {
		if err := <-late; !errors.Is(err, syscall.EIO) {
			t.Fatalf("a caller of the failed sync got %v, want EIO", err)
		}
	}
	if err := ds.SyncDir(syncTestDir); err != nil {
		t.Fatalf("a caller after the failed sync: %v, want a sync of its own", err)
	}
	if n := held.count(); n != 3 {
		t.Fatalf("%d directory syncs, want 3", n)
	}
}

// TestDirSyncerDirectoriesApart: syncs of different directories are not
// shared, and sequential callers each get their own.
func TestDirSyncerDirectoriesApart(t *testing.T) {
	mem := newSyncTestFS(t)
	if err := volume.MkdirAllSync(mem, "/other"); err != nil {
		t.Fatal(err)
	}
	var ops []faultfs.Op
	fsys := faultfs.New(mem, recordOps(&ops))
	ds := volume.NewDirSyncer(fsys)
	for _, dir := range []string{syncTestDir, "/other", syncTestDir} {
		if err := ds.SyncDir(dir); err != nil {
			t.Fatal(err)
		}
	}
	var dirs []string
	for _, op := range ops {
		if op.Kind == faultfs.OpSyncDir {
			dirs = append(dirs, op.Path)
		}
	}
	if fmt.Sprint(dirs) != "[/work /other /work]" {
		t.Fatalf("synced %v", dirs)
	}
	if err := ds.SyncDir("/missing"); err == nil {
		t.Fatal("SyncDir of a missing directory succeeded")
	}
}

// TestDirSyncerWriteFileAtomicCrashSweep: writers replacing files of one
// directory at once through the DirSyncer, crashed at every mutating
// operation before and after it: every write that returned nil before the
// crash is durable whole, and no write is torn.
func TestDirSyncerWriteFileAtomicCrashSweep(t *testing.T) {
	const writers = 6
	workload := func(fsys volume.FS) []error {
		ds := volume.NewDirSyncer(fsys)
		errs := make([]error, writers)
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				name := path.Join(syncTestDir, fmt.Sprintf("f%d", w))
				errs[w] = ds.WriteFileAtomic(name, []byte(fmt.Sprintf("contents of %d", w)))
			})
		}
		wg.Wait()
		return errs
	}
	clean := faultfs.New(newSyncTestFS(t), nil)
	for w, err := range workload(clean) {
		if err != nil {
			t.Fatalf("clean run, writer %d: %v", w, err)
		}
	}
	// Coalescing makes the number of syncs vary from run to run: sweep a
	// margin past the clean run's count.
	n := clean.MutatingOps() + writers
	for i := range n {
		for _, after := range []bool{false, true} {
			mem := newSyncTestFS(t)
			errs := workload(faultfs.New(mem, faultfs.CrashAtMutating(i, after)))
			disk := mem.CrashClone()
			for w, err := range errs {
				name := path.Join(syncTestDir, fmt.Sprintf("f%d", w))
				b, rerr := volume.ReadFile(disk, name)
				switch {
				case err == nil && rerr != nil:
					t.Fatalf("crash at mutating op %d (after %v): writer %d returned nil, but %s is gone: %v", i, after, w, name, rerr)
				case rerr == nil && string(b) != fmt.Sprintf("contents of %d", w):
					t.Fatalf("crash at mutating op %d (after %v): %s holds %q", i, after, name, b)
				}
			}
		}
	}
}

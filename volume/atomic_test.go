package volume_test

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"syscall"
	"testing"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/faultfs"
	"github.com/kaas-dev/kaas/volume/memfs"
)

var errInjected = errors.New("injected")

// failAt fails the operation with the given Index.
func failAt(i int, after bool) faultfs.Injector {
	return func(op faultfs.Op) faultfs.Action {
		if op.Index != i {
			return faultfs.Proceed
		}
		if after {
			return faultfs.FailAfter(errInjected)
		}
		return faultfs.FailBefore(errInjected)
	}
}

// recordOps appends every Op it sees to *ops.
func recordOps(ops *[]faultfs.Op) faultfs.Injector {
	return func(op faultfs.Op) faultfs.Action {
		*ops = append(*ops, op)
		return faultfs.Proceed
	}
}

// listNames lists dir's names, failing the test on error.
func listNames(t *testing.T, fsys volume.FS, dir string) []string {
	t.Helper()
	es, err := fsys.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// readOrAbsent returns the contents of name, or "<absent>".
func readOrAbsent(t *testing.T, fsys volume.FS, name string) string {
	t.Helper()
	b, err := volume.ReadFile(fsys, name)
	if errors.Is(err, fs.ErrNotExist) {
		return "<absent>"
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// setupTarget creates dir and, if old is not "<absent>", a durable file
// dir/target holding old.
func setupTarget(t *testing.T, fsys volume.FS, dir, old string) string {
	t.Helper()
	if err := volume.MkdirAllSync(fsys, dir); err != nil {
		t.Fatal(err)
	}
	target := path.Join(dir, "target")
	if old != "<absent>" {
		if err := volume.WriteFileAtomic(fsys, target, []byte(old)); err != nil {
			t.Fatal(err)
		}
	}
	return target
}

func TestWriteFileAtomic(t *testing.T) {
	for _, impl := range implementations() {
		for _, old := range []string{"<absent>", "old contents"} {
			t.Run(fmt.Sprintf("%s/old=%s", impl.name, old), func(t *testing.T) {
				fsys, root := impl.make(t)
				target := setupTarget(t, fsys, path.Join(root, "d"), old)
				for _, data := range []string{"new", "", "newer and longer"} {
					if err := volume.WriteFileAtomic(fsys, target, []byte(data)); err != nil {
						t.Fatal(err)
					}
					if got := readOrAbsent(t, fsys, target); got != data {
						t.Fatalf("got %q, want %q", got, data)
					}
					if names := listNames(t, fsys, path.Dir(target)); !slices.Equal(names, []string{"target"}) {
						t.Fatalf("directory holds %v", names)
					}
				}
			})
		}
	}
}

func TestWriteFileAtomicRefusesDirectoryName(t *testing.T) {
	err := volume.WriteFileAtomic(memfs.New(), "/a/", []byte("x"))
	if !errors.Is(err, syscall.EISDIR) {
		t.Fatalf("err = %v", err)
	}
}

// TestWriteFileAtomicFaultSweep fails each operation of WriteFileAtomic in
// turn, before and after it is applied, and checks that the error reaches
// the caller, that no temp file is left, and that the target holds the old
// contents until the rename is applied and the new ones from then on.
func TestWriteFileAtomicFaultSweep(t *testing.T) {
	const newData = "new contents"
	for _, impl := range implementations() {
		for _, old := range []string{"<absent>", "old contents"} {
			t.Run(fmt.Sprintf("%s/old=%s", impl.name, old), func(t *testing.T) {
				// A clean run learns the operations and where the rename is.
				inner, root := impl.make(t)
				target := setupTarget(t, inner, path.Join(root, "clean"), old)
				var ops []faultfs.Op
				if err := volume.WriteFileAtomic(faultfs.New(inner, recordOps(&ops)), target, []byte(newData)); err != nil {
					t.Fatal(err)
				}
				renameAt := slices.IndexFunc(ops, func(op faultfs.Op) bool { return op.Kind == faultfs.OpRename })
				if renameAt < 0 {
					t.Fatalf("no rename in %v", ops)
				}
				if last := ops[len(ops)-1]; last.Kind != faultfs.OpSyncDir {
					t.Fatalf("last op %v, want SyncDir", last)
				}

				for i := range ops {
					for _, after := range []bool{false, true} {
						dir := path.Join(root, fmt.Sprintf("op%d-after%v", i, after))
						target := setupTarget(t, inner, dir, old)
						err := volume.WriteFileAtomic(faultfs.New(inner, failAt(i, after)), target, []byte(newData))
						if !errors.Is(err, errInjected) {
							t.Fatalf("fail %v after=%v: err = %v, want the injected error", ops[i], after, err)
						}
						want := old
						if i > renameAt || (i == renameAt && after) {
							want = newData
						}
						if got := readOrAbsent(t, inner, target); got != want {
							t.Fatalf("fail %v after=%v: target %q, want %q", ops[i], after, got, want)
						}
						for _, n := range listNames(t, inner, dir) {
							if n != "target" {
								t.Fatalf("fail %v after=%v: left %q behind", ops[i], after, n)
							}
						}
					}
				}
			})
		}
	}
}

// TestWriteFileAtomicCrashSweep crashes WriteFileAtomic at each mutating
// operation, before and after, and checks what a power loss leaves: the old
// contents or the new, never a torn or missing file.
func TestWriteFileAtomicCrashSweep(t *testing.T) {
	const newData = "new contents"
	for _, old := range []string{"<absent>", "old contents"} {
		t.Run("old="+old, func(t *testing.T) {
			clean := memfs.New()
			target := setupTarget(t, clean, "/d", old)
			ffs := faultfs.New(clean, nil)
			if err := volume.WriteFileAtomic(ffs, target, []byte(newData)); err != nil {
				t.Fatal(err)
			}
			if got := readOrAbsent(t, clean.CrashClone(), target); got != newData {
				t.Fatalf("after a clean run a crash leaves %q, want %q", got, newData)
			}
			n := ffs.MutatingOps()
			if n == 0 {
				t.Fatal("no mutating ops")
			}

			for i := range n {
				for _, after := range []bool{false, true} {
					mem := memfs.New()
					setupTarget(t, mem, "/d", old)
					ffs := faultfs.New(mem, faultfs.CrashAtMutating(i, after))
					err := volume.WriteFileAtomic(ffs, target, []byte(newData))
					if !errors.Is(err, faultfs.ErrCrashed) || !ffs.Crashed() {
						t.Fatalf("crash at %d after=%v: err = %v", i, after, err)
					}
					disk := mem.CrashClone()
					if got := readOrAbsent(t, disk, target); got != old && got != newData {
						t.Fatalf("crash at %d after=%v: target %q, want %q or %q", i, after, got, old, newData)
					}
					// Leftovers are temp files, which a sweep recognises.
					for _, name := range listNames(t, disk, "/d") {
						if name != "target" && !volume.IsTempName(name) {
							t.Fatalf("crash at %d after=%v: unexpected %q", i, after, name)
						}
					}
				}
			}
		})
	}
}

func TestIsTempName(t *testing.T) {
	cases := []struct {
		name string
		want bool
	}{
		{".target.tmp-0123456789abcdef", true},
		{".a.b.tmp-0123456789abcdef", true},
		{".tmp-0123456789abcdef", false}, // no base
		{"target.tmp-0123456789abcdef", false},
		{".target.tmp-0123456789abcde", false},
		{".target.tmp-0123456789abcdef0", false},
		{".target.tmp-0123456789ABCDEF", false},
		{".target.tmp-0123456789abcdeg", false},
		{".target", false},
		{"", false},
	}
	for _, tc := range cases {
		if got := volume.IsTempName(tc.name); got != tc.want {
			t.Errorf("IsTempName(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
	// The names WriteFileAtomic really uses are recognised: fail its rename
	// so the temp file is visible to the injector.
	var seen string
	inj := func(op faultfs.Op) faultfs.Action {
		if op.Kind == faultfs.OpRename {
			seen = path.Base(op.Path)
			return faultfs.CrashBefore
		}
		return faultfs.Proceed
	}
	_ = volume.WriteFileAtomic(faultfs.New(memfs.New(), inj), "/x.json", []byte("x"))
	if !volume.IsTempName(seen) {
		t.Fatalf("IsTempName(%q) = false for a real temp name", seen)
	}
}

func TestCreateExclusiveFile(t *testing.T) {
	for _, impl := range implementations() {
		t.Run(impl.name, func(t *testing.T) {
			fsys, root := impl.make(t)
			name := path.Join(root, "claim")
			if err := volume.CreateExclusiveFile(fsys, name, []byte("first")); err != nil {
				t.Fatal(err)
			}
			err := volume.CreateExclusiveFile(fsys, name, []byte("second"))
			if !errors.Is(err, fs.ErrExist) {
				t.Fatalf("second create: err = %v, want ErrExist", err)
			}
			if got := readOrAbsent(t, fsys, name); got != "first" {
				t.Fatalf("got %q", got)
			}
		})
	}
}

// TestCreateExclusiveFileFaults checks both sweeps: a fault before the file
// is closed removes it (so a retry can win the claim again); a crash leaves
// either no file or the complete one, never an empty claim.
func TestCreateExclusiveFileFaults(t *testing.T) {
	const data = "claim contents"
	var ops []faultfs.Op
	if err := volume.CreateExclusiveFile(faultfs.New(memfs.New(), recordOps(&ops)), "/c", []byte(data)); err != nil {
		t.Fatal(err)
	}
	closeAt := slices.IndexFunc(ops, func(op faultfs.Op) bool { return op.Kind == faultfs.OpClose })
	for i := range ops {
		for _, after := range []bool{false, true} {
			mem := memfs.New()
			err := volume.CreateExclusiveFile(faultfs.New(mem, failAt(i, after)), "/c", []byte(data))
			if !errors.Is(err, errInjected) {
				t.Fatalf("fail %v after=%v: err = %v", ops[i], after, err)
			}
			got := readOrAbsent(t, mem, "/c")
			switch {
			case i == 0 && after:
				// The create was applied but its reply lost: an empty claim
				// stays, which readers treat as stale.
				if got != "" {
					t.Fatalf("lost create reply left %q", got)
				}
			case i <= closeAt:
				// A failed Close (even one applied) counts as "not created":
				// the caller is told it failed, so it must not hold the claim.
				if got != "<absent>" {
					t.Fatalf("fail %v after=%v: left %q, want it removed", ops[i], after, got)
				}
			default:
				if got != data {
					t.Fatalf("fail %v after=%v: got %q", ops[i], after, got)
				}
			}
		}
	}

	n := 0
	for _, op := range ops {
		if op.Kind.Mutating() {
			n++
		}
	}
	for i := range n {
		for _, after := range []bool{false, true} {
			mem := memfs.New()
			_ = volume.CreateExclusiveFile(faultfs.New(mem, faultfs.CrashAtMutating(i, after)), "/c", []byte(data))
			if got := readOrAbsent(t, mem.CrashClone(), "/c"); got != "<absent>" && got != data {
				t.Fatalf("crash at %d after=%v: claim holds %q", i, after, got)
			}
		}
	}
}

func TestRemoveAll(t *testing.T) {
	build := func(t *testing.T, fsys volume.FS, root string) {
		t.Helper()
		for _, d := range []string{"t/a/b", "t/c", "t/e"} {
			if err := fsys.MkdirAll(path.Join(root, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for _, f := range []string{"t/f", "t/a/g", "t/a/b/h", "t/c/i"} {
			mustWrite(t, fsys, path.Join(root, f), f)
		}
	}
	cases := []struct {
		name   string
		target string
	}{
		{"tree", "t"},
		{"subtree", "t/a"},
		{"file", "t/f"},
		{"empty dir", "t/e"},
		{"absent", "t/nope"},
		{"under absent", "nope/nope"},
	}
	for _, impl := range implementations() {
		for _, tc := range cases {
			t.Run(impl.name+"/"+tc.name, func(t *testing.T) {
				fsys, root := impl.make(t)
				build(t, fsys, root)
				p := path.Join(root, tc.target)
				for round := range 2 { // idempotent: the second run finds nothing
					if err := volume.RemoveAll(fsys, p); err != nil {
						t.Fatalf("round %d: %v", round, err)
					}
					if _, err := fsys.Stat(p); !errors.Is(err, fs.ErrNotExist) {
						t.Fatalf("round %d: still there: %v", round, err)
					}
				}
			})
		}
	}
}

// TestRemoveAllFaults checks that RemoveAll reports what it could not
// remove, takes a vanished entry as success, and converges when re-driven.
func TestRemoveAllFaults(t *testing.T) {
	cases := []struct {
		name    string
		inj     faultfs.Injector
		wantErr error // nil: the first run succeeds
	}{
		// Someone else removed the file first: the reply says ENOENT.
		{"enoent race", faultfs.FailMatching(faultfs.OpRemove, "g", syscall.ENOENT, true, 1), nil},
		// A stale negative lookup: the listing says gone while the
		// directory is still there; its parent's rmdir then reports it.
		{"stale enoent listing", faultfs.FailMatching(faultfs.OpReadDir, "/t/a/b", syscall.ENOENT, false, 1), syscall.ENOTEMPTY},
		// A .nfsXXXX file that another host holds open cannot go yet.
		{"busy file", faultfs.FailMatching(faultfs.OpRemove, "g", syscall.EBUSY, false, 1), syscall.EBUSY},
		// A stale handle on the listing.
		{"estale listing", faultfs.FailMatching(faultfs.OpReadDir, "/t/a", syscall.ESTALE, false, 1), syscall.ESTALE},
		// A lost reply on the final rmdir.
		{"lost rmdir reply", faultfs.FailMatching(faultfs.OpRemove, "/t", syscall.EIO, true, 2), syscall.EIO},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mem := memfs.New()
			for _, f := range []string{"/t/a/b/h", "/t/a/g", "/t/f"} {
				if err := mem.MkdirAll(path.Dir(f), 0); err != nil {
					t.Fatal(err)
				}
				mustWrite(t, mem, f, f)
			}
			ffs := faultfs.New(mem, tc.inj)
			err := volume.RemoveAll(ffs, "/t")
			switch {
			case tc.wantErr == nil && err != nil:
				t.Fatalf("err = %v, want success", err)
			case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				// Something remains and was reported; re-driving converges.
				if err := volume.RemoveAll(ffs, "/t"); err != nil {
					t.Fatalf("re-drive: %v", err)
				}
			}
			if _, err := mem.Stat("/t"); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("/t remains: %v", err)
			}
		})
	}
}

func TestMkdirAllSync(t *testing.T) {
	cases := []struct {
		name     string
		existing string
		dir      string
		wantSync []string
	}{
		{"all new", "", "/a/b/c", []string{"/a/b/c", "/a/b", "/a", "/"}},
		{"parent exists", "/a/b", "/a/b/c", []string{"/a/b/c", "/a/b"}},
		{"two new", "/a", "/a/b/c", []string{"/a/b/c", "/a/b", "/a"}},
		{"already there", "/a/b/c", "/a/b/c", []string{"/a/b/c", "/a/b"}},
		{"relative", "", "a/b", []string{"a/b", "a", "."}},
		{"root child", "", "/a", []string{"/a", "/"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mem := memfs.New()
			if tc.existing != "" {
				if err := volume.MkdirAllSync(mem, tc.existing); err != nil {
					t.Fatal(err)
				}
			}
			var ops []faultfs.Op
			if err := volume.MkdirAllSync(faultfs.New(mem, recordOps(&ops)), tc.dir); err != nil {
				t.Fatal(err)
			}
			var synced []string
			for _, op := range ops {
				if op.Kind == faultfs.OpSyncDir {
					synced = append(synced, op.Path)
				}
			}
			if !slices.Equal(synced, tc.wantSync) {
				t.Fatalf("synced %v, want %v", synced, tc.wantSync)
			}
			fi, err := mem.CrashClone().Stat(tc.dir)
			if err != nil || !fi.IsDir() {
				t.Fatalf("after a crash: %v, %v", fi, err)
			}
		})
	}
}

// MkdirEntriesSync syncs what MkdirAllSync syncs but the new directory
// itself, through the DirSync given, and the directory survives a crash.
func TestMkdirEntriesSync(t *testing.T) {
	cases := []struct {
		name     string
		existing string
		dir      string
		wantSync []string
	}{
		{"all new", "", "/a/b/c", []string{"/a/b", "/a", "/"}},
		{"parent exists", "/a/b", "/a/b/c", []string{"/a/b"}},
		{"already there", "/a/b/c", "/a/b/c", []string{"/a/b"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mem := memfs.New()
			if tc.existing != "" {
				if err := volume.MkdirAllSync(mem, tc.existing); err != nil {
					t.Fatal(err)
				}
			}
			var ops []faultfs.Op
			ffs := faultfs.New(mem, recordOps(&ops))
			if err := volume.MkdirEntriesSync(ffs, volume.NewDirSyncer(ffs), tc.dir); err != nil {
				t.Fatal(err)
			}
			var synced []string
			for _, op := range ops {
				if op.Kind == faultfs.OpSyncDir {
					synced = append(synced, op.Path)
				}
			}
			if !slices.Equal(synced, tc.wantSync) {
				t.Fatalf("synced %v, want %v", synced, tc.wantSync)
			}
			fi, err := mem.CrashClone().Stat(tc.dir)
			if err != nil || !fi.IsDir() {
				t.Fatalf("after a crash: %v, %v", fi, err)
			}
		})
	}
}

// staleLookupFS answers the first lookups of one directory as missing and
// its mkdir as EEXIST, as a GlusterFS client does for a directory another
// process just created while it held a negative entry for it.
type staleLookupFS struct {
	volume.FS
	dir   string
	stale int // mkdirs of dir still answered EEXIST
}

func (s *staleLookupFS) MkdirAll(name string, perm fs.FileMode) error {
	if name == s.dir && s.stale > 0 {
		s.stale--
		if err := s.FS.MkdirAll(name, perm); err != nil {
			return err
		}
		return &fs.PathError{Op: "mkdir", Path: name, Err: syscall.EEXIST}
	}
	return s.FS.MkdirAll(name, perm)
}

// TestMkdirAllSyncCreatedMeanwhile: a directory another broker created
// between this one's lookup and its mkdir is success, even while the
// client still answers from a stale lookup for a moment; one that never
// shows up is an error.
func TestMkdirAllSyncCreatedMeanwhile(t *testing.T) {
	for _, tc := range []struct {
		stale   int
		wantErr bool
	}{{1, false}, {3, false}, {100, true}} {
		sfs := &staleLookupFS{FS: memfs.New(), dir: "/data/topics", stale: tc.stale}
		err := volume.MkdirAllSync(sfs, "/data/topics")
		if (err != nil) != tc.wantErr {
			t.Errorf("stale %d: err = %v, want error %v", tc.stale, err, tc.wantErr)
		}
	}
}

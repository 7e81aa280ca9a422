package faultfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"syscall"
	"testing"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/memfs"
)

var errInjected = errors.New("injected")

// workload is a fixed sequence of calls covering every Op kind.
func workload(fsys volume.FS) error {
	steps := []func() error{}
	var f volume.File
	steps = append(steps,
		func() error { return fsys.MkdirAll("/d", 0) },                           // 0 MkdirAll
		func() (err error) { f, err = fsys.Create("/d/a"); return err },          // 1 Create
		func() error { _, err := f.Write([]byte("hello")); return err },          // 2 Write
		func() error { _, err := f.WriteAt([]byte("J"), 0); return err },         // 3 WriteAt
		func() error { _, err := f.Seek(0, io.SeekStart); return err },           // not an op
		func() error { _, err := f.Read(make([]byte, 2)); return err },           // 4 Read
		func() error { _, err := f.ReadAt(make([]byte, 2), 0); return err },      // 5 ReadAt
		func() error { return f.Truncate(4) },                                    // 6 Truncate
		func() error { return f.Sync() },                                         // 7 Sync
		func() error { _, err := f.Stat(); return err },                          // 8 FileStat
		func() error { return f.Close() },                                        // 9 Close
		func() error { return fsys.Rename("/d/a", "/d/b") },                      // 10 Rename
		func() error { return fsys.SyncDir("/d") },                               // 11 SyncDir
		func() error { _, err := fsys.Stat("/d/b"); return err },                 // 12 Stat
		func() error { _, err := fsys.ReadDir("/d"); return err },                // 13 ReadDir
		func() (err error) { f, err = fsys.Open("/d/b"); return err },            // 14 Open
		func() error { return f.Close() },                                        // 15 Close
		func() (err error) { f, err = fsys.OpenReadWrite("/d/b"); return err },   // 16 OpenReadWrite
		func() error { return f.Close() },                                        // 17 Close
		func() (err error) { f, err = fsys.CreateExclusive("/d/c"); return err }, // 18 CreateExclusive
		func() error { return f.Close() },                                        // 19 Close
		func() error { return fsys.Remove("/d/c") },                              // 20 Remove
	)
	for _, s := range steps {
		if err := s(); err != nil {
			return err
		}
	}
	return nil
}

func TestOpIndexesAndKinds(t *testing.T) {
	var ops []Op
	ffs := New(memfs.New(), func(op Op) Action { ops = append(ops, op); return Proceed })
	if err := workload(ffs); err != nil {
		t.Fatal(err)
	}
	want := []Op{
		{0, OpMkdirAll, "/d", ""},
		{1, OpCreate, "/d/a", ""},
		{2, OpWrite, "/d/a", ""},
		{3, OpWriteAt, "/d/a", ""},
		{4, OpRead, "/d/a", ""},
		{5, OpReadAt, "/d/a", ""},
		{6, OpTruncate, "/d/a", ""},
		{7, OpSync, "/d/a", ""},
		{8, OpFileStat, "/d/a", ""},
		{9, OpClose, "/d/a", ""},
		{10, OpRename, "/d/a", "/d/b"},
		{11, OpSyncDir, "/d", ""},
		{12, OpStat, "/d/b", ""},
		{13, OpReadDir, "/d", ""},
		{14, OpOpen, "/d/b", ""},
		{15, OpClose, "/d/b", ""},
		{16, OpOpenReadWrite, "/d/b", ""},
		{17, OpClose, "/d/b", ""},
		{18, OpCreateExclusive, "/d/c", ""},
		{19, OpClose, "/d/c", ""},
		{20, OpRemove, "/d/c", ""},
	}
	if !slices.Equal(ops, want) {
		t.Fatalf("ops:\n%v\nwant:\n%v", ops, want)
	}
	mutating := 0
	for _, op := range want {
		if op.Kind.Mutating() {
			mutating++
		}
	}
	if ffs.Ops() != len(want) || ffs.MutatingOps() != mutating || mutating != 10 {
		t.Fatalf("Ops() = %d, MutatingOps() = %d (%d)", ffs.Ops(), ffs.MutatingOps(), mutating)
	}
}

// TestBeforeAfter checks, per kind, that FailBefore leaves the volume as it
// was and FailAfter applies the operation, both returning the error.
func TestBeforeAfter(t *testing.T) {
	type state struct{ a, b string }
	read := func(t *testing.T, m *memfs.FS) state {
		t.Helper()
		get := func(n string) string {
			b, err := volume.ReadFile(m, n)
			if errors.Is(err, fs.ErrNotExist) {
				return "<absent>"
			}
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
		return state{get("/a"), get("/b")}
	}
	cases := []struct {
		name          string
		kind          OpKind
		do            func(fsys volume.FS) error
		before, after state
	}{
		{"create", OpCreate,
			func(fsys volume.FS) error { _, err := fsys.Create("/b"); return err },
			state{"A", "<absent>"}, state{"A", ""}},
		{"rename", OpRename,
			func(fsys volume.FS) error { return fsys.Rename("/a", "/b") },
			state{"A", "<absent>"}, state{"<absent>", "A"}},
		{"remove", OpRemove,
			func(fsys volume.FS) error { return fsys.Remove("/a") },
			state{"A", "<absent>"}, state{"<absent>", "<absent>"}},
		{"write", OpWrite,
			func(fsys volume.FS) error {
				f, err := fsys.OpenReadWrite("/a")
				if err != nil {
					return err
				}
				_, err = f.Write([]byte("Z"))
				return err
			},
			state{"A", "<absent>"}, state{"Z", "<absent>"}},
		{"truncate", OpTruncate,
			func(fsys volume.FS) error {
				f, err := fsys.OpenReadWrite("/a")
				if err != nil {
					return err
				}
				return f.Truncate(0)
			},
			state{"A", "<absent>"}, state{"", "<absent>"}},
	}
	for _, tc := range cases {
		for _, after := range []bool{false, true} {
			name := tc.name + "/before"
			if after {
				name = tc.name + "/after"
			}
			t.Run(name, func(t *testing.T) {
				m := memfs.New()
				if err := volume.WriteFileAtomic(m, "/a", []byte("A")); err != nil {
					t.Fatal(err)
				}
				ffs := New(m, FailMatching(tc.kind, "", errInjected, after, 1))
				err := tc.do(ffs)
				if !errors.Is(err, errInjected) {
					t.Fatalf("err = %v", err)
				}
				want := tc.before
				if after {
					want = tc.after
				}
				if got := read(t, m); got != want {
					t.Fatalf("state %+v, want %+v", got, want)
				}
				if ffs.Crashed() {
					t.Fatal("a failure crashed the FS")
				}
			})
		}
	}
}

func TestFailAfterOpenGivesNoHandle(t *testing.T) {
	m := memfs.New()
	ffs := New(m, FailMatching(OpCreateExclusive, "*.claim", syscall.ESTALE, true, 1))
	f, err := ffs.CreateExclusive("/x.claim")
	if !errors.Is(err, syscall.ESTALE) || f != nil {
		t.Fatalf("got %v, %v", f, err)
	}
	if _, err := m.Stat("/x.claim"); err != nil {
		t.Fatalf("the create was not applied: %v", err)
	}
	// The count is spent: a retry reaches the volume, which says EEXIST.
	if _, err := ffs.CreateExclusive("/x.claim"); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("retry: %v", err)
	}
}

func TestCrashIsSticky(t *testing.T) {
	for _, after := range []bool{false, true} {
		t.Run(map[bool]string{false: "before", true: "after"}[after], func(t *testing.T) {
			m := memfs.New()
			// Crash at the first write (mutating op #1, after the Create).
			ffs := New(m, CrashAtMutating(1, after))
			f, err := ffs.Create("/f")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write([]byte("data")); !errors.Is(err, ErrCrashed) {
				t.Fatalf("crashing write: %v", err)
			}
			if !ffs.Crashed() {
				t.Fatal("not crashed")
			}
			fi, err := m.Stat("/f")
			if err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int64{false: 0, true: 4}[after]; fi.Size() != want {
				t.Fatalf("size %d, want %d", fi.Size(), want)
			}
			opsAtCrash := ffs.Ops()
			later := []struct {
				name string
				do   func() error
			}{
				{"write", func() error { _, err := f.Write([]byte("x")); return err }},
				{"read at", func() error { _, err := f.ReadAt(make([]byte, 1), 0); return err }},
				{"seek", func() error { _, err := f.Seek(0, io.SeekStart); return err }},
				{"sync", f.Sync},
				{"close", f.Close},
				{"stat", func() error { _, err := ffs.Stat("/f"); return err }},
				{"open", func() error { _, err := ffs.Open("/f"); return err }},
				{"remove", func() error { return ffs.Remove("/f") }},
				{"syncdir", func() error { return ffs.SyncDir("/") }},
			}
			for _, l := range later {
				if err := l.do(); !errors.Is(err, ErrCrashed) {
					t.Errorf("%s after crash: %v", l.name, err)
				}
			}
			if ffs.Ops() != opsAtCrash {
				t.Errorf("ops after the crash were counted: %d -> %d", opsAtCrash, ffs.Ops())
			}
			if _, err := m.Stat("/f"); err != nil {
				t.Fatalf("a refused remove reached the volume: %v", err)
			}
		})
	}
}

func TestFailMatching(t *testing.T) {
	cases := []struct {
		name  string
		glob  string
		count int
		paths []string
		want  []bool // whether each Remove failed
	}{
		{"base glob", "*.log", 0, []string{"/d/a.log", "/d/b.idx", "/e/c.log"}, []bool{true, false, true}},
		{"full glob", "/d/*", 0, []string{"/d/a.log", "/e/c.log"}, []bool{true, false}},
		{"count", "*", 2, []string{"/a", "/b", "/c"}, []bool{true, true, false}},
		{"empty glob matches all", "", 0, []string{"/a", "/d/b"}, []bool{true, true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ffs := New(memfs.New(), FailMatching(OpRemove, tc.glob, syscall.ESTALE, false, tc.count))
			for i, p := range tc.paths {
				err := ffs.Remove(p)
				if failed := errors.Is(err, syscall.ESTALE); failed != tc.want[i] {
					t.Errorf("%s: err = %v, want injected: %v", p, err, tc.want[i])
				} else if !failed && !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("%s: err = %v, want the volume's ENOENT", p, err)
				}
			}
		})
	}
}

func TestFailMatchingRenameNewPath(t *testing.T) {
	m := memfs.New()
	if err := volume.WriteFileAtomic(m, "/tmp1", []byte("x")); err != nil {
		t.Fatal(err)
	}
	ffs := New(m, FailMatching(OpRename, "*.json", errInjected, false, 0))
	if err := ffs.Rename("/tmp1", "/state.json"); !errors.Is(err, errInjected) {
		t.Fatalf("err = %v", err)
	}
}

func TestStickySyncError(t *testing.T) {
	m := memfs.New()
	ffs := New(m, StickySyncError("*.log", nil))
	f, err := ffs.Create("/seg.log")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("data")); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := f.Sync(); !errors.Is(err, syscall.EIO) {
			t.Fatalf("sync %d: %v", i, err)
		}
	}
	if err := ffs.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	// The failed syncs did not make the data durable.
	b, err := volume.ReadFile(m.CrashClone(), "/seg.log")
	if err != nil || len(b) != 0 {
		t.Fatalf("after crash %q, %v", b, err)
	}
	g, err := ffs.Create("/other.idx")
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Sync(); err != nil {
		t.Fatalf("non-matching sync: %v", err)
	}
}

func TestChain(t *testing.T) {
	// Both injectors see every op: the crash counter is not starved by the
	// failure that wins op 0.
	ffs := New(memfs.New(), Chain(
		nil,
		FailMatching(OpMkdirAll, "", errInjected, false, 1),
		CrashAtMutating(1, false),
	))
	if err := ffs.MkdirAll("/a", 0); !errors.Is(err, errInjected) {
		t.Fatalf("op 0: %v", err)
	}
	if err := ffs.MkdirAll("/a", 0); !errors.Is(err, ErrCrashed) {
		t.Fatalf("op 1: %v", err)
	}
}

func TestStrings(t *testing.T) {
	cases := []struct{ got, want string }{
		{Op{3, OpRename, "/a", "/b"}.String(), "#3 Rename /a -> /b"},
		{Op{0, OpSync, "/f", ""}.String(), "#0 Sync /f"},
		{OpKind(99).String(), "OpKind(99)"},
		{FailAfter(syscall.ESTALE).String(), "FailAfter(" + syscall.ESTALE.Error() + ")"},
		{CrashBefore.String(), "CrashBefore"},
	}
	for _, tc := range cases {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestProceedThen(t *testing.T) {
	// The hook runs once the operation has reached the volume and before
	// its caller sees the result, for FS calls, opens and file calls alike;
	// the operation's own result is kept.
	m := memfs.New()
	var calls []string
	ffs := New(m, func(op Op) Action {
		if op.Kind == OpRename || op.Kind == OpCreate || op.Kind == OpWrite || op.Kind == OpRemove {
			return ProceedThen(func() {
				// The operation is already applied when the hook runs.
				applied := false
				switch op.Kind {
				case OpRename:
					_, err := m.Stat("/b")
					applied = err == nil
				case OpCreate:
					_, err := m.Stat("/a")
					applied = err == nil
				case OpWrite:
					b, _ := volume.ReadFile(m, "/a")
					applied = string(b) == "x"
				case OpRemove:
					applied = true // the remove of a missing file fails on its own
				}
				calls = append(calls, fmt.Sprintf("%s applied=%v", op.Kind, applied))
			})
		}
		return Proceed
	})
	f, err := ffs.Create("/a")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := f.Write([]byte("x")); n != 1 || err != nil {
		t.Fatalf("write: %d, %v", n, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ffs.Rename("/a", "/b"); err != nil {
		t.Fatal(err)
	}
	if err := ffs.Remove("/missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("remove of a missing file: %v, want its own ENOENT", err)
	}
	want := []string{"Create applied=true", "Write applied=true", "Rename applied=true", "Remove applied=true"}
	if !slices.Equal(calls, want) {
		t.Fatalf("hooks %q, want %q", calls, want)
	}
	if ProceedThen(func() {}) == Proceed || ProceedThen(func() {}).String() != "ProceedThen" {
		t.Fatal("ProceedThen compares equal to Proceed or prints wrong")
	}
}

func TestOpMatches(t *testing.T) {
	cases := []struct {
		op   Op
		kind OpKind
		glob string
		want bool
	}{
		{Op{Kind: OpSync, Path: "/d/a.log"}, OpSync, "*.log", true},
		{Op{Kind: OpSync, Path: "/d/a.log"}, OpWrite, "*.log", false},
		{Op{Kind: OpSync, Path: "/d/a.log"}, OpSync, "/e/*", false},
		{Op{Kind: OpRename, Path: "/d/.x.tmp-1", NewPath: "/d/x"}, OpRename, "/d/x", true},
		{Op{Kind: OpRename, Path: "/d/.x.tmp-1", NewPath: "/d/x"}, OpRename, "/d/.x.tmp-*", true},
		{Op{Kind: OpSyncDir, Path: "/d"}, OpSyncDir, "", true},
	}
	for _, tc := range cases {
		if got := tc.op.Matches(tc.kind, tc.glob); got != tc.want {
			t.Errorf("%v.Matches(%v, %q) = %v, want %v", tc.op, tc.kind, tc.glob, got, tc.want)
		}
	}
}

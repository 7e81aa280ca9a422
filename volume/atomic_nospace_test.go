package volume_test

import (
	"errors"
	"fmt"
	"slices"
	"syscall"
	"testing"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/faultfs"
	"github.com/kaas-dev/kaas/volume/memfs"
)

// TestWriteFileAtomicNoSpace fails each step of WriteFileAtomic with ENOSPC
// (a full volume: the create, a write, the temp's fsync or close, the
// rename, the directory fsync), before and after it is applied. Whatever
// step fails, the target is never torn: it holds the old contents unless the
// rename was applied, no temp file is left in the directory, and a crash
// right after leaves the old or the new contents. ErrNotReplaced is wrapped
// exactly when the failing step came before the rename. Once space returns
// the same write succeeds.
func TestWriteFileAtomicNoSpace(t *testing.T) {
	const newData = "new contents, longer than the old"
	for _, old := range []string{"<absent>", "old contents"} {
		t.Run("old="+old, func(t *testing.T) {
			clean := memfs.New()
			target := setupTarget(t, clean, "/clean", old)
			var ops []faultfs.Op
			if err := volume.WriteFileAtomic(faultfs.New(clean, recordOps(&ops)), target, []byte(newData)); err != nil {
				t.Fatal(err)
			}
			renameAt := slices.IndexFunc(ops, func(op faultfs.Op) bool { return op.Kind == faultfs.OpRename })
			steps := 0
			for i, op := range ops {
				if !op.Kind.Mutating() && op.Kind != faultfs.OpClose {
					continue
				}
				for _, after := range []bool{false, true} {
					t.Run(fmt.Sprintf("%s/after=%v", op.Kind, after), func(t *testing.T) {
						steps++
						mem := memfs.New()
						dir := "/d"
						target := setupTarget(t, mem, dir, old)
						inj := func(o faultfs.Op) faultfs.Action {
							if o.Index != i {
								return faultfs.Proceed
							}
							if after {
								return faultfs.FailAfter(syscall.ENOSPC)
							}
							return faultfs.FailBefore(syscall.ENOSPC)
						}
						err := volume.WriteFileAtomic(faultfs.New(mem, inj), target, []byte(newData))
						if !errors.Is(err, syscall.ENOSPC) {
							t.Fatalf("err = %v, want ENOSPC", err)
						}
						replaced := i > renameAt || (i == renameAt && after)
						want := old
						if replaced {
							want = newData
						}
						if got := readOrAbsent(t, mem, target); got != want {
							t.Fatalf("target %q, want %q", got, want)
						}
						if i < renameAt != errors.Is(err, volume.ErrNotReplaced) {
							t.Fatalf("step %d (rename at %d): ErrNotReplaced %v in %v", i, renameAt, errors.Is(err, volume.ErrNotReplaced), err)
						}
						for _, n := range listNames(t, mem, dir) {
							if n != "target" {
								t.Fatalf("left %q behind", n)
							}
						}
						disk := mem.CrashClone()
						if got := readOrAbsent(t, disk, target); got != old && got != newData {
							t.Fatalf("after a crash: target %q, want %q or %q", got, old, newData)
						}
						for _, n := range listNames(t, disk, dir) {
							if n != "target" && !volume.IsTempName(n) {
								t.Fatalf("after a crash: unexpected %q", n)
							}
						}
						// Space returns: the write goes through.
						if err := volume.WriteFileAtomic(mem, target, []byte(newData)); err != nil {
							t.Fatal(err)
						}
						if got := readOrAbsent(t, mem.CrashClone(), target); got != newData {
							t.Fatalf("after space returned: %q", got)
						}
						if names := listNames(t, mem, dir); !slices.Equal(names, []string{"target"}) {
							t.Fatalf("after space returned: %v", names)
						}
					})
				}
			}
			if steps < 10 {
				t.Fatalf("only %d steps faulted", steps)
			}
		})
	}
}

package volume

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"syscall"
	"time"
)

// tempMarker separates the target's base name from the random suffix in the
// names of WriteFileAtomic's temp files: ".<base>.tmp-<16 hex digits>". A
// base too long for that to fit NameMax is shortened as FitName does
// (".<base cut short>~<hash of base>.tmp-<16 hex digits>"), so that a temp
// file can be created beside any target that fits.
const (
	tempMarker    = ".tmp-"
	tempHexDigits = 16
	// tempAttempts bounds the retries on a name collision. With 64 random
	// bits a collision means a lost-reply retransmit or a bug, not bad luck.
	tempAttempts = 8
)

// ErrNotReplaced is wrapped by a WriteFileAtomic error from a step before
// the rename (creating, writing, syncing or closing the temp file, which is
// then removed): the target still holds its previous contents (or is still
// absent), so a caller may treat the write as not having happened. Errors
// from the rename or the directory sync never wrap it: the rename may have
// been applied.
var ErrNotReplaced = errors.New("target not replaced")

// tempPrefix is what every temp name of base starts with, up to the
// random suffix: "." + base + ".tmp-", shortened to fit NameMax.
func tempPrefix(base string) string {
	return "." + fitName(base, tempMarker, NameMax-1-tempHexDigits)
}

// tempName returns a fresh temp name for base (a base name, not a path) in
// the format IsTempName and IsTempNameOf recognise.
func tempName(base string) (string, error) {
	var b [tempHexDigits / 2]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("random temp suffix: %w", err)
	}
	return tempPrefix(base) + hex.EncodeToString(b[:]), nil
}

// IsTempName reports whether name (a base name, not a path) is a temp file
// left by WriteFileAtomic: a crash between its create and its rename leaves
// one behind, and whoever owns the directory sweeps them.
func IsTempName(name string) bool {
	if !strings.HasPrefix(name, ".") {
		return false
	}
	i := strings.LastIndex(name, tempMarker)
	if i <= 1 { // the original base name must be non-empty
		return false
	}
	return isTempSuffix(name[i+len(tempMarker):])
}

// IsTempNameOf reports whether name (a base name) is a temp file that
// WriteFileAtomic left while replacing base: what a sweeper that owns one
// file, not the whole directory, removes.
func IsTempNameOf(name, base string) bool {
	prefix := tempPrefix(base)
	return strings.HasPrefix(name, prefix) && isTempSuffix(name[len(prefix):])
}

// isTempSuffix reports whether s is a temp name's random suffix.
func isTempSuffix(s string) bool {
	if len(s) != tempHexDigits {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// writeAll writes data to f, turning a short write without an error into
// io.ErrShortWrite.
func writeAll(f File, data []byte) error {
	n, err := f.Write(data)
	if err == nil && n < len(data) {
		err = io.ErrShortWrite
	}
	return err
}

// WriteFileAtomic replaces name with data so that a reader (or a crash)
// sees either the old contents or the new, never a mix. It follows
// renameio's steps through fsys, plus the directory fsync renameio omits:
// exclusive-create a temp file in name's directory, write, Sync, Close,
// Rename over name, SyncDir.
//
// Before the rename, every error path removes the temp file. An error from
// the Rename or the SyncDir may mean the rename was applied (a lost reply on
// a network filesystem, or a failed directory fsync): callers re-read name
// before deciding what happened, and never retry a failed SyncDir as if it
// had not failed. A crash before the rename can leave a temp file behind;
// IsTempName recognises it.
func WriteFileAtomic(fsys FS, name string, data []byte) error {
	if err := WriteFileRenamed(fsys, name, data); err != nil {
		return err
	}
	dir := path.Clean(path.Dir(name))
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("write %s atomically: renamed, but sync dir %s: %w", name, dir, err)
	}
	return nil
}

// WriteFileRenamed is WriteFileAtomic without its last step: the rename is
// done, but not yet durable. The caller fsyncs name's directory itself
// before anything relies on the new contents surviving a crash, typically
// once for several changes in that directory. Its errors are those of
// WriteFileAtomic up to the rename.
func WriteFileRenamed(fsys FS, name string, data []byte) error {
	return writeFileRenamed(fsys, name, data, true)
}

// WriteFileReplaced is WriteFileRenamed without its fsync: readers still
// see the old contents or the new, never a part, but a host crash may
// lose the new contents, or, where the filesystem does not order a file's
// data before its rename, leave it empty or partial. It is for status a
// reader takes for absent when it is missing or does not decode.
func WriteFileReplaced(fsys FS, name string, data []byte) error {
	return writeFileRenamed(fsys, name, data, false)
}

func writeFileRenamed(fsys FS, name string, data []byte, durable bool) error {
	dir, base := path.Split(name)
	dir = path.Clean(dir) // "" becomes "."; a trailing slash goes
	if base == "" || base == "." || base == ".." {
		return fmt.Errorf("write %s atomically: %w", name, syscall.EISDIR)
	}
	var f File
	var tmp string
	for attempt := 0; ; attempt++ {
		t, err := tempName(base)
		if err != nil {
			return fmt.Errorf("write %s atomically: %w", name, err)
		}
		tmp = path.Join(dir, t)
		f, err = fsys.CreateExclusive(tmp)
		if err == nil {
			break
		}
		if errors.Is(err, fs.ErrExist) && attempt+1 < tempAttempts {
			continue // not ours: never remove it, pick another name
		}
		if !errors.Is(err, fs.ErrExist) {
			// The create may have been applied with its reply lost; the
			// random name is ours alone, so removing it is safe.
			_ = fsys.Remove(tmp)
		}
		return fmt.Errorf("write %s atomically: create temp: %w (%w)", name, err, ErrNotReplaced)
	}

	// fail closes (if still open) and removes the temp file, and wraps err
	// (with ErrNotReplaced unless the rename was tried). Cleanup errors are
	// dropped: the caller needs the first failure, and a leftover temp is
	// swept by IsTempName.
	closed := false
	fail := func(step string, err error) error {
		if !closed {
			_ = f.Close()
		}
		_ = fsys.Remove(tmp)
		if step != "rename" {
			return fmt.Errorf("write %s atomically: %s %s: %w (%w)", name, step, tmp, err, ErrNotReplaced)
		}
		return fmt.Errorf("write %s atomically: %s %s: %w", name, step, tmp, err)
	}

	if err := writeAll(f, data); err != nil {
		return fail("write", err)
	}
	if durable {
		if err := f.Sync(); err != nil {
			return fail("sync", err)
		}
	}
	closed = true
	if err := f.Close(); err != nil {
		return fail("close", err)
	}
	if err := fsys.Rename(tmp, name); err != nil {
		// Usually not applied, so the temp is still there; if the reply was
		// lost the Remove finds nothing, which is harmless.
		return fail("rename", err)
	}
	return nil
}

// ReadFile reads the whole of name. It goes through Open, so on a shared
// filesystem it sees the contents as of the writer's last close or fsync.
func ReadFile(fsys FS, name string) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, fmt.Errorf("read file: %w", err)
	}
	data, rerr := io.ReadAll(f)
	cerr := f.Close()
	if rerr != nil {
		return nil, fmt.Errorf("read file %s: %w", name, rerr)
	}
	if cerr != nil {
		return nil, fmt.Errorf("read file %s: close: %w", name, cerr)
	}
	return data, nil
}

// CreateExclusiveFile creates name with data, durably, only if name does
// not exist: exclusive create, write, Sync, Close, SyncDir. If name exists
// the error satisfies errors.Is(err, fs.ErrExist); on a shared filesystem
// that is not proof that a complete file exists (see FS.CreateExclusive).
//
// If a step before the Close completes fails, the half-written file is
// removed so that a retry can create it again. A SyncDir failure leaves the
// complete file in place (others may already have read it) and is returned:
// whether the entry is durable is then unknown.
func CreateExclusiveFile(fsys FS, name string, data []byte) error {
	return CreateExclusiveFileVia(fsys, fsys, name, data)
}

// CreateExclusiveFileVia is CreateExclusiveFile with its directory fsync
// through ds: a DirSyncer shares one between files created in one
// directory at once.
func CreateExclusiveFileVia(fsys FS, ds DirSync, name string, data []byte) error {
	f, err := fsys.CreateExclusive(name)
	if err != nil {
		// No cleanup here: an EEXIST may be someone else's file, and for
		// other errors the create was most likely not applied. A lost reply
		// leaves an empty file, which readers must treat as stale anyway.
		return fmt.Errorf("create %s exclusively: %w", name, err)
	}
	closed := false
	fail := func(step string, err error) error {
		if !closed {
			_ = f.Close()
		}
		_ = fsys.Remove(name)
		return fmt.Errorf("create %s exclusively: %s: %w", name, step, err)
	}
	if err := writeAll(f, data); err != nil {
		return fail("write", err)
	}
	if err := f.Sync(); err != nil {
		return fail("sync", err)
	}
	closed = true
	if err := f.Close(); err != nil {
		return fail("close", err)
	}
	dir := path.Dir(name)
	if err := ds.SyncDir(dir); err != nil {
		return fmt.Errorf("create %s exclusively: sync dir %s: %w", name, dir, err)
	}
	return nil
}

// RemoveAll removes p and everything below it. It is idempotent and meant to
// be re-driven to its end state, "p does not exist": a missing p, and entries
// that vanish while it works (another remover, a rename aside), count as
// success. It returns an error whenever something remains, for example a
// .nfsXXXX file held open by another host, which keeps its directory
// non-empty until the handle closes.
//
// It is not atomic: after an error, part of the tree may be gone.
func RemoveAll(fsys FS, p string) error {
	failed, first := removeAll(fsys, p)
	switch {
	case failed == 0:
		return nil
	case failed == 1:
		return fmt.Errorf("remove all %s: %w", p, first)
	default:
		// One cause is enough to act on; the count tells how much is left.
		return fmt.Errorf("remove all %s: %w (and %d more entries could not be removed)", p, first, failed-1)
	}
}

// removeAll removes p and what is below it, returning how many entries could
// not be removed and the first error (its path names the entry).
func removeAll(fsys FS, p string) (int, error) {
	// Try the cheap case first, which also avoids deciding from Stat, whose
	// answer may be stale on a shared filesystem.
	rerr := fsys.Remove(p)
	if rerr == nil || errors.Is(rerr, fs.ErrNotExist) {
		return 0, nil
	}
	entries, lerr := fsys.ReadDir(p)
	switch {
	case errors.Is(lerr, fs.ErrNotExist):
		return 0, nil
	case errors.Is(lerr, syscall.ENOTDIR):
		return 1, rerr // a file that would not go
	case lerr != nil:
		// Not a directory we can list: both errors tell something.
		return 1, errors.Join(rerr, lerr)
	}
	var (
		first  error
		failed int
	)
	for _, e := range entries {
		if n, err := removeAll(fsys, path.Join(p, e.Name())); n > 0 {
			if first == nil {
				first = err
			}
			failed += n
		}
	}
	if failed > 0 {
		return failed, first
	}
	if err := fsys.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 1, err
	}
	return 0, nil
}

// DirSync makes a directory's entries durable: FS.SyncDir, or a
// DirSyncer's, which shares one SyncDir between callers.
type DirSync interface {
	SyncDir(dir string) error
}

// MkdirEntriesSync creates dir and its missing parents and makes their
// entries durable in the directories that hold them, through sync: it
// syncs every parent up to and including the parent of the topmost
// directory that was missing (always at least dir's parent), but not dir
// itself, which holds nothing yet: whoever fills dir syncs it. It is
// MkdirAllSync for a directory created to be filled at once (a partition's)
// under a parent many such creations share, whose syncs a DirSyncer
// coalesces.
func MkdirEntriesSync(fsys FS, sync DirSync, dir string) error {
	return mkdirAllSync(fsys, sync, path.Clean(dir), false)
}

// MkdirAllSync creates dir and its missing parents and makes the new entries
// durable: it syncs dir itself and every parent up to and including the
// parent of the topmost directory that was missing (always at least dir's
// parent). Which directories were missing is decided by Stat before the
// MkdirAll; a stale answer only makes it sync more or the same, because
// MkdirAll tolerates entries that appeared meanwhile.
func MkdirAllSync(fsys FS, dir string) error {
	return mkdirAllSync(fsys, fsys, path.Clean(dir), true)
}

func mkdirAllSync(fsys FS, sync DirSync, dir string, self bool) error {
	// top is the topmost ancestor (or dir itself) found missing.
	top := ""
	for d := dir; ; {
		if _, err := fsys.Stat(d); err == nil {
			break
		}
		top = d
		parent := path.Dir(d)
		if parent == d {
			break
		}
		d = parent
	}
	if err := mkdirAllShared(fsys, dir); err != nil {
		return fmt.Errorf("mkdir all %s: %w", dir, err)
	}
	if self {
		if err := sync.SyncDir(dir); err != nil {
			return fmt.Errorf("mkdir all %s: sync: %w", dir, err)
		}
	}
	stop := path.Dir(dir) // sync at least dir's parent
	if top != "" {
		stop = path.Dir(top)
	}
	for d := dir; d != stop; {
		parent := path.Dir(d)
		if err := sync.SyncDir(parent); err != nil {
			return fmt.Errorf("mkdir all %s: sync parent %s: %w", dir, parent, err)
		}
		if parent == d {
			break
		}
		d = parent
	}
	return nil
}

// mkdirAllShared is MkdirAll for a directory other processes may be
// creating at the same time (brokers starting together make <data>/topics
// and the cluster directories): MkdirAll treats EEXIST as success only if
// its lookup that follows sees a directory, and a shared filesystem's
// client may answer that lookup from a negative entry it cached a moment
// before (GlusterFS's FUSE client does). Looking again after a pause
// finds the other process's directory.
func mkdirAllShared(fsys FS, dir string) error {
	err := fsys.MkdirAll(dir, dirPerm)
	for pause := 10 * time.Millisecond; errors.Is(err, fs.ErrExist) && pause <= 640*time.Millisecond; pause *= 2 {
		time.Sleep(pause)
		err = fsys.MkdirAll(dir, dirPerm)
	}
	return err
}

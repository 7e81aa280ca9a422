package partlog

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/kaas-dev/kaas/volume"
)

// A full volume (ENOSPC) is not a failure of the log when nothing it left
// behind can be read as data and nothing durable was promised:
//
//   - an append's write: the file is truncated back to the last whole batch
//     (ftruncate frees space, it needs none) and nothing in memory changes;
//   - a roll: the new segment's files are removed (unlisted, our epoch), the
//     old segment stays active; index entries already written are rewritten
//     from the same positions by the next flush;
//   - a manifest write that failed before its rename (the temp file is
//     removed by volume.WriteFileAtomic, the previous manifest stays the
//     valid one): at a roll, the roll is undone as above; in a sync round,
//     the checkpoint does not advance. A checkpoint is only where recovery
//     starts re-validating the tail, so an older one costs a longer scan at
//     the next Open, never data. The round still publishes the high
//     watermark: the data is fsynced and the fence checked.
//
// These return errors wrapping ErrNoSpace and the cause. Every fsync failure
// stays final (errSyncFailed marks those that a write step could otherwise be
// mistaken for): after a failed fsync Linux may mark the pages clean, and a
// retry may report success for data that is gone. The fsync of a manifest's
// temp file is the exception: that file is removed, so no later fsync can
// vouch for it. A rename or directory fsync that fails leaves it unknown
// which manifest is durable, which is final too.

// errSyncFailed marks a failed fsync inside a step that also writes, so that
// an ENOSPC from it is not taken for a recoverable write error.
var errSyncFailed = errors.New("fsync failed")

// isNoSpace reports whether err is the volume's ENOSPC.
func isNoSpace(err error) bool { return errors.Is(err, syscall.ENOSPC) }

// isRecoverableNoSpace reports whether err is an ENOSPC that left nothing a
// later fsync could wrongly vouch for (see above).
func isRecoverableNoSpace(err error) bool {
	return isNoSpace(err) && !errors.Is(err, errSyncFailed)
}

// manifestUnchangedNoSpace reports whether a manifest write failed with
// ENOSPC before its rename, so the previous manifest is still in place.
func manifestUnchangedNoSpace(err error) bool {
	return isNoSpace(err) && errors.Is(err, volume.ErrNotReplaced)
}

// manifestUnchangedTryLater wraps err, a manifest write's error, in
// errTryLater if it failed before its rename for want of descriptors (the
// previous manifest is in place), and returns it unchanged otherwise.
func manifestUnchangedTryLater(err error) error {
	if errors.Is(err, volume.ErrNotReplaced) && transientOpenError(err) {
		return fmt.Errorf("%w: %w", errTryLater, err)
	}
	return err
}

// noSpace wraps err, an ENOSPC, in ErrNoSpace.
func noSpace(what string, err error) error {
	return fmt.Errorf("%w: %s: %w", ErrNoSpace, what, err)
}

// undoWriteLocked undoes an append write through wf that failed with
// ENOSPC (l.mu held): it truncates the active segment back to pos, the end
// of the last whole batch, so that neither a later append nor recovery sees
// the partial batch. If the truncate fails too, the log fails: its tail is
// unknown.
func (l *Log) undoWriteLocked(wf volume.File, pos int64, err error) error {
	if terr := wf.Truncate(pos); terr != nil {
		return l.fail(fmt.Errorf("%w; truncating back to %d failed: %w", err, pos, terr))
	}
	return noSpace(l.dir, err)
}

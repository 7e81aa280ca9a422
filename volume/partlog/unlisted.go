package partlog

import (
	"errors"
	"io/fs"
	"path"
	"slices"
)

// The unlisted-file rule: which segment files (plain or cleaned, any of the
// three) the writer removes. A file the manifest it made durable last does
// not name, and no reader pins, is garbage when
//
//   - its epoch is below the writer's: an older writer's leftover (a drop
//     that crashed before its unlinks, a roll that crashed before its
//     manifest, a fenced writer's superseded segment, a cleaner's output
//     never swapped in, or an input swapped out);
//   - it is a cleaned name of the writer's own epoch and no cleaning pass
//     runs on this log (Log.cleaning): an abandoned pass's output;
//   - it is a plain name of the writer's own epoch below the active
//     segment's base: a dropped segment whose unlink failed.
//
// Never removed: files of a higher epoch (a newer writer exists, and this
// one's next fence check fails it), and plain files of the writer's own
// epoch at or above the active base (a roll creates its file at the log end
// before its manifest names it).
//
// Why no owner can need a garbage file: files are removed only after a
// fence read that follows the manifest write keep comes from (both under
// manMu). A later owner claims the fence after that read and reads the
// highest-epoch manifest, which is that one or a later version of it; a
// later version only adds names of this epoch (rolls at the log end, a
// running pass's swaps) and drops names through its own fenced path. A
// stale listing only hides files until the next sweep: names are never
// reused, so a stale entry is garbage or gone (ENOENT).
type unlistedRule struct {
	epoch      int32           // the writer's
	activeBase int64           // base of the manifest's last segment, the active one
	cleaning   bool            // a cleaning pass runs: its outputs are not named yet
	keep       map[string]bool // stems the manifest names, and dropped ones still pinned
}

// unlistedRuleLocked is the rule as of l.man (manMu held).
func (l *Log) unlistedRuleLocked() unlistedRule {
	r := unlistedRule{epoch: l.cfg.Epoch, cleaning: l.cleaning.Load(), keep: l.retiredStems()}
	for _, s := range l.man.Segments {
		r.keep[s.id().stem()] = true
	}
	if n := len(l.man.Segments); n > 0 {
		r.activeBase = l.man.Segments[n-1].Base
	}
	return r
}

// garbage reports whether the files of segment id may be removed.
func (r unlistedRule) garbage(id segID) bool {
	switch {
	case r.keep[id.stem()] || id.epoch > r.epoch:
		return false
	case id.epoch < r.epoch:
		return true
	case id.gen != 0:
		return !r.cleaning
	default:
		return id.base < r.activeBase
	}
}

// sweepUnlisted removes the garbage segment files among names (a listing
// of the partition directory, possibly stale; nil: list it now) and
// returns how many it removed. Only a writer that still holds the fence
// removes anything; a failed removal is left to the next sweep. The caller
// is Open or holds retMu, so no segment is dropped meanwhile.
//
// The listing comes first: a file it shows was created before the manifest
// and the cleaning flag are read, so a pass's output is either named or
// covered by the flag (set before its first output, cleared after its
// last manifest write).
func (l *Log) sweepUnlisted(names []string) int {
	if names == nil {
		ents, err := l.fsys.ReadDir(l.dir)
		if err != nil {
			l.log.V(1).Info("listing for the unlisted-file sweep failed; the next sweep retries", "err", err.Error())
			return 0
		}
		names = make([]string, len(ents))
		for i, e := range ents {
			names[i] = e.Name()
		}
	}
	l.manMu.Lock()
	rule := l.unlistedRuleLocked()
	var garbage []string
	for _, n := range names {
		if id, ok := parseAnySegmentFile(n); ok && rule.garbage(id) {
			garbage = append(garbage, n)
		}
	}
	var fenceErr error
	if len(garbage) > 0 {
		// Only now: a sweep with nothing to remove costs no fence read.
		fenceErr = l.checkFence()
	}
	l.manMu.Unlock()
	if fenceErr != nil {
		l.log.V(1).Info("unlisted-file sweep removes nothing: the fence is not ours", "files", len(garbage), "err", fenceErr.Error())
		return 0
	}
	slices.Sort(garbage)
	garbage = slices.Compact(garbage)
	removed := 0
	for _, n := range garbage {
		err := l.fsys.Remove(path.Join(l.dir, n))
		switch {
		case err == nil:
			removed++
		case errors.Is(err, fs.ErrNotExist):
			l.log.V(1).Info("unlisted segment file already gone", "file", n)
		default:
			l.log.V(1).Info("removing an unlisted segment file failed; the next sweep retries", "file", n, "err", err.Error())
		}
	}
	if removed > 0 {
		l.log.V(1).Info("removed unlisted segment files", "files", removed, "activeBase", rule.activeBase)
	}
	return removed
}

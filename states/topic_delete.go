package states

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/kaas-dev/kaas/volume"
)

// TopicDelete removes one incarnation of a topic:
//
//	requested --release--> released --rename-aside--> renamed --purge--> purged --forget--> deleted
//
// release: every partition's owner has closed its handles (lifecycle fencing:
// nothing is removed while a leader holds it). rename-aside: the topic
// directory is renamed into the trash under its topic ID, one atomic step
// that makes the name free for a new incarnation. purge: the trash entry is
// removed, re-driven until it is really gone (on NFS a handle still open
// elsewhere keeps a .nfsXXXX file and its directory alive). forget: the
// desired-state file is removed, if it still describes this incarnation.
var TopicDelete = Definition{
	Kind:    "topic-delete",
	Summary: "Removes one incarnation of a topic: handles released, directory renamed into the trash, trash purged, desired state forgotten.",
	Initial: "requested",
	End:     "deleted",
	Steps: []Step{
		{From: "requested", Event: "release", To: "released", Host: true},
		{From: "released", Event: "rename-aside", To: "renamed"},
		{From: "renamed", Event: "purge", To: "purged"},
		{From: "purged", Event: "forget", To: "deleted", Host: true},
	},
}

// TopicDeleteHost does the steps of TopicDelete that need the engine.
type TopicDeleteHost interface {
	// Release returns once no broker holds the incarnation's partitions
	// open (this one closes its own handles).
	Release(ctx context.Context) error
	// Forget removes the desired state, if it still describes this
	// incarnation.
	Forget(ctx context.Context) error
}

// TopicDeleteActions are the actions of TopicDelete for one incarnation:
// rename-aside and purge act on the volume, release and forget are host's.
func TopicDeleteActions(fsys volume.FS, dataDir, topic, topicID string, host TopicDeleteHost) Actions {
	return Actions{
		"release":      host.Release,
		"rename-aside": func(ctx context.Context) error { return renameAside(fsys, dataDir, topic, topicID, false) },
		"purge":        func(ctx context.Context) error { return PurgeTrash(fsys, dataDir, topic, topicID) },
		"forget":       host.Forget,
	}
}

// PurgeTrash removes the trash entry of one incarnation (TrashPath), and is
// re-driven until it is really gone: on NFS a segment another host still
// holds open leaves a hidden .nfsXXXX file that keeps its directory
// non-empty until the handle closes, and the error then names those files.
// An entry stamped with another topic ID is never removed (a rename-aside
// that lost a race moved the wrong directory: it needs a human, and the
// error says so). Absent is success.
func PurgeTrash(fsys volume.FS, dataDir, topic, topicID string) error {
	return purgeTrash(fsys, TrashPath(dataDir, topic, topicID), topicID)
}

// PurgeTrashEntry is PurgeTrash for the trash entry called name (one that
// TrashEntry parses), for a sweep that knows the entry but not its topic
// (a shortened name). The ID in the name decides, as in PurgeTrash.
func PurgeTrashEntry(fsys volume.FS, dataDir, name string) error {
	_, topicID, ok := TrashEntry(name)
	if !ok || path.Base(name) != name {
		return fmt.Errorf("purge trash entry %q: not a name kaas makes", name)
	}
	return purgeTrash(fsys, path.Join(dataDir, TrashDir, name), topicID)
}

// purgeTrash removes the trash entry at path trash of incarnation topicID.
func purgeTrash(fsys volume.FS, trash, topicID string) error {
	if st, err := readStampFile(fsys, path.Join(trash, StampFile)); err == nil && st.TopicID != topicID {
		return fmt.Errorf("%w: trash entry %s is stamped %s, not %s: refusing to remove it", ErrStampMismatch, trash, st.TopicID, topicID)
	}
	if err := volume.RemoveAll(fsys, trash); err != nil {
		if held := heldOpen(fsys, trash); len(held) > 0 {
			return fmt.Errorf("%w; files still held open elsewhere (NFS silly-rename, removed when the last handle closes): %s",
				err, strings.Join(held, ", "))
		}
		return err
	}
	// The removal is durable only once the trash directory is synced;
	// before that a crash brings the entry back while the record already
	// says purged.
	if err := fsys.SyncDir(path.Dir(trash)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("sync %s: %w", path.Dir(trash), err)
	}
	return nil
}

// heldOpen lists (a few of) the .nfsXXXX files left under dir, for the
// purge's error: the status then says why the trash is not empty yet.
func heldOpen(fsys volume.FS, dir string) []string {
	const most = 4
	var out []string
	var walk func(d string, depth int)
	walk = func(d string, depth int) {
		ents, err := fsys.ReadDir(d)
		if err != nil {
			return
		}
		for _, e := range ents {
			if len(out) >= most {
				return
			}
			p := path.Join(d, e.Name())
			switch {
			case strings.HasPrefix(e.Name(), ".nfs"):
				out = append(out, strings.TrimPrefix(p, dir+"/"))
			case e.IsDir() && depth < 3:
				walk(p, depth+1)
			}
		}
	}
	walk(dir, 0)
	return out
}

// renameAside moves the topic directory of incarnation topicID into the
// trash (TrashPath), one atomic rename, idempotently: a directory already
// gone is success. It never moves another incarnation's directory: one
// stamped with another ID is left where it is (a topic recreated under the
// name after an earlier rename owns it). With stampedOnly (directory
// reclaim) it moves only a directory whose stamp names topicID, so an
// unstamped directory is adopted, never reclaimed; without it (topic
// delete) an unstamped directory, an open interrupted before its stamp, is
// moved too.
//
// The stamp is re-checked at the destination after the rename: should a
// racing actor (a controller that lost its lease mid-step) have replaced
// the directory between the check and the rename, the wrong directory is
// moved back and the step fails, to be re-driven.
func renameAside(fsys volume.FS, dataDir, topic, topicID string, stampedOnly bool) error {
	src, dst := TopicDir(dataDir, topic), TrashPath(dataDir, topic, topicID)
	// The stamp is read through open (close-to-open), not decided from a
	// possibly cached stat.
	st, err := ReadStamp(fsys, dataDir, topic)
	switch {
	case err == nil && st.TopicID != topicID:
		return nil // another incarnation's: never moved
	case err == nil:
		// ours: move it
	case errors.Is(err, errTornStamp):
		if stampedOnly {
			return nil // not provably ours: adopted by whoever stamps it
		}
	case errors.Is(err, fs.ErrNotExist):
		if stampedOnly {
			return nil // gone already, or unstamped: adopted, never reclaimed
		}
		if _, err := fsys.Stat(src); errors.Is(err, fs.ErrNotExist) {
			return nil // already moved (or never created): the end of this step holds
		} else if err != nil {
			return fmt.Errorf("stat %s: %w", src, err)
		}
	default:
		return fmt.Errorf("read stamp of %s: %w", src, err)
	}
	if err := volume.MkdirAllSync(fsys, path.Dir(dst)); err != nil {
		return fmt.Errorf("trash dir: %w", err)
	}
	if err := fsys.Rename(src, dst); err != nil {
		// The reply may have been lost after the rename was applied.
		if _, serr := fsys.Stat(dst); serr == nil {
			if _, serr := fsys.Stat(src); errors.Is(serr, fs.ErrNotExist) {
				return verifyMoved(fsys, src, dst, topicID, stampedOnly)
			}
		}
		if errors.Is(err, fs.ErrNotExist) {
			return nil // moved away between the check and the rename
		}
		return fmt.Errorf("rename %s aside: %w", src, err)
	}
	return verifyMoved(fsys, src, dst, topicID, stampedOnly)
}

// verifyMoved checks that what landed in the trash is incarnation
// topicID's directory, moves it back if not, and makes the rename durable.
func verifyMoved(fsys volume.FS, src, dst, topicID string, stampedOnly bool) error {
	st, err := readStampFile(fsys, path.Join(dst, StampFile))
	wrong := (err == nil && st.TopicID != topicID) || (stampedOnly && err != nil)
	if wrong {
		if rerr := fsys.Rename(dst, src); rerr != nil {
			return fmt.Errorf("%w: moved %s (stamp %q, %v) aside by a race and could not move it back: %v",
				ErrStampMismatch, src, st.TopicID, err, rerr)
		}
		_ = syncBoth(fsys, src, dst)
		return fmt.Errorf("%w: %s changed incarnation during the rename (stamp %q, %v); moved it back", ErrStampMismatch, src, st.TopicID, err)
	}
	return syncBoth(fsys, src, dst)
}

func syncBoth(fsys volume.FS, src, dst string) error {
	if err := fsys.SyncDir(path.Dir(src)); err != nil {
		return fmt.Errorf("sync %s: %w", path.Dir(src), err)
	}
	if err := fsys.SyncDir(path.Dir(dst)); err != nil {
		return fmt.Errorf("sync %s: %w", path.Dir(dst), err)
	}
	return nil
}

// Machines lists every named machine, so that crash sweeps cover each one.
var Machines = []Definition{PartitionOpen, TopicDelete, CoordinatorOpen, DirectoryReclaim, SegmentCompact}

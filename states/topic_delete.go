package states

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"

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
	Initial: "requested",
	End:     "deleted",
	Steps: []Step{
		{From: "requested", Event: "release", To: "released"},
		{From: "released", Event: "rename-aside", To: "renamed"},
		{From: "renamed", Event: "purge", To: "purged"},
		{From: "purged", Event: "forget", To: "deleted"},
	},
}

// TopicDeleteActions are the actions of TopicDelete for one incarnation.
// releaseFn closes the partitions' handles; forgetFn removes desired state.
func TopicDeleteActions(fsys volume.FS, dataDir, topic, topicID string, releaseFn, forgetFn Action) Actions {
	return Actions{
		"release":      releaseFn,
		"rename-aside": func(ctx context.Context) error { return renameAside(fsys, dataDir, topic, topicID) },
		"purge": func(ctx context.Context) error {
			trash := TrashPath(dataDir, topic, topicID)
			if err := volume.RemoveAll(fsys, trash); err != nil {
				return err
			}
			// The removal is durable only once the trash directory is
			// synced; before that a crash brings the entry back while the
			// record already says purged.
			if err := fsys.SyncDir(path.Dir(trash)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("sync %s: %w", path.Dir(trash), err)
			}
			return nil
		},
		"forget": forgetFn,
	}
}

func renameAside(fsys volume.FS, dataDir, topic, topicID string) error {
	src, dst := TopicDir(dataDir, topic), TrashPath(dataDir, topic, topicID)
	if _, err := fsys.Stat(src); errors.Is(err, fs.ErrNotExist) {
		return nil // already moved (or never created): the end of this step holds
	} else if err != nil {
		return fmt.Errorf("stat %s: %w", src, err)
	}
	// Never move another incarnation's directory: a topic recreated under
	// this name after the rename owns what is there now.
	if st, err := ReadStamp(fsys, dataDir, topic); err == nil && st.TopicID != topicID {
		return nil
	}
	if err := volume.MkdirAllSync(fsys, path.Dir(dst)); err != nil {
		return fmt.Errorf("trash dir: %w", err)
	}
	if err := fsys.Rename(src, dst); err != nil {
		// The reply may have been lost after the rename was applied.
		if _, serr := fsys.Stat(dst); serr == nil {
			if _, serr := fsys.Stat(src); errors.Is(serr, fs.ErrNotExist) {
				return syncBoth(fsys, src, dst)
			}
		}
		return fmt.Errorf("rename %s aside: %w", src, err)
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
var Machines = []Definition{PartitionOpen, TopicDelete, CoordinatorOpen}

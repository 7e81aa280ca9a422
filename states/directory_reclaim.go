package states

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/kaas-dev/kaas/volume"
)

// DirectoryReclaim clears a topic's name for the incarnation the desired
// state names, when the topic directory is still stamped by a previous
// incarnation (docs/design.md §1 rule 4: names are not identities):
//
//	requested --release--> released --rename-aside--> renamed --purge--> reclaimed
//
// The record's object is the topic name and its TopicID the OLD
// incarnation, the one being reclaimed. release: no broker serves the old
// incarnation any more (lifecycle fencing: the assignment no longer names
// its topic ID and no live broker's heartbeat lists one of its partitions
// open), as for a delete. rename-aside: the directory stamped with the old
// ID, and only that one (the stamp is re-read before the rename and checked
// again at the destination), is renamed into the trash under the old ID:
// one atomic step after which the name is free and the new incarnation's
// partition open starts from make-dir, empty, at offset 0, with no producer
// state (which lived in the moved directory). An unstamped directory is
// adopted, never reclaimed: rename-aside leaves it. purge: the trash entry
// is removed, re-driven until it is really gone (.nfsXXXX leftovers of
// handles still open elsewhere keep it non-empty meanwhile).
//
// Only the controller drives it (the one writer of topic directories, as
// for topic-delete); a partition owner that meets the old stamp waits.
var DirectoryReclaim = Definition{
	Kind:    "directory-reclaim",
	Summary: "Clears a topic name for the incarnation now desired when its directory is still stamped by a previous one.",
	Initial: "requested",
	End:     "reclaimed",
	Steps: []Step{
		{From: "requested", Event: "release", To: "released", Host: true},
		{From: "released", Event: "rename-aside", To: "renamed"},
		{From: "renamed", Event: "purge", To: "reclaimed"},
	},
}

// DirectoryReclaimHost does the step of DirectoryReclaim that needs the
// engine.
type DirectoryReclaimHost interface {
	// Release returns once no broker holds the old incarnation open (the
	// engine knows the assignment and the heartbeats).
	Release(ctx context.Context) error
}

// DirectoryReclaimActions are the actions of DirectoryReclaim for the
// directory of topic stamped with oldID: rename-aside and purge act on the
// volume, release is host's.
func DirectoryReclaimActions(fsys volume.FS, dataDir, topic, oldID string, host DirectoryReclaimHost) Actions {
	return Actions{
		"release":      host.Release,
		"rename-aside": func(ctx context.Context) error { return renameAside(fsys, dataDir, topic, oldID, true) },
		"purge":        func(ctx context.Context) error { return PurgeTrash(fsys, dataDir, topic, oldID) },
	}
}

// readStampFile reads a stamp file: a topic directory's, or one inside a
// trash entry.
func readStampFile(fsys volume.FS, p string) (Stamp, error) {
	b, err := volume.ReadFile(fsys, p)
	if err != nil {
		return Stamp{}, err
	}
	var s Stamp
	if err := json.Unmarshal(b, &s); err != nil || s.TopicID == "" {
		return Stamp{}, fmt.Errorf("%w: %s", errTornStamp, p)
	}
	return s, nil
}

// IsTornStamp reports whether err is ReadStamp's for a stamp that exists
// but cannot be parsed (a create interrupted before its data was synced).
func IsTornStamp(err error) bool { return errors.Is(err, errTornStamp) }

// TrashEntry names what a trash entry holds: the topic ID of the
// incarnation moved aside, and its topic when the name carries it whole.
// For a shortened name (TrashPath, a topic name too long to fit) topic is
// "": the entry's stamp and its machine's record name it. ok is false for
// names kaas did not make.
func TrashEntry(name string) (topic, topicID string, ok bool) {
	i := strings.LastIndexByte(name, '~')
	if i <= 0 || i == len(name)-1 {
		return "", "", false
	}
	topic, topicID = name[:i], name[i+1:]
	if strings.IndexByte(topic, '~') >= 0 {
		// Topic names have no '~': this is the shortened form.
		return "", topicID, true
	}
	return topic, topicID, true
}

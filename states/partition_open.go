package states

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"

	"github.com/kaas-dev/kaas/volume"
)

// PartitionOpen brings one partition to `serving` at the leader epoch the
// assignment gives this broker: its directory exists, the topic directory
// carries this incarnation's stamp, the partition's fence holds the epoch,
// the log is open with the old tail recovered and sealed and a segment of
// the new epoch started, and the owner routes requests to it.
//
//	pending --make-dir--> dir-ready --stamp--> stamped --fence--> fenced
//	        --recover--> recovered --serve--> serving
//
// It is also the takeover machine (docs/design.md §4): when another broker wrote
// the partition before, `fence` is the step that stops it. The fence is
// written before anything of the old tail is read, so the old writer can
// acknowledge nothing more (it re-reads the fence every group-commit
// round), and `recover` then reads a tail that no longer grows except by
// unacknowledged zombie bytes, which recovery seals away.
//
// `fenced` holds for one epoch and one process: the engine starts again
// from `stamped` when the record names another epoch than the one
// assigned, or when another process fenced it. `recovered` and `serving`
// describe handles held by a process: after a restart the engine treats a
// record in either as `stamped`, since nothing is open any more
// (level-triggered: the state is observed, not remembered). `dir-ready` is
// observed again from `pending`. Resumes holds these rules.
//
// So the record is status, saved only where a pass stops and at
// `serving` (SaveAtStops): a loading process would go back to `pending`
// or `stamped` from any state in between, and the two steps before
// `stamped` are idempotent, so a crash that leaves the volume ahead of
// the record changes nothing but what reconcile-status shows meanwhile.
var PartitionOpen = Definition{
	Kind:        "partition-open",
	Summary:     "Brings one partition to serving at the leader epoch assigned to this broker, taking it over from a previous writer.",
	Initial:     "pending",
	End:         "serving",
	SaveAtStops: true,
	Steps: []Step{
		{From: "pending", Event: "make-dir", To: "dir-ready"},
		{From: "dir-ready", Event: "stamp", To: "stamped"},
		{From: "stamped", Event: "fence", To: "fenced", Host: true},
		{From: "fenced", Event: "recover", To: "recovered", Host: true},
		{From: "recovered", Event: "serve", To: "serving", Host: true},
	},
	Resumes: map[State]ResumeRule{
		// A reclaim of another incarnation's directory may have moved it
		// since (make-dir is idempotent).
		"dir-ready": {Means: Observed, From: "pending"},
		"fenced":    {Means: Claimed, From: "stamped"},
		"recovered": {Means: HeldHandles, From: "stamped"},
		"serving":   {Means: HeldHandles, From: "stamped"},
	},
}

// Stamp is the content of a topic directory's .topic-id.json.
type Stamp struct {
	Topic   string `json:"topic"`
	TopicID string `json:"topicID"`
}

// ErrStampMismatch means the directory belongs to another incarnation of the
// topic's name. The directory-reclaim machine (not this one) moves it aside.
var ErrStampMismatch = errors.New("topic directory belongs to another incarnation")

// PartitionOpenHost does the steps of PartitionOpen that need the engine:
// it knows the assigned epoch and holds the handles. Each step gets the
// record being driven (Fence names the epoch and FencedFrom there, which
// Recover reads). Every step is idempotent, as every action is.
type PartitionOpenHost interface {
	// Fence claims the partition's fence at the assigned epoch
	// (PartitionFence, Fence.Claim).
	Fence(ctx context.Context, rec *Record) error
	// Recover opens the log (and its producer state) at the fenced epoch,
	// recovering and sealing the old tail.
	Recover(ctx context.Context, rec *Record) error
	// Serve publishes the recovered log to the requests routed to it.
	Serve(ctx context.Context, rec *Record) error
}

// StampEnsurer is a PartitionOpenHost that shares the stamp step between
// the partitions of a topic it opens side by side: EnsureStamp answers
// what EnsureStamp of the host's topic answered once for all of them.
// Sharing it is sound because only a stamp of another incarnation is ever
// moved aside (directory-reclaim), so a directory found carrying this
// incarnation's stamp keeps carrying it.
type StampEnsurer interface {
	EnsureStamp() error
}

// PartitionOpenActions are the actions of PartitionOpen for one
// partition, driving rec: make-dir and stamp act on the volume, the rest
// are host's.
func PartitionOpenActions(fsys volume.FS, dataDir, topic, topicID string, partition int32, rec *Record, host PartitionOpenHost) Actions {
	return Actions{
		"make-dir": func(ctx context.Context) error {
			// The partition directory's entry durable in the topic
			// directory; its own entries are the log's to sync. A host
			// that shares directory fsyncs (volume.DirSync, a DirSyncer:
			// every partition of a topic syncs the one topic directory)
			// syncs through it.
			var ds volume.DirSync = fsys
			if hs, ok := host.(volume.DirSync); ok {
				ds = hs
			}
			return volume.MkdirEntriesSync(fsys, ds, PartitionDir(dataDir, topic, partition))
		},
		"stamp": func(ctx context.Context) error {
			var err error
			if hs, ok := host.(StampEnsurer); ok {
				err = hs.EnsureStamp()
			} else {
				err = EnsureStamp(fsys, dataDir, topic, topicID)
			}
			if errors.Is(err, ErrStampMismatch) {
				// Not this machine's to fix: it waits for the controller's
				// directory-reclaim to move the directory aside.
				return Wait(fmt.Errorf("%w (waiting for the controller's directory-reclaim)", err))
			}
			return err
		},
		"fence":   func(ctx context.Context) error { return host.Fence(ctx, rec) },
		"recover": func(ctx context.Context) error { return host.Recover(ctx, rec) },
		"serve":   func(ctx context.Context) error { return host.Serve(ctx, rec) },
	}
}

// EnsureStamp makes the topic directory carry topicID. An absent stamp is
// created by exclusive create; an existing one must match. An unstamped
// directory is adopted by stamping it, never reclaimed. An empty or torn
// stamp (a create interrupted before its data was synced) is rewritten.
func EnsureStamp(fsys volume.FS, dataDir, topic, topicID string) error {
	p := StampPath(dataDir, topic)
	want, err := json.Marshal(Stamp{Topic: topic, TopicID: topicID})
	if err != nil {
		return err
	}
	for attempt := 0; attempt < 3; attempt++ {
		got, err := ReadStamp(fsys, dataDir, topic)
		switch {
		case err == nil && got.TopicID == topicID:
			return nil
		case err == nil:
			return fmt.Errorf("%w: %s is stamped %s, want %s", ErrStampMismatch, path.Dir(p), got.TopicID, topicID)
		case errors.Is(err, fs.ErrNotExist):
			err = volume.CreateExclusiveFile(fsys, p, want)
			if err == nil || errors.Is(err, fs.ErrExist) {
				continue // re-read: EEXIST is not proof of a finished stamp
			}
			return fmt.Errorf("stamp %s: %w", p, err)
		case errors.Is(err, errTornStamp):
			// Only this topic's one writer (the engine's reconciler) stamps,
			// so a torn stamp is our own interrupted create: replace it.
			if err := volume.WriteFileAtomic(fsys, p, want); err != nil {
				return fmt.Errorf("restamp %s: %w", p, err)
			}
		default:
			return err
		}
	}
	return fmt.Errorf("stamp %s: did not settle", p)
}

var errTornStamp = errors.New("torn stamp")

// ReadStamp reads a topic directory's stamp.
func ReadStamp(fsys volume.FS, dataDir, topic string) (Stamp, error) {
	b, err := volume.ReadFile(fsys, StampPath(dataDir, topic))
	if err != nil {
		return Stamp{}, err
	}
	var s Stamp
	if err := json.Unmarshal(b, &s); err != nil || s.TopicID == "" {
		return Stamp{}, fmt.Errorf("%w: %s", errTornStamp, StampPath(dataDir, topic))
	}
	return s, nil
}

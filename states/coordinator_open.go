package states

import (
	"context"
	"strconv"

	"github.com/kaas-dev/kaas/volume"
)

// CoordinatorOpen brings one group-coordinator shard to `serving` at the
// leader epoch the assignment gives this broker: its directory exists, the
// shard's fence holds the epoch, the shard's store (engine/groupstore) is
// open with the old tail recovered and sealed and its table loaded, and the
// coordinator answers for the shard's groups.
//
//	pending --make-dir--> dir-ready --fence--> fenced --load--> loaded
//	        --serve--> serving
//
// It is also the shard's takeover: `fence` writes the new epoch before
// anything of the old log or snapshots is read, so the previous owner
// acknowledges nothing more (its group-commit round re-reads the fence) and
// its late snapshot is rejected at load (groupstore's version-conditional
// rule).
//
// As in PartitionOpen, `fenced` holds for one epoch and one process: the
// engine starts again from `dir-ready` when the record names another epoch
// than the one assigned, or when another process fenced it. `loaded` and
// `serving` describe handles held by a process: after a restart the engine
// treats a record in either as `dir-ready`, since nothing is open any more.
// Resumes holds these rules.
// Shard directories carry no stamp: shards are fixed, never deleted, and a
// name like groups/3 means the same shard for the life of the cluster.
var CoordinatorOpen = Definition{
	Kind:    "coordinator-open",
	Summary: "Brings one group-coordinator shard to serving at the leader epoch assigned to this broker, taking it over from a previous owner.",
	Initial: "pending",
	End:     "serving",
	// As PartitionOpen: every state between resumes from an earlier one.
	SaveAtStops: true,
	Steps: []Step{
		{From: "pending", Event: "make-dir", To: "dir-ready"},
		{From: "dir-ready", Event: "fence", To: "fenced", Host: true},
		{From: "fenced", Event: "load", To: "loaded", Host: true},
		{From: "loaded", Event: "serve", To: "serving", Host: true},
	},
	Resumes: map[State]ResumeRule{
		"fenced":  {Means: Claimed, From: "dir-ready"},
		"loaded":  {Means: HeldHandles, From: "dir-ready"},
		"serving": {Means: HeldHandles, From: "dir-ready"},
	},
}

// ShardObject names a coordinator shard in CoordinatorOpen records and
// status: groups/<shard>.
func ShardObject(shard int32) string { return GroupsDir + "/" + strconv.Itoa(int(shard)) }

// CoordinatorOpenHost does the steps of CoordinatorOpen that need the
// engine: it knows the assigned epoch and holds the handles. Each step gets
// the record being driven. Every step is idempotent, as every action is.
type CoordinatorOpenHost interface {
	// Fence claims the shard's fence at the assigned epoch (ShardFence,
	// Fence.Claim).
	Fence(ctx context.Context, rec *Record) error
	// Load opens the shard's store (engine/groupstore) at the fenced
	// epoch and loads its table.
	Load(ctx context.Context, rec *Record) error
	// Serve makes the loaded coordinator answer for the shard's groups.
	Serve(ctx context.Context, rec *Record) error
}

// CoordinatorOpenActions are the actions of CoordinatorOpen for one shard,
// driving rec: make-dir creates the shard directory durably, the rest are
// host's.
func CoordinatorOpenActions(fsys volume.FS, clusterDir string, shard int32, rec *Record, host CoordinatorOpenHost) Actions {
	return Actions{
		"make-dir": func(ctx context.Context) error {
			return volume.MkdirAllSync(fsys, ShardDir(clusterDir, shard))
		},
		"fence": func(ctx context.Context) error { return host.Fence(ctx, rec) },
		"load":  func(ctx context.Context) error { return host.Load(ctx, rec) },
		"serve": func(ctx context.Context) error { return host.Serve(ctx, rec) },
	}
}

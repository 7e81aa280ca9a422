package states

import "context"

// SegmentCompact is one cleaning pass over one compacted partition, run by
// the partition's owner at its epoch:
//
//	pending --plan--> planned --map--> mapped --clean--> cleaned --retire--> compacted
//
// plan: the log is usable, the quiet tail rolled, garbage of earlier
// passes swept, the cleanable range and its groups chosen. map: the
// offset map of the dirty range built (reads only). clean: per group a
// cleaned segment written, made durable and swapped in for its inputs by
// one manifest replace, the inputs retired. retire: the inputs' last pin
// is gone and the unlisted files swept.
//
// Every step's leftovers are unlisted files, which the sweep at every Open
// and every pass removes, so any crash converges. `planned` and `mapped`
// name a plan and a map held in memory by the process that made them: any
// process that loads them, the same one after a failed pass included,
// starts again at `pending` (the new plan sweeps). `cleaned` is kept: the
// swaps are facts of the manifest, and retire is valid in any process at
// any epoch. A new pass over a record at `compacted` starts at `pending`.
//
// The record is progress, not status: clean saves it after each swap
// (same state, updated Compact), so it is saved after every step too, not
// only at the stops, and with fsync.
var SegmentCompact = Definition{
	Kind:    "segment-compact",
	Summary: "Rewrites the cleanable segments of one compacted partition into cleaned segments and retires the inputs once no reader holds them.",
	Initial: "pending",
	End:     "compacted",
	Steps: []Step{
		{From: "pending", Event: "plan", To: "planned", Host: true},
		{From: "planned", Event: "map", To: "mapped", Host: true},
		{From: "mapped", Event: "clean", To: "cleaned", Host: true},
		{From: "cleaned", Event: "retire", To: "compacted", Host: true},
	},
	Resumes: map[State]ResumeRule{
		"planned": {Means: HeldHandles, From: "pending"},
		"mapped":  {Means: HeldHandles, From: "pending"},
	},
}

// CompactProgress is what a segment-compact pass planned and did so far,
// for reconcile-status and metrics; nothing resumes from it.
type CompactProgress struct {
	// From and End are the pass's cleanable range [From, End) at plan.
	From int64 `json:"from"`
	End  int64 `json:"end"`
	// MapEnd is where the offset map stopped: records at or above it are
	// kept, and it is the next pass's first dirty offset.
	MapEnd int64 `json:"mapEnd,omitempty"`
	// GroupsPlanned and GroupsSwapped count the pass's groups.
	GroupsPlanned int `json:"groupsPlanned"`
	GroupsSwapped int `json:"groupsSwapped"`
	// Gens are the generations of the cleaned segments swapped in.
	Gens []int64 `json:"gens,omitempty"`
	// BytesRead and BytesWritten are the filter's; BytesReclaimed is what
	// the swaps freed.
	BytesRead      int64 `json:"bytesRead"`
	BytesWritten   int64 `json:"bytesWritten"`
	BytesReclaimed int64 `json:"bytesReclaimed"`
	// Records removed: superseded by a later record of their key,
	// tombstones past their horizon, of aborted transactions; and
	// transaction markers removed.
	Superseded int64 `json:"superseded,omitempty"`
	Tombstones int64 `json:"tombstones,omitempty"`
	Aborted    int64 `json:"aborted,omitempty"`
	Markers    int64 `json:"markers,omitempty"`
}

// SegmentCompactHost does every step of SegmentCompact: the engine's
// cleaner holds the open log, the plan and the map. Each step gets the
// record being driven and keeps its Compact up to date; Clean saves it
// after each swap. Every step is idempotent, as every action is.
type SegmentCompactHost interface {
	// Plan checks the log is usable and compacted, rolls a quiet tail,
	// sweeps unlisted files and chooses the range and groups. An empty
	// range is success with zero groups: the pass goes straight through.
	Plan(ctx context.Context, rec *Record) error
	// Map builds the offset map of the plan's dirty range.
	Map(ctx context.Context, rec *Record) error
	// Clean writes, finishes and swaps in each group's cleaned segment.
	// A failure removes the pass's outputs (best effort).
	Clean(ctx context.Context, rec *Record) error
	// Retire waits (Wait) for the inputs' last unpin and sweeps.
	Retire(ctx context.Context, rec *Record) error
}

// SegmentCompactActions are the actions of SegmentCompact for one
// partition's pass, driving rec: every step is host's.
func SegmentCompactActions(rec *Record, host SegmentCompactHost) Actions {
	return Actions{
		"plan":   func(ctx context.Context) error { return host.Plan(ctx, rec) },
		"map":    func(ctx context.Context) error { return host.Map(ctx, rec) },
		"clean":  func(ctx context.Context) error { return host.Clean(ctx, rec) },
		"retire": func(ctx context.Context) error { return host.Retire(ctx, rec) },
	}
}

package engine

import "github.com/kaas-dev/kaas/volume/partlog"

// NegativeControls deliberately break a guarantee, for the fault-model
// scenarios that prove the checks catch it: a chaos spec turns one on and
// its checker must then report the loss that follows. None is ever on in
// production; the zero value (all off) is the broker as designed.
type NegativeControls struct {
	// CompareWallClocks judges liveness by comparing this broker's wall
	// clock (Config.Now) with the wall time in other brokers' heartbeats
	// (fault model T13: clock jumps).
	CompareWallClocks bool
	// SkipFenceRecheck makes partition logs, and the group coordinators'
	// shard logs, acknowledge without re-reading the fence after each
	// fsync (a zombie's acks).
	SkipFenceRecheck bool
	// InPlaceAssignment makes the controller overwrite the assignment file
	// in place instead of temp+rename (torn control-plane files).
	InPlaceAssignment bool
	// IgnoreServingLease keeps serving partitions however long ago the
	// heartbeat was last renewed (see leaseHeld): the zombie scenarios,
	// with SkipFenceRecheck.
	IgnoreServingLease bool
	// CompactDropLatest makes the log cleaner remove the latest value of
	// one key in 64 (dataplane.OffsetMap.UnsafeDropLatest): the loss the
	// compaction checker must catch.
	CompactDropLatest bool
}

// Option changes an Engine beyond its Config.
type Option func(*Engine)

// WithNegativeControls turns nc's negative controls on.
func WithNegativeControls(nc NegativeControls) Option {
	return func(e *Engine) { e.negative = nc }
}

// logOptions are the partition log options the negative controls ask for,
// for partitions and coordinator shards alike.
func (e *Engine) logOptions() []partlog.Option {
	if e.negative.SkipFenceRecheck {
		return []partlog.Option{partlog.UnsafeSkipFenceRecheck()}
	}
	return nil
}

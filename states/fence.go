package states

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/partlog"
)

// Fence is the fence of one log, a partition's or a coordinator shard's:
// the fence step of PartitionOpen and CoordinatorOpen claims it (Claim).
type Fence struct {
	// Dir is the log's directory.
	Dir string
	// What names the log in errors and logs.
	What string
	// DeferNew claims a new log's fence (none there yet: nobody to stop)
	// without the directory fsync; the log's Open makes it durable with
	// its first segment's, before its manifest (partlog.ClaimFenceDeferred,
	// FenceDeferred).
	DeferNew bool
}

// PartitionFence is the fence of one partition log; a new partition's is
// claimed with the directory fsync deferred to the log's Open.
func PartitionFence(dataDir, topic string, partition int32) Fence {
	return Fence{Dir: PartitionDir(dataDir, topic, partition), What: PartitionObject(topic, partition), DeferNew: true}
}

// FenceDeferred says whether the fence a record's fence step claimed may
// not be durable yet, so that the log's Open must make it durable
// (partlog.Config.FenceNotDurable): a new log's (FencedFrom -1), or one
// whose claim the record does not say (a claim of an earlier pass).
func FenceDeferred(rec *Record) bool { return rec.FencedFrom == nil || *rec.FencedFrom < 0 }

// ShardFence is the fence of one coordinator shard's log.
func ShardFence(clusterDir string, shard int32) Fence {
	return Fence{Dir: ShardDir(clusterDir, shard), What: "coordinator shard " + strconv.Itoa(int(shard))}
}

// ErrStaleAssignment: the fence holds a newer leader epoch than the one
// assigned, so the assignment the claimant read is stale. The step is
// retried when a newer one arrives.
var ErrStaleAssignment = errors.New("stale assignment")

// ErrEpochHeld: the fence already holds exactly the assigned epoch, written
// by another writer (an assignment computed from a stale one can repeat an
// epoch). Two writers must never share one: the claimant asks for a new
// epoch instead.
var ErrEpochHeld = errors.New("already held by another writer")

// FenceClaim is what a claim of a fence found and did.
type FenceClaim struct {
	// Epoch is the leader epoch claimed.
	Epoch int32
	// Found is the epoch the fence held before the claim (-1: none, a new
	// log); meaningless when reading the fence failed.
	Found int32
	// Cleared is set once the checks passed: the epoch is the claimant's
	// to write, whether or not the write then succeeded. A process notes a
	// cleared epoch as its own claim (ours, on the next attempt), so that a
	// retry after a failed write does not take the fence for another
	// writer's.
	Cleared bool
}

// TookOver reports whether the claim stopped a previous writer: the fence
// held an older epoch, now replaced.
func (c FenceClaim) TookOver() bool { return c.Cleared && c.Found >= 0 && c.Found < c.Epoch }

// Claim is the volume part of the fence step (the takeover): it writes the
// assigned leader epoch to the fence before anything of the old tail is
// read, so the previous writer acknowledges nothing more. A fence above
// epoch fails with ErrStaleAssignment; a fence already at epoch is this
// claimant's own earlier claim only if ours says so (the process
// remembers the epochs it claimed), and otherwise fails with ErrEpochHeld.
// On success rec names the epoch, and, unless the claim was ours already,
// the epoch the fence held before (FencedFrom), which recovery needs.
func (f Fence) Claim(fsys volume.FS, epoch int32, ours bool, rec *Record) (FenceClaim, error) {
	claim := FenceClaim{Epoch: epoch}
	found, err := partlog.ReadFence(fsys, f.Dir)
	if err != nil {
		return claim, fmt.Errorf("read fence: %w", err)
	}
	claim.Found = found
	if found > epoch {
		return claim, fmt.Errorf("%w: fence of %s holds leader epoch %d, assigned %d", ErrStaleAssignment, f.What, found, epoch)
	}
	ours = ours && found == epoch
	if found == epoch && !ours {
		return claim, fmt.Errorf("leader epoch %d of %s is %w", epoch, f.What, ErrEpochHeld)
	}
	claim.Cleared = true
	claimFence := partlog.ClaimFence
	if f.DeferNew {
		claimFence = func(fsys volume.FS, dir string, epoch int32) (int32, error) {
			prev, _, err := partlog.ClaimFenceDeferred(fsys, dir, epoch)
			return prev, err
		}
	}
	prev, err := claimFence(fsys, f.Dir, epoch)
	if err != nil {
		return claim, fmt.Errorf("claim fence of %s at leader epoch %d: %w", f.What, epoch, err)
	}
	claim.Found = prev
	if !ours {
		rec.FencedFrom = &prev
	}
	rec.Epoch = epoch
	return claim, nil
}

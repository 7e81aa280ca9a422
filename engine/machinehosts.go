package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/kaas-dev/kaas/engine/dataplane"
	"github.com/kaas-dev/kaas/engine/desired"
	"github.com/kaas-dev/kaas/engine/reconcile"
	"github.com/kaas-dev/kaas/states"
)

// The engine's side of the machines: one host per machine (states'
// PartitionOpenHost, CoordinatorOpenHost, TopicDeleteHost,
// DirectoryReclaimHost) for the steps that need what only the engine knows:
// the assigned epoch, the handles, the routing table, the heartbeats.

// partitionOpenHost does the engine's steps of one partition's open at the
// leader epoch assigned to this broker; opened is the log its Recover
// opened, for Serve (and for driveOpen to close when the drive fails).
type partitionOpenHost struct {
	e            *Engine
	spec         desired.TopicSpec
	index, epoch int32
	opened       *dataplane.Partition
	// stamp is the stamp step shared by the topic's opens in one pass
	// (nil: this open's own).
	stamp func() error
}

// EnsureStamp is the stamp step (states.StampEnsurer): once per topic and
// reconcile pass, not once per partition.
func (h *partitionOpenHost) EnsureStamp() error {
	if h.stamp != nil {
		return h.stamp()
	}
	return states.EnsureStamp(h.e.fsys, h.e.cfg.DataDir, h.spec.Name, h.spec.ID)
}

// SyncDir shares the directory fsyncs of every open (volume.DirSyncer):
// the partitions of a topic opened side by side sync their topic
// directory together.
func (h *partitionOpenHost) SyncDir(dir string) error { return h.e.dirSync.SyncDir(dir) }

func (h *partitionOpenHost) Fence(ctx context.Context, rec *states.Record) error {
	return h.e.claimFence(h.spec, h.index, h.epoch, rec)
}

func (h *partitionOpenHost) Recover(ctx context.Context, rec *states.Record) error {
	p, err := h.e.openPartition(h.spec, h.index, h.epoch, rec)
	if err != nil {
		return err
	}
	h.opened = p
	return nil
}

func (h *partitionOpenHost) Serve(ctx context.Context, rec *states.Record) error {
	if h.opened == nil {
		return errors.New("no open log to serve")
	}
	return h.e.publish(h.opened)
}

// claimFence is the fence step of a partition's open (its takeover): it
// writes the assigned leader epoch to the partition's fence before anything
// of the old tail is read. A fence above that epoch means the assignment
// this broker read is stale: the step fails and is retried when a newer one
// arrives.
func (e *Engine) claimFence(spec desired.TopicSpec, index, epoch int32, rec *states.Record) error {
	return e.claimFenceAt(states.PartitionFence(e.cfg.DataDir, spec.Name, index), openKey(spec.Name, index, spec.ID),
		spec.ID, index, epoch, rec)
}

// claimFenceAt claims fence (a partition's or a coordinator shard's) at
// epoch for the open named key (Fence.Claim), keeping this process's
// claims: an epoch it cleared is its own on a retry (openBook.fenced), and an
// epoch another writer holds is answered by asking the controller for a
// new one.
func (e *Engine) claimFenceAt(fence states.Fence, key, topicID string, index, epoch int32, rec *states.Record) error {
	claim, err := fence.Claim(e.fsys, epoch, e.opens.fencedAt(key) == epoch, rec)
	if claim.Cleared {
		e.opens.noteFenced(key, epoch)
	}
	if errors.Is(err, states.ErrEpochHeld) {
		e.askReopen(key, topicID, index, epoch)
		return fmt.Errorf("%w: asking for a new one", err)
	}
	if err != nil {
		return err
	}
	if claim.TookOver() {
		e.log.Info("took over", "what", fence.What, "fromEpoch", claim.Found, "epoch", epoch)
	}
	return nil
}

// shardOpenHost does the engine's steps of one coordinator shard's open at
// the leader epoch assigned to this broker; opened is the shard its Load
// loaded, for Serve (and for driveShardOpen to close when the drive fails).
type shardOpenHost struct {
	e            *Engine
	index, epoch int32
	opened       *shard
}

func (h *shardOpenHost) Fence(ctx context.Context, rec *states.Record) error {
	e, i := h.e, h.index
	return e.claimFenceAt(states.ShardFence(e.cfg.ClusterDir, i), shardKey(i), GroupsTopicID, i, h.epoch, rec)
}

func (h *shardOpenHost) Load(ctx context.Context, rec *states.Record) error {
	s, err := h.e.loadShard(h.index, h.epoch, rec)
	if err != nil {
		return err
	}
	h.opened = s
	return nil
}

func (h *shardOpenHost) Serve(ctx context.Context, rec *states.Record) error {
	e, i := h.e, h.index
	if h.opened == nil {
		return errors.New("no loaded coordinator to serve")
	}
	if o, mine, _ := e.ownerOf(GroupsTopicID, i); !mine || o.LeaderEpoch != h.epoch {
		return fmt.Errorf("coordinator shard %d moved while it was loading", i)
	}
	return e.shards.serve(h.opened)
}

// topicDeleteHost does the engine's steps of deleting one incarnation.
type topicDeleteHost struct {
	e    *Engine
	spec desired.TopicSpec
}

// Release is lifecycle fencing: handles are closed before anything is
// removed, here and on every live broker.
func (h topicDeleteHost) Release(ctx context.Context) error {
	e, spec := h.e, h.spec
	if err := e.dropTopic(spec.Name, spec.ID); err != nil {
		return err
	}
	if e.assigned(spec.ID) {
		return reconcile.WaitingOn(fmt.Errorf("release %s: the assignment read still names topic ID %s", spec.Name, spec.ID))
	}
	if b := e.heldElsewhere(spec.Name, spec.ID); b >= 0 {
		return reconcile.WaitingOn(fmt.Errorf("release %s: broker %d may still hold partitions open (it has not released the assignment that dropped the topic)", spec.Name, b))
	}
	_, compacted := compactPolicyOf(spec)
	for p := int32(0); p < spec.Partitions; p++ {
		obj := states.PartitionObject(spec.Name, p)
		if err := states.Forget(e.fsys, e.cfg.ClusterDir, states.PartitionOpen.Kind, obj); err != nil {
			return err
		}
		// A topic compacted once and changed to delete since keeps its
		// last pass's record: small, and named by this incarnation only.
		if compacted {
			if err := states.Forget(e.fsys, e.cfg.ClusterDir, states.SegmentCompact.Kind, obj); err != nil {
				return err
			}
		}
		e.forgetPartitionMachines(spec.Name, p)
	}
	return nil
}

func (h topicDeleteHost) Forget(ctx context.Context) error {
	if err := desired.RemoveTopicSpec(h.e.fsys, h.e.cfg.ClusterDir, h.spec.Name, h.spec.ID); err != nil {
		return err
	}
	h.e.forgetDropped(h.spec.ID)
	return nil
}

// reclaimHost does the engine's step of reclaiming the directory of spec's
// topic stamped by incarnation oldID; spec is the incarnation now desired.
type reclaimHost struct {
	e     *Engine
	spec  desired.TopicSpec
	oldID string
}

func (h reclaimHost) Release(ctx context.Context) error {
	e, spec, oldID := h.e, h.spec, h.oldID
	// The desired state must still name another incarnation: a reclaim is
	// never started for the one that is desired.
	if err := e.stillDesired(spec); err != nil {
		return err
	}
	if err := e.dropTopic(spec.Name, oldID); err != nil {
		return err
	}
	// Waits, not failures: the controller moves the assignment, and the
	// other brokers drop the old handles when they see the new desired
	// state. (The machine's record says it waits; its attempts do not
	// grow.)
	if e.assigned(oldID) {
		return reconcile.WaitingOn(fmt.Errorf("release %s: the assignment read still names the old topic ID %s", spec.Name, oldID))
	}
	if b := e.heldElsewhere(spec.Name, oldID); b >= 0 {
		return reconcile.WaitingOn(fmt.Errorf("release %s: broker %d still holds partitions of the old topic ID %s open", spec.Name, b, oldID))
	}
	return nil
}

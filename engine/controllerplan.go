package engine

import (
	"github.com/kaas-dev/kaas/engine/cluster"
	"github.com/kaas-dev/kaas/engine/desired"
	"github.com/kaas-dev/kaas/engine/groups"
)

// A controller round is observe → plan → apply. The round reads the
// volume and the heartbeats (controllerRound), planAssignment decides the
// next assignment from what was read and nothing else, and the round
// writes it if the election still holds. The plan is a pure function, so
// its table tests need no goroutines, no volume and no clock.

// partitionRef names one partition of a topic (or one coordinator shard,
// under GroupsTopicID) by ID.
type partitionRef struct {
	TopicID string
	Index   int32
}

// reopenAsk is one owner's request, through its heartbeat, for a new
// leader epoch: its log failed for good at Epoch.
type reopenAsk struct {
	Broker      int32
	Incarnation string
	Partition   partitionRef
	Epoch       int32
}

// assignmentInput is what one controller round observed.
type assignmentInput struct {
	Epoch int32 // this controller's epoch
	// Base is the assignment the next one is computed from (see
	// assignmentBase); nil when there is none.
	Base *cluster.Assignment
	// Rewrite: Base is this controller's last write, not what the file
	// holds, so the file must be written even if nothing else changed.
	Rewrite bool
	Topics  []desired.TopicSpec // desired state, deleted topics included
	Live    []cluster.LiveBroker
	// Fences holds the fence epoch of each partition that is new to Base
	// (partitions missing from it mean no fence).
	Fences map[partitionRef]int32
	Reopen []reopenAsk // from live brokers' current incarnations
}

// assignmentBase picks what the next assignment grows from: the file as
// read (onDisk, nil if missing or unreadable) or this controller's last
// write. stop is true when a newer controller wrote the file (the next
// campaign steps down). rewrite is true when the file is not this
// controller's last write although this controller wrote at its epoch: a
// deposed controller's late write replaced it, or it is unreadable; the
// round carries on from its own write so that no leader epoch it handed
// out is handed out again.
func assignmentBase(onDisk, written *cluster.Assignment, epoch int32) (base *cluster.Assignment, rewrite, stop bool) {
	switch {
	case onDisk != nil && onDisk.ControllerEpoch > epoch:
		return nil, false, true
	case written != nil && written.ControllerEpoch == epoch && (onDisk == nil || onDisk.ControllerEpoch < epoch):
		return written, true, false
	}
	return onDisk, false, false
}

// newPartitions lists the partitions of the desired topics (and the
// coordinator shards) that base does not hold yet: the ones whose fences
// the round must read before planning.
func newPartitions(base *cluster.Assignment, topics []desired.TopicSpec) []partitionRef {
	var refs []partitionRef
	add := func(id string, n int32) {
		have := 0
		if base != nil {
			have = len(base.Owners(id))
		}
		for p := int32(have); p < n; p++ {
			refs = append(refs, partitionRef{id, p})
		}
	}
	for _, s := range topics {
		if !s.Deleted {
			add(s.ID, s.Partitions)
		}
	}
	add(GroupsTopicID, groups.Shards)
	return refs
}

// planAssignment returns the next assignment, Stamped one version above
// its base, and the delta from the base; nil when the volume already
// holds exactly it (unless the base is rewritten).
func planAssignment(in assignmentInput) (*cluster.Assignment, *cluster.AssignmentDelta, error) {
	topics := make([]cluster.Topic, 0, len(in.Topics)+1)
	for _, s := range in.Topics {
		if !s.Deleted {
			topics = append(topics, cluster.Topic{ID: s.ID, Partitions: s.Partitions})
		}
	}
	topics = append(topics, cluster.Topic{ID: GroupsTopicID, Partitions: groups.Shards})
	next, err := cluster.NextAssignment(in.Base, topics, in.Live, in.Epoch)
	if err != nil {
		return nil, nil, err
	}
	// A partition new to the assignment starts at epoch 1 or above
	// whatever fence its directory holds (data from before the assignment
	// existed, or an assignment lost): epochs never go backwards.
	for _, t := range topics {
		ps := next.Owners(t.ID)
		have := 0
		if in.Base != nil {
			have = len(in.Base.Owners(t.ID))
		}
		for p := have; p < len(ps); p++ {
			ps[p].LeaderEpoch = max(ps[p].LeaderEpoch, in.Fences[partitionRef{t.ID, int32(p)}]+1, 1)
		}
	}
	next.NoteEpochs()
	// An owner whose log failed for good at its current epoch asks for a
	// new one: the reopened log must start a new leader epoch.
	for _, r := range in.Reopen {
		ps := next.Owners(r.Partition.TopicID)
		if r.Partition.Index < 0 || int(r.Partition.Index) >= len(ps) {
			continue
		}
		if o := &ps[r.Partition.Index]; o.Broker == r.Broker && o.Incarnation == r.Incarnation && o.LeaderEpoch == r.Epoch {
			o.LeaderEpoch++
		}
	}
	next.NoteEpochs()
	delta := cluster.Stamp(in.Base, next)
	if in.Base != nil && !in.Rewrite && delta.Empty() {
		return nil, nil, nil
	}
	return next, delta, nil
}

// topicsToReconcile names the desired topics this broker must reconcile:
// created, changed or deleted elsewhere (by another broker, or by the
// operator writing the desired state). held returns the spec this broker
// holds for a name.
func topicsToReconcile(specs []desired.TopicSpec, held func(name string) (desired.TopicSpec, bool)) []string {
	var names []string
	for _, s := range specs {
		k, ok := held(s.Name)
		if !ok || k.ID != s.ID || k.Generation != s.Generation || s.Deleted {
			names = append(names, s.Name)
		}
	}
	return names
}

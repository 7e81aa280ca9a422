package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/kaas-dev/kaas/engine/cluster"
	"github.com/kaas-dev/kaas/engine/desired"
	"github.com/kaas-dev/kaas/states"
	"github.com/kaas-dev/kaas/volume/partlog"
)

// The controller round (controllerplan.go has the plan): observe the
// assignment on the volume, the desired state and the live brokers; plan
// only when one of them changed (or every fullPlanRounds rounds); commit
// what changed as one delta of the assignment's chain, or as a new base
// (docs/volume.md "The assignment").

// controllerState is what the controller keeps between its rounds; only
// the cluster loop touches it.
type controllerState struct {
	// written is the last assignment this broker committed as controller
	// (remembered before the commit: one that fails may have landed) and
	// head the chain's head after it.
	written *cluster.Assignment
	head    *cluster.AssignmentHead
	// chainBytes is the size of the deltas written since the head's base.
	chainBytes int
	// planned digests the inputs of the last plan (planDigest); idle
	// counts the rounds since.
	planned uint64
	idle    int
	// compactBelow is Config.AssignmentCompactBelow.
	compactBelow int
}

// fullPlanRounds bounds the rounds between two plans whose inputs did
// not change: the plan is level-triggered even if a change escaped the
// digest.
const fullPlanRounds = 240

// Compaction: a chain is folded into a new base when the base is small
// (Config.AssignmentCompactBelow), the chain has maxChainDeltas deltas,
// or the deltas since the base weigh a quarter of it. So what one change
// writes stays proportional to the change, and readers never follow a
// long chain.
const (
	maxChainDeltas = 32
	// entryBytes estimates one entry of a base in format 2.
	entryBytes = 14
)

// hurryAfterChange is how long the cluster loop runs fast rounds after a
// change of the desired state: the controller plans it, the owners read
// the assignment and open, and they say so, each within a fifth of an
// interval.
const hurryAfterChange = 3 * time.Second

// controllerRound computes and commits the next assignment from specs, the
// complete desired state (the caller skips the round when it could not be
// listed: a topic left out would be released and its epochs forgotten).
func (e *Engine) controllerRound(live []cluster.LiveBroker, epoch int32, specs []desired.TopicSpec) error {
	var err error
	onDisk, head := e.observeAssignment(epoch)
	c := &e.ctrl
	base, rewrite, stop := assignmentBase(onDisk, c.written, epoch)
	if stop {
		return nil // a newer controller wrote it: the next Campaign steps down
	}
	if rewrite {
		e.log.Info("assignment is not this controller's last write; rewriting it",
			"controllerEpoch", epoch, "found", controllerEpochOf(onDisk))
	}
	asks := e.reopenAsks(live)
	legacy := e.legacyPeers(live)
	digest := planDigest(base, rewrite, legacy, specs, live, asks)
	if digest == c.planned && c.idle < fullPlanRounds {
		c.idle++
		return nil
	}
	in := assignmentInput{
		Epoch: epoch, Base: base, Rewrite: rewrite, Topics: specs, Live: live,
		Reopen: asks,
	}
	if in.Fences, err = e.seedFences(base, specs); err != nil {
		return err
	}
	next, delta, err := planAssignment(in)
	if err != nil {
		return err
	}
	c.planned, c.idle = digest, 0
	if next == nil {
		return nil
	}
	ok, err := e.elector.Verify()
	if err != nil || !ok {
		return err
	}
	next.Legacy = legacy
	compact := rewrite || legacy || e.negative.InPlaceAssignment || c.shouldCompact(next, head)
	// Remembered before the commit: a commit that fails may have landed.
	c.written, c.head = next, nil
	c.planned = 0 // plan again next round if this commit fails
	if e.negative.InPlaceAssignment {
		// The chaos tests' negative control: the base torn in place, and
		// no head, so readers read the base.
		c.planned = digest
		return cluster.WriteAssignmentInPlaceUnsafe(e.fsys, e.cfg.ClusterDir, next)
	}
	if c.head, err = cluster.CommitAssignment(e.fsys, e.cfg.ClusterDir, head, next, delta, compact); err != nil {
		return err
	}
	c.planned = digest
	if len(c.head.Deltas) == 0 {
		c.chainBytes = 0
	} else {
		c.chainBytes += len(delta.Changed())*64 + entriesIn(delta)*entryBytes
	}
	e.log.V(1).Info("assignment committed", "version", next.ID().String(), "compacted", len(c.head.Deltas) == 0,
		"live", len(live), "topics", len(next.Topics), "changedTopics", len(delta.Changed()))
	return nil
}

// observeAssignment returns the assignment the volume holds and its head
// (nil when no chain was written yet): this controller's last commit
// when the head and the base are still as it left them (two small reads),
// else what a full load finds (nil when there is none or it is
// unreadable, a base a deposed controller overwrote included).
func (e *Engine) observeAssignment(epoch int32) (*cluster.Assignment, *cluster.AssignmentHead) {
	c := &e.ctrl
	if w := c.written; w != nil && c.head != nil && w.ControllerEpoch == epoch {
		head, herr := cluster.ReadAssignmentHead(e.fsys, e.cfg.ClusterDir)
		base, berr := cluster.ReadAssignmentID(e.fsys, e.cfg.ClusterDir)
		if herr == nil && berr == nil && head.AssignmentVersion == w.ID() && base == head.Base {
			return w, head
		}
	}
	a, head, err := cluster.LoadAssignment(e.fsys, e.cfg.ClusterDir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			e.log.Info("assignment unreadable; seeding epochs from the fences", "err", err.Error())
		}
		return nil, nil
	}
	return a, head
}

// shouldCompact says whether next, extending head's chain, is committed
// as a new base instead of a delta.
func (c *controllerState) shouldCompact(next *cluster.Assignment, head *cluster.AssignmentHead) bool {
	if head == nil || len(head.Deltas) >= maxChainDeltas {
		return true
	}
	entries := len(next.Coordinators)
	for _, ps := range next.Topics {
		entries += len(ps)
	}
	baseBytes := entries * entryBytes
	return baseBytes <= c.compactBelow || c.chainBytes*4 >= baseBytes
}

// entriesIn counts the entries a delta sets.
func entriesIn(d *cluster.AssignmentDelta) int {
	n := 0
	for _, td := range d.Topics {
		n += len(td.Set)
	}
	if d.Coordinators != nil {
		n += len(d.Coordinators.Set)
	}
	return n
}

// legacyPeers reports whether a live broker runs an older kaas (its
// heartbeat has no format): it reads only a base of format 1.
func (e *Engine) legacyPeers(live []cluster.LiveBroker) bool {
	cv := e.clusterView()
	for _, b := range live {
		if hb, ok := cv.heartbeats[b.ID]; ok && hb.Incarnation == b.Incarnation && hb.Format < cluster.HeartbeatFormat {
			return true
		}
	}
	return false
}

// seedFences reads the fences of the partitions (and shards) new to base,
// side by side: a directory left by an earlier incarnation, or an
// assignment lost, must not restart epochs below its fence.
func (e *Engine) seedFences(base *cluster.Assignment, specs []desired.TopicSpec) (map[partitionRef]int32, error) {
	names := make(map[string]string, len(specs))
	for _, s := range specs {
		names[s.ID] = s.Name
	}
	refs := newPartitions(base, specs)
	epochs := make([]int32, len(refs))
	var g errgroup.Group
	g.SetLimit(e.cfg.ParallelOpens)
	for i, r := range refs {
		g.Go(func() error {
			dir := states.PartitionDir(e.cfg.DataDir, names[r.TopicID], r.Index)
			if r.TopicID == GroupsTopicID {
				dir = states.ShardDir(e.cfg.ClusterDir, r.Index)
			}
			fence, err := partlog.ReadFence(e.fsys, dir)
			if err != nil {
				return fmt.Errorf("seed epoch of %s/%d: %w", names[r.TopicID], r.Index, err)
			}
			epochs[i] = fence
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	fences := map[partitionRef]int32{}
	for i, r := range refs {
		if epochs[i] != 0 {
			fences[r] = epochs[i]
		}
	}
	return fences, nil
}

// planDigest digests a plan's inputs: the base's version, whether it is
// rewritten, the format, the desired topics, the live brokers and the
// reopen requests.
func planDigest(base *cluster.Assignment, rewrite, legacy bool, specs []desired.TopicSpec, live []cluster.LiveBroker, asks []reopenAsk) uint64 {
	h := fnv.New64a()
	var b [8]byte
	num := func(v int64) {
		binary.LittleEndian.PutUint64(b[:], uint64(v))
		_, _ = h.Write(b[:])
	}
	str := func(s string) {
		num(int64(len(s)))
		_, _ = h.Write([]byte(s))
	}
	if base != nil {
		num(int64(base.ControllerEpoch))
		num(base.Version)
	}
	flags := int64(0)
	if rewrite {
		flags |= 1
	}
	if legacy {
		flags |= 2
	}
	num(flags)
	for _, s := range slices.SortedFunc(slices.Values(specs), func(a, b desired.TopicSpec) int { return strings.Compare(a.ID, b.ID) }) {
		str(s.ID)
		num(int64(s.Partitions))
		if s.Deleted {
			num(1)
		}
	}
	for _, l := range live {
		num(int64(l.ID))
		str(l.Incarnation)
	}
	for _, a := range asks {
		num(int64(a.Broker))
		str(a.Incarnation)
		str(a.Partition.TopicID)
		num(int64(a.Partition.Index))
		num(int64(a.Epoch))
	}
	return h.Sum64()
}

package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/kaas-dev/kaas/engine/cluster"
	"github.com/kaas-dev/kaas/engine/desired"
	"github.com/kaas-dev/kaas/engine/groups"
	"github.com/kaas-dev/kaas/engine/groupstore"
	"github.com/kaas-dev/kaas/engine/reconcile"
	"github.com/kaas-dev/kaas/engine/txns"
	"github.com/kaas-dev/kaas/states"
	"github.com/kaas-dev/kaas/volume/partlog"
)

// Group coordinators. The groups of the cluster are spread over
// groups.Shards shards, and the assignment owns each shard like a
// partition (its own place in the assignment, looked up under the ID
// GroupsTopicID): the controller picks its owner
// by rendezvous hashing over the live brokers and bumps its leader epoch
// when the owner changes. The owner takes the shard over through the
// coordinator-open machine (fence the shard's log at the new epoch, then
// load its snapshot and tail) and serves the shard's groups until the
// assignment moves it. Hashing groups to a fixed set of shards, rather than
// giving each group its own assignment entry, keeps the assignment file
// bounded however many groups there are, and gives each shard one log whose
// fsyncs all its groups' commits share.

// GroupsTopicID is the ID the coordinator shards are looked up under in
// the assignment and named by in the plan. It is not a UUID, so no topic
// ID can collide with it.
const GroupsTopicID = cluster.CoordinatorsID

// groupsObject names the shards in heartbeats' open lists and reopen
// requests ("__groups/<shard>@__groups"); no topic is named "__groups/…".
const groupsObject = "__groups"

var (
	// ErrNotCoordinator: this broker does not own the group's shard; the
	// client looks the coordinator up again.
	ErrNotCoordinator = errors.New("this broker is not the group's coordinator")
	// ErrCoordinatorLoading: this broker owns the shard and is taking it
	// over (fencing, loading); the client retries.
	ErrCoordinatorLoading = errors.New("the group's coordinator is loading")
	// ErrCoordinatorNotAvailable: no live broker owns the group's shard yet.
	ErrCoordinatorNotAvailable = errors.New("no coordinator is available for the group")
)

// shard is a coordinator shard this broker serves: the groups and the
// transactional IDs that hash to it, over one log.
type shard struct {
	index int32
	epoch int32
	store *groupstore.Store
	coord *groups.Coordinator
	txns  *txns.Coordinator
	once  sync.Once
}

func (s *shard) close() error {
	var err error
	s.once.Do(func() {
		s.coord.Close()
		s.txns.Close()
		err = s.store.Close()
	})
	if errors.Is(err, partlog.ErrFenced) {
		return nil // the new owner has it
	}
	return err
}

func shardKey(index int32) string { return openKey(groupsObject, index, GroupsTopicID) }

// GroupCoordinator returns the coordinator of group's shard if this broker
// serves it: ErrNotCoordinator if another broker owns it (or this one's
// serving lease lapsed), ErrCoordinatorLoading while this broker takes it
// over.
func (e *Engine) GroupCoordinator(group string) (*groups.Coordinator, error) {
	s, err := e.coordinatorShard("group", group)
	if err != nil {
		return nil, err
	}
	return s.coord, nil
}

// TxnCoordinator returns the transaction coordinator of txnID's shard if
// this broker serves it, with the errors of GroupCoordinator.
func (e *Engine) TxnCoordinator(txnID string) (*txns.Coordinator, error) {
	s, err := e.coordinatorShard("transactional ID", txnID)
	if err != nil {
		return nil, err
	}
	return s.txns, nil
}

// coordinatorShard returns the shard serving key (a group or a
// transactional ID: both hash with groups.ShardOf).
func (e *Engine) coordinatorShard(what, key string) (*shard, error) {
	i := groups.ShardOf(key)
	o, mine, _ := e.ownerOf(GroupsTopicID, i)
	if !mine {
		return nil, fmt.Errorf("%w: %s %q is in shard %d, owned by broker %d", ErrNotCoordinator, what, key, i, o.Broker)
	}
	if !e.leaseHeld() {
		return nil, fmt.Errorf("%w: this broker has not renewed its heartbeat within %s; another broker may own shard %d by now",
			ErrNotCoordinator, e.cfg.Lease-e.cfg.Lease/4, i)
	}
	s := e.shards.get(i)
	if s == nil || s.epoch != o.LeaderEpoch || s.store.Err() != nil {
		return nil, fmt.Errorf("%w: shard %d at leader epoch %d", ErrCoordinatorLoading, i, o.LeaderEpoch)
	}
	return s, nil
}

// GroupCoordinatorBroker returns the live broker that owns the shard of
// key: a group ID or a transactional ID.
func (e *Engine) GroupCoordinatorBroker(key string) (BrokerInfo, error) {
	return e.shardBroker(groups.ShardOf(key))
}

// shardBroker returns the live broker that owns shard i.
func (e *Engine) shardBroker(i int32) (BrokerInfo, error) {
	o, _, ok := e.ownerOf(GroupsTopicID, i)
	if !ok || o.Broker < 0 {
		return BrokerInfo{}, fmt.Errorf("%w: shard %d is not assigned yet", ErrCoordinatorNotAvailable, i)
	}
	for _, b := range e.Brokers() {
		if b.ID == o.Broker && (b.Port > 0 || b.Self) { // the front end fills in its own address
			return b, nil
		}
	}
	return BrokerInfo{}, fmt.Errorf("%w: shard %d's owner, broker %d, is not live", ErrCoordinatorNotAvailable, i, o.Broker)
}

// GroupCoordinators returns the coordinators of every shard this broker
// serves (ListGroups asks each broker for its own groups).
func (e *Engine) GroupCoordinators() []*groups.Coordinator {
	var out []*groups.Coordinator
	all := e.shards.all()
	for i, s := range all {
		if s == nil {
			continue
		}
		if o, mine, _ := e.ownerOf(GroupsTopicID, int32(i)); mine && o.LeaderEpoch == s.epoch && s.store.Err() == nil {
			out = append(out, s.coord)
		}
	}
	return out
}

// TxnCoordinators returns the transaction coordinators of every shard this
// broker serves (ListTransactions asks each broker for its own).
func (e *Engine) TxnCoordinators() []*txns.Coordinator {
	var out []*txns.Coordinator
	all := e.shards.all()
	for i, s := range all {
		if s == nil {
			continue
		}
		if o, mine, _ := e.ownerOf(GroupsTopicID, int32(i)); mine && o.LeaderEpoch == s.epoch && s.store.Err() == nil {
			out = append(out, s.txns)
		}
	}
	return out
}

// reconcileGroups opens the shards the assignment gives this broker and
// releases the others. Each shard's own lines are at V(1); a pass that
// opened or released any logs one summary (one line per broker start).
func (e *Engine) reconcileGroups(ctx context.Context) error {
	if e.shards.hasResigned() {
		return nil
	}
	start := e.cfg.Now()
	errs := make([]error, groups.Shards)
	opened := make([]bool, groups.Shards)
	released := make([]bool, groups.Shards)
	var wg sync.WaitGroup
	for i := int32(0); i < groups.Shards; i++ {
		o, mine, _ := e.ownerOf(GroupsTopicID, i)
		if !mine {
			released[i], errs[i] = e.releaseShard(i)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			opened[i], errs[i] = e.driveShardOpen(ctx, i, o.LeaderEpoch)
		}()
	}
	wg.Wait()
	if sum := summarizeShardPass(opened, released, errs); sum.opened+sum.released > 0 {
		e.log.Info("coordinator shards", "opened", sum.opened, "released", sum.released, "serving", e.shards.serving(),
			"notReady", sum.notReady, "took", e.cfg.Now().Sub(start).Round(time.Millisecond))
	}
	return errors.Join(errs...)
}

// shardPassSummary counts what one reconcileGroups pass did.
type shardPassSummary struct{ opened, released, notReady int }

func summarizeShardPass(opened, released []bool, errs []error) shardPassSummary {
	var s shardPassSummary
	for i := range opened {
		if opened[i] {
			s.opened++
		}
		if released[i] {
			s.released++
		}
		if errs[i] != nil {
			s.notReady++
		}
	}
	return s
}

// releaseShard stops serving a shard this broker no longer owns; released
// says whether it served one.
func (e *Engine) releaseShard(i int32) (released bool, err error) {
	s := e.shards.get(i)
	if s == nil {
		return false, nil
	}
	e.shards.unserve(s)
	e.machines.forget(states.CoordinatorOpen.Kind, states.ShardObject(i))
	e.log.V(1).Info("coordinator shard released", "shard", i, "epoch", s.epoch)
	return true, s.close()
}

// driveShardOpen drives one shard's coordinator-open machine to serving at
// the leader epoch assigned to this broker; opened says whether this call
// brought it to serving (false when it already served at that epoch).
func (e *Engine) driveShardOpen(ctx context.Context, i, epoch int32) (opened bool, err error) {
	key := shardKey(i)
	cur := e.shards.get(i)
	if cur != nil && cur.epoch == epoch && cur.store.Err() == nil {
		return false, nil
	}
	if cur != nil {
		// Failed (fsync error, fenced) or held at an older epoch: close it
		// and load again from the volume.
		e.log.Info("coordinator shard reopening", "shard", i, "epoch", epoch, "heldEpoch", cur.epoch, "err", cur.store.Err())
		e.shards.unserve(cur)
		if err := cur.close(); err != nil {
			e.log.Error(err, "close failed coordinator shard", "shard", i)
		}
		if cur.epoch == epoch {
			e.askReopen(key, GroupsTopicID, i, epoch)
			return false, reconcile.WaitingOn(fmt.Errorf("coordinator shard %d failed at leader epoch %d: waiting for a new one", i, epoch))
		}
	}
	if r, ok := e.pendingReopen(GroupsTopicID, groupsObject, i); ok && r.epoch == epoch {
		return false, reconcile.WaitingOn(fmt.Errorf("coordinator shard %d failed at leader epoch %d: waiting for a new one", i, epoch))
	}
	obj := states.ShardObject(i)
	rec, err := states.Load(e.fsys, e.cfg.ClusterDir, states.CoordinatorOpen.Kind, obj)
	if err != nil {
		return false, err
	}
	if rec == nil {
		rec = states.CoordinatorOpen.NewRecord(obj, "", e.owner, e.cfg.Now())
	}
	rec.State = states.CoordinatorOpen.Resume(rec.State, e.stillFenced(key, rec.Epoch, epoch))
	rec.Owner = e.owner
	host := &shardOpenHost{e: e, index: i, epoch: epoch}
	acts := states.CoordinatorOpenActions(e.fsys, e.cfg.ClusterDir, i, rec, host)
	err = e.drive(ctx, states.CoordinatorOpen, rec, acts)
	if opened := host.opened; err != nil && opened != nil && e.shards.get(i) != opened {
		_ = opened.close()
	}
	if err != nil {
		return false, err
	}
	e.log.V(1).Info("coordinator shard serving", "shard", i, "epoch", epoch)
	return true, nil
}

// loadShard opens a shard's store at epoch and loads its groups into a new
// coordinator.
func (e *Engine) loadShard(i, epoch int32, rec *states.Record) (*shard, error) {
	var previous []int32
	if rec.FencedFrom != nil {
		previous = append(previous, *rec.FencedFrom)
	}
	s := &shard{index: i, epoch: epoch}
	store, stats, err := groupstore.Open(groupstore.Config{
		FS: e.fsys, Dir: states.ShardDir(e.cfg.ClusterDir, i), Index: i,
		Epoch: epoch, PreviousEpochs: previous,
		CheckpointInterval: e.cfg.CheckpointInterval,
		Now:                e.cfg.Now,
		Logger:             e.log.WithName("groupstore").WithValues("shard", i),
		OnFailure: func() {
			e.askReopen(shardKey(i), GroupsTopicID, i, epoch)
			e.queue.Add(groupsKey)
		},
	}, e.logOptions()...)
	if err != nil {
		return nil, fmt.Errorf("open coordinator shard %d: %w", i, err)
	}
	cfg := e.cfg.Groups
	cfg.Shard, cfg.Journal = i, store
	if cfg.Topics == nil {
		cfg.Topics = topicTable{e}
	}
	cfg.Logger = e.log.WithName("groups").WithValues("shard", i)
	coord := groups.New(cfg)
	tcfg := e.cfg.Txns
	tcfg.Shard, tcfg.Epoch, tcfg.Journal, tcfg.IDs, tcfg.Markers = i, epoch, store, e.pids, e
	tcfg.Counts = e.txnEnds
	tcfg.Logger = e.log.WithName("txns").WithValues("shard", i)
	tc := txns.New(tcfg)
	replay := func(r groupstore.Record) error {
		if txns.IsRecord(r.Key) {
			return tc.Replay(r)
		}
		return coord.Replay(r)
	}
	if err := store.Records(replay); err != nil {
		_ = store.Close()
		return nil, fmt.Errorf("load coordinator shard %d: %w", i, err)
	}
	coord.Start()
	tc.Start()
	s.store, s.coord, s.txns = store, coord, tc
	e.log.V(1).Info("coordinator shard loaded", "shard", i, "epoch", epoch, "snapshotOffset", stats.SnapshotOffset,
		"snapshotRecords", stats.SnapshotRecords, "replayedRecords", stats.ReplayedRecords, "logEnd", stats.LogEnd, "took", stats.Took)
	return s, nil
}

// ResignCoordinators closes every coordinator shard this broker serves and
// opens none again: the first step of a graceful shutdown, so that joins
// and syncs waiting for a rebalance are answered NOT_COORDINATOR at once
// (their clients move on to the next coordinator) instead of holding the
// shutdown until they time out.
func (e *Engine) ResignCoordinators() error {
	return e.closeShards(true)
}

// closeShards closes every shard this broker serves (at shutdown); with
// resign, none is served again.
func (e *Engine) closeShards(resign bool) error {
	var errs []error
	for _, s := range e.shards.takeAll(resign) {
		if s != nil {
			errs = append(errs, s.close())
		}
	}
	return errors.Join(errs...)
}

// shardOpenList lists the shards this broker serves, as open-list keys.
func (e *Engine) shardOpenList() []string {
	var out []string
	for i, s := range e.shards.all() {
		if s != nil {
			out = append(out, shardKey(int32(i)))
		}
	}
	return out
}

// topicTable is the coordinators' view of which incarnation of a topic is
// live (groups.Topics): committed offsets carry the topic ID of the
// incarnation they were made for, and one of another incarnation is not
// served (issue 7).
type topicTable struct{ e *Engine }

// TopicID is the incarnation this broker routes: no I/O, no view built.
func (t topicTable) TopicID(name string) ([16]byte, bool) {
	var id string
	if spec, ok := t.e.routes.spec(name); ok && !spec.Deleted {
		id = spec.ID
	}
	return parseTopicID(id)
}

// ConfirmTopicID reads the desired state, which names the live
// incarnation for every broker (through open(): close-to-open). A spec
// marked deleted has no live incarnation.
func (t topicTable) ConfirmTopicID(name string) ([16]byte, bool, error) {
	spec, err := desired.ReadTopicSpec(t.e.fsys, t.e.cfg.ClusterDir, name)
	if errors.Is(err, fs.ErrNotExist) {
		return [16]byte{}, false, nil
	}
	if err != nil {
		return [16]byte{}, false, err
	}
	if spec.Deleted {
		return [16]byte{}, false, nil
	}
	id, ok := parseTopicID(spec.ID)
	if !ok {
		return id, false, fmt.Errorf("topic %s: topic ID %q is not a UUID", name, spec.ID)
	}
	return id, true, nil
}

func parseTopicID(id string) ([16]byte, bool) {
	if id == "" {
		return [16]byte{}, false
	}
	u, err := uuid.Parse(id)
	if err != nil {
		return [16]byte{}, false
	}
	return u, true
}

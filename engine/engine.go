// Package engine is the core of a kaas broker: the desired state of topics,
// the reconciler that drives the named state machines of package states to
// their end states, and the partitions this broker serves. It knows nothing
// of the Kafka wire protocol (package wire) or of Kubernetes.
package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"

	"github.com/kaas-dev/kaas/engine/cluster"
	"github.com/kaas-dev/kaas/engine/datametrics"
	"github.com/kaas-dev/kaas/engine/dataplane"
	"github.com/kaas-dev/kaas/engine/desired"
	"github.com/kaas-dev/kaas/engine/groups"
	"github.com/kaas-dev/kaas/engine/reconcile"
	"github.com/kaas-dev/kaas/engine/txns"
	"github.com/kaas-dev/kaas/states"
	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/partlog"
)

// Config configures an Engine.
type Config struct {
	FS         volume.FS
	DataDir    string
	ClusterDir string // default <DataDir>/__cluster
	BrokerID   int32

	AutoCreateTopics  bool
	DefaultPartitions int32 // default 1

	Logger logr.Logger
	Now    func() time.Time

	// ResyncInterval is how often every topic is reconciled even without a
	// change (level-triggered). Default 10s.
	ResyncInterval time.Duration
	// CheckpointInterval is how often partition logs advance their recovery
	// checkpoint. Default 1s.
	CheckpointInterval time.Duration
	// RetentionCheckInterval is how often the partitions this broker
	// serves are checked for segments that retention.ms or retention.bytes
	// expire (log.retention.check.interval.ms; retention.go). Default 5m.
	RetentionCheckInterval time.Duration
	// Cleaner configures the log cleaner of compacted topics
	// (compaction.go).
	Cleaner CleanerConfig
	// Workers reconcile keys side by side (topics, the coordinator shards,
	// the trash). Default 8.
	Workers int
	// ParallelOpens bounds the partition opens (takeovers included) in
	// flight on this broker, across topics: a takeover of thousands of
	// partitions costs about as many round trips to the volume as this
	// many opens at once, and no more than this many open at once.
	// Default 64.
	ParallelOpens int

	// Cluster membership (engine/cluster). KafkaAddr (the inter-broker
	// listener's address), Listeners (every listener's advertised address,
	// by name), AdminAddr and Zone are published in this broker's
	// heartbeat.
	KafkaAddr string
	Listeners map[string]string
	AdminAddr string
	Zone      string
	// HeartbeatInterval is how often the broker beats, observes, campaigns
	// and reads the assignment. Default cluster.DefaultHeartbeatInterval.
	HeartbeatInterval time.Duration
	// Lease is how long a broker stays live without observed progress.
	// Default cluster.DefaultLease.
	Lease time.Duration

	// Groups configures the group coordinators of the shards this broker
	// owns (Shard, Journal and Logger are set per shard).
	Groups groups.Config
	// Txns configures the transaction coordinators of those shards (the
	// shard, journal, producer IDs and marker writer are filled in).
	Txns txns.Config
	// ProducerIDExpiration forgets a partition's idle producers (no
	// transaction open) whose last write is older than this, at snapshots
	// and opens (producer.id.expiration.ms). Zero: never.
	ProducerIDExpiration time.Duration
	// MaxProducersPerPartition caps a partition's producer entries, the
	// least recently used idle one evicted first (engine/dataplane).
	// Default DefaultMaxProducersPerPartition.
	MaxProducersPerPartition int
	// MaxPartitionsPerBroker is how many partitions this broker holds open
	// at most (the partitions of its file-descriptor budget): opens beyond
	// it wait (partitionbudget.go), and admin changes that would make the
	// cluster hold more than its brokers' budgets together are refused.
	// Zero: no budget.
	MaxPartitionsPerBroker int
	// Authorization (engine/acl): with ACLs on, every broker loads the
	// cluster's ACLs and the front end checks each request against them
	// (acls.go). Off (the default), the ACL APIs answer SECURITY_DISABLED
	// and every principal may do anything.
	ACLs ACLConfig

	// Peers sends requests to other brokers: transaction markers to
	// partition owners, and verifications to transaction coordinators.
	// Nil: a single broker, or transactions across brokers fail.
	Peers Peers

	// AssignmentCompactBelow: an assignment whose base would take at most
	// this many bytes is written whole at every change, not as a delta
	// (controller.go). Default 64 KiB; negative: never by size alone.
	AssignmentCompactBelow int

	// DisableMetrics skips the one observation the data path makes for
	// the metrics, the timing of every group-commit round
	// (SyncRoundMetrics is then nil). The other collectors read state at
	// scrape time and cost nothing unscraped.
	DisableMetrics bool
}

// Errors the front end maps to Kafka error codes.
var (
	ErrUnknownTopic = errors.New("unknown topic or partition")
	ErrNotServing   = errors.New("partition is not being served by this broker")
	ErrTopicExists  = errors.New("topic already exists")
)

// Engine is one broker's core.
type Engine struct {
	cfg   Config
	fsys  volume.FS
	log   logr.Logger
	queue *reconcile.Queue[Key]
	pids  *cluster.ProducerIDs

	// dispatch is the reconcilers' table (reconcilers.go); reconcileIDs
	// numbers the passes for their loggers.
	dispatch     map[Kind]ReconcileFunc
	reconcileIDs atomic.Uint64

	clusterID string
	owner     string

	routes *routingTable

	// changes is closed and replaced at every routing change.
	changes atomic.Pointer[chan struct{}]

	adminMu sync.Mutex // serialises desired-state writes of this broker

	// Cluster membership: this process's incarnation and the pieces of
	// engine/cluster, driven by clusterLoop.
	incarnation string
	hb          *cluster.Heartbeater
	guard       startGuard // one process per broker ID (startcheck.go)
	obs         *cluster.Observer
	elector     *cluster.Elector
	areader     *cluster.AssignmentReader

	// cview is the cluster as last read (clusterview.go): published by
	// the cluster loop, read without a lock.
	cview atomic.Pointer[clusterView]

	acls   aclState
	quotas quotaState

	// opens is this process's bookkeeping of its opens (openbook.go);
	// openSem bounds the opens in flight (Config.ParallelOpens).
	opens   *openBook
	openSem chan struct{}
	// openSlots counts the partitions holding or opening log handles,
	// bounded by Config.MaxPartitionsPerBroker (partitionbudget.go).
	openSlots atomic.Int64
	// statusDirs holds the record kinds whose status directory this
	// process has made durable (states.EnsureStatusDir).
	statusDirs sync.Map
	// stampOK holds, by topic name, the topic ID the controller last found
	// its directory stamped with (reclaim.go: reclaimStale).
	stampOK sync.Map
	// ctrl is what the controller keeps between its rounds (controller.go);
	// report, released and routeGen what this broker tells the others of
	// what it holds (report.go). Only the cluster loop touches the first
	// three.
	ctrl     controllerState
	report   reportState
	released cluster.AssignmentVersion
	routeGen atomic.Uint64
	// dropped holds when the assignment stopped naming a topic ID, as this
	// broker read it (lifecycle fencing: heldElsewhere).
	dropped droppedTopics
	// catalog is the desired state as last listed (catalog.go).
	catalog catalogState
	// dirSync shares directory fsyncs between concurrent writers into one
	// directory (a topic's partitions' make-dir, the status records).
	dirSync *volume.DirSyncer
	// kick runs a cluster round at once; hurryUntil (observer clock) keeps
	// the rounds fast until then (membership.go).
	kick       chan struct{}
	hurryUntil atomic.Int64
	// leaseFrom is 1 + when (observer clock) the last heartbeat that
	// succeeded began; 0 before the first. See leaseHeld.
	leaseFrom atomic.Int64

	// shards are the group-coordinator shards this broker serves
	// (shards.go, coordinators.go).
	shards shardTable

	// machines and reconciles are what the metrics read of the
	// reconciler (machinebook.go, metrics.go).
	machines   *machineBook
	reconciles *reconcileCounts

	negative NegativeControls // WithNegativeControls: off in production
	cleaner  *cleaner

	// rounds observes the group-commit rounds of every partition log
	// (SyncRoundMetrics).
	rounds *datametrics.SyncRounds
	// txnEnds counts the transactions every shard's coordinator ends
	// (coordinator_metrics.go): they outlive a shard moving away.
	txnEnds *txns.Counts
}

// New prepares an engine on the volume: the cluster directory and the
// cluster ID exist when it returns. Run starts reconciling. Options are
// for tests only (negative.go).
func New(cfg Config, opts ...Option) (*Engine, error) {
	if cfg.FS == nil {
		cfg.FS = volume.OS()
	}
	if cfg.DataDir == "" {
		cfg.DataDir = "kaas-data"
	}
	if cfg.ClusterDir == "" {
		cfg.ClusterDir = path.Join(cfg.DataDir, "__cluster")
	}
	if cfg.DefaultPartitions <= 0 {
		cfg.DefaultPartitions = 1
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.ResyncInterval <= 0 {
		cfg.ResyncInterval = 10 * time.Second
	}
	if cfg.CheckpointInterval <= 0 {
		cfg.CheckpointInterval = time.Second
	}
	if cfg.RetentionCheckInterval <= 0 {
		cfg.RetentionCheckInterval = DefaultRetentionCheckInterval
	}
	cfg.Cleaner = cfg.Cleaner.withDefaults()
	if err := cfg.Cleaner.check(); err != nil {
		return nil, err
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 8
	}
	if cfg.ParallelOpens <= 0 {
		cfg.ParallelOpens = 64
	}
	if cfg.AssignmentCompactBelow == 0 {
		cfg.AssignmentCompactBelow = 64 << 10
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = cluster.DefaultHeartbeatInterval
	}
	if cfg.Lease <= 0 {
		cfg.Lease = cluster.DefaultLease
	}
	if cfg.MaxProducersPerPartition <= 0 {
		cfg.MaxProducersPerPartition = dataplane.DefaultMaxProducersPerPartition
	}
	e := &Engine{
		cfg:    cfg,
		fsys:   cfg.FS,
		log:    cfg.Logger,
		queue:  reconcile.NewQueue[Key](cfg.Now, 100*time.Millisecond, maxRetryDelay),
		pids:   cluster.NewProducerIDs(cfg.FS, cfg.ClusterDir, cfg.BrokerID),
		owner:  "broker-" + strconv.Itoa(int(cfg.BrokerID)),
		routes: newRoutingTable(),

		incarnation: uuid.NewString(),
		opens:       newOpenBook(),
		openSem:     make(chan struct{}, cfg.ParallelOpens),
		machines:    newMachineBook(),
		reconciles:  newReconcileCounts(),
		txnEnds:     &txns.Counts{},
		ctrl:        controllerState{compactBelow: cfg.AssignmentCompactBelow},
		kick:        make(chan struct{}, 1),
		dirSync:     volume.NewDirSyncer(cfg.FS),
	}
	if !cfg.DisableMetrics {
		e.rounds = datametrics.NewSyncRounds()
	}
	for _, o := range opts {
		o(e)
	}
	e.cleaner = newCleaner(e, cfg.Cleaner)
	e.dispatch = e.reconcilers()
	e.hb = cluster.NewHeartbeater(e.fsys, cfg.ClusterDir, cluster.Heartbeat{BrokerID: cfg.BrokerID,
		KafkaAddr: cfg.KafkaAddr, Listeners: cfg.Listeners, AdminAddr: cfg.AdminAddr, Zone: cfg.Zone, Incarnation: e.incarnation,
		MaxPartitions: int32(min(cfg.MaxPartitionsPerBroker, math.MaxInt32))})
	e.hb.SetWallClock(cfg.Now)
	e.obs = cluster.NewObserver(cfg.Lease, nil)
	if e.negative.CompareWallClocks {
		e.obs.UnsafeCompareWallClocks(cfg.Now)
	}
	e.elector = cluster.NewElector(cluster.ElectorConfig{FS: e.fsys, ClusterDir: cfg.ClusterDir, BrokerID: cfg.BrokerID,
		Incarnation: e.incarnation, Observer: e.obs, Log: cfg.Logger.WithName("elector")})
	first := make(chan struct{})
	e.changes.Store(&first)
	e.cview.Store(&clusterView{self: cfg.BrokerID, incarnation: e.incarnation, controller: -1})
	e.initACLs()
	e.initQuotas()
	e.areader = cluster.NewAssignmentReader(e.fsys, cfg.ClusterDir)
	for _, d := range []string{cfg.DataDir, path.Join(cfg.DataDir, states.TopicsDir), cfg.ClusterDir, path.Join(cfg.ClusterDir, desired.SpecsDir)} {
		if err := volume.MkdirAllSync(e.fsys, d); err != nil {
			return nil, fmt.Errorf("prepare %s: %w", d, err)
		}
	}
	id, err := loadClusterID(e.fsys, cfg.ClusterDir)
	if err != nil {
		return nil, err
	}
	e.clusterID = id
	specs, err := desired.ListTopicSpecs(e.fsys, cfg.ClusterDir)
	if err != nil {
		return nil, err
	}
	for _, s := range specs {
		if !s.Deleted {
			e.routes.upsert(s)
		}
		e.queue.Add(topicKey(s.Name))
	}
	e.queue.Add(groupsKey)
	e.queue.Add(trashKey)
	return e, nil
}

// loadClusterID reads <cluster>/cluster.json, creating it on first start.
func loadClusterID(fsys volume.FS, clusterDir string) (string, error) {
	p := path.Join(clusterDir, "cluster.json")
	type clusterFile struct {
		ClusterID string `json:"clusterID"`
	}
	for attempt := 0; attempt < 3; attempt++ {
		b, err := volume.ReadFile(fsys, p)
		if err == nil {
			var cf clusterFile
			if json.Unmarshal(b, &cf) == nil && cf.ClusterID != "" {
				return cf.ClusterID, nil
			}
			// Torn by a crash during the first start: only a first start
			// writes it, so rewrite it.
			b, _ = json.Marshal(clusterFile{ClusterID: newClusterID()})
			if err := volume.WriteFileAtomic(fsys, p, b); err != nil {
				return "", fmt.Errorf("rewrite cluster id: %w", err)
			}
			continue
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("read cluster id: %w", err)
		}
		b, _ = json.Marshal(clusterFile{ClusterID: newClusterID()})
		if err := volume.CreateExclusiveFile(fsys, p, b); err != nil && !errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("create cluster id: %w", err)
		}
	}
	return "", errors.New("cluster id did not settle")
}

func newClusterID() string {
	u := uuid.New()
	return strings.TrimRight(base64URL(u[:]), "=")
}

// ClusterID is the cluster's stable ID.
func (e *Engine) ClusterID() string { return e.clusterID }

// BrokerID is this broker's ID.
func (e *Engine) BrokerID() int32 { return e.cfg.BrokerID }

// Run takes part in the cluster and reconciles until ctx ends, then
// releases every partition (fsync, producer snapshot, handles closed),
// writes a last heartbeat marked leaving, and returns. It runs StartCheck
// first if the caller has not, and stops with a *cluster.SupplantedError
// (writing no leaving mark) when another process writes this broker's
// heartbeat (startcheck.go).
func (e *Engine) Run(ctx context.Context) error {
	if err := e.StartCheck(ctx); err != nil {
		return err
	}
	ctx, cancel := e.guardRun(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		e.clusterLoop(ctx)
	}()
	for i := 0; i < e.cfg.Workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.work(ctx)
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		e.retentionLoop(ctx)
	}()
	if !e.cfg.Cleaner.Disable {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.cleaner.run(ctx)
		}()
	}
	ticker := time.NewTicker(e.cfg.ResyncInterval)
	defer ticker.Stop()
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-ticker.C:
			e.resync()
		}
	}
	wg.Wait()
	err := errors.Join(e.closeAll(), e.closeShards(false))
	if serr := supplantedCause(ctx); serr != nil {
		// The heartbeat file is the other process's now: no leaving mark.
		return errors.Join(serr, err)
	}
	e.hb.SetOpen(nil)
	e.hb.SetReport(cluster.ReportSummary{})
	if lerr := e.hb.Leave(); lerr != nil {
		e.log.Error(lerr, "leaving heartbeat failed; the others wait out the lease")
	}
	return err
}

// resync is the periodic resync: every key again, but a key whose last
// pass ended terminally only when something changed for it (Queue.Resync).
func (e *Engine) resync() { e.enqueueAll(e.queue.Resync) }

// enqueueAll adds, with add, every key: the groups, the trash, and every
// topic desired or held.
func (e *Engine) enqueueAll(add func(Key)) {
	specs := e.listedSpecs()
	if specs == nil {
		var err error
		if specs, err = desired.ListTopicSpecs(e.fsys, e.cfg.ClusterDir); err != nil {
			e.log.Error(err, "resync: list desired topics")
			return
		}
	}
	add(groupsKey)
	add(trashKey)
	seen := map[string]bool{}
	for _, s := range specs {
		seen[s.Name] = true
		add(topicKey(s.Name))
	}
	for _, name := range e.routes.names() {
		if !seen[name] {
			add(topicKey(name))
		}
	}
}

// reconcileTopic drives one topic toward its desired state (KindTopic).
func (e *Engine) reconcileTopic(ctx context.Context, name string) error {
	spec, err := desired.ReadTopicSpec(e.fsys, e.cfg.ClusterDir, name)
	if errors.Is(err, fs.ErrNotExist) {
		e.noteSpec(name, nil)
		return e.dropTopic(name, "")
	}
	if err != nil {
		return err
	}
	e.noteSpec(name, &spec)
	if spec.Deleted {
		if !e.isController() {
			// Only the controller drives the delete machine; every broker
			// closes its handles of the incarnation.
			return e.dropTopic(spec.Name, spec.ID)
		}
		return e.driveDelete(ctx, spec)
	}
	if err := e.upsertTopic(spec); err != nil {
		return err
	}
	if e.isController() {
		// The one writer of topic directories: a directory still stamped
		// by a previous incarnation is reclaimed before any open of this
		// one (reclaim.go), whichever broker owns the partitions.
		if err := e.reclaimStale(ctx, spec); err != nil {
			return err
		}
	}
	// Partitions are independent (own directory, fence, record): open
	// them side by side, so that taking over many partitions costs about
	// one takeover's round trips to the volume, not one per partition;
	// openSem bounds the opens of every topic together.
	errs := make([]error, spec.Partitions)
	var g errgroup.Group
	g.SetLimit(e.cfg.ParallelOpens)
	prepared := false
	stamp := sync.OnceValue(func() error { return states.EnsureStamp(e.fsys, e.cfg.DataDir, spec.Name, spec.ID) })
	for p := int32(0); p < spec.Partitions; p++ {
		owner, mine, _ := e.ownerOf(spec.ID, p)
		if !mine {
			// Not ours (or not assigned yet): release it if we hold it.
			errs[p] = e.release(spec, p)
			e.opens.noteOpen(openKey(spec.Name, p, spec.ID), nil)
			continue
		}
		if cur := e.servingPartition(spec.Name, spec.ID, p); !prepared && (cur == nil || cur.Epoch() != owner.LeaderEpoch) {
			// Before opens run side by side, make the topic directory
			// exist durably, once: concurrent make-dir steps must not
			// each assume another synced the shared parent.
			if err := e.prepareTopicDir(spec); err != nil {
				_ = g.Wait()
				return err
			}
			prepared = true
		}
		g.Go(func() error {
			select {
			case e.openSem <- struct{}{}:
			case <-ctx.Done():
				errs[p] = ctx.Err()
				return nil
			}
			errs[p] = e.driveOpen(ctx, spec, p, owner.LeaderEpoch, stamp)
			<-e.openSem
			e.opens.noteOpen(openKey(spec.Name, p, spec.ID), errs[p])
			return nil
		})
	}
	_ = g.Wait()
	if prepared {
		// Opens ran: tell the others at once what this broker serves now.
		e.kickCluster()
	}
	err = errors.Join(errs...)
	if errors.Is(err, states.ErrStampMismatch) {
		// Check the stamp again at the next pass (soon: the error backs
		// off from 100ms): the controller reclaims, the others wait.
		e.stampOK.Delete(spec.Name)
	}
	return err
}

// prepareTopicDir creates the topic directory (durably) before partitions
// are opened in it, after re-reading the desired state: a topic marked
// deleted since the reconcile began gets no directory back.
func (e *Engine) prepareTopicDir(spec desired.TopicSpec) error {
	if err := e.stillDesired(spec); err != nil {
		return err
	}
	if err := volume.MkdirAllSync(e.fsys, states.TopicDir(e.cfg.DataDir, spec.Name)); err != nil {
		return fmt.Errorf("topic %s: %w", spec.Name, err)
	}
	return nil
}

// stillDesired re-reads the desired state of spec's topic and fails unless
// it still names this incarnation, undeleted.
func (e *Engine) stillDesired(spec desired.TopicSpec) error {
	now, err := desired.ReadTopicSpec(e.fsys, e.cfg.ClusterDir, spec.Name)
	if err != nil {
		return fmt.Errorf("topic %s: re-read desired state: %w", spec.Name, err)
	}
	if now.ID != spec.ID || now.Deleted {
		return fmt.Errorf("topic %s: topic ID %s is deleted or replaced", spec.Name, spec.ID)
	}
	return nil
}

// forgetPartitionMachines drops a partition's machines from the book
// (metrics) when this broker lets go of it.
func (e *Engine) forgetPartitionMachines(topic string, index int32) {
	obj := states.PartitionObject(topic, index)
	e.machines.forget(states.PartitionOpen.Kind, obj)
	e.machines.forget(states.SegmentCompact.Kind, obj)
	e.cleaner.forget(topic, index)
}

// release unpublishes and closes a partition this broker no longer owns.
func (e *Engine) release(spec desired.TopicSpec, index int32) error {
	cur := e.servingPartition(spec.Name, spec.ID, index)
	if cur == nil {
		return nil
	}
	e.unpublish(cur)
	e.forgetPartitionMachines(spec.Name, index)
	e.log.Info("partition released", "topic", spec.Name, "partition", index, "epoch", cur.Epoch())
	if err := cur.Close(); err != nil && !errors.Is(err, partlog.ErrFenced) {
		return err // a fenced log's final sync fails by design: the new owner has it
	}
	return nil
}

// upsertTopic installs spec in the routing table. A different ID under the
// same name is a new incarnation: the old one's partitions are closed.
func (e *Engine) upsertTopic(spec desired.TopicSpec) error {
	stale, served := e.routes.upsert(spec)
	var errs []error
	for _, p := range stale {
		if p != nil {
			errs = append(errs, p.Close())
		}
	}
	rules := produceRules(spec)
	for _, p := range served {
		if err := p.Reconfigure(logLimits(spec)); err != nil {
			errs = append(errs, err)
		}
		p.SetProduceRules(rules)
	}
	e.broadcast()
	return errors.Join(errs...)
}

// drive runs a machine (states.Drive) with this engine's save and clock,
// and books where the record stands after (machinebook.go).
//
// Each step that succeeds is counted here, each that fails or waits when
// its record is saved: a machine that saves only at stops
// (Definition.SaveAtStops) still counts every step.
func (e *Engine) drive(ctx context.Context, def states.Definition, rec *states.Record, acts states.Actions) error {
	counted := make(states.Actions, len(acts))
	for ev, act := range acts {
		counted[ev] = func(ctx context.Context) error {
			err := act(ctx)
			if err == nil {
				e.reconciles.add(def.Kind, resultOK)
			}
			return err
		}
	}
	err := states.Drive(ctx, def, rec, counted, e.save, e.cfg.Now)
	e.machines.note(rec)
	return err
}

func (e *Engine) save(rec *states.Record) error {
	if rec.LastError != "" {
		e.reconciles.noteStop(rec)
	}
	e.machines.note(rec)
	if _, ok := e.statusDirs.Load(rec.Kind); !ok {
		if err := states.EnsureStatusDir(e.fsys, e.cfg.ClusterDir, rec.Kind); err != nil {
			return err
		}
		e.statusDirs.Store(rec.Kind, true)
	}
	return states.SaveInStatusDirVia(e.fsys, e.dirSync, e.cfg.ClusterDir, rec)
}

// driveOpen drives one partition's open machine to serving at the leader
// epoch assigned to this broker.
// stamp, if not nil, is the stamp step shared by the topic's opens of this
// pass.
func (e *Engine) driveOpen(ctx context.Context, spec desired.TopicSpec, index, epoch int32, stamp func() error) error {
	obj := states.PartitionObject(spec.Name, index)
	cur := e.servingPartition(spec.Name, spec.ID, index)
	if cur != nil && cur.Log().Err() == nil && cur.Epoch() == epoch {
		return nil // serving: nothing to observe or do
	}
	if cur != nil && cur.Log().Err() != nil && cur.Epoch() == epoch {
		// The log failed for good at this epoch: release it and wait for
		// the controller to answer the reopen request with a new epoch.
		e.log.Info("partition log failed; releasing it until a new leader epoch is assigned",
			"topic", spec.Name, "partition", index, "epoch", epoch, "err", cur.Log().Err())
		e.requestReopen(cur)
		e.unpublish(cur)
		if err := cur.Close(); err != nil {
			e.log.Error(err, "close failed partition", "topic", spec.Name, "partition", index)
		}
		return reconcile.WaitingOn(fmt.Errorf("partition %s/%d failed at leader epoch %d: waiting for a new one", spec.Name, index, epoch))
	}
	if cur == nil {
		if err := e.stillOverBudget(openKey(spec.Name, index, spec.ID), fmt.Sprintf("%s/%d", spec.Name, index)); err != nil {
			return err // recorded already: no volume I/O while it waits
		}
		if r, ok := e.pendingReopen(spec.ID, spec.Name, index); ok && r.epoch == epoch {
			return reconcile.WaitingOn(fmt.Errorf("partition %s/%d failed at leader epoch %d: waiting for a new one", spec.Name, index, epoch))
		}
	}
	rec, err := states.Load(e.fsys, e.cfg.ClusterDir, states.PartitionOpen.Kind, obj)
	if err != nil {
		return err
	}
	if rec == nil || rec.TopicID != spec.ID {
		rec = states.PartitionOpen.NewRecord(obj, spec.ID, e.owner, e.cfg.Now())
	}
	if cur != nil {
		// The log failed (fsync error or fenced): release it and recover
		// again from the volume under a new epoch.
		e.log.Info("reopening partition", "topic", spec.Name, "partition", index, "epoch", epoch, "err", cur.Log().Err())
		e.unpublish(cur)
		if err := cur.Close(); err != nil {
			e.log.Error(err, "close failed partition", "topic", spec.Name, "partition", index)
		}
	}
	key := openKey(spec.Name, index, spec.ID)
	rec.State = states.PartitionOpen.Resume(rec.State, e.stillFenced(key, rec.Epoch, epoch))
	rec.Owner = e.owner
	// In flight first, then owned: an open decided on an older assignment
	// either sees the current one here and stops, or is in flight while
	// this broker says what it holds (lifecycle fencing must wait for it).
	defer e.opens.startOpening(key, openRef{spec.ID, index})()
	if o, mine, _ := e.ownerOf(spec.ID, index); !mine || o.LeaderEpoch != epoch {
		return reconcile.WaitingOn(fmt.Errorf("partition %s/%d is not assigned here at leader epoch %d any more: not opening it", spec.Name, index, epoch))
	}
	if rec.State == states.PartitionOpen.Initial || rec.State == "dir-ready" {
		// Re-read the desired state before creating anything: a delete
		// marked since the reconcile began must not get its directories
		// recreated by a late open.
		if err := e.stillDesired(spec); err != nil {
			return fmt.Errorf("open partition %d: %w", index, err)
		}
	}
	host := &partitionOpenHost{e: e, spec: spec, index: index, epoch: epoch, stamp: stamp}
	acts := states.PartitionOpenActions(e.fsys, e.cfg.DataDir, spec.Name, spec.ID, index, rec, host)
	err = e.drive(ctx, states.PartitionOpen, rec, acts)
	if opened := host.opened; err != nil && opened != nil && e.servingPartition(spec.Name, spec.ID, index) != opened {
		_ = opened.Close()
	}
	if err == nil {
		e.log.Info("partition serving", "topic", spec.Name, "partition", index, "epoch", rec.Epoch)
		e.broadcast() // the record now says serving too
	}
	return err
}

// openPartition opens the log under the leader epoch the fence step claimed
// and rebuilds the producer state from the newest snapshot plus the log
// after it.
func (e *Engine) openPartition(spec desired.TopicSpec, index, epoch int32, rec *states.Record) (*dataplane.Partition, error) {
	dir := states.PartitionDir(e.cfg.DataDir, spec.Name, index)
	var previous []int32
	if rec.FencedFrom != nil {
		previous = append(previous, *rec.FencedFrom)
	}
	// Within the budget only: the fds beyond it belong to clients and the
	// control plane.
	if err := e.takeOpenSlot(fmt.Sprintf("%s/%d", spec.Name, index)); err != nil {
		return nil, err
	}
	start := time.Now()
	limits := logLimits(spec)
	rules := produceRules(spec)
	p, rc, err := dataplane.Open(e.fsys, dir, dataplane.OpenOptions{
		Topic: spec.Name, Index: index, TopicID: spec.ID,
		Log: partlog.Config{
			Epoch:              epoch,
			SegmentBytes:       limits.SegmentBytes,
			SegmentAge:         limits.SegmentAge,
			MaxBatchBytes:      limits.MaxBatchBytes,
			LogAppendTime:      limits.LogAppendTime,
			CheckpointInterval: e.cfg.CheckpointInterval,
			PreviousEpochs:     previous,
			FenceNotDurable:    states.FenceDeferred(rec),
			Now:                e.cfg.Now,
			Logger:             e.log.WithName("partlog").WithValues("topic", spec.Name, "partition", index),
			Rounds:             e.roundObserver(),
		},
		LogOptions:      e.logOptions(),
		Rules:           &rules,
		MaxProducers:    e.cfg.MaxProducersPerPartition,
		ExpireProducers: e.cfg.ProducerIDExpiration,
		Now:             e.cfg.Now,
		OnFailure:       e.partitionFailed,
		OnClosed:        e.releaseOpenSlot,
		Logger:          e.log.WithValues("topic", spec.Name, "partition", index),
	})
	if err != nil {
		e.releaseOpenSlot()
		return nil, err
	}
	e.log.V(1).Info("partition recovered", "topic", spec.Name, "partition", index, "epoch", epoch,
		"logStart", p.Log().LogStartOffset(), "logEnd", p.Log().LogEndOffset(), "openTime", rc.LogOpen,
		"producerReplayBatches", rc.ReplayedBatches, "totalTime", time.Since(start))
	return p, nil
}

func (e *Engine) partitionFailed(p *dataplane.Partition) {
	e.requestReopen(p)
	e.queue.Add(topicKey(p.Topic))
}

// requestReopen asks the controller (through the heartbeat) for a new
// leader epoch for a partition whose log failed.
func (e *Engine) requestReopen(p *dataplane.Partition) {
	e.askReopen(openKey(p.Topic, p.Index, p.TopicID), p.TopicID, p.Index, p.Epoch())
}

// askReopen asks the controller for a new leader epoch for the log named
// key (a partition's or a coordinator shard's), which failed at epoch.
func (e *Engine) askReopen(key, topicID string, index, epoch int32) {
	e.opens.askReopen(key, reopenRequest{topicID: topicID, index: index, epoch: epoch})
}

func (e *Engine) pendingReopen(topicID, name string, index int32) (reopenRequest, bool) {
	return e.opens.pendingReopen(openKey(name, index, topicID))
}

func (e *Engine) servingPartition(name, id string, index int32) *dataplane.Partition {
	return e.routes.serving(name, id, index)
}

func (e *Engine) publish(p *dataplane.Partition) error {
	if err := e.routes.publish(p); err != nil {
		return err
	}
	e.broadcast()
	return nil
}

func (e *Engine) unpublish(p *dataplane.Partition) {
	e.routes.unpublish(p)
	e.broadcast()
}

// dropTopic removes a topic from routing and closes its partitions. An empty
// id drops whatever incarnation is there.
func (e *Engine) dropTopic(name, id string) error {
	t, ok := e.routes.drop(name, id)
	if !ok {
		return nil
	}
	e.opens.forgetFailures(name, t.spec.ID)
	e.broadcast()
	var errs []error
	for i, p := range t.parts {
		e.forgetPartitionMachines(name, int32(i))
		if p != nil {
			errs = append(errs, p.Close())
		}
	}
	return errors.Join(errs...)
}

// driveDelete drives a topic incarnation's delete machine to deleted.
func (e *Engine) driveDelete(ctx context.Context, spec desired.TopicSpec) error {
	rec, err := states.Load(e.fsys, e.cfg.ClusterDir, states.TopicDelete.Kind, spec.Name)
	if err != nil {
		return err
	}
	if rec == nil || rec.TopicID != spec.ID {
		rec = states.TopicDelete.NewRecord(spec.Name, spec.ID, e.owner, e.cfg.Now())
	}
	rec.Owner = e.owner
	acts := states.TopicDeleteActions(e.fsys, e.cfg.DataDir, spec.Name, spec.ID, topicDeleteHost{e: e, spec: spec})
	if err := e.drive(ctx, states.TopicDelete, rec, acts); err != nil {
		return err
	}
	e.log.Info("topic deleted", "topic", spec.Name, "topicID", spec.ID)
	e.broadcast()
	return nil
}

func (e *Engine) closeAll() error {
	var errs []error
	for _, p := range e.routes.takeAll() {
		// A fenced log's final sync fails by design (a zombie that resumed
		// and is stopped): the new owner has the partition.
		if err := p.Close(); err != nil && !errors.Is(err, partlog.ErrFenced) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// broadcast wakes everything waiting for a routing change (topics and
// partitions appearing or going, waits for serving or deleted topics).
// New data wakes only the fetches watching its partition (Partition.Watch).
func (e *Engine) broadcast() {
	e.routeGen.Add(1)
	next := make(chan struct{})
	close(*e.changes.Swap(&next)) // each channel is swapped out, and closed, once
}

// Changed returns a channel closed at the next routing change.
func (e *Engine) Changed() <-chan struct{} { return *e.changes.Load() }

// TopicView is a topic as routing sees it.
type TopicView struct {
	Spec desired.TopicSpec
	// Epochs holds each partition's leader epoch, -1 where it has no
	// serving leader.
	Epochs []int32
	// Leaders holds each partition's leader (its assigned owner, while that
	// broker is live and serves it), -1 where none.
	Leaders []int32
}

// view is a topic's routing view. A partition has a leader when its
// assigned owner is live and serves it: this broker at the assigned epoch,
// or another broker whose last heartbeat lists it open.
func (e *Engine) view(t routedTopic) TopicView {
	v := TopicView{Spec: t.spec, Epochs: make([]int32, len(t.parts)), Leaders: make([]int32, len(t.parts))}
	cv := e.clusterView()
	for i, p := range t.parts {
		v.Epochs[i], v.Leaders[i] = -1, -1
		o, mine, ok := cv.owner(t.spec.ID, int32(i))
		switch {
		case !ok:
		case mine:
			if p != nil && p.Epoch() == o.LeaderEpoch {
				v.Epochs[i], v.Leaders[i] = o.LeaderEpoch, o.Broker
			}
		case cv.leader(o, t.spec.ID, int32(i), func() string { return openKey(t.spec.Name, int32(i), t.spec.ID) }) >= 0:
			v.Epochs[i], v.Leaders[i] = o.LeaderEpoch, o.Broker
		}
	}
	return v
}

// Topics lists live topics, sorted by name.
func (e *Engine) Topics() []TopicView {
	all := e.routes.all()
	out := make([]TopicView, 0, len(all))
	for _, t := range all {
		if !t.spec.Deleted {
			out = append(out, e.view(t))
		}
	}
	return out
}

// Topic returns one live topic.
func (e *Engine) Topic(name string) (TopicView, bool) {
	t, ok := e.routes.topic(name)
	if !ok {
		return TopicView{}, false
	}
	return e.view(t), true
}

// TopicPartitions returns a live topic's partition count, without building
// its routing view (the offset-commit path checks every topic it names).
func (e *Engine) TopicPartitions(name string) (int32, bool) { return e.routes.partitions(name) }

// TopicByID returns the live topic with this ID.
func (e *Engine) TopicByID(id string) (TopicView, bool) {
	t, ok := e.routes.byID(id)
	if !ok {
		return TopicView{}, false
	}
	return e.view(t), true
}

// TopicName returns the name of the live topic whose incarnation has this
// topic ID, without building its view (the fetch path's lookup by ID).
func (e *Engine) TopicName(id string) (string, bool) { return e.routes.nameOf(id) }

// Partition returns a partition this broker serves.
func (e *Engine) Partition(name string, index int32) (*dataplane.Partition, error) {
	id, p, known := e.routes.route(name, index)
	if !known {
		if desired.IsReservedTopic(name) && !e.routes.has(name) {
			return nil, fmt.Errorf("%w: cannot append to or fetch from internal topic %s: kaas keeps that state in its coordinator shards", desired.ErrInvalidTopic, name)
		}
		return nil, fmt.Errorf("%w: %s/%d", ErrUnknownTopic, name, index)
	}
	if p != nil {
		// Routing ownership: between an assignment and the reconciler's
		// release, a partition assigned elsewhere is no longer served.
		if o, mine, _ := e.ownerOf(id, index); mine && o.LeaderEpoch == p.Epoch() {
			if !e.leaseHeld() {
				return nil, fmt.Errorf("%w: %s/%d: this broker has not renewed its heartbeat within %s (slow or stalled volume); another broker may own the partition by now",
					ErrNotServing, name, index, e.cfg.Lease-e.cfg.Lease/4)
			}
			return p, nil
		}
	}
	return nil, fmt.Errorf("%w: %s/%d", ErrNotServing, name, index)
}

// leaseHeld reports whether this broker's last successful heartbeat began
// recently enough that no other broker can have declared it dead: others
// wait a full lease from the moment they saw that beat, so a quarter lease
// of margin covers the beat's own latency and clock-rate differences.
// Without it, a broker whose volume stalls (it can no longer read the
// assignment) would keep answering reads, such as a high watermark, from
// memory after another broker took its partitions over.
func (e *Engine) leaseHeld() bool {
	if e.negative.IgnoreServingLease {
		return true
	}
	from := e.leaseFrom.Load()
	return from != 0 && e.obs.Now()-time.Duration(from-1) < e.cfg.Lease-e.cfg.Lease/4
}

// NextProducerID issues a producer ID never issued before.
func (e *Engine) NextProducerID() (int64, error) { return e.pids.Next() }

// CreateTopicRequest asks for a new topic.
type CreateTopicRequest struct {
	Name         string
	Partitions   int32 // -1: the default
	Configs      map[string]string
	ValidateOnly bool
}

// CreateTopic writes the desired state of a new topic incarnation.
func (e *Engine) CreateTopic(req CreateTopicRequest) (desired.TopicSpec, error) {
	r := e.CreateTopics([]CreateTopicRequest{req})[0]
	return r.Spec, r.Err
}

// CreateTopicResult is one topic's outcome in CreateTopics: its spec
// (the existing one with ErrTopicExists) or the error.
type CreateTopicResult struct {
	Spec desired.TopicSpec
	Err  error
}

// CreateTopics writes the desired state of new topic incarnations, in
// the order given: each is checked as CreateTopic checks it (and against
// the partition budget with the ones before it), then the specs are
// created side by side and the desired state's version bumped once, so a
// request for a hundred topics costs about one create's round trips.
func (e *Engine) CreateTopics(reqs []CreateTopicRequest) []CreateTopicResult {
	out := make([]CreateTopicResult, len(reqs))
	e.adminMu.Lock()
	defer e.adminMu.Unlock()
	var (
		specs  []desired.TopicSpec
		which  []int
		adding int64
	)
	for i, req := range reqs {
		if req.Partitions == -1 {
			req.Partitions = e.cfg.DefaultPartitions
		}
		if err := desired.ValidateTopic(req.Name, req.Partitions, req.Configs); err != nil {
			out[i].Err = err
			continue
		}
		cur, err := desired.ReadTopicSpec(e.fsys, e.cfg.ClusterDir, req.Name)
		switch {
		case err == nil && cur.Deleted:
			out[i].Err = fmt.Errorf("%w: %s", desired.ErrTopicDeleting, req.Name)
			continue
		case err == nil:
			e.learnTopic(cur)
			out[i] = CreateTopicResult{Spec: cur, Err: fmt.Errorf("%w: %s", ErrTopicExists, req.Name)}
			continue
		case !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, desired.ErrTornSpec):
			out[i].Err = err
			continue
		}
		if err := e.checkPartitionBudget(adding + int64(req.Partitions)); err != nil {
			out[i].Err = err
			continue
		}
		spec := desired.TopicSpec{Name: req.Name, ID: uuid.NewString(), Partitions: req.Partitions, Configs: req.Configs, Generation: 1}
		out[i].Spec = spec
		if req.ValidateOnly {
			continue
		}
		adding += int64(req.Partitions)
		specs, which = append(specs, spec), append(which, i)
	}
	if len(specs) == 0 {
		return out
	}
	// Exclusive creates: two brokers creating one name cannot give it two
	// topic IDs; the loser reads the winner's spec.
	errs, bumpErr := desired.CreateTopicSpecs(e.fsys, e.cfg.ClusterDir, specs)
	for k, spec := range specs {
		i := which[k]
		if err := errs[k]; err != nil {
			out[i] = CreateTopicResult{Err: err}
			if !errors.Is(err, fs.ErrExist) {
				continue
			}
			cur, rerr := desired.ReadTopicSpec(e.fsys, e.cfg.ClusterDir, spec.Name)
			switch {
			case rerr != nil:
				out[i].Err = fmt.Errorf("topic %s is being created elsewhere: %w", spec.Name, rerr)
			case cur.Deleted:
				out[i].Err = fmt.Errorf("%w: %s", desired.ErrTopicDeleting, spec.Name)
			default:
				e.learnTopic(cur)
				out[i] = CreateTopicResult{Spec: cur, Err: fmt.Errorf("%w: %s", ErrTopicExists, spec.Name)}
			}
			continue
		}
		e.log.Info("topic created", "topic", spec.Name, "topicID", spec.ID, "partitions", spec.Partitions)
		if err := e.upsertTopic(spec); err != nil {
			out[i].Err = err
		}
		e.queue.Add(topicKey(spec.Name))
	}
	if bumpErr != nil {
		// The specs are there; the others see them at their next full
		// listing, or with the next bump.
		e.log.Error(bumpErr, "topics created, but the desired state's version not bumped")
	}
	e.hurryFor(hurryAfterChange)
	e.kickCluster()
	return out
}

// learnTopic installs a topic another broker created, so that this broker
// routes it before its next resync.
func (e *Engine) learnTopic(spec desired.TopicSpec) {
	if _, ok := e.Topic(spec.Name); ok || spec.Deleted {
		return
	}
	if err := e.upsertTopic(spec); err != nil {
		e.log.Error(err, "install topic", "topic", spec.Name)
	}
	e.queue.Add(topicKey(spec.Name))
}

// AutoCreate creates a topic with the defaults if auto-creation is on.
func (e *Engine) AutoCreate(name string) error {
	if !e.cfg.AutoCreateTopics {
		return fmt.Errorf("%w: %s (auto-creation is off)", ErrUnknownTopic, name)
	}
	_, err := e.CreateTopic(CreateTopicRequest{Name: name, Partitions: -1})
	if errors.Is(err, ErrTopicExists) {
		return nil
	}
	return err
}

// AutoCreateEnabled reports whether topics are created on first use.
func (e *Engine) AutoCreateEnabled() bool { return e.cfg.AutoCreateTopics }

// DeleteTopic marks a topic incarnation deleted; the reconciler removes it.
func (e *Engine) DeleteTopic(name string) (desired.TopicSpec, error) {
	if desired.IsReservedTopic(name) {
		return desired.TopicSpec{}, fmt.Errorf("%w: internal topic %s cannot be deleted", desired.ErrInvalidTopic, name)
	}
	e.adminMu.Lock()
	defer e.adminMu.Unlock()
	spec, err := desired.ReadTopicSpec(e.fsys, e.cfg.ClusterDir, name)
	if errors.Is(err, fs.ErrNotExist) {
		return desired.TopicSpec{}, fmt.Errorf("%w: %s", ErrUnknownTopic, name)
	}
	if err != nil {
		return desired.TopicSpec{}, err
	}
	if spec.ManagedBy != "" && !spec.Deleted {
		return spec, managedError(spec)
	}
	if !spec.Deleted {
		spec.Deleted = true
		spec.Generation++
		if err := desired.WriteTopicSpec(e.fsys, e.cfg.ClusterDir, spec); err != nil {
			return desired.TopicSpec{}, err
		}
		e.log.Info("topic delete requested", "topic", name, "topicID", spec.ID)
	}
	// Stop routing at once; the machine closes the handles.
	e.routes.markDeleted(name, spec.ID)
	e.queue.Add(topicKey(name))
	return spec, nil
}

// WaitServing waits until every partition of the topic has a serving
// leader (on any broker), or ctx ends.
func (e *Engine) WaitServing(ctx context.Context, name string) bool {
	for {
		e.hurryFor(time.Second) // the owners' reports, read at once
		ch := e.Changed()
		if v, ok := e.Topic(name); ok {
			all := true
			for _, ep := range v.Epochs {
				all = all && ep >= 0
			}
			if all {
				return true
			}
		}
		select {
		case <-ctx.Done():
			return false
		case <-ch:
		}
	}
}

// WaitDeleted waits until the incarnation's desired state is gone.
func (e *Engine) WaitDeleted(ctx context.Context, name, id string) bool {
	for {
		ch := e.Changed()
		s, err := desired.ReadTopicSpec(e.fsys, e.cfg.ClusterDir, name)
		if errors.Is(err, fs.ErrNotExist) || (err == nil && s.ID != id) {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-ch:
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Ready reports whether an assignment has been read and every partition it
// assigns to this broker, of every live topic, is served at its assigned
// leader epoch.
func (e *Engine) Ready() bool {
	ready, _ := e.Readiness()
	return ready
}

// Readiness is Ready with, when not ready, the reason: how many of the
// partitions assigned here are not served, and why (over the partition
// budget, out of file descriptors, still opening or failing).
func (e *Engine) Readiness() (bool, string) {
	// Each table is read on its own (copies), never under another's lock.
	shards := e.shards.all()
	topics := e.routes.all()
	cv := e.clusterView()
	if cv.assign == nil {
		return false, "no partition assignment read yet"
	}
	var assigned, unserved, overBudget, noFDs int
	for _, t := range topics {
		if t.spec.Deleted {
			continue
		}
		for i, p := range t.parts {
			o, mine, _ := cv.owner(t.spec.ID, int32(i))
			if !mine {
				continue
			}
			assigned++
			if p == nil || p.Epoch() != o.LeaderEpoch {
				unserved++
				f, _ := e.opens.failure(openKey(t.spec.Name, int32(i), t.spec.ID))
				if f.overBudget {
					overBudget++
				} else if f.noFDs {
					noFDs++
				}
			}
		}
	}
	shardsDown := 0
	for i, s := range shards {
		if o, mine, _ := cv.owner(GroupsTopicID, int32(i)); mine && (s == nil || s.epoch != o.LeaderEpoch) {
			shardsDown++
		}
	}
	if unserved == 0 && shardsDown == 0 {
		return true, ""
	}
	var why []string
	if unserved > 0 {
		msg := fmt.Sprintf("%d of the %d partitions assigned to this broker are not served", unserved, assigned)
		if open, budget := e.openSlots.Load(), int64(e.cfg.MaxPartitionsPerBroker); overBudget > 0 || (budget > 0 && open >= budget) {
			msg += fmt.Sprintf(": it holds %d open, all of its partition budget (--max-partitions-per-broker %d)", open, budget)
		}
		if noFDs > 0 {
			msg += fmt.Sprintf(", %d of them out of file descriptors (EMFILE)", noFDs)
		}
		why = append(why, msg)
	}
	if shardsDown > 0 {
		why = append(why, fmt.Sprintf("%d coordinator shards assigned to this broker are not served", shardsDown))
	}
	return false, strings.Join(why, "; ")
}

// Status reads every machine's reconcile status from the volume.
func (e *Engine) Status() ([]states.Record, error) { return ReadStatus(e.fsys, e.cfg.ClusterDir) }

// ReadStatus reads reconcile status with no broker running (kaasctl).
func ReadStatus(fsys volume.FS, clusterDir string) ([]states.Record, error) {
	return states.LoadAll(fsys, clusterDir)
}

package groups

import (
	"context"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Config configures a Coordinator. Zero durations and sizes take the
// Default* values; a nil Clock is the wall clock. A negative
// InitialRebalanceDelay turns the initial delay off.
type Config struct {
	Shard   int32
	Journal Journal
	Clock   Clock
	Logger  logr.Logger
	// Topics tells which incarnation of a topic is live (incarnations.go);
	// nil keeps commits without topic IDs, applying to any incarnation.
	Topics Topics

	InitialRebalanceDelay time.Duration
	MinSessionTimeout     time.Duration
	MaxSessionTimeout     time.Duration
	OffsetsRetention      time.Duration
	RetentionCheck        time.Duration
	MaxGroupSize          int
	MaxMetadataBytes      int
}

func (cfg Config) withDefaults() Config {
	if cfg.Clock == nil {
		cfg.Clock = RealClock()
	}
	if cfg.InitialRebalanceDelay == 0 {
		cfg.InitialRebalanceDelay = DefaultInitialRebalanceDelay
	}
	if cfg.MinSessionTimeout == 0 {
		cfg.MinSessionTimeout = DefaultMinSessionTimeout
	}
	if cfg.MaxSessionTimeout == 0 {
		cfg.MaxSessionTimeout = DefaultMaxSessionTimeout
	}
	if cfg.OffsetsRetention == 0 {
		cfg.OffsetsRetention = DefaultOffsetsRetention
	}
	if cfg.RetentionCheck == 0 {
		cfg.RetentionCheck = DefaultRetentionCheck
	}
	if cfg.MaxGroupSize == 0 {
		cfg.MaxGroupSize = DefaultMaxGroupSize
	}
	if cfg.MaxMetadataBytes == 0 {
		cfg.MaxMetadataBytes = DefaultMaxMetadataBytes
	}
	return cfg
}

// Coordinator serves the groups of one shard. One mutex guards every
// group; it is never held while waiting for the journal or a client.
type Coordinator struct {
	cfg   Config
	clock Clock
	log   logr.Logger

	// ctx ends at Close; background waits for durability use it.
	ctx    context.Context
	cancel context.CancelFunc
	bg     sync.WaitGroup

	mu          sync.Mutex
	groups      map[string]*group
	txnGroups   map[int64]map[string]struct{} // producer ID → groups with its txnOffsets (txnoffsets.go)
	closed      bool
	started     bool
	expiryTimer Timer
}

// New returns a coordinator with no groups. Replay records into it, then
// Start it.
func New(cfg Config) *Coordinator {
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	return &Coordinator{
		cfg:    cfg,
		clock:  cfg.Clock,
		log:    cfg.Logger.WithValues("shard", cfg.Shard),
		ctx:    ctx,
		cancel: cancel,
		groups: make(map[string]*group),
	}
}

// Start begins serving after loading: session timers for the members of
// loaded groups, and the periodic offset expiry.
func (c *Coordinator) Start() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.started {
		return
	}
	c.started = true
	for _, g := range c.groups {
		for _, m := range g.members {
			c.touchSession(g, m)
		}
	}
	c.scheduleExpiry()
}

// Close stops timers and answers every waiting request with
// NOT_COORDINATOR. Nothing is written.
func (c *Coordinator) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.closed = true
	c.cancel()
	if c.expiryTimer != nil {
		c.expiryTimer.Stop()
	}
	for _, g := range c.groups {
		g.stopTimers()
		for _, m := range g.members {
			m.answerJoin(joinError(m.joinVersion, m.id, kerr.NotCoordinator.Code))
			m.answerSync(syncError(m.syncVersion, kerr.NotCoordinator.Code))
		}
	}
}

// current reports whether g is still the live group of its ID: timer
// callbacks and durability completions check it before touching g.
func (c *Coordinator) current(g *group) bool {
	return !c.closed && c.groups[g.id] == g
}

// appendInBackground appends recs and waits for durability off the lock;
// for writes that no request waits on (a group gone empty, expiry). A
// failure fails the shard (see Journal), so it is only logged here.
func (c *Coordinator) appendInBackground(recs []Record, what string) {
	_, wait, err := c.cfg.Journal.Append(recs)
	if err != nil {
		c.log.Error(err, "appending group records", "what", what)
		return
	}
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		if err := wait(c.ctx); err != nil && c.ctx.Err() == nil {
			c.log.Error(err, "writing group records", "what", what)
		}
	}()
}

// DescribeGroup describes one group. An unknown group is "Dead" with no
// error, as Kafka answers.
func (c *Coordinator) DescribeGroup(group string) kmsg.DescribeGroupsResponseGroup {
	resp := kmsg.NewDescribeGroupsResponseGroup()
	resp.Group = group
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		resp.ErrorCode = kerr.NotCoordinator.Code
		return resp
	}
	g := c.groups[group]
	if g == nil {
		resp.State = stateDead.String()
		return resp
	}
	resp.State = g.state.String()
	resp.ProtocolType = g.protocolType
	stable := g.state == stateStable
	if stable {
		resp.Protocol = g.protocol
	}
	for _, m := range g.membersInOrder() {
		dm := kmsg.NewDescribeGroupsResponseGroupMember()
		dm.MemberID = m.id
		dm.InstanceID = m.instanceID
		dm.ClientID = m.clientID
		dm.ClientHost = m.clientHost
		// As Kafka: metadata and assignment only while Stable.
		if stable {
			dm.ProtocolMetadata = m.metadataFor(g.protocol)
			dm.MemberAssignment = m.assignment
		}
		resp.Members = append(resp.Members, dm)
	}
	return resp
}

// ListGroups lists the shard's groups, filtered by state when states is not
// empty (ListGroups v4; case-insensitive).
func (c *Coordinator) ListGroups(states []string) []kmsg.ListGroupsResponseGroup {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	var out []kmsg.ListGroupsResponseGroup
	for _, g := range c.groups {
		state := g.state.String()
		if len(states) > 0 && !containsFold(states, state) {
			continue
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group = g.id
		lg.ProtocolType = g.protocolType
		lg.GroupState = state
		out = append(out, lg)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

// DeleteGroup deletes an empty group and its offsets (error code, 0 on
// success: GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, NOT_COORDINATOR). A group
// with pending transactional offsets is not empty. The group is gone from
// memory at once, as Kafka marks it Dead before the write.
func (c *Coordinator) DeleteGroup(ctx context.Context, group string) int16 {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return kerr.NotCoordinator.Code
	}
	g := c.groups[group]
	switch {
	case g == nil:
		c.mu.Unlock()
		return kerr.GroupIDNotFound.Code
	case g.state != stateEmpty || len(g.txnOffsets) > 0:
		c.mu.Unlock()
		return kerr.NonEmptyGroup.Code
	}
	recs := make([]Record, 0, len(g.offsets)+1)
	for _, tp := range g.sortedPartitions() {
		recs = append(recs, offsetTombstone(group, tp))
	}
	recs = append(recs, groupTombstone(group))
	c.forgetGroup(g)
	_, wait, err := c.cfg.Journal.Append(recs)
	c.mu.Unlock()
	if err == nil {
		err = wait(ctx)
	}
	if err != nil {
		c.log.Error(err, "deleting group", "group", group)
		return kerr.NotCoordinator.Code
	}
	return 0
}

// forgetGroup removes g from the shard (Dead): its timers stop and
// in-flight completions see it is no longer current.
func (c *Coordinator) forgetGroup(g *group) {
	g.stopTimers()
	for _, id := range g.pendingIDs() {
		g.removePending(id)
	}
	g.state = stateDead
	delete(c.groups, g.id)
}

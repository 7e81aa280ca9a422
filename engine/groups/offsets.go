package groups

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// pendingCommit is one partition of an OffsetCommit on its way to the log.
type pendingCommit struct {
	tp     topicPartition
	value  committedOffset
	topic  int // index in the response
	result int
}

// OffsetCommit commits offsets of one group. The records go to the journal
// in one Append; the answer, and visibility to OffsetFetch, wait for
// durability without holding the coordinator's lock, so concurrent commits
// share one fsync.
func (c *Coordinator) OffsetCommit(ctx context.Context, req *kmsg.OffsetCommitRequest) *kmsg.OffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	n := 0
	resp.Topics = make([]kmsg.OffsetCommitResponseTopic, len(req.Topics))
	for i, t := range req.Topics {
		rt := &resp.Topics[i]
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		rt.Partitions = make([]kmsg.OffsetCommitResponseTopicPartition, len(t.Partitions))
		for j, p := range t.Partitions {
			rt.Partitions[j].Partition = p.Partition
		}
		n += len(t.Partitions)
	}
	if req.Group == "" {
		setCommitErrors(resp, nil, kerr.InvalidGroupID.Code)
		return resp
	}
	now := c.clock.Now().UnixMilli()
	// The incarnation each topic's commits are for, looked up before the
	// lock is taken (incarnations.go).
	ids := make([][16]byte, len(req.Topics))
	known := make(map[string][16]byte, len(req.Topics))
	for i, t := range req.Topics {
		ids[i] = c.currentTopicID(known, t.Topic)
	}
	// A commit naming its incarnation (v10 carries the topic ID the client
	// consumed under) is refused unless that is the live one.
	for i, t := range req.Topics {
		if t.TopicID == noTopicID || c.cfg.Topics == nil {
			continue
		}
		if t.TopicID != ids[i] {
			for j := range resp.Topics[i].Partitions {
				resp.Topics[i].Partitions[j].ErrorCode = kerr.UnknownTopicID.Code
			}
		}
	}

	c.mu.Lock()
	g, code := c.commitTarget(req)
	if code != 0 {
		c.mu.Unlock()
		setCommitErrors(resp, nil, code)
		return resp
	}
	commits := make([]pendingCommit, 0, n)
	recs := make([]Record, 0, n)
	for i, t := range req.Topics {
		for j, p := range t.Partitions {
			if resp.Topics[i].Partitions[j].ErrorCode != 0 {
				continue
			}
			if p.Metadata != nil && len(*p.Metadata) > c.cfg.MaxMetadataBytes {
				resp.Topics[i].Partitions[j].ErrorCode = kerr.OffsetMetadataTooLarge.Code
				continue
			}
			pc := pendingCommit{
				tp:    topicPartition{t.Topic, p.Partition},
				topic: i, result: j,
				value: committedOffset{offset: p.Offset, leaderEpoch: p.LeaderEpoch, committedAt: now, topicID: ids[i]},
			}
			if p.Metadata != nil {
				pc.value.metadata = *p.Metadata
			}
			commits = append(commits, pc)
			recs = append(recs, offsetCommitRecord(g.id, pc.tp, pc.value))
		}
	}
	if len(recs) == 0 {
		c.mu.Unlock()
		return resp
	}
	first, wait, err := c.cfg.Journal.Append(recs)
	if err != nil {
		c.mu.Unlock()
		c.log.Error(err, "appending offset commit", "group", g.id)
		setCommitErrors(resp, commits, kerr.NotCoordinator.Code)
		return resp
	}
	g.commitsInFlight++
	c.mu.Unlock()

	err = wait(ctx)

	c.mu.Lock()
	g.commitsInFlight--
	if err == nil && c.groups[g.id] == g {
		for i := range commits {
			commits[i].value.logOffset = first + int64(i)
			g.applyCommit(commits[i].tp, commits[i].value)
		}
	}
	if g.commitsInFlight == 0 {
		g.deleted = nil
	}
	c.mu.Unlock()
	if err != nil {
		// A commit whose wait was abandoned (ctx) may still be durable;
		// it shows after the next load, never before.
		c.log.V(1).Info("offset commit not durable", "group", g.id, "err", err.Error())
		setCommitErrors(resp, commits, kerr.NotCoordinator.Code)
	}
	return resp
}

// commitTarget is Kafka's check of who may commit: a simple commit
// (generation < 0) into a group without members, else a member of the
// current generation. A simple commit creates its group.
func (c *Coordinator) commitTarget(req *kmsg.OffsetCommitRequest) (*group, int16) {
	if c.closed {
		return nil, kerr.NotCoordinator.Code
	}
	g := c.groups[req.Group]
	if g == nil {
		if req.Generation >= 0 {
			return nil, kerr.IllegalGeneration.Code
		}
		g = newGroup(req.Group, c.clock.Now())
		c.groups[g.id] = g
		return g, 0
	}
	if g.fencedInstance(req.InstanceID, req.MemberID) {
		return nil, kerr.FencedInstanceID.Code
	}
	if req.Generation < 0 && g.state == stateEmpty {
		return g, 0
	}
	m := g.members[req.MemberID]
	if g.state == stateCompletingRebalance {
		if m != nil {
			c.touchSession(g, m)
		}
		return nil, kerr.RebalanceInProgress.Code
	}
	if m == nil {
		return nil, kerr.UnknownMemberID.Code
	}
	if req.Generation != g.generation {
		return nil, kerr.IllegalGeneration.Code
	}
	c.touchSession(g, m)
	return g, 0
}

// applyCommit makes a durable commit visible unless a record appended
// after it for the same partition (commit or tombstone) already applied.
func (g *group) applyCommit(tp topicPartition, v committedOffset) {
	if prev, ok := g.offsets[tp]; ok && prev.logOffset > v.logOffset {
		return
	}
	if at, ok := g.deleted[tp]; ok && at > v.logOffset {
		return
	}
	g.offsets[tp] = v
}

// deleteOffset drops a partition's commit as its tombstone at logOffset is
// appended (deletions are visible at once, as in Kafka).
func (g *group) deleteOffset(tp topicPartition, logOffset int64) {
	delete(g.offsets, tp)
	if g.commitsInFlight > 0 {
		if g.deleted == nil {
			g.deleted = make(map[topicPartition]int64)
		}
		g.deleted[tp] = logOffset
	}
}

// setCommitErrors sets code on the partitions of commits, or on every
// partition when commits is nil.
func setCommitErrors(resp *kmsg.OffsetCommitResponse, commits []pendingCommit, code int16) {
	if commits == nil {
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				resp.Topics[i].Partitions[j].ErrorCode = code
			}
		}
		return
	}
	for _, pc := range commits {
		resp.Topics[pc.topic].Partitions[pc.result].ErrorCode = code
	}
}

var emptyMetadata = ""

// OffsetFetch answers one group (OffsetFetch v8 form; wire converts older
// versions). Nil Topics means every committed partition. Only durable
// commits are visible. With requireStable (v7+, KIP-447) a partition with
// pending transactional offsets answers UNSTABLE_OFFSET_COMMIT (offset -1),
// as Kafka; without, its committed offset. An offset committed for another
// incarnation of its topic than the live one is no committed offset: -1,
// and not listed when Topics is nil (incarnations.go).
func (c *Coordinator) OffsetFetch(req kmsg.OffsetFetchRequestGroup, requireStable bool) kmsg.OffsetFetchResponseGroup {
	resp := kmsg.NewOffsetFetchResponseGroup()
	resp.Group = req.Group
	var stamps []offsetStamp
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		resp.ErrorCode = kerr.NotCoordinator.Code
		return resp
	}
	g := c.groups[req.Group]
	if g == nil {
		// A group that does not exist (yet) has no committed offset:
		// every asked partition answers -1, as Kafka (clients wait for,
		// or fail on, a partition missing from the answer).
		g = &noGroup
	}
	if req.Topics == nil {
		for _, tp := range g.sortedPartitions() {
			if n := len(resp.Topics); n == 0 || resp.Topics[n-1].Topic != tp.topic {
				rt := kmsg.NewOffsetFetchResponseGroupTopic()
				rt.Topic = tp.topic
				resp.Topics = append(resp.Topics, rt)
			}
			rt := &resp.Topics[len(resp.Topics)-1]
			p, id := g.fetchPartition(tp, requireStable)
			if id != noTopicID {
				stamps = append(stamps, offsetStamp{len(resp.Topics) - 1, len(rt.Partitions), id})
			}
			rt.Partitions = append(rt.Partitions, p)
		}
	} else {
		resp.Topics = make([]kmsg.OffsetFetchResponseGroupTopic, len(req.Topics))
		for i, t := range req.Topics {
			rt := &resp.Topics[i]
			rt.Topic = t.Topic
			rt.Partitions = make([]kmsg.OffsetFetchResponseGroupTopicPartition, len(t.Partitions))
			for j, p := range t.Partitions {
				var id [16]byte
				rt.Partitions[j], id = g.fetchPartition(topicPartition{t.Topic, p}, requireStable)
				if id != noTopicID {
					stamps = append(stamps, offsetStamp{i, j, id})
				}
			}
		}
	}
	c.mu.Unlock()
	if len(stamps) > 0 && c.cfg.Topics != nil {
		c.hideOtherIncarnations(&resp, stamps, req.Topics == nil)
	}
	return resp
}

// noGroup stands for a group that does not exist in OffsetFetch: no
// offsets, no pending transactional ones. Only read.
var noGroup group

// offsetStamp is a fetched offset's place in the answer and its topic ID.
type offsetStamp struct {
	topic, partition int
	id               [16]byte
}

// hideOtherIncarnations turns the offsets of resp committed for an
// incarnation that is not the live one into "no committed offset", or,
// in an all-partitions answer (drop), leaves them out. Called off the
// lock: it may read the desired state on the volume.
func (c *Coordinator) hideOtherIncarnations(resp *kmsg.OffsetFetchResponseGroup, stamps []offsetStamp, drop bool) {
	in := c.newIncarnations()
	var hidden map[[2]int]bool
	for _, s := range stamps {
		rt := &resp.Topics[s.topic]
		if in.applies(rt.Topic, s.id) {
			continue
		}
		p := &rt.Partitions[s.partition]
		p.Offset, p.LeaderEpoch, p.Metadata = -1, -1, &emptyMetadata
		if hidden == nil {
			hidden = make(map[[2]int]bool)
		}
		hidden[[2]int{s.topic, s.partition}] = true
	}
	if !drop || hidden == nil {
		return
	}
	topics := resp.Topics[:0]
	for i, rt := range resp.Topics {
		parts := rt.Partitions[:0]
		for j, p := range rt.Partitions {
			if !hidden[[2]int{i, j}] {
				parts = append(parts, p)
			}
		}
		rt.Partitions = parts
		if len(parts) > 0 {
			topics = append(topics, rt)
		}
	}
	resp.Topics = topics
}

// fetchPartition answers one partition and returns the topic ID its
// answered offset was committed for (noTopicID when none).
func (g *group) fetchPartition(tp topicPartition, requireStable bool) (kmsg.OffsetFetchResponseGroupTopicPartition, [16]byte) {
	p := kmsg.NewOffsetFetchResponseGroupTopicPartition()
	p.Partition = tp.partition
	if requireStable && g.hasTxnOffset(tp) {
		p.Offset = -1
		p.Metadata = &emptyMetadata
		p.ErrorCode = kerr.UnstableOffsetCommit.Code
		return p, noTopicID
	}
	o, ok := g.offsets[tp]
	if !ok {
		p.Offset = -1
		p.Metadata = &emptyMetadata
		return p, noTopicID
	}
	p.Offset, p.LeaderEpoch = o.offset, o.leaderEpoch
	md := o.metadata
	p.Metadata = &md
	return p, o.topicID
}

// OffsetDelete deletes committed offsets of partitions no live member
// subscribes to (KIP-496).
func (c *Coordinator) OffsetDelete(ctx context.Context, req *kmsg.OffsetDeleteRequest) *kmsg.OffsetDeleteResponse {
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		resp.ErrorCode = kerr.NotCoordinator.Code
		return resp
	}
	g := c.groups[req.Group]
	if g == nil {
		c.mu.Unlock()
		resp.ErrorCode = kerr.GroupIDNotFound.Code
		return resp
	}
	var subscribed func(topic string) bool
	switch {
	case g.state == stateEmpty:
		subscribed = func(string) bool { return false }
	case g.protocolType == "consumer":
		subscribed = g.subscribedTopics()
	default:
		c.mu.Unlock()
		resp.ErrorCode = kerr.NonEmptyGroup.Code
		return resp
	}
	var deleting []topicPartition
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		sub := subscribed(t.Topic)
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition = p.Partition
			tp := topicPartition{t.Topic, p.Partition}
			switch _, ok := g.offsets[tp]; {
			case sub:
				rp.ErrorCode = kerr.GroupSubscribedToTopic.Code
			case ok:
				deleting = append(deleting, tp)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if len(deleting) == 0 {
		c.mu.Unlock()
		return resp
	}
	recs := make([]Record, len(deleting))
	for i, tp := range deleting {
		recs[i] = offsetTombstone(g.id, tp)
	}
	first, wait, err := c.cfg.Journal.Append(recs)
	if err == nil {
		for i, tp := range deleting {
			g.deleteOffset(tp, first+int64(i))
		}
	}
	c.mu.Unlock()
	if err == nil {
		err = wait(ctx)
	}
	if err != nil {
		c.log.Error(err, "deleting offsets", "group", g.id)
		resp.ErrorCode = kerr.NotCoordinator.Code
	}
	return resp
}

// subscribedTopics is the union of the live members' consumer
// subscriptions; a subscription that does not parse, or a group with no
// protocol chosen yet, counts as subscribed to everything.
func (g *group) subscribedTopics() func(string) bool {
	all := func(string) bool { return true }
	if g.protocol == "" {
		return all
	}
	topics := make(map[string]bool)
	for _, m := range g.members {
		md := m.metadataFor(g.protocol)
		if md == nil && len(m.protocols) > 0 {
			md = m.protocols[0].Metadata
		}
		var meta kmsg.ConsumerMemberMetadata
		if err := meta.ReadFrom(md); err != nil {
			return all
		}
		for _, t := range meta.Topics {
			topics[t] = true
		}
	}
	return func(t string) bool { return topics[t] }
}

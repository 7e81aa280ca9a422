package groups

import (
	"bytes"
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// JoinGroup joins a member to a group and blocks until the join completes
// (the rebalance's new generation), ctx ends, or Close. A cancelled ctx
// leaves the member in the group as Kafka does; the rebalance and session
// timeouts take care of it.
func (c *Coordinator) JoinGroup(ctx context.Context, req *kmsg.JoinGroupRequest) *kmsg.JoinGroupResponse {
	switch session := millis(req.SessionTimeoutMillis); {
	case req.Group == "":
		return joinError(req.Version, req.MemberID, kerr.InvalidGroupID.Code)
	case session < c.cfg.MinSessionTimeout || session > c.cfg.MaxSessionTimeout:
		return joinError(req.Version, req.MemberID, kerr.InvalidSessionTimeout.Code)
	}
	client := clientFrom(ctx)

	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return joinError(req.Version, req.MemberID, kerr.NotCoordinator.Code)
	}
	resp, wait := c.join(req, client)
	c.mu.Unlock()
	if wait == nil {
		return resp
	}
	select {
	case resp := <-wait:
		return resp
	case <-ctx.Done():
		return joinError(req.Version, req.MemberID, kerr.NotCoordinator.Code)
	}
}

// join answers at once (resp) or registers the member as waiting (wait).
func (c *Coordinator) join(req *kmsg.JoinGroupRequest, client clientInfo) (*kmsg.JoinGroupResponse, chan *kmsg.JoinGroupResponse) {
	g := c.groups[req.Group]
	created := false
	if g == nil {
		if req.MemberID != "" {
			return joinError(req.Version, req.MemberID, kerr.UnknownMemberID.Code), nil
		}
		g = newGroup(req.Group, c.clock.Now())
		c.groups[g.id] = g
		created = true
	}
	if !g.supportsProtocols(req.MemberID, req.ProtocolType, req.Protocols) {
		if created {
			delete(c.groups, g.id)
		}
		return joinError(req.Version, req.MemberID, kerr.InconsistentGroupProtocol.Code), nil
	}
	if req.MemberID == "" {
		return c.joinNewMember(g, req, client)
	}
	return c.joinKnownMember(g, req, client)
}

func (c *Coordinator) joinNewMember(g *group, req *kmsg.JoinGroupRequest, client clientInfo) (*kmsg.JoinGroupResponse, chan *kmsg.JoinGroupResponse) {
	if req.InstanceID != nil {
		if old := g.members[g.static[*req.InstanceID]]; old != nil {
			return c.replaceStaticMember(g, old, req, client)
		}
	}
	if len(g.members)+len(g.pending) >= c.cfg.MaxGroupSize {
		return joinError(req.Version, "", kerr.GroupMaxSizeReached.Code), nil
	}
	id := newMemberID(client.id, req.InstanceID)
	// KIP-394: from v4 a dynamic member must come back with the ID we
	// hand out, so that a client that never gets the answer does not
	// leave a member behind.
	if req.Version >= 4 && req.InstanceID == nil {
		c.addPending(g, id, millis(req.SessionTimeoutMillis))
		return joinError(req.Version, id, kerr.MemberIDRequired.Code), nil
	}
	return nil, c.addMemberAndRebalance(g, newMember(id, req, client), req.ProtocolType)
}

func (c *Coordinator) joinKnownMember(g *group, req *kmsg.JoinGroupRequest, client clientInfo) (*kmsg.JoinGroupResponse, chan *kmsg.JoinGroupResponse) {
	if g.fencedInstance(req.InstanceID, req.MemberID) {
		return joinError(req.Version, req.MemberID, kerr.FencedInstanceID.Code), nil
	}
	if _, ok := g.pending[req.MemberID]; ok {
		g.removePending(req.MemberID)
		if len(g.members) >= c.cfg.MaxGroupSize {
			return joinError(req.Version, req.MemberID, kerr.GroupMaxSizeReached.Code), nil
		}
		return nil, c.addMemberAndRebalance(g, newMember(req.MemberID, req, client), req.ProtocolType)
	}
	m := g.members[req.MemberID]
	if m == nil {
		return joinError(req.Version, req.MemberID, kerr.UnknownMemberID.Code), nil
	}
	switch g.state {
	case statePreparingRebalance:
		return nil, c.updateMemberAndRebalance(g, m, req)
	case stateCompletingRebalance:
		if m.sameProtocols(req.Protocols) {
			c.touchSession(g, m)
			return g.joinResponse(req.Version, m), nil
		}
		return nil, c.updateMemberAndRebalance(g, m, req)
	case stateStable:
		// As Kafka: a follower rejoining unchanged gets the current
		// generation; the leader rejoining, or changed metadata,
		// rebalances.
		if m.id != g.leader && m.sameProtocols(req.Protocols) {
			c.touchSession(g, m)
			return g.joinResponse(req.Version, m), nil
		}
		return nil, c.updateMemberAndRebalance(g, m, req)
	default:
		return joinError(req.Version, req.MemberID, kerr.UnknownMemberID.Code), nil
	}
}

// replaceStaticMember is KIP-345: a known instance joining with no member
// ID takes a new member ID; the old one is fenced. In a Stable group with
// unchanged protocols there is no rebalance: the new member keeps the old
// assignment, made durable before the member is answered.
func (c *Coordinator) replaceStaticMember(g *group, old *member, req *kmsg.JoinGroupRequest, client clientInfo) (*kmsg.JoinGroupResponse, chan *kmsg.JoinGroupResponse) {
	old.answerJoin(joinError(old.joinVersion, old.id, kerr.FencedInstanceID.Code))
	old.answerSync(syncError(old.syncVersion, kerr.FencedInstanceID.Code))
	old.stopSession()

	m := newMember(newMemberID(client.id, req.InstanceID), req, client)
	m.joinOrder = old.joinOrder
	m.assignment = old.assignment
	delete(g.members, old.id)
	g.members[m.id] = m
	g.static[*m.instanceID] = m.id
	if g.leader == old.id {
		g.leader = m.id
	}
	if g.awaitingSync[old.id] {
		delete(g.awaitingSync, old.id)
		g.awaitingSync[m.id] = true
	}

	wait := make(chan *kmsg.JoinGroupResponse, 1)
	m.joinReply, m.joinVersion = wait, req.Version
	c.touchSession(g, m)
	if g.state != stateStable || !old.sameProtocols(req.Protocols) {
		c.rebalanceAfterJoin(g)
		return nil, wait
	}

	gen := g.generation
	_, durable, err := c.cfg.Journal.Append([]Record{groupMetadataRecord(g, nil)})
	if err != nil {
		c.log.Error(err, "appending static member replacement", "group", g.id)
		m.answerJoin(joinError(req.Version, m.id, kerr.NotCoordinator.Code))
		return nil, wait
	}
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		err := durable(c.ctx)
		c.mu.Lock()
		defer c.mu.Unlock()
		// A rebalance since has answered (or will answer) the join.
		if !c.current(g) || g.members[m.id] != m || m.joinReply != wait || g.generation != gen || g.state != stateStable {
			return
		}
		if err != nil {
			c.log.Error(err, "writing static member replacement", "group", g.id)
			m.answerJoin(joinError(req.Version, m.id, kerr.NotCoordinator.Code))
			return
		}
		m.answerJoin(g.joinResponse(req.Version, m))
		c.touchSession(g, m)
	}()
	return nil, wait
}

func newMember(id string, req *kmsg.JoinGroupRequest, client clientInfo) *member {
	m := &member{
		id:         id,
		instanceID: req.InstanceID,
		clientID:   client.id,
		clientHost: client.host,
	}
	m.setJoin(req)
	return m
}

// setJoin takes the timeouts and protocols of a join.
func (m *member) setJoin(req *kmsg.JoinGroupRequest) {
	m.sessionTimeout = millis(req.SessionTimeoutMillis)
	m.rebalanceTimeout = millis(req.RebalanceTimeoutMillis)
	if req.Version == 0 || req.RebalanceTimeoutMillis <= 0 {
		m.rebalanceTimeout = m.sessionTimeout // v0 had one timeout
	}
	// Copied: decoded requests' byte fields alias the connection's buffer.
	m.protocols = make([]kmsg.JoinGroupRequestProtocol, len(req.Protocols))
	for i, p := range req.Protocols {
		m.protocols[i] = kmsg.JoinGroupRequestProtocol{Name: p.Name, Metadata: bytes.Clone(p.Metadata)}
	}
}

func newMemberID(clientID string, instanceID *string) string {
	prefix := clientID
	if instanceID != nil {
		prefix = *instanceID // as Kafka, for static members
	}
	return prefix + "-" + uuid.NewString()
}

func (c *Coordinator) addMemberAndRebalance(g *group, m *member, protocolType string) chan *kmsg.JoinGroupResponse {
	wait := make(chan *kmsg.JoinGroupResponse, 1)
	if len(g.members) == 0 {
		g.protocolType = protocolType // the first member sets the group's type
	}
	g.addMember(m)
	m.joinReply = wait
	if g.initialDelay {
		g.newMemberAdded = true
	}
	c.touchSession(g, m)
	c.rebalanceAfterJoin(g)
	return wait
}

func (c *Coordinator) updateMemberAndRebalance(g *group, m *member, req *kmsg.JoinGroupRequest) chan *kmsg.JoinGroupResponse {
	// A second join of a member still waiting replaces the first.
	m.answerJoin(joinError(m.joinVersion, m.id, kerr.RebalanceInProgress.Code))
	m.setJoin(req)
	wait := make(chan *kmsg.JoinGroupResponse, 1)
	m.joinReply, m.joinVersion = wait, req.Version
	c.touchSession(g, m)
	c.rebalanceAfterJoin(g)
	return wait
}

// rebalanceAfterJoin starts a rebalance, or completes the running one if
// this was the last member it waited for.
func (c *Coordinator) rebalanceAfterJoin(g *group) {
	if g.state == statePreparingRebalance {
		c.tryCompleteJoin(g)
		return
	}
	c.prepareRebalance(g)
}

// prepareRebalance moves g to PreparingRebalance: waiting syncs of the
// generation being abandoned are answered REBALANCE_IN_PROGRESS, and the
// join phase gets its deadline.
func (c *Coordinator) prepareRebalance(g *group) {
	if g.state == stateCompletingRebalance {
		for _, m := range g.members {
			m.assignment = nil
			m.answerSync(syncError(m.syncVersion, kerr.RebalanceInProgress.Code))
		}
	}
	g.stopRebalanceTimers()
	g.awaitingSync = nil
	g.syncWriting = false
	wasEmpty := g.state == stateEmpty
	g.setState(statePreparingRebalance, c.clock.Now())

	timeout := g.maxRebalanceTimeout()
	if wasEmpty && c.cfg.InitialRebalanceDelay > 0 {
		// KIP-134: wait for more members before the first generation,
		// longer while they keep coming, up to the rebalance timeout.
		g.initialDelay = true
		g.newMemberAdded = false
		delay := c.cfg.InitialRebalanceDelay
		c.armInitialDelay(g, delay, max(timeout-delay, 0))
		return
	}
	g.initialDelay = false
	token := g.rebalanceToken
	g.rebalanceTimer = c.clock.AfterFunc(timeout, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.current(g) && g.rebalanceToken == token {
			c.completeJoin(g)
		}
	})
	c.tryCompleteJoin(g)
}

func (c *Coordinator) armInitialDelay(g *group, delay, remaining time.Duration) {
	token := g.rebalanceToken
	g.rebalanceTimer = c.clock.AfterFunc(delay, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if !c.current(g) || g.rebalanceToken != token {
			return
		}
		if g.newMemberAdded && remaining > 0 {
			g.newMemberAdded = false
			next := min(c.cfg.InitialRebalanceDelay, remaining)
			c.armInitialDelay(g, next, remaining-next)
			return
		}
		g.initialDelay = false
		c.completeJoin(g)
	})
}

// tryCompleteJoin completes the join phase once every member (and every
// KIP-394 pending member) has joined.
func (c *Coordinator) tryCompleteJoin(g *group) {
	if g.state == statePreparingRebalance && !g.initialDelay && g.allJoined() {
		c.completeJoin(g)
	}
}

// completeJoin ends the join phase: members that did not rejoin are
// removed, the generation advances, and every joined member is answered
// (the leader with the members' metadata). A group left with no members
// goes Empty and is persisted.
func (c *Coordinator) completeJoin(g *group) {
	if g.state != statePreparingRebalance {
		return
	}
	g.stopRebalanceTimers()
	g.initialDelay = false
	for _, m := range g.membersInOrder() {
		if m.joinReply == nil {
			c.removeMember(g, m)
		}
	}
	g.generation++
	if g.generation < 0 {
		g.generation = 1
	}
	now := c.clock.Now()
	if len(g.members) == 0 {
		g.protocol, g.leader = "", ""
		g.setState(stateEmpty, now)
		c.appendInBackground([]Record{groupMetadataRecord(g, nil)}, "empty group")
		return
	}
	g.protocol = g.selectProtocol()
	ms := g.membersInOrder()
	if g.members[g.leader] == nil {
		g.leader = ms[0].id
	}
	g.setState(stateCompletingRebalance, now)
	g.awaitingSync = make(map[string]bool, len(ms))
	for _, m := range ms {
		g.awaitingSync[m.id] = true
		m.answerJoin(g.joinResponse(m.joinVersion, m))
		c.touchSession(g, m)
	}
	c.armPendingSync(g, g.maxRebalanceTimeout())
}

// joinResponse is the answer for a member of the current generation.
func (g *group) joinResponse(version int16, m *member) *kmsg.JoinGroupResponse {
	resp := kmsg.NewPtrJoinGroupResponse()
	resp.Version = version
	resp.Generation = g.generation
	resp.ProtocolType = kmsg.StringPtr(g.protocolType)
	resp.Protocol = kmsg.StringPtr(g.protocol)
	resp.LeaderID = g.leader
	resp.MemberID = m.id
	if m.id == g.leader {
		for _, gm := range g.membersInOrder() {
			rm := kmsg.NewJoinGroupResponseMember()
			rm.MemberID = gm.id
			rm.InstanceID = gm.instanceID
			rm.ProtocolMetadata = gm.metadataFor(g.protocol)
			resp.Members = append(resp.Members, rm)
		}
	}
	return resp
}

func joinError(version int16, memberID string, code int16) *kmsg.JoinGroupResponse {
	resp := kmsg.NewPtrJoinGroupResponse()
	resp.Version = version
	resp.MemberID = memberID
	resp.ErrorCode = code
	if version < 7 {
		resp.Protocol = kmsg.StringPtr("") // not nullable before v7
	}
	return resp
}

func millis(ms int32) time.Duration { return time.Duration(ms) * time.Millisecond }

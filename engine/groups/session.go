package groups

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// touchSession (re)starts a member's session timer: any activity of the
// member keeps it alive for another session timeout.
func (c *Coordinator) touchSession(g *group, m *member) {
	if !c.started {
		return // loading: Start arms the timers
	}
	m.stopSession()
	token := m.sessionToken
	m.session = c.clock.AfterFunc(m.sessionTimeout, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if !c.current(g) || g.members[m.id] != m || m.sessionToken != token {
			return
		}
		// As Kafka, a member waiting for its join or sync answer is
		// alive: the rebalance timeouts bound that wait.
		if m.joinReply != nil || m.syncReply != nil {
			c.touchSession(g, m)
			return
		}
		c.log.V(1).Info("member session expired", "group", g.id, "member", m.id)
		c.removeMember(g, m)
		c.afterMemberRemoved(g)
	})
}

// addPending remembers a KIP-394 member ID for one session timeout; the
// running rebalance waits for it to join.
func (c *Coordinator) addPending(g *group, id string, session time.Duration) {
	var t Timer
	if c.started {
		t = c.clock.AfterFunc(session, func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			if !c.current(g) {
				return
			}
			if _, ok := g.pending[id]; ok {
				delete(g.pending, id)
				c.tryCompleteJoin(g)
			}
		})
	}
	g.pending[id] = t
}

// removeMember takes m out of g without starting a rebalance; a request it
// still waits on is answered UNKNOWN_MEMBER_ID.
func (c *Coordinator) removeMember(g *group, m *member) {
	m.stopSession()
	m.answerJoin(joinError(m.joinVersion, m.id, kerr.UnknownMemberID.Code))
	m.answerSync(syncError(m.syncVersion, kerr.UnknownMemberID.Code))
	delete(g.members, m.id)
	delete(g.awaitingSync, m.id)
	if m.instanceID != nil && g.static[*m.instanceID] == m.id {
		delete(g.static, *m.instanceID)
	}
	if g.leader == m.id {
		g.leader = ""
		if ms := g.membersInOrder(); len(ms) > 0 {
			g.leader = ms[0].id
		}
	}
}

// afterMemberRemoved is Kafka's reaction to a member leaving or failing.
func (c *Coordinator) afterMemberRemoved(g *group) {
	switch g.state {
	case stateStable, stateCompletingRebalance:
		c.prepareRebalance(g)
	case statePreparingRebalance:
		c.tryCompleteJoin(g)
	}
}

// Heartbeat keeps a member's session alive and tells it whether a
// rebalance is running.
func (c *Coordinator) Heartbeat(req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	c.mu.Lock()
	defer c.mu.Unlock()
	resp.ErrorCode = c.heartbeat(req)
	return resp
}

func (c *Coordinator) heartbeat(req *kmsg.HeartbeatRequest) int16 {
	if c.closed {
		return kerr.NotCoordinator.Code
	}
	g := c.groups[req.Group]
	if g == nil {
		return kerr.UnknownMemberID.Code
	}
	if code := g.checkInstance(req.InstanceID, req.MemberID); code != 0 {
		return code
	}
	m := g.members[req.MemberID]
	if m == nil {
		return kerr.UnknownMemberID.Code
	}
	if req.Generation != g.generation {
		return kerr.IllegalGeneration.Code
	}
	switch g.state {
	case statePreparingRebalance, stateCompletingRebalance:
		c.touchSession(g, m)
		return kerr.RebalanceInProgress.Code
	case stateStable:
		c.touchSession(g, m)
		return 0
	default:
		return kerr.UnknownMemberID.Code
	}
}

// LeaveGroup removes members (v0–2: one MemberID; v3+: a batch by member
// and/or instance ID, with an error per member) and rebalances.
func (c *Coordinator) LeaveGroup(ctx context.Context, req *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	leaving := req.Members
	if req.Version < 3 {
		leaving = []kmsg.LeaveGroupRequestMember{{MemberID: req.MemberID}}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		resp.ErrorCode = kerr.NotCoordinator.Code
		return resp
	}
	g := c.groups[req.Group]
	for _, lm := range leaving {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID = lm.MemberID, lm.InstanceID
		rm.ErrorCode = c.leave(g, &rm)
		resp.Members = append(resp.Members, rm)
	}
	if req.Version < 3 {
		resp.ErrorCode = resp.Members[0].ErrorCode
		resp.Members = nil
	}
	return resp
}

// leave removes one member; rm.MemberID is resolved from the instance ID.
func (c *Coordinator) leave(g *group, rm *kmsg.LeaveGroupResponseMember) int16 {
	if g == nil {
		return kerr.UnknownMemberID.Code
	}
	if rm.InstanceID != nil {
		id, ok := g.static[*rm.InstanceID]
		if !ok {
			return kerr.UnknownMemberID.Code
		}
		if rm.MemberID != "" && rm.MemberID != id {
			return kerr.FencedInstanceID.Code
		}
		rm.MemberID = id
	}
	if _, ok := g.pending[rm.MemberID]; ok {
		g.removePending(rm.MemberID)
		c.tryCompleteJoin(g)
		return 0
	}
	m := g.members[rm.MemberID]
	if m == nil {
		return kerr.UnknownMemberID.Code
	}
	c.removeMember(g, m)
	c.afterMemberRemoved(g)
	return 0
}

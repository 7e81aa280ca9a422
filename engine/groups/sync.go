package groups

import (
	"bytes"
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SyncGroup hands a member its assignment. In CompletingRebalance every
// member waits until the leader's assignment is durable.
func (c *Coordinator) SyncGroup(ctx context.Context, req *kmsg.SyncGroupRequest) *kmsg.SyncGroupResponse {
	c.mu.Lock()
	resp, wait := c.sync(req)
	c.mu.Unlock()
	if wait == nil {
		return resp
	}
	select {
	case resp := <-wait:
		return resp
	case <-ctx.Done():
		return syncError(req.Version, kerr.NotCoordinator.Code)
	}
}

func (c *Coordinator) sync(req *kmsg.SyncGroupRequest) (*kmsg.SyncGroupResponse, chan *kmsg.SyncGroupResponse) {
	if c.closed {
		return syncError(req.Version, kerr.NotCoordinator.Code), nil
	}
	g := c.groups[req.Group]
	if g == nil {
		return syncError(req.Version, kerr.UnknownMemberID.Code), nil
	}
	if code := g.checkInstance(req.InstanceID, req.MemberID); code != 0 {
		return syncError(req.Version, code), nil
	}
	m := g.members[req.MemberID]
	switch {
	case m == nil:
		return syncError(req.Version, kerr.UnknownMemberID.Code), nil
	case req.Generation != g.generation:
		return syncError(req.Version, kerr.IllegalGeneration.Code), nil
	case req.ProtocolType != nil && *req.ProtocolType != g.protocolType,
		req.Protocol != nil && *req.Protocol != g.protocol:
		return syncError(req.Version, kerr.InconsistentGroupProtocol.Code), nil
	}
	c.touchSession(g, m)
	switch g.state {
	case statePreparingRebalance:
		return syncError(req.Version, kerr.RebalanceInProgress.Code), nil
	case stateStable:
		delete(g.awaitingSync, m.id)
		return g.syncResponse(req.Version, m.assignment), nil
	case stateCompletingRebalance:
		delete(g.awaitingSync, m.id)
		m.answerSync(syncError(m.syncVersion, kerr.RebalanceInProgress.Code)) // a repeated sync replaces the first
		wait := make(chan *kmsg.SyncGroupResponse, 1)
		m.syncReply, m.syncVersion = wait, req.Version
		if m.id == g.leader && !g.syncWriting {
			c.writeAssignment(g, req.GroupAssignment)
		}
		return nil, wait
	default:
		return syncError(req.Version, kerr.UnknownMemberID.Code), nil
	}
}

// writeAssignment appends the generation's group metadata with the
// leader's assignment; once it is durable (and the generation still
// current) the group goes Stable and every waiting sync is answered.
func (c *Coordinator) writeAssignment(g *group, leaderAssignment []kmsg.SyncGroupRequestGroupAssignment) {
	assignments := make(map[string][]byte, len(g.members))
	for _, a := range leaderAssignment {
		if g.members[a.MemberID] != nil {
			assignments[a.MemberID] = bytes.Clone(a.MemberAssignment) // not the request's buffer
		}
	}
	for id := range g.members {
		assignments[id] = g.assignmentOrEmpty(assignments[id])
	}
	gen := g.generation
	_, durable, err := c.cfg.Journal.Append([]Record{groupMetadataRecord(g, assignments)})
	if err != nil {
		c.failSync(g, err)
		return
	}
	g.syncWriting = true
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		err := durable(c.ctx)
		c.mu.Lock()
		defer c.mu.Unlock()
		if !c.current(g) || g.generation != gen || g.state != stateCompletingRebalance {
			return // a rebalance since has answered the syncs
		}
		if err != nil {
			c.failSync(g, err)
			return
		}
		g.syncWriting = false
		g.setState(stateStable, c.clock.Now())
		for _, m := range g.members {
			m.assignment = assignments[m.id]
			m.answerSync(g.syncResponse(m.syncVersion, m.assignment))
		}
	}()
}

// failSync is Kafka's answer to a failed assignment write: waiting syncs
// get NOT_COORDINATOR and the group rebalances.
func (c *Coordinator) failSync(g *group, err error) {
	c.log.Error(err, "writing group assignment", "group", g.id, "generation", g.generation)
	for _, m := range g.members {
		m.answerSync(syncError(m.syncVersion, kerr.NotCoordinator.Code))
	}
	c.prepareRebalance(g)
}

// armPendingSync removes, after the rebalance timeout, the members that
// got the generation's join answer but never synced, and rebalances.
func (c *Coordinator) armPendingSync(g *group, timeout time.Duration) {
	token, gen := g.rebalanceToken, g.generation
	g.syncTimer = c.clock.AfterFunc(timeout, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if !c.current(g) || g.rebalanceToken != token || g.generation != gen || len(g.awaitingSync) == 0 {
			return
		}
		if g.state != stateCompletingRebalance && g.state != stateStable {
			return
		}
		for id := range g.awaitingSync {
			if m := g.members[id]; m != nil {
				c.removeMember(g, m)
			}
		}
		g.awaitingSync = nil
		c.prepareRebalance(g)
	})
}

// emptyConsumerAssignment is a ConsumerMemberAssignment with no
// partitions: followers of a "consumer" group always get a decodable
// assignment, even one the leader left out.
var emptyConsumerAssignment = func() []byte {
	a := kmsg.NewConsumerMemberAssignment()
	return a.AppendTo(nil)
}()

func (g *group) assignmentOrEmpty(a []byte) []byte {
	if len(a) > 0 {
		return a
	}
	if g.protocolType == "consumer" {
		return emptyConsumerAssignment
	}
	return []byte{}
}

func (g *group) syncResponse(version int16, assignment []byte) *kmsg.SyncGroupResponse {
	resp := kmsg.NewPtrSyncGroupResponse()
	resp.Version = version
	resp.ProtocolType = kmsg.StringPtr(g.protocolType)
	resp.Protocol = kmsg.StringPtr(g.protocol)
	resp.MemberAssignment = assignment
	return resp
}

func syncError(version int16, code int16) *kmsg.SyncGroupResponse {
	resp := kmsg.NewPtrSyncGroupResponse()
	resp.Version = version
	resp.ErrorCode = code
	return resp
}

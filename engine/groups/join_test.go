package groups

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestJoinTwoMembersSyncAssignments(t *testing.T) {
	h := newHarness(t)
	// v3: member IDs are assigned directly.
	ja := h.joinAsync(joinReq(3, "g", ""))
	h.waitJoins("g", 1)
	jb := h.joinAsync(joinReq(3, "g", ""))
	h.waitJoins("g", 2)
	if got := h.c.stateOf("g"); got != "PreparingRebalance" {
		t.Fatalf("state %s during the initial delay", got)
	}
	h.clock.Advance(3 * time.Second) // a member joined during the delay: another one
	if j, _ := h.c.waiting("g"); j != 2 {
		t.Fatal("initial delay did not extend for the second member")
	}
	h.clock.Advance(3 * time.Second)
	ra, rb := recv(t, ja), recv(t, jb)
	if ra.ErrorCode != 0 || rb.ErrorCode != 0 {
		t.Fatalf("join errors %d %d", ra.ErrorCode, rb.ErrorCode)
	}
	if ra.Generation != 1 || rb.Generation != 1 || ra.LeaderID != rb.LeaderID || *ra.Protocol != "range" {
		t.Fatalf("generations %d %d, leaders %q %q", ra.Generation, rb.Generation, ra.LeaderID, rb.LeaderID)
	}
	leader, follower := ra, rb
	if rb.LeaderID == rb.MemberID {
		leader, follower = rb, ra
	}
	if len(leader.Members) != 2 || len(follower.Members) != 0 {
		t.Fatalf("leader got %d members, follower %d", len(leader.Members), len(follower.Members))
	}
	if h.c.stateOf("g") != "CompletingRebalance" {
		t.Fatal("not CompletingRebalance after join")
	}

	sf := h.syncAsync(syncReq(3, "g", follower.MemberID, 1, nil))
	h.waitSyncs("g", 1)
	sl := h.syncAsync(syncReq(3, "g", leader.MemberID, 1, map[string]string{
		leader.MemberID: "for-leader", follower.MemberID: "for-follower",
	}))
	if got := string(recv(t, sl).MemberAssignment); got != "for-leader" {
		t.Fatalf("leader assignment %q", got)
	}
	if got := string(recv(t, sf).MemberAssignment); got != "for-follower" {
		t.Fatalf("follower assignment %q", got)
	}
	if h.journal.batchCount() != 1 {
		t.Fatalf("%d journal batches, want the one group metadata record", h.journal.batchCount())
	}
	d := h.c.DescribeGroup("g")
	if d.State != "Stable" || d.Protocol != "range" || len(d.Members) != 2 || d.Members[0].ClientID != "client" {
		t.Fatalf("describe: %+v", d)
	}
}

func TestJoinMemberIDRequired(t *testing.T) {
	h := newHarness(t)
	resp := h.c.JoinGroup(context.Background(), joinReq(4, "g", ""))
	if resp.ErrorCode != kerr.MemberIDRequired.Code || resp.MemberID == "" {
		t.Fatalf("first v4 join: %d %q", resp.ErrorCode, resp.MemberID)
	}
	j := h.joinAsync(joinReq(4, "g", resp.MemberID))
	h.waitJoins("g", 1)
	h.clock.Advance(3 * time.Second)
	r := recv(t, j)
	if r.ErrorCode != 0 || r.MemberID != resp.MemberID || r.LeaderID != r.MemberID {
		t.Fatalf("rejoin: %+v", r)
	}

	// A pending member ID is forgotten after a session timeout.
	other := h.c.JoinGroup(context.Background(), joinReq(4, "g2", ""))
	h.clock.Advance(11 * time.Second)
	late := h.c.JoinGroup(context.Background(), joinReq(4, "g2", other.MemberID))
	if late.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("expired pending member: %d", late.ErrorCode)
	}
}

func TestJoinValidation(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxGroupSize = 1 })
	h.c.JoinGroup(context.Background(), joinReq(5, "g", "")) // pending: the group is full
	full := h.c.JoinGroup(context.Background(), joinReq(5, "g", ""))
	if full.ErrorCode != kerr.GroupMaxSizeReached.Code {
		t.Fatalf("second pending member in a group of max 1: %d", full.ErrorCode)
	}
	tests := []struct {
		name string
		req  *kmsg.JoinGroupRequest
		want int16
	}{
		{"empty group", joinReq(5, "", ""), kerr.InvalidGroupID.Code},
		{"session too short", func() *kmsg.JoinGroupRequest { r := joinReq(5, "x", ""); r.SessionTimeoutMillis = 10; return r }(), kerr.InvalidSessionTimeout.Code},
		{"session too long", func() *kmsg.JoinGroupRequest { r := joinReq(5, "x", ""); r.SessionTimeoutMillis = 1 << 30; return r }(), kerr.InvalidSessionTimeout.Code},
		{"no protocols", joinReq(5, "x", "", withProtocols()), kerr.InconsistentGroupProtocol.Code},
		{"unknown member", joinReq(5, "x", "nobody"), kerr.UnknownMemberID.Code},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := h.c.JoinGroup(context.Background(), tt.req).ErrorCode; got != tt.want {
				t.Fatalf("error %d, want %d", got, tt.want)
			}
		})
	}
}

func TestJoinInconsistentProtocol(t *testing.T) {
	h := newHarness(t)
	h.stableGroup("g", "")
	other := joinReq(3, "g", "", withProtocols(kmsg.JoinGroupRequestProtocol{Name: "sticky"}))
	if got := h.c.JoinGroup(context.Background(), other).ErrorCode; got != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("no common protocol: %d", got)
	}
	wrongType := joinReq(3, "g", "")
	wrongType.ProtocolType = "connect"
	if got := h.c.JoinGroup(context.Background(), wrongType).ErrorCode; got != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("other protocol type: %d", got)
	}
}

func TestProtocolVote(t *testing.T) {
	g := newGroup("g", time.Time{})
	add := func(id string, names ...string) {
		m := &member{id: id}
		for _, n := range names {
			m.protocols = append(m.protocols, kmsg.JoinGroupRequestProtocol{Name: n})
		}
		g.addMember(m)
	}
	add("a", "sticky", "range", "rr")
	add("b", "range", "sticky")
	add("c", "range", "rr", "sticky")
	// Candidates: sticky, range (rr is not supported by b). Votes:
	// a→sticky, b→range, c→range.
	if got := g.selectProtocol(); got != "range" {
		t.Fatalf("selected %q, want range", got)
	}
}

func TestRebalanceOnThirdJoin(t *testing.T) {
	h := newHarness(t)
	a, b := h.stableGroup("g", "")
	c := h.memberID("g")
	jc := h.joinAsync(joinReq(5, "g", c))
	h.waitJoins("g", 1)
	if h.c.stateOf("g") != "PreparingRebalance" {
		t.Fatal("third member did not start a rebalance")
	}
	for _, id := range []string{a, b} {
		if got := h.c.Heartbeat(heartbeatReq("g", id, 1)).ErrorCode; got != kerr.RebalanceInProgress.Code {
			t.Fatalf("heartbeat during rebalance: %d", got)
		}
	}
	ja := h.joinAsync(joinReq(5, "g", a))
	jb := h.joinAsync(joinReq(5, "g", b))
	// Not an initial delay: the join completes once all three rejoined.
	ra, rb, rc := recv(t, ja), recv(t, jb), recv(t, jc)
	if ra.Generation != 2 || rb.Generation != 2 || rc.Generation != 2 || ra.LeaderID != a || len(ra.Members) != 3 {
		t.Fatalf("generations %d %d %d, leader %q, %d members", ra.Generation, rb.Generation, rc.Generation, ra.LeaderID, len(ra.Members))
	}
}

func TestRebalanceTimeoutRemovesMembersThatDoNotRejoin(t *testing.T) {
	h := newHarness(t)
	a, b := h.stableGroup("g", "")
	ja := h.joinAsync(joinReq(5, "g", a)) // the leader rejoining rebalances
	h.waitJoins("g", 1)
	h.clock.Advance(60 * time.Second)
	ra := recv(t, ja)
	if ra.Generation != 2 || len(ra.Members) != 1 {
		t.Fatalf("gen %d with %d members", ra.Generation, len(ra.Members))
	}
	if got := h.c.Heartbeat(heartbeatReq("g", b, 1)).ErrorCode; got != kerr.UnknownMemberID.Code {
		t.Fatalf("removed member heartbeat: %d", got)
	}
}

func TestStableFollowerRejoinKeepsGeneration(t *testing.T) {
	h := newHarness(t)
	_, b := h.stableGroup("g", "")
	r := h.c.JoinGroup(context.Background(), joinReq(5, "g", b))
	if r.ErrorCode != 0 || r.Generation != 1 || h.c.stateOf("g") != "Stable" {
		t.Fatalf("unchanged follower rejoin: %d gen %d state %s", r.ErrorCode, r.Generation, h.c.stateOf("g"))
	}
}

func TestCloseAnswersWaitingJoins(t *testing.T) {
	h := newHarness(t)
	j := h.joinAsync(joinReq(3, "g", ""))
	h.waitJoins("g", 1)
	h.c.Close()
	if got := recv(t, j).ErrorCode; got != kerr.NotCoordinator.Code {
		t.Fatalf("join after close: %d", got)
	}
	if got := h.c.JoinGroup(context.Background(), joinReq(3, "g", "")).ErrorCode; got != kerr.NotCoordinator.Code {
		t.Fatalf("new join after close: %d", got)
	}
}

func TestCancelledJoinDoesNotStickGroup(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *kmsg.JoinGroupResponse, 1)
	go func() { done <- h.c.JoinGroup(ctx, joinReq(3, "g", "")) }()
	h.waitJoins("g", 1)
	cancel()
	if got := recv(t, done).ErrorCode; got != kerr.NotCoordinator.Code {
		t.Fatalf("cancelled join: %d", got)
	}
	// The member stays (as Kafka); the rebalance completes and, never
	// syncing, it is removed after the rebalance timeout.
	h.clock.Advance(3 * time.Second)
	if h.c.stateOf("g") != "CompletingRebalance" {
		t.Fatalf("state %s", h.c.stateOf("g"))
	}
	h.clock.Advance(60 * time.Second)
	if h.c.stateOf("g") != "Empty" {
		t.Fatalf("state %s after the pending-sync timeout", h.c.stateOf("g"))
	}
}

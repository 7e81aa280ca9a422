package groups

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestSessionExpiryRemovesMember(t *testing.T) {
	h := newHarness(t)
	a, b := h.stableGroup("g", "")
	// A heartbeats, B does not: after B's 10s session it is gone.
	for i := 0; i < 3; i++ {
		h.clock.Advance(4 * time.Second)
		if got := h.c.Heartbeat(heartbeatReq("g", a, 1)).ErrorCode; got != 0 && got != kerr.RebalanceInProgress.Code {
			t.Fatalf("heartbeat: %d", got)
		}
	}
	if h.c.stateOf("g") != "PreparingRebalance" {
		t.Fatalf("state %s after B's session expired", h.c.stateOf("g"))
	}
	ra := recv(t, h.joinAsync(joinReq(5, "g", a)))
	if ra.Generation != 2 || len(ra.Members) != 1 {
		t.Fatalf("gen %d, %d members", ra.Generation, len(ra.Members))
	}
	if got := h.c.Heartbeat(heartbeatReq("g", b, 1)).ErrorCode; got != kerr.UnknownMemberID.Code {
		t.Fatalf("expired member heartbeat: %d", got)
	}
}

func TestLastMemberExpiryEmptiesAndPersists(t *testing.T) {
	h := newHarness(t)
	h.stableGroup("g", "")
	before := h.journal.batchCount()
	h.clock.Advance(11 * time.Second)
	if h.c.stateOf("g") != "Empty" {
		t.Fatalf("state %s", h.c.stateOf("g"))
	}
	recs := h.journal.records()
	if h.journal.batchCount() != before+1 {
		t.Fatal("empty group not persisted")
	}
	var v kmsg.GroupMetadataValue
	if err := v.ReadFrom(recs[len(recs)-1].Value); err != nil || v.Generation != 2 || len(v.Members) != 0 {
		t.Fatalf("empty group record: gen %d members %d err %v", v.Generation, len(v.Members), err)
	}
}

func TestHeartbeatErrors(t *testing.T) {
	h := newHarness(t)
	a, _ := h.stableGroup("g", "ia")
	tests := []struct {
		name string
		req  *kmsg.HeartbeatRequest
		want int16
	}{
		{"ok", heartbeatReq("g", a, 1), 0},
		{"unknown group", heartbeatReq("nope", a, 1), kerr.UnknownMemberID.Code},
		{"unknown member", heartbeatReq("g", "nobody", 1), kerr.UnknownMemberID.Code},
		{"old generation", heartbeatReq("g", a, 0), kerr.IllegalGeneration.Code},
		{"fenced instance", func() *kmsg.HeartbeatRequest {
			r := heartbeatReq("g", "zombie", 1)
			r.InstanceID = kmsg.StringPtr("ia")
			return r
		}(), kerr.FencedInstanceID.Code},
		{"unknown instance", func() *kmsg.HeartbeatRequest {
			r := heartbeatReq("g", a, 1)
			r.InstanceID = kmsg.StringPtr("other")
			return r
		}(), kerr.UnknownMemberID.Code},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := h.c.Heartbeat(tt.req).ErrorCode; got != tt.want {
				t.Fatalf("error %d, want %d", got, tt.want)
			}
		})
	}
}

func TestHeartbeatDuringCompletingRebalance(t *testing.T) {
	h := newHarness(t)
	j := h.joinAsync(joinReq(3, "g", ""))
	h.waitJoins("g", 1)
	h.clock.Advance(3 * time.Second)
	r := recv(t, j)
	if got := h.c.Heartbeat(heartbeatReq("g", r.MemberID, r.Generation)).ErrorCode; got != kerr.RebalanceInProgress.Code {
		t.Fatalf("heartbeat in CompletingRebalance: %d", got)
	}
}

func TestLeaveGroup(t *testing.T) {
	t.Run("v1 single", func(t *testing.T) {
		h := newHarness(t)
		a, b := h.stableGroup("g", "")
		req := kmsg.NewPtrLeaveGroupRequest()
		req.Version, req.Group, req.MemberID = 1, "g", b
		if got := h.c.LeaveGroup(context.Background(), req).ErrorCode; got != 0 {
			t.Fatalf("leave: %d", got)
		}
		if h.c.stateOf("g") != "PreparingRebalance" {
			t.Fatalf("state %s", h.c.stateOf("g"))
		}
		req.MemberID = "nobody"
		if got := h.c.LeaveGroup(context.Background(), req).ErrorCode; got != kerr.UnknownMemberID.Code {
			t.Fatalf("unknown leave: %d", got)
		}
		req.MemberID = a
		h.c.LeaveGroup(context.Background(), req)
		if h.c.stateOf("g") != "Empty" {
			t.Fatalf("state %s after the last member left", h.c.stateOf("g"))
		}
	})
	t.Run("v3 batch", func(t *testing.T) {
		h := newHarness(t)
		a, b := h.stableGroup("g", "ia")
		req := kmsg.NewPtrLeaveGroupRequest()
		req.Version, req.Group = 5, "g"
		req.Members = []kmsg.LeaveGroupRequestMember{
			{InstanceID: kmsg.StringPtr("ia")},
			{MemberID: b},
			{MemberID: "nobody"},
			{MemberID: "zombie", InstanceID: kmsg.StringPtr("ib")},
		}
		resp := h.c.LeaveGroup(context.Background(), req)
		want := []int16{0, 0, kerr.UnknownMemberID.Code, kerr.UnknownMemberID.Code}
		for i, m := range resp.Members {
			if m.ErrorCode != want[i] {
				t.Fatalf("member %d: error %d, want %d", i, m.ErrorCode, want[i])
			}
		}
		if resp.Members[0].MemberID != a {
			t.Fatalf("leave by instance answered member %q, want %q", resp.Members[0].MemberID, a)
		}
		if h.c.stateOf("g") != "Empty" {
			t.Fatalf("state %s", h.c.stateOf("g"))
		}
	})
}

func TestStaticMemberReplacement(t *testing.T) {
	h := newHarness(t)
	old, b := h.stableGroup("g", "ia")
	if old == "" {
		t.Fatal("no static member ID")
	}
	batches := h.journal.batchCount()
	// The instance restarts: same protocols, Stable group, no rebalance.
	r := recv(t, h.joinAsync(joinReq(5, "g", "", withInstance("ia"))))
	if r.ErrorCode != 0 || r.MemberID == old || r.Generation != 1 {
		t.Fatalf("replacement join: %d %q gen %d", r.ErrorCode, r.MemberID, r.Generation)
	}
	if h.c.stateOf("g") != "Stable" {
		t.Fatalf("state %s", h.c.stateOf("g"))
	}
	if h.journal.batchCount() != batches+1 {
		t.Fatal("replacement not persisted")
	}
	s := recv(t, h.syncAsync(syncReq(3, "g", r.MemberID, 1, nil)))
	if s.ErrorCode != 0 || string(s.MemberAssignment) != "a" {
		t.Fatalf("new member's sync: %d %q", s.ErrorCode, s.MemberAssignment)
	}

	// The old member ID is fenced everywhere.
	hb := heartbeatReq("g", old, 1)
	hb.InstanceID = kmsg.StringPtr("ia")
	if got := h.c.Heartbeat(hb).ErrorCode; got != kerr.FencedInstanceID.Code {
		t.Fatalf("old heartbeat: %d", got)
	}
	sr := syncReq(3, "g", old, 1, nil)
	sr.InstanceID = kmsg.StringPtr("ia")
	if got := h.c.SyncGroup(context.Background(), sr).ErrorCode; got != kerr.FencedInstanceID.Code {
		t.Fatalf("old sync: %d", got)
	}
	cr := commitReq("g", old, 1, "t1", map[int32]int64{0: 1})
	cr.InstanceID = kmsg.StringPtr("ia")
	if got := commitCodes(h.c.OffsetCommit(context.Background(), cr)); got[0] != kerr.FencedInstanceID.Code {
		t.Fatalf("old commit: %v", got)
	}
	jr := joinReq(5, "g", old, withInstance("ia"))
	if got := h.c.JoinGroup(context.Background(), jr).ErrorCode; got != kerr.FencedInstanceID.Code {
		t.Fatalf("old join: %d", got)
	}
	lr := kmsg.NewPtrLeaveGroupRequest()
	lr.Version, lr.Group = 3, "g"
	lr.Members = []kmsg.LeaveGroupRequestMember{{MemberID: old, InstanceID: kmsg.StringPtr("ia")}}
	if got := h.c.LeaveGroup(context.Background(), lr).Members[0].ErrorCode; got != kerr.FencedInstanceID.Code {
		t.Fatalf("old leave: %d", got)
	}
	// The new member and B carry on in generation 1.
	if got := h.c.Heartbeat(heartbeatReq("g", b, 1)).ErrorCode; got != 0 {
		t.Fatalf("follower heartbeat: %d", got)
	}
}

func TestStaticMemberReplacementWithNewProtocolsRebalances(t *testing.T) {
	h := newHarness(t)
	h.stableGroup("g", "ia")
	meta := kmsg.JoinGroupRequestProtocol{Name: "range", Metadata: consumerMeta("t1", "t2")}
	h.joinAsync(joinReq(5, "g", "", withInstance("ia"), withProtocols(meta)))
	h.waitFor("rebalance", func() bool { return h.c.stateOf("g") == "PreparingRebalance" })
}

func TestStaticMemberSessionExpiry(t *testing.T) {
	h := newHarness(t)
	a, _ := h.stableGroup("g", "ia")
	h.clock.Advance(11 * time.Second)
	if h.c.stateOf("g") != "Empty" {
		t.Fatalf("state %s", h.c.stateOf("g"))
	}
	hb := heartbeatReq("g", a, 1)
	hb.InstanceID = kmsg.StringPtr("ia")
	if got := h.c.Heartbeat(hb).ErrorCode; got != kerr.UnknownMemberID.Code {
		t.Fatalf("expired static member: %d", got)
	}
}

func TestSyncErrors(t *testing.T) {
	h := newHarness(t)
	a, _ := h.stableGroup("g", "")
	tests := []struct {
		name string
		req  *kmsg.SyncGroupRequest
		want int16
	}{
		{"unknown member", syncReq(3, "g", "nobody", 1, nil), kerr.UnknownMemberID.Code},
		{"old generation", syncReq(3, "g", a, 0, nil), kerr.IllegalGeneration.Code},
		{"wrong protocol", func() *kmsg.SyncGroupRequest {
			r := syncReq(5, "g", a, 1, nil)
			r.Protocol = kmsg.StringPtr("sticky")
			return r
		}(), kerr.InconsistentGroupProtocol.Code},
		{"stable", syncReq(5, "g", a, 1, nil), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := h.c.SyncGroup(context.Background(), tt.req).ErrorCode; got != tt.want {
				t.Fatalf("error %d, want %d", got, tt.want)
			}
		})
	}
	// During PreparingRebalance.
	h.joinAsync(joinReq(5, "g", a))
	h.waitJoins("g", 1)
	if got := h.c.SyncGroup(context.Background(), syncReq(3, "g", a, 1, nil)).ErrorCode; got != kerr.RebalanceInProgress.Code {
		t.Fatalf("sync during rebalance: %d", got)
	}
}

func TestSyncJournalFailure(t *testing.T) {
	h := newHarness(t)
	ja := h.joinAsync(joinReq(3, "g", ""))
	h.waitJoins("g", 1)
	jb := h.joinAsync(joinReq(3, "g", ""))
	h.waitJoins("g", 2)
	h.clock.Advance(6 * time.Second)
	ra, rb := recv(t, ja), recv(t, jb)
	leader, follower := ra, rb
	if rb.LeaderID == rb.MemberID {
		leader, follower = rb, ra
	}
	h.journal.mu.Lock()
	h.journal.failWait = errInjected
	h.journal.mu.Unlock()
	sf := h.syncAsync(syncReq(3, "g", follower.MemberID, 1, nil))
	h.waitSyncs("g", 1)
	sl := recv(t, h.syncAsync(syncReq(3, "g", leader.MemberID, 1, map[string]string{leader.MemberID: "x"})))
	if sl.ErrorCode != kerr.NotCoordinator.Code || recv(t, sf).ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("sync with a failed write: %d", sl.ErrorCode)
	}
	if h.c.stateOf("g") != "PreparingRebalance" {
		t.Fatalf("state %s after a failed assignment write", h.c.stateOf("g"))
	}
}

func TestSyncWaitsForDurability(t *testing.T) {
	h := newHarness(t)
	j := h.joinAsync(joinReq(3, "g", ""))
	h.waitJoins("g", 1)
	h.clock.Advance(3 * time.Second)
	r := recv(t, j)
	h.journal.mu.Lock()
	h.journal.hold = true
	h.journal.mu.Unlock()
	s := h.syncAsync(syncReq(3, "g", r.MemberID, 1, map[string]string{r.MemberID: "x"}))
	h.waitFor("append", func() bool { return h.journal.batchCount() == 1 })
	select {
	case <-s:
		t.Fatal("sync answered before its assignment was durable")
	default:
	}
	if h.c.stateOf("g") != "CompletingRebalance" {
		t.Fatal("Stable before durable")
	}
	h.journal.release(0)
	if got := recv(t, s); got.ErrorCode != 0 || string(got.MemberAssignment) != "x" {
		t.Fatalf("sync: %d %q", got.ErrorCode, got.MemberAssignment)
	}
}

func TestSyncMissingMemberGetsEmptyAssignment(t *testing.T) {
	h := newHarness(t)
	ja := h.joinAsync(joinReq(3, "g", ""))
	h.waitJoins("g", 1)
	jb := h.joinAsync(joinReq(3, "g", ""))
	h.waitJoins("g", 2)
	h.clock.Advance(6 * time.Second)
	ra, rb := recv(t, ja), recv(t, jb)
	leader, follower := ra, rb
	if rb.LeaderID == rb.MemberID {
		leader, follower = rb, ra
	}
	sf := h.syncAsync(syncReq(3, "g", follower.MemberID, 1, nil))
	h.waitSyncs("g", 1)
	recv(t, h.syncAsync(syncReq(3, "g", leader.MemberID, 1, map[string]string{leader.MemberID: "x"})))
	got := recv(t, sf)
	var a kmsg.ConsumerMemberAssignment
	if got.ErrorCode != 0 || a.ReadFrom(got.MemberAssignment) != nil || len(a.Topics) != 0 {
		t.Fatalf("missing member: %d %v", got.ErrorCode, got.MemberAssignment)
	}
}

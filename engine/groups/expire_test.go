package groups

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestExpirySimpleCommits(t *testing.T) {
	h := newHarness(t) // retention 1h, checked every 10m
	h.c.OffsetCommit(context.Background(), commitReq("s", "", -1, "t1", map[int32]int64{0: 1}))
	h.clock.Advance(30 * time.Minute)
	h.c.OffsetCommit(context.Background(), commitReq("s", "", -1, "t1", map[int32]int64{1: 2}))
	h.clock.Advance(40 * time.Minute) // p0 is 70m old, p1 40m
	if f := h.fetched("s"); len(f["t1"]) != 1 || f["t1"][1] != 2 {
		t.Fatalf("after 70m: %v", f)
	}
	h.clock.Advance(30 * time.Minute)
	if f := h.fetched("s"); len(f) != 0 {
		t.Fatalf("after 100m: %v", f)
	}
	if got := h.c.DescribeGroup("s").State; got != "Dead" {
		t.Fatalf("group without offsets not removed: %s", got)
	}
	recs := h.journal.records()
	if last := recs[len(recs)-1]; last.Value != nil || string(last.Key) != string(groupMetadataKey("s")) {
		t.Fatal("no group tombstone")
	}
}

func TestExpiryKeepsOffsetsWhileMembers(t *testing.T) {
	h := newHarness(t)
	a, b := h.stableGroup("g", "")
	h.c.OffsetCommit(context.Background(), commitReq("g", a, 1, "t1", map[int32]int64{0: 1}))
	for i := 0; i < 24*60; i++ { // 2 hours of heartbeats
		h.clock.Advance(5 * time.Second)
		h.c.Heartbeat(heartbeatReq("g", a, 1))
		h.c.Heartbeat(heartbeatReq("g", b, 1))
	}
	if f := h.fetched("g"); f["t1"][0] != 1 {
		t.Fatalf("a group with members lost offsets: %v", f)
	}
	// Both leave: the hour counts from going Empty.
	lr := kmsg.NewPtrLeaveGroupRequest()
	lr.Version, lr.Group = 3, "g"
	lr.Members = []kmsg.LeaveGroupRequestMember{{MemberID: a}, {MemberID: b}}
	h.c.LeaveGroup(context.Background(), lr)
	h.clock.Advance(50 * time.Minute)
	if f := h.fetched("g"); f["t1"][0] != 1 {
		t.Fatalf("expired before the retention since Empty: %v", f)
	}
	h.clock.Advance(20 * time.Minute)
	if f := h.fetched("g"); len(f) != 0 {
		t.Fatalf("not expired: %v", f)
	}
	if got := h.c.DescribeGroup("g").State; got != "Dead" {
		t.Fatalf("state %s", got)
	}
}

package groups

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A coordinator rebuilt from the compacted journal of a scenario describes
// the same groups and fetches the same offsets.
func TestReplayRoundTrip(t *testing.T) {
	h := newHarness(t)
	a, b := h.stableGroup("stable", "ia")
	h.c.OffsetCommit(context.Background(), commitReq("stable", a, 1, "t1", map[int32]int64{0: 10, 1: 11}))
	h.c.OffsetCommit(context.Background(), commitReq("stable", b, 1, "t1", map[int32]int64{1: 12}))
	h.c.OffsetCommit(context.Background(), commitReq("simple", "", -1, "t2", map[int32]int64{3: 30}))
	h.c.OffsetCommit(context.Background(), commitReq("deleted", "", -1, "t2", map[int32]int64{0: 1}))
	h.c.DeleteGroup(context.Background(), "deleted")
	h.c.OffsetCommit(context.Background(), commitReq("trimmed", "", -1, "t3", map[int32]int64{0: 1, 1: 2}))
	h.c.OffsetDelete(context.Background(), offsetDeleteReq("trimmed", "t3", 0))
	// A group whose members left: Empty, at generation 2.
	x, y := h.stableGroup("left", "")
	lr := kmsg.NewPtrLeaveGroupRequest()
	lr.Version, lr.Group = 3, "left"
	lr.Members = []kmsg.LeaveGroupRequestMember{{MemberID: x}, {MemberID: y}}
	h.c.LeaveGroup(context.Background(), lr)
	h.c.OffsetCommit(context.Background(), commitReq("left", "", -1, "t4", map[int32]int64{0: 4}))

	// Compare with a clock at the same time, since states carry timestamps.
	h.c.bg.Wait()
	replayed := New(Config{Journal: &fakeJournal{}, Clock: h.clock})
	for _, r := range h.journal.compacted() {
		if err := replayed.Replay(r); err != nil {
			t.Fatal(err)
		}
	}
	replayed.Start()
	defer replayed.Close()

	groups := []string{"stable", "simple", "deleted", "trimmed", "left"}
	for _, g := range groups {
		if want, got := h.c.DescribeGroup(g), replayed.DescribeGroup(g); !reflect.DeepEqual(want, got) {
			t.Errorf("group %s:\n live     %+v\n replayed %+v", g, want, got)
		}
		fetch := kmsg.OffsetFetchRequestGroup{Group: g}
		if want, got := h.c.OffsetFetch(fetch, false), replayed.OffsetFetch(fetch, false); !reflect.DeepEqual(want, got) {
			t.Errorf("offsets of %s:\n live     %+v\n replayed %+v", g, want, got)
		}
	}
	if want, got := h.c.ListGroups(nil), replayed.ListGroups(nil); !reflect.DeepEqual(want, got) {
		t.Errorf("list:\n live     %+v\n replayed %+v", want, got)
	}

	// The loaded Stable group serves its members: generation, static
	// fencing, and session timers started by Start.
	if got := replayed.Heartbeat(heartbeatReq("stable", b, 1)).ErrorCode; got != 0 {
		t.Fatalf("heartbeat of a loaded member: %d", got)
	}
	r := replayed.JoinGroup(context.Background(), joinReq(5, "stable", b))
	if r.ErrorCode != 0 || r.Generation != 1 {
		t.Fatalf("loaded follower rejoin: %d gen %d", r.ErrorCode, r.Generation)
	}
	h.clock.Advance(11 * time.Second)
	if got := replayed.DescribeGroup("stable").State; got != "Empty" {
		t.Fatalf("loaded members did not expire: %s", got)
	}
}

func TestReplayRejectsUnknownVersions(t *testing.T) {
	c := New(Config{Journal: &fakeJournal{}, Clock: newFakeClock()})
	for _, r := range []Record{
		{Key: []byte{0, 9, 0, 0}},
		{Key: []byte{0}},
		{Key: offsetCommitKey("g", "t", 0), Value: []byte{0, 9, 1, 2}},
		{Key: groupMetadataKey("g"), Value: []byte{0, 1}},
	} {
		if err := c.Replay(r); err == nil {
			t.Errorf("record %v replayed without error", r)
		}
	}
}

func TestRecordsRoundTripThroughKmsg(t *testing.T) {
	rec := offsetCommitRecord("g", topicPartition{"t", 3}, committedOffset{offset: 42, leaderEpoch: 7, metadata: "m", committedAt: 1234})
	var k kmsg.OffsetCommitKey
	var v kmsg.OffsetCommitValue
	if err := k.ReadFrom(rec.Key); err != nil || k.Version != 1 || k.Group != "g" || k.Topic != "t" || k.Partition != 3 {
		t.Fatalf("key %+v %v", k, err)
	}
	if err := v.ReadFrom(rec.Value); err != nil || v.Version != 3 || v.Offset != 42 || v.LeaderEpoch != 7 || v.Metadata != "m" || v.CommitTimestamp != 1234 {
		t.Fatalf("value %+v %v", v, err)
	}
	if len(rec.Key) != cap(rec.Key) {
		t.Fatal("key slice can grow into the value")
	}
}

package groups

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestSimpleCommitIntoEmptyGroup(t *testing.T) {
	h := newHarness(t)
	resp := h.c.OffsetCommit(context.Background(), commitReq("g", "", -1, "t1", map[int32]int64{0: 10, 1: 20}))
	if codes := commitCodes(resp); codes[0] != 0 || codes[1] != 0 {
		t.Fatalf("simple commit: %v", codes)
	}
	if got := h.fetched("g"); got["t1"][0] != 10 || got["t1"][1] != 20 {
		t.Fatalf("fetched %v", got)
	}
	f := h.c.OffsetFetch(kmsg.OffsetFetchRequestGroup{Group: "g", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t1", Partitions: []int32{0, 7}}}}, true)
	p0, p7 := f.Topics[0].Partitions[0], f.Topics[0].Partitions[1]
	if p0.Offset != 10 || p0.LeaderEpoch != 3 || *p0.Metadata != "md" || p7.Offset != -1 || p7.LeaderEpoch != -1 || *p7.Metadata != "" || p7.ErrorCode != 0 {
		t.Fatalf("fetch: %+v %+v", p0, p7)
	}
	if d := h.c.DescribeGroup("g"); d.State != "Empty" || d.ProtocolType != "" {
		t.Fatalf("simple group: %+v", d)
	}
	if f := h.c.OffsetFetch(kmsg.OffsetFetchRequestGroup{Group: "unknown"}, false); len(f.Topics) != 0 || f.ErrorCode != 0 {
		t.Fatalf("unknown group fetch: %+v", f)
	}
}

func TestCommitFencing(t *testing.T) {
	h := newHarness(t)
	a, _ := h.stableGroup("g", "")
	tests := []struct {
		name string
		req  *kmsg.OffsetCommitRequest
		want int16
	}{
		{"simple commit into a group with members", commitReq("g", "", -1, "t1", map[int32]int64{0: 1}), kerr.UnknownMemberID.Code},
		{"old generation", commitReq("g", a, 0, "t1", map[int32]int64{0: 1}), kerr.IllegalGeneration.Code},
		{"unknown member", commitReq("g", "nobody", 1, "t1", map[int32]int64{0: 1}), kerr.UnknownMemberID.Code},
		{"unknown group with a generation", commitReq("nope", "x", 1, "t1", map[int32]int64{0: 1}), kerr.IllegalGeneration.Code},
		{"member of the generation", commitReq("g", a, 1, "t1", map[int32]int64{0: 1}), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := commitCodes(h.c.OffsetCommit(context.Background(), tt.req)); got[0] != tt.want {
				t.Fatalf("error %d, want %d", got[0], tt.want)
			}
		})
	}
}

func TestCommitDuringCompletingRebalance(t *testing.T) {
	h := newHarness(t)
	j := h.joinAsync(joinReq(3, "g", ""))
	h.waitJoins("g", 1)
	h.clock.Advance(3 * time.Second)
	r := recv(t, j)
	got := commitCodes(h.c.OffsetCommit(context.Background(), commitReq("g", r.MemberID, 1, "t1", map[int32]int64{0: 1})))
	if got[0] != kerr.RebalanceInProgress.Code {
		t.Fatalf("commit in CompletingRebalance: %v", got)
	}
}

func TestCommitMetadataTooLarge(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxMetadataBytes = 4 })
	req := commitReq("g", "", -1, "t1", map[int32]int64{0: 1, 1: 2})
	req.Topics[0].Partitions[1].Metadata = kmsg.StringPtr(strings.Repeat("x", 5))
	got := commitCodes(h.c.OffsetCommit(context.Background(), req))
	if got[0] != 0 || got[1] != kerr.OffsetMetadataTooLarge.Code {
		t.Fatalf("codes %v", got)
	}
	if f := h.fetched("g"); len(f["t1"]) != 1 {
		t.Fatalf("fetched %v", f)
	}
}

func TestCommitJournalFailure(t *testing.T) {
	h := newHarness(t)
	h.journal.failWait = errInjected
	got := commitCodes(h.c.OffsetCommit(context.Background(), commitReq("g", "", -1, "t1", map[int32]int64{0: 1, 1: 2})))
	if got[0] != kerr.NotCoordinator.Code || got[1] != kerr.NotCoordinator.Code {
		t.Fatalf("codes %v", got)
	}
	if f := h.fetched("g"); len(f) != 0 {
		t.Fatalf("a failed commit is visible: %v", f)
	}
}

// OffsetFetch shows a commit only once durable, and commits to one
// partition apply in log order whatever order their waits end in.
func TestCommitVisibleWhenDurableInLogOrder(t *testing.T) {
	h := newHarness(t)
	h.journal.hold = true
	commit := func(off int64) <-chan *kmsg.OffsetCommitResponse {
		ch := make(chan *kmsg.OffsetCommitResponse, 1)
		go func() {
			ch <- h.c.OffsetCommit(context.Background(), commitReq("g", "", -1, "t1", map[int32]int64{0: off}))
		}()
		return ch
	}
	first := commit(10)
	h.waitFor("first append", func() bool { return h.journal.batchCount() == 1 })
	second := commit(20)
	h.waitFor("second append", func() bool { return h.journal.batchCount() == 2 })
	if f := h.fetched("g"); len(f) != 0 {
		t.Fatalf("not durable yet, fetched %v", f)
	}
	h.journal.release(1) // the later commit is durable first
	if got := commitCodes(recv(t, second)); got[0] != 0 {
		t.Fatalf("second: %v", got)
	}
	if f := h.fetched("g"); f["t1"][0] != 20 {
		t.Fatalf("fetched %v, want 20", f)
	}
	h.journal.release(0)
	recv(t, first)
	if f := h.fetched("g"); f["t1"][0] != 20 {
		t.Fatalf("an older commit overwrote a newer one: %v", f)
	}
}

// A commit appended before a tombstone must not reappear when it becomes
// durable after the deletion.
func TestCommitDoesNotResurrectDeletedOffset(t *testing.T) {
	h := newHarness(t)
	h.c.OffsetCommit(context.Background(), commitReq("g", "", -1, "t1", map[int32]int64{0: 1}))
	h.journal.mu.Lock()
	h.journal.hold = true
	h.journal.mu.Unlock()
	pending := make(chan *kmsg.OffsetCommitResponse, 1)
	go func() {
		pending <- h.c.OffsetCommit(context.Background(), commitReq("g", "", -1, "t1", map[int32]int64{0: 5}))
	}()
	h.waitFor("commit append", func() bool { return h.journal.batchCount() == 2 })
	del := make(chan *kmsg.OffsetDeleteResponse, 1)
	go func() { del <- h.c.OffsetDelete(context.Background(), offsetDeleteReq("g", "t1", 0)) }()
	h.waitFor("tombstone append", func() bool { return h.journal.batchCount() == 3 })
	h.journal.release(2)
	if r := recv(t, del); r.ErrorCode != 0 {
		t.Fatalf("offset delete: %d", r.ErrorCode)
	}
	h.journal.release(1)
	recv(t, pending)
	if f := h.fetched("g"); len(f) != 0 {
		t.Fatalf("deleted offset resurrected: %v", f)
	}
}

func TestConcurrentCommits(t *testing.T) {
	h := newHarness(t)
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := int64(0); k < 50; k++ {
				h.c.OffsetCommit(context.Background(), commitReq("g", "", -1, "t1", map[int32]int64{int32(k % 4): k}))
			}
		}()
	}
	wg.Wait()
	// The visible offset of each partition is its last record in the log.
	last := map[int32]int64{}
	for _, r := range h.journal.records() {
		var k kmsg.OffsetCommitKey
		var v kmsg.OffsetCommitValue
		if k.ReadFrom(r.Key) == nil && v.ReadFrom(r.Value) == nil {
			last[k.Partition] = v.Offset
		}
	}
	f := h.fetched("g")
	for p, off := range last {
		if f["t1"][p] != off {
			t.Fatalf("partition %d: fetched %d, log's last %d", p, f["t1"][p], off)
		}
	}
}

func offsetDeleteReq(group, topic string, partitions ...int32) *kmsg.OffsetDeleteRequest {
	r := kmsg.NewPtrOffsetDeleteRequest()
	r.Group = group
	t := kmsg.NewOffsetDeleteRequestTopic()
	t.Topic = topic
	for _, p := range partitions {
		t.Partitions = append(t.Partitions, kmsg.OffsetDeleteRequestTopicPartition{Partition: p})
	}
	r.Topics = append(r.Topics, t)
	return r
}

func TestOffsetDelete(t *testing.T) {
	h := newHarness(t)
	a, _ := h.stableGroup("g", "") // subscribed to t1
	h.c.OffsetCommit(context.Background(), commitReq("g", a, 1, "t1", map[int32]int64{0: 1}))
	h.c.OffsetCommit(context.Background(), commitReq("g", a, 1, "t2", map[int32]int64{0: 2}))

	if r := h.c.OffsetDelete(context.Background(), offsetDeleteReq("nope", "t1", 0)); r.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("unknown group: %d", r.ErrorCode)
	}
	r := h.c.OffsetDelete(context.Background(), offsetDeleteReq("g", "t1", 0))
	if r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != kerr.GroupSubscribedToTopic.Code {
		t.Fatalf("subscribed topic: %+v", r)
	}
	r = h.c.OffsetDelete(context.Background(), offsetDeleteReq("g", "t2", 0))
	if r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("unsubscribed topic: %+v", r)
	}
	if f := h.fetched("g"); len(f["t2"]) != 0 || f["t1"][0] != 1 {
		t.Fatalf("fetched %v", f)
	}
	last := h.journal.records()[len(h.journal.records())-1]
	if last.Value != nil {
		t.Fatal("no tombstone written")
	}
}

func TestDeleteGroup(t *testing.T) {
	h := newHarness(t)
	h.stableGroup("g", "")
	h.c.OffsetCommit(context.Background(), commitReq("s", "", -1, "t1", map[int32]int64{0: 1, 1: 2}))
	if got := h.c.DeleteGroup(context.Background(), "nope"); got != kerr.GroupIDNotFound.Code {
		t.Fatalf("unknown group: %d", got)
	}
	if got := h.c.DeleteGroup(context.Background(), "g"); got != kerr.NonEmptyGroup.Code {
		t.Fatalf("group with members: %d", got)
	}
	before := len(h.journal.records())
	if got := h.c.DeleteGroup(context.Background(), "s"); got != 0 {
		t.Fatalf("delete: %d", got)
	}
	recs := h.journal.records()[before:]
	if len(recs) != 3 {
		t.Fatalf("%d tombstones, want 2 offsets + group", len(recs))
	}
	for _, r := range recs {
		if r.Value != nil {
			t.Fatal("not a tombstone")
		}
	}
	if d := h.c.DescribeGroup("s"); d.State != "Dead" {
		t.Fatalf("state %s", d.State)
	}
	if f := h.fetched("s"); len(f) != 0 {
		t.Fatalf("fetched %v", f)
	}
}

func TestListGroups(t *testing.T) {
	h := newHarness(t)
	h.stableGroup("g", "")
	h.c.OffsetCommit(context.Background(), commitReq("s", "", -1, "t1", map[int32]int64{0: 1}))
	all := h.c.ListGroups(nil)
	if len(all) != 2 || all[0].Group != "g" || all[0].ProtocolType != "consumer" || all[0].GroupState != "Stable" || all[1].GroupState != "Empty" {
		t.Fatalf("list: %+v", all)
	}
	if got := h.c.ListGroups([]string{"empty"}); len(got) != 1 || got[0].Group != "s" {
		t.Fatalf("filtered: %+v", got)
	}
}

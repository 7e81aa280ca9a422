package groups

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnReq is a TxnOffsetCommit of version for one topic; member and
// generation are sent from v3 on.
func txnReq(version int16, group string, producerID int64, memberID string, gen int32, topic string, offsets map[int32]int64) *kmsg.TxnOffsetCommitRequest {
	r := kmsg.NewPtrTxnOffsetCommitRequest()
	r.Version = version
	r.TransactionalID = "tx"
	r.Group = group
	r.ProducerID, r.ProducerEpoch = producerID, 1
	r.MemberID, r.Generation = memberID, gen
	t := kmsg.NewTxnOffsetCommitRequestTopic()
	t.Topic = topic
	parts := make([]int32, 0, len(offsets))
	for p := range offsets {
		parts = append(parts, p)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	for _, p := range parts {
		tp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		tp.Partition, tp.Offset = p, offsets[p]
		tp.LeaderEpoch = 4
		tp.Metadata = kmsg.StringPtr("txmd")
		t.Partitions = append(t.Partitions, tp)
	}
	r.Topics = append(r.Topics, t)
	return r
}

// simpleTxn is a v3 TxnOffsetCommit naming no member (no member check).
func simpleTxn(group string, producerID int64, topic string, offsets map[int32]int64) *kmsg.TxnOffsetCommitRequest {
	return txnReq(3, group, producerID, "", -1, topic, offsets)
}

func txnCodes(resp *kmsg.TxnOffsetCommitResponse) []int16 {
	var codes []int16
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			codes = append(codes, p.ErrorCode)
		}
	}
	return codes
}

func (h *harness) txnCommit(req *kmsg.TxnOffsetCommitRequest) {
	h.t.Helper()
	for _, code := range txnCodes(h.c.TxnOffsetCommit(context.Background(), req)) {
		if code != 0 {
			h.t.Fatalf("txn offset commit to %s: error %d", req.Group, code)
		}
	}
}

func (h *harness) complete(producerID int64, commit bool) {
	h.t.Helper()
	if err := h.c.CompleteTxn(context.Background(), producerID, 1, commit); err != nil {
		h.t.Fatalf("complete producer %d: %v", producerID, err)
	}
}

// stable fetches partitions of topic with requireStable: offset, or -2 for
// UNSTABLE_OFFSET_COMMIT (checking the rest of its answer).
func (h *harness) stable(group, topic string, partitions ...int32) []int64 {
	h.t.Helper()
	resp := h.c.OffsetFetch(kmsg.OffsetFetchRequestGroup{Group: group, Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: topic, Partitions: partitions}}}, true)
	var out []int64
	for _, p := range resp.Topics[0].Partitions {
		switch p.ErrorCode {
		case 0:
			out = append(out, p.Offset)
		case kerr.UnstableOffsetCommit.Code:
			if p.Offset != -1 || p.LeaderEpoch != -1 || p.Metadata == nil || *p.Metadata != "" {
				h.t.Fatalf("unstable partition answer %+v", p)
			}
			out = append(out, -2)
		default:
			h.t.Fatalf("fetch partition %d: error %d", p.Partition, p.ErrorCode)
		}
	}
	return out
}

// txnView is a coordinator's offsets: committed by "group/topic/partition"
// and pending by "group/producer/topic/partition", each as
// "offset/epoch/metadata/committedAt", and groups by state.
type txnView struct {
	Committed map[string]string
	Pending   map[string]string
	Groups    map[string]string
}

func (c *Coordinator) txnView(t *testing.T) txnView {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	v := txnView{Committed: map[string]string{}, Pending: map[string]string{}, Groups: map[string]string{}}
	val := func(o committedOffset) string {
		return fmt.Sprintf("%d/%d/%s/%d", o.offset, o.leaderEpoch, o.metadata, o.committedAt)
	}
	for id, g := range c.groups {
		v.Groups[id] = g.state.String()
		for tp, o := range g.offsets {
			v.Committed[fmt.Sprintf("%s/%s/%d", id, tp.topic, tp.partition)] = val(o)
		}
		for pid, byTP := range g.txnOffsets {
			if len(byTP) == 0 {
				t.Errorf("group %s keeps an empty pending set of producer %d", id, pid)
			}
			if _, ok := c.txnGroups[pid][id]; !ok {
				t.Errorf("group %s with pending offsets of producer %d is not indexed", id, pid)
			}
			for tp, o := range byTP {
				v.Pending[fmt.Sprintf("%s/%d/%s/%d", id, pid, tp.topic, tp.partition)] = val(o)
			}
		}
	}
	for pid, ids := range c.txnGroups {
		if len(ids) == 0 {
			t.Errorf("empty index entry for producer %d", pid)
		}
	}
	return v
}

func replayAll(t *testing.T, clock Clock, recs []Record) *Coordinator {
	t.Helper()
	c := New(Config{Journal: &fakeJournal{}, Clock: clock})
	for i, r := range recs {
		if err := c.Replay(r); err != nil {
			t.Fatalf("replay record %d: %v", i, err)
		}
	}
	return c
}

// compact is what a snapshot of recs holds (fakeJournal.compacted).
func compact(recs []Record) []Record {
	last := make(map[string]int)
	for i, r := range recs {
		last[string(r.Key)] = i
	}
	var out []Record
	for i, r := range recs {
		if last[string(r.Key)] == i && r.Value != nil {
			out = append(out, r)
		}
	}
	return out
}

func TestTxnOffsetsInvisibleUntilCommit(t *testing.T) {
	h := newHarness(t)
	h.c.OffsetCommit(context.Background(), commitReq("g", "", -1, "t1", map[int32]int64{0: 5}))
	h.txnCommit(simpleTxn("g", 7, "t1", map[int32]int64{0: 10, 1: 11}))
	if f := h.fetched("g"); len(f["t1"]) != 1 || f["t1"][0] != 5 {
		t.Fatalf("pending offsets visible: %v", f)
	}
	h.clock.Advance(time.Second)
	h.complete(7, true)
	if f := h.fetched("g"); f["t1"][0] != 10 || f["t1"][1] != 11 {
		t.Fatalf("after commit: %v", f)
	}
	// The committed value is the transaction's: epoch, metadata, time.
	p := h.c.OffsetFetch(kmsg.OffsetFetchRequestGroup{Group: "g", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t1", Partitions: []int32{0}}}}, true).Topics[0].Partitions[0]
	if p.ErrorCode != 0 || p.Offset != 10 || p.LeaderEpoch != 4 || *p.Metadata != "txmd" {
		t.Fatalf("committed %+v", p)
	}
	if v := h.c.txnView(t); len(v.Pending) != 0 {
		t.Fatalf("still pending: %v", v.Pending)
	}
}

func TestTxnOffsetsCompletion(t *testing.T) {
	tests := []struct {
		name   string
		commit bool
		want   map[int32]int64
	}{
		{"commit overwrites committed offsets", true, map[int32]int64{0: 10, 1: 11, 2: 3}},
		{"abort drops pending offsets", false, map[int32]int64{0: 1, 2: 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.c.OffsetCommit(context.Background(), commitReq("g", "", -1, "t1", map[int32]int64{0: 1, 2: 3}))
			h.txnCommit(simpleTxn("g", 7, "t1", map[int32]int64{0: 9, 1: 11}))
			h.txnCommit(simpleTxn("g", 7, "t1", map[int32]int64{0: 10})) // last write wins
			before := h.journal.batchCount()
			h.complete(7, tt.commit)
			if got := h.journal.batchCount() - before; got != 1 {
				t.Fatalf("%d appends for one completion", got)
			}
			if f := h.fetched("g"); !reflect.DeepEqual(f["t1"], tt.want) {
				t.Fatalf("fetched %v, want %v", f["t1"], tt.want)
			}
			if got := h.stable("g", "t1", 0, 1, 2); got[0] == -2 || got[1] == -2 || got[2] == -2 {
				t.Fatalf("unstable after completion: %v", got)
			}
			// A re-sent marker, or one for a producer with nothing
			// pending here, writes nothing.
			before = h.journal.batchCount()
			h.complete(7, tt.commit)
			h.complete(7, !tt.commit)
			h.complete(99, true)
			if got := h.journal.batchCount(); got != before {
				t.Fatalf("re-sent completion wrote %d batches", got-before)
			}
			if f := h.fetched("g"); !reflect.DeepEqual(f["t1"], tt.want) {
				t.Fatalf("after re-sent completion: %v", f["t1"])
			}
		})
	}
}

func TestTxnOffsetsTwoProducers(t *testing.T) {
	h := newHarness(t)
	h.txnCommit(simpleTxn("g", 7, "t1", map[int32]int64{0: 10, 1: 11}))
	h.txnCommit(simpleTxn("g", 8, "t1", map[int32]int64{1: 21, 2: 22}))
	if got := h.stable("g", "t1", 0, 1, 2, 3); !reflect.DeepEqual(got, []int64{-2, -2, -2, -1}) {
		t.Fatalf("requireStable: %v", got)
	}
	h.complete(8, true)
	if got := h.stable("g", "t1", 0, 1, 2); !reflect.DeepEqual(got, []int64{-2, -2, 22}) {
		t.Fatalf("after producer 8 commits: %v", got)
	}
	if f := h.fetched("g"); !reflect.DeepEqual(f["t1"], map[int32]int64{1: 21, 2: 22}) {
		t.Fatalf("fetched %v", f)
	}
	h.complete(7, true) // later: its offset of partition 1 wins
	if got := h.stable("g", "t1", 0, 1, 2); !reflect.DeepEqual(got, []int64{10, 11, 22}) {
		t.Fatalf("after both commit: %v", got)
	}
}

func TestTxnOffsetsRequireStable(t *testing.T) {
	h := newHarness(t)
	h.c.OffsetCommit(context.Background(), commitReq("g", "", -1, "t1", map[int32]int64{0: 1, 1: 2}))
	h.txnCommit(simpleTxn("g", 7, "t1", map[int32]int64{1: 20}))
	h.txnCommit(simpleTxn("g", 7, "t2", map[int32]int64{0: 30}))
	if got := h.stable("g", "t1", 0, 1); !reflect.DeepEqual(got, []int64{1, -2}) {
		t.Fatalf("requireStable: %v", got)
	}
	// Without requireStable: the committed offsets as before.
	resp := h.c.OffsetFetch(kmsg.OffsetFetchRequestGroup{Group: "g", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t1", Partitions: []int32{0, 1}}, {Topic: "t2", Partitions: []int32{0}}}}, false)
	if p := resp.Topics[0].Partitions[1]; p.ErrorCode != 0 || p.Offset != 2 {
		t.Fatalf("not requiring stable: %+v", p)
	}
	if p := resp.Topics[1].Partitions[0]; p.ErrorCode != 0 || p.Offset != -1 {
		t.Fatalf("pending only, not requiring stable: %+v", p)
	}
	// Every partition (nil topics): the committed ones, as Kafka, with
	// the pending check.
	all := h.c.OffsetFetch(kmsg.OffsetFetchRequestGroup{Group: "g"}, true)
	if len(all.Topics) != 1 || len(all.Topics[0].Partitions) != 2 ||
		all.Topics[0].Partitions[0].ErrorCode != 0 || all.Topics[0].Partitions[1].ErrorCode != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("all partitions: %+v", all.Topics)
	}
	h.complete(7, false)
	if got := h.stable("g", "t1", 0, 1); !reflect.DeepEqual(got, []int64{1, 2}) {
		t.Fatalf("after abort: %v", got)
	}
}

func TestTxnOffsetCommitChecks(t *testing.T) {
	h := newHarness(t)
	a, b := h.stableGroup("g", "ia")
	tests := []struct {
		name     string
		req      *kmsg.TxnOffsetCommitRequest
		instance string
		want     int16
	}{
		{"member of the generation", txnReq(3, "g", 1, a, 1, "t1", map[int32]int64{0: 1}), "", 0},
		{"static member of the generation", txnReq(3, "g", 1, a, 1, "t1", map[int32]int64{0: 1}), "ia", 0},
		{"old generation", txnReq(3, "g", 1, a, 0, "t1", map[int32]int64{0: 1}), "", kerr.IllegalGeneration.Code},
		{"unknown member", txnReq(3, "g", 1, "nobody", 1, "t1", map[int32]int64{0: 1}), "", kerr.UnknownMemberID.Code},
		{"generation without member", txnReq(3, "g", 1, "", 1, "t1", map[int32]int64{0: 1}), "", kerr.UnknownMemberID.Code},
		{"fenced instance", txnReq(3, "g", 1, b, 1, "t1", map[int32]int64{0: 1}), "ia", kerr.FencedInstanceID.Code},
		{"unknown instance", txnReq(3, "g", 1, a, 1, "t1", map[int32]int64{0: 1}), "nope", kerr.UnknownMemberID.Code},
		{"no member nor generation, group with members", txnReq(3, "g", 1, "", -1, "t1", map[int32]int64{0: 1}), "", 0},
		{"v2 ignores member fields", txnReq(2, "g", 1, "nobody", 5, "t1", map[int32]int64{0: 1}), "nope", 0},
		{"v0", txnReq(0, "g", 1, "", -1, "t1", map[int32]int64{0: 1}), "", 0},
		{"unknown group with a member", txnReq(3, "new1", 1, "x", 1, "t1", map[int32]int64{0: 1}), "", kerr.UnknownMemberID.Code},
		{"empty group ID", txnReq(3, "", 1, "", -1, "t1", map[int32]int64{0: 1}), "", kerr.InvalidGroupID.Code},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.instance != "" {
				tt.req.InstanceID = kmsg.StringPtr(tt.instance)
			}
			before := h.journal.batchCount()
			got := txnCodes(h.c.TxnOffsetCommit(context.Background(), tt.req))
			if got[0] != tt.want {
				t.Fatalf("error %d, want %d", got[0], tt.want)
			}
			if wrote := h.journal.batchCount() - before; (tt.want == 0) != (wrote == 1) || wrote > 1 {
				t.Fatalf("%d appends", wrote)
			}
		})
	}
	if got := h.c.DescribeGroup("new1").State; got != "Dead" {
		t.Fatalf("rejected commit left group new1 %s", got)
	}
	// An unknown group is created Empty by a commit naming no member.
	h.txnCommit(txnReq(1, "new2", 1, "", -1, "t1", map[int32]int64{0: 1}))
	if got := h.c.DescribeGroup("new2").State; got != "Empty" {
		t.Fatalf("new group %s", got)
	}
	// v0–1 carry no leader epoch.
	h.complete(1, true)
	p := h.c.OffsetFetch(kmsg.OffsetFetchRequestGroup{Group: "new2"}, false).Topics[0].Partitions[0]
	if p.Offset != 1 || p.LeaderEpoch != -1 {
		t.Fatalf("v1 commit: %+v", p)
	}
}

// Kafka takes transactional commits of members during
// CompletingRebalance, where plain commits get REBALANCE_IN_PROGRESS.
func TestTxnOffsetCommitDuringCompletingRebalance(t *testing.T) {
	h := newHarness(t)
	j := h.joinAsync(joinReq(3, "g", ""))
	h.waitJoins("g", 1)
	h.clock.Advance(3 * time.Second)
	r := recv(t, j)
	if st := h.c.DescribeGroup("g").State; st != "CompletingRebalance" {
		t.Fatalf("state %s", st)
	}
	if got := txnCodes(h.c.TxnOffsetCommit(context.Background(), txnReq(3, "g", 1, r.MemberID, 1, "t1", map[int32]int64{0: 1}))); got[0] != 0 {
		t.Fatalf("txn commit in CompletingRebalance: %v", got)
	}
}

func TestTxnOffsetCommitMetadataTooLarge(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxMetadataBytes = 4 })
	req := simpleTxn("g", 7, "t1", map[int32]int64{0: 1, 1: 2})
	req.Topics[0].Partitions[0].Metadata = kmsg.StringPtr("x")
	req.Topics[0].Partitions[1].Metadata = kmsg.StringPtr(strings.Repeat("x", 5))
	if got := txnCodes(h.c.TxnOffsetCommit(context.Background(), req)); got[0] != 0 || got[1] != kerr.OffsetMetadataTooLarge.Code {
		t.Fatalf("codes %v", got)
	}
	if v := h.c.txnView(t); len(v.Pending) != 1 {
		t.Fatalf("pending %v", v.Pending)
	}
}

// One request is one Append of pending records; one completion is one
// Append over every group of the producer: commits, then tombstones.
func TestTxnOffsetsRecords(t *testing.T) {
	h := newHarness(t)
	req := simpleTxn("g1", 7, "t1", map[int32]int64{0: 10})
	t2 := kmsg.NewTxnOffsetCommitRequestTopic()
	t2.Topic = "t2"
	t2.Partitions = []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 3, Offset: 30, LeaderEpoch: -1}}
	req.Topics = append(req.Topics, t2)
	h.txnCommit(req)
	h.txnCommit(simpleTxn("g2", 7, "t1", map[int32]int64{0: 20}))
	h.txnCommit(simpleTxn("g2", 8, "t1", map[int32]int64{0: 80}))
	if got := h.journal.batchCount(); got != 3 {
		t.Fatalf("%d appends for 3 requests", got)
	}
	recs := h.journal.records()
	if len(recs) != 4 {
		t.Fatalf("%d records", len(recs))
	}
	for i, want := range []struct {
		pid          int64
		group, topic string
		partition    int32
		offset       int64
		epoch        int32
		metadata     string
	}{
		{7, "g1", "t1", 0, 10, 4, "txmd"},
		{7, "g1", "t2", 3, 30, -1, ""},
		{7, "g2", "t1", 0, 20, 4, "txmd"},
		{8, "g2", "t1", 0, 80, 4, "txmd"},
	} {
		pid, group, tp, err := readTxnOffsetKey(recs[i].Key)
		if err != nil || pid != want.pid || group != want.group || tp != (topicPartition{want.topic, want.partition}) {
			t.Fatalf("record %d key: %d %s %v %v", i, pid, group, tp, err)
		}
		var v kmsg.OffsetCommitValue
		if err := v.ReadFrom(recs[i].Value); err != nil || v.Version != 3 || v.Offset != want.offset || v.LeaderEpoch != want.epoch || v.Metadata != want.metadata {
			t.Fatalf("record %d value %+v %v", i, v, err)
		}
	}
	// The key's bytes: int16 1001, int64 producer ID, group, topic,
	// partition (Kafka strings: int16 length).
	wantKey := []byte{0x03, 0xe9, 0, 0, 0, 0, 0, 0, 0, 7, 0, 2, 'g', '1', 0, 2, 't', '1', 0, 0, 0, 0}
	if !bytes.Equal(recs[0].Key, wantKey) {
		t.Fatalf("key %x, want %x", recs[0].Key, wantKey)
	}

	h.complete(7, true)
	if got := h.journal.batchCount(); got != 4 {
		t.Fatalf("%d appends after completion", got)
	}
	done := h.journal.records()[4:]
	var kinds []string
	for _, r := range done {
		if pid, group, tp, err := readTxnOffsetKey(r.Key); err == nil {
			if r.Value != nil || pid != 7 {
				t.Fatalf("completion wrote a pending record of %d", pid)
			}
			kinds = append(kinds, fmt.Sprintf("end %s/%s/%d", group, tp.topic, tp.partition))
			continue
		}
		var k kmsg.OffsetCommitKey
		var v kmsg.OffsetCommitValue
		if err := k.ReadFrom(r.Key); err != nil || k.Version != 1 || v.ReadFrom(r.Value) != nil {
			t.Fatalf("not an offset commit: %x", r.Key)
		}
		kinds = append(kinds, fmt.Sprintf("commit %s/%s/%d=%d", k.Group, k.Topic, k.Partition, v.Offset))
	}
	want := []string{
		"commit g1/t1/0=10", "commit g1/t2/3=30", "end g1/t1/0", "end g1/t2/3",
		"commit g2/t1/0=20", "end g2/t1/0",
	}
	if !reflect.DeepEqual(kinds, want) {
		t.Fatalf("completion records\n got  %q\n want %q", kinds, want)
	}
	// Abort: tombstones only.
	h.complete(8, false)
	last := h.journal.records()[len(h.journal.records())-1]
	if pid, _, _, err := readTxnOffsetKey(last.Key); err != nil || pid != 8 || last.Value != nil || len(h.journal.records()) != 11 {
		t.Fatalf("abort wrote %d records, last %x", len(h.journal.records())-10, last.Key)
	}
}

// Replaying the log cut at any record gives the state the coordinator had
// at that point: at a batch boundary exactly that state (both raw and
// compacted, as a snapshot holds it); inside a batch, each key holds its
// value from before or after the batch.
func TestTxnOffsetsReplayAtEveryCut(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	step := func(f func()) func() {
		return func() { h.clock.Advance(time.Second); f() }
	}
	ops := []func(){
		step(func() { h.c.OffsetCommit(ctx, commitReq("g1", "", -1, "t", map[int32]int64{0: 1, 1: 2})) }),
		step(func() { h.txnCommit(simpleTxn("g1", 7, "t", map[int32]int64{0: 10, 1: 11})) }),
		step(func() { h.txnCommit(simpleTxn("g1", 8, "t", map[int32]int64{1: 21, 2: 22})) }),
		step(func() { h.txnCommit(simpleTxn("g2", 7, "t", map[int32]int64{0: 30})) }), // a group of pending offsets only
		step(func() { h.txnCommit(simpleTxn("g1", 7, "t", map[int32]int64{0: 12})) }),
		step(func() { h.c.OffsetCommit(ctx, commitReq("g1", "", -1, "t", map[int32]int64{2: 5})) }), // does not end pending ones
		step(func() { h.complete(7, true) }),
		step(func() { h.c.OffsetCommit(ctx, commitReq("g1", "", -1, "t", map[int32]int64{1: 15})) }),
		step(func() { h.complete(8, false) }),
		step(func() { h.txnCommit(simpleTxn("g3", 9, "t", map[int32]int64{0: 5})) }),
		step(func() { h.txnCommit(simpleTxn("g1", 9, "t", map[int32]int64{0: 6})) }),
		step(func() { h.complete(9, true) }),
		step(func() { h.txnCommit(simpleTxn("g3", 9, "t", map[int32]int64{0: 7})) }), // left pending
	}
	views := []txnView{h.c.txnView(t)}
	bounds := []int{0}
	for i, op := range ops {
		before := h.journal.batchCount()
		op()
		if got := h.journal.batchCount() - before; got != 1 {
			t.Fatalf("op %d: %d appends", i, got)
		}
		views = append(views, h.c.txnView(t))
		bounds = append(bounds, len(h.journal.records()))
	}
	last := views[len(views)-1]
	if last.Committed["g1/t/0"] == "" || !strings.HasPrefix(last.Committed["g1/t/0"], "6/") ||
		!strings.HasPrefix(last.Committed["g1/t/1"], "15/") || !strings.HasPrefix(last.Committed["g2/t/0"], "30/") ||
		len(last.Pending) != 1 || !strings.HasPrefix(last.Pending["g3/9/t/0"], "7/") {
		t.Fatalf("scenario ends at %+v", last)
	}

	recs := h.journal.records()
	batch := 0
	for cut := 0; cut <= len(recs); cut++ {
		for batch+1 < len(bounds) && bounds[batch+1] <= cut {
			batch++
		}
		raw := replayAll(t, h.clock, recs[:cut]).txnView(t)
		if bounds[batch] == cut {
			if !reflect.DeepEqual(raw, views[batch]) {
				t.Fatalf("cut %d (after op %d), raw replay:\n got  %+v\n want %+v", cut, batch, raw, views[batch])
			}
			if got := replayAll(t, h.clock, compact(recs[:cut])).txnView(t); !reflect.DeepEqual(got, views[batch]) {
				t.Fatalf("cut %d (after op %d), compacted replay:\n got  %+v\n want %+v", cut, batch, got, views[batch])
			}
			continue
		}
		before, after := views[batch], views[batch+1]
		between := func(what string, got, b, a map[string]string) {
			keys := map[string]bool{}
			for _, m := range []map[string]string{got, b, a} {
				for k := range m {
					keys[k] = true
				}
			}
			for k := range keys {
				if got[k] != b[k] && got[k] != a[k] {
					t.Fatalf("cut %d inside op %d: %s %s is %q, neither %q nor %q", cut, batch, what, k, got[k], b[k], a[k])
				}
			}
		}
		between("committed", raw.Committed, before.Committed, after.Committed)
		between("pending", raw.Pending, before.Pending, after.Pending)
		between("group", raw.Groups, before.Groups, after.Groups)
	}

	// The loaded coordinator serves: the pending offsets complete.
	c := replayAll(t, h.clock, h.journal.compacted())
	c.Start()
	defer c.Close()
	if err := c.CompleteTxn(ctx, 9, 1, true); err != nil {
		t.Fatal(err)
	}
	if v := c.txnView(t); len(v.Pending) != 0 || !strings.HasPrefix(v.Committed["g3/t/0"], "7/") {
		t.Fatalf("loaded coordinator completing: %+v", v)
	}
}

func TestTxnOffsetsReplayRejectsMalformedKeys(t *testing.T) {
	good := txnOffsetKey(7, "g", "t", 0)
	for _, key := range [][]byte{
		good[:len(good)-1],
		append(append([]byte{}, good...), 0),
		good[:5],
	} {
		c := New(Config{Journal: &fakeJournal{}, Clock: newFakeClock()})
		if err := c.Replay(Record{Key: key, Value: []byte{}}); err == nil {
			t.Errorf("key %x replayed", key)
		}
	}
	c := New(Config{Journal: &fakeJournal{}, Clock: newFakeClock()})
	if err := c.Replay(Record{Key: good, Value: []byte{0, 9, 1}}); err == nil {
		t.Error("bad value replayed")
	}
	// A tombstone of nothing pending is fine (its record compacted away).
	if err := c.Replay(Record{Key: good}); err != nil {
		t.Error(err)
	}
}

func TestTxnOffsetsJournalFailure(t *testing.T) {
	tests := []struct {
		name       string
		failAppend bool
	}{
		{"append fails", true},
		{"wait fails", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			setFail := func(err error) {
				h.journal.mu.Lock()
				defer h.journal.mu.Unlock()
				if tt.failAppend {
					h.journal.failAppend = err
				} else {
					h.journal.failWait = err
				}
			}
			h.c.OffsetCommit(context.Background(), commitReq("g", "", -1, "t1", map[int32]int64{0: 1}))
			setFail(errInjected)
			got := txnCodes(h.c.TxnOffsetCommit(context.Background(), simpleTxn("g", 7, "t1", map[int32]int64{0: 10, 1: 11})))
			if got[0] != kerr.NotCoordinator.Code || got[1] != kerr.NotCoordinator.Code {
				t.Fatalf("codes %v", got)
			}
			// Not appended: nothing pending. Appended but not known
			// durable: pending, as the log may hold it.
			if n := len(h.c.txnView(t).Pending); tt.failAppend != (n == 0) {
				t.Fatalf("%d pending", n)
			}
			setFail(nil)
			h.txnCommit(simpleTxn("g", 7, "t1", map[int32]int64{0: 10, 1: 11}))

			setFail(errInjected)
			if err := h.c.CompleteTxn(context.Background(), 7, 1, true); !errors.Is(err, errInjected) {
				t.Fatalf("completion: %v", err)
			}
			if f := h.fetched("g"); len(f["t1"]) != 1 || f["t1"][0] != 1 {
				t.Fatalf("failed completion visible: %v", f)
			}
			if got := h.stable("g", "t1", 0, 1); !reflect.DeepEqual(got, []int64{-2, -2}) {
				t.Fatalf("failed completion ended pending offsets: %v", got)
			}
			setFail(nil)
			h.complete(7, true) // the retry
			if f := h.fetched("g"); f["t1"][0] != 10 || f["t1"][1] != 11 {
				t.Fatalf("after retry: %v", f)
			}
			h.c.mu.Lock()
			inFlight := h.c.groups["g"].commitsInFlight
			h.c.mu.Unlock()
			if inFlight != 0 {
				t.Fatalf("%d commits in flight", inFlight)
			}
		})
	}
}

func TestTxnOffsetsClosed(t *testing.T) {
	h := newHarness(t)
	h.txnCommit(simpleTxn("g", 7, "t1", map[int32]int64{0: 10}))
	h.c.Close()
	if got := txnCodes(h.c.TxnOffsetCommit(context.Background(), simpleTxn("g", 7, "t1", map[int32]int64{0: 11}))); got[0] != kerr.NotCoordinator.Code {
		t.Fatalf("closed: %v", got)
	}
	if err := h.c.CompleteTxn(context.Background(), 7, 1, true); !errors.Is(err, kerr.NotCoordinator) {
		t.Fatalf("closed completion: %v", err)
	}
}

// The completion shows once durable; a commit of the producer's next
// transaction appended meanwhile stays pending.
func TestTxnOffsetsCompletionDurability(t *testing.T) {
	h := newHarness(t)
	h.c.OffsetCommit(context.Background(), commitReq("g", "", -1, "t1", map[int32]int64{0: 1}))
	h.journal.mu.Lock()
	h.journal.hold = true
	h.journal.mu.Unlock()

	txn := func(offsets map[int32]int64) <-chan *kmsg.TxnOffsetCommitResponse {
		ch := make(chan *kmsg.TxnOffsetCommitResponse, 1)
		go func() { ch <- h.c.TxnOffsetCommit(context.Background(), simpleTxn("g", 7, "t1", offsets)) }()
		return ch
	}
	first := txn(map[int32]int64{0: 10})
	h.waitFor("pending append", func() bool { return h.journal.batchCount() == 2 })
	if got := h.stable("g", "t1", 0); got[0] != -2 {
		t.Fatalf("appended pending offset is stable: %v", got)
	}
	h.journal.release(1)
	if got := txnCodes(recv(t, first)); got[0] != 0 {
		t.Fatalf("txn commit: %v", got)
	}

	done := make(chan error, 1)
	go func() { done <- h.c.CompleteTxn(context.Background(), 7, 1, true) }()
	h.waitFor("completion append", func() bool { return h.journal.batchCount() == 3 })
	next := txn(map[int32]int64{1: 20})
	h.waitFor("next append", func() bool { return h.journal.batchCount() == 4 })
	if f := h.fetched("g"); f["t1"][0] != 1 {
		t.Fatalf("completion visible before durable: %v", f)
	}
	if got := h.stable("g", "t1", 0); got[0] != -2 {
		t.Fatalf("stable before the completion is durable: %v", got)
	}
	h.journal.release(3)
	recv(t, next)
	h.journal.release(2)
	if err := recv(t, done); err != nil {
		t.Fatal(err)
	}
	if got := h.stable("g", "t1", 0, 1); !reflect.DeepEqual(got, []int64{10, -2}) {
		t.Fatalf("after completion: %v", got)
	}
	if v := h.c.txnView(t); len(v.Pending) != 1 || !strings.HasPrefix(v.Pending["g/7/t1/1"], "20/") {
		t.Fatalf("pending %v", v.Pending)
	}
}

func TestTxnOffsetsKeepGroup(t *testing.T) {
	h := newHarness(t) // retention 1h
	h.txnCommit(simpleTxn("p", 7, "t1", map[int32]int64{0: 10}))
	h.c.OffsetCommit(context.Background(), commitReq("q", "", -1, "t1", map[int32]int64{0: 1}))
	h.txnCommit(simpleTxn("q", 7, "t1", map[int32]int64{1: 11}))
	if got := h.c.DeleteGroup(context.Background(), "p"); got != kerr.NonEmptyGroup.Code {
		t.Fatalf("deleting a group with pending offsets: %d", got)
	}
	h.clock.Advance(2 * time.Hour)
	// q's plain commit expired; the pending offsets and both groups stay.
	if f := h.fetched("q"); len(f) != 0 {
		t.Fatalf("q fetched %v", f)
	}
	for _, g := range []string{"p", "q"} {
		if st := h.c.DescribeGroup(g).State; st != "Empty" {
			t.Fatalf("group %s of pending offsets: %s", g, st)
		}
	}
	if v := h.c.txnView(t); len(v.Pending) != 2 {
		t.Fatalf("pending %v", v.Pending)
	}
	// The expiry's records leave the pending ones alone on reload too.
	if v := replayAll(t, h.clock, h.journal.compacted()).txnView(t); len(v.Pending) != 2 || v.Groups["p"] != "Empty" || v.Groups["q"] != "Empty" {
		t.Fatalf("reloaded %+v", v)
	}
	h.complete(7, false)
	if got := h.c.DeleteGroup(context.Background(), "p"); got != 0 {
		t.Fatalf("deleting after the abort: %d", got)
	}
}

// Pending offsets outlive the group's metadata records on replay: a newer
// membership record replaces the group but not its pending offsets, and a
// group tombstone leaves a group with pending offsets.
func TestTxnOffsetsReplayWithGroupMetadata(t *testing.T) {
	h := newHarness(t)
	a, b := h.stableGroup("g", "")
	h.txnCommit(txnReq(3, "g", 7, a, 1, "t1", map[int32]int64{0: 10}))
	lr := kmsg.NewPtrLeaveGroupRequest()
	lr.Version, lr.Group = 3, "g"
	lr.Members = []kmsg.LeaveGroupRequestMember{{MemberID: a}, {MemberID: b}}
	h.c.LeaveGroup(context.Background(), lr)
	h.c.bg.Wait()
	recs := h.journal.records()
	if last := recs[len(recs)-1]; !bytes.Equal(last.Key, groupMetadataKey("g")) {
		t.Fatalf("last record %x is not the group's metadata", last.Key)
	}
	want := h.c.txnView(t)
	if len(want.Pending) != 1 || want.Groups["g"] != "Empty" {
		t.Fatalf("live %+v", want)
	}
	for name, rs := range map[string][]Record{"raw": recs, "compacted": h.journal.compacted()} {
		if got := replayAll(t, h.clock, rs).txnView(t); !reflect.DeepEqual(got, want) {
			t.Errorf("%s replay:\n got  %+v\n want %+v", name, got, want)
		}
	}

	c := replayAll(t, h.clock, []Record{
		txnOffsetRecord(7, "p", topicPartition{"t1", 0}, committedOffset{offset: 1}),
		groupTombstone("p"),
	})
	if v := c.txnView(t); v.Groups["p"] != "Empty" || len(v.Pending) != 1 {
		t.Fatalf("after a group tombstone: %+v", v)
	}
}

// An offset deleted while a completion is in flight stays deleted when the
// completion, appended before the tombstone, becomes durable after it.
func TestTxnOffsetsCompletionDoesNotResurrectDeletedOffset(t *testing.T) {
	h := newHarness(t)
	h.c.OffsetCommit(context.Background(), commitReq("g", "", -1, "t1", map[int32]int64{0: 1}))
	h.txnCommit(simpleTxn("g", 7, "t1", map[int32]int64{0: 10}))
	h.journal.mu.Lock()
	h.journal.hold = true
	h.journal.mu.Unlock()
	done := make(chan error, 1)
	go func() { done <- h.c.CompleteTxn(context.Background(), 7, 1, true) }()
	h.waitFor("completion append", func() bool { return h.journal.batchCount() == 3 })
	del := make(chan *kmsg.OffsetDeleteResponse, 1)
	go func() { del <- h.c.OffsetDelete(context.Background(), offsetDeleteReq("g", "t1", 0)) }()
	h.waitFor("tombstone append", func() bool { return h.journal.batchCount() == 4 })
	h.journal.release(3)
	if r := recv(t, del); r.ErrorCode != 0 {
		t.Fatalf("offset delete: %d", r.ErrorCode)
	}
	h.journal.release(2)
	if err := recv(t, done); err != nil {
		t.Fatal(err)
	}
	if f := h.fetched("g"); len(f) != 0 {
		t.Fatalf("deleted offset resurrected: %v", f)
	}
	if got := replayAll(t, h.clock, h.journal.compacted()).txnView(t); len(got.Committed) != 0 || len(got.Pending) != 0 {
		t.Fatalf("replayed %+v", got)
	}
}

package wire

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/engine"
)

// groupSeeds are group requests for the fuzzer's corpus, each answered at
// once (no join waits for a rebalance).
func groupSeeds() []kmsg.Request {
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version, fc.CoordinatorKeys = 4, []string{"g", "", "h"}
	join := kmsg.NewPtrJoinGroupRequest()
	join.Version, join.Group, join.ProtocolType, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 9, "g", "consumer", 10000, 10000
	proto := kmsg.NewJoinGroupRequestProtocol()
	proto.Name = "range"
	join.Protocols = append(join.Protocols, proto)
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Version, sync.Group, sync.MemberID, sync.Generation = 5, "g", "nobody", 3
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Version, hb.Group, hb.MemberID = 4, "g", "nobody"
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version, leave.Group = 5, "g"
	leave.Members = append(leave.Members, kmsg.NewLeaveGroupRequestMember())
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Version, commit.Group, commit.Generation = 8, "g", -1
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic = "fuzz-topic"
	cp := kmsg.NewOffsetCommitRequestTopicPartition()
	cp.Partition, cp.Offset = 0, 7
	ct.Partitions = append(ct.Partitions, cp)
	commit.Topics = append(commit.Topics, ct)
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Version = 8
	fetch.Groups = append(fetch.Groups, kmsg.NewOffsetFetchRequestGroup())
	fetch1 := kmsg.NewPtrOffsetFetchRequest()
	fetch1.Version, fetch1.Group = 1, "g"
	desc := kmsg.NewPtrDescribeGroupsRequest()
	desc.Version, desc.Groups = 5, []string{"g", "x"}
	list := kmsg.NewPtrListGroupsRequest()
	list.Version, list.StatesFilter = 4, []string{"Empty"}
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Version, del.Groups = 2, []string{"g", "none"}
	od := kmsg.NewPtrOffsetDeleteRequest()
	od.Group = "g"
	return []kmsg.Request{fc, join, sync, hb, leave, commit, fetch, fetch1, desc, list, del, od}
}

func startGroupBroker(t *testing.T) *testBroker {
	t.Helper()
	b := startBrokerWith(t, func(c *engine.Config) { c.Groups.InitialRebalanceDelay = -1 }, nil)
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	for !b.eng.Ready() {
		select {
		case <-ctx.Done():
			t.Fatal("broker not ready: coordinator shards not served")
		case <-time.After(10 * time.Millisecond):
		}
	}
	return b
}

// TestFindCoordinator: every group, transactional ID and version gets
// this broker (it owns every shard); an unknown key type is refused.
func TestFindCoordinator(t *testing.T) {
	b := startGroupBroker(t)
	c := b.dial(t)
	for _, v := range []int16{0, 1, 3} {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version, req.CoordinatorKey = v, fmt.Sprintf("group-%d", v)
		resp := c.do(req).(*kmsg.FindCoordinatorResponse)
		if resp.ErrorCode != 0 || resp.NodeID != 0 || resp.Port != b.srv.plaintext.port || resp.Host != b.srv.plaintext.host {
			t.Errorf("v%d: %+v", v, resp)
		}
	}
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.Version, req.CoordinatorKeys = 4, []string{"a", "b", "c"}
	resp := c.do(req).(*kmsg.FindCoordinatorResponse)
	if len(resp.Coordinators) != 3 {
		t.Fatalf("v4: %d coordinators for 3 keys", len(resp.Coordinators))
	}
	for i, co := range resp.Coordinators {
		if co.Key != req.CoordinatorKeys[i] || co.ErrorCode != 0 || co.Port != b.srv.plaintext.port {
			t.Errorf("v4 key %d: %+v", i, co)
		}
	}
	txn := kmsg.NewPtrFindCoordinatorRequest()
	txn.Version, txn.CoordinatorType, txn.CoordinatorKey = 3, 1, "txn"
	tresp := c.do(txn).(*kmsg.FindCoordinatorResponse)
	if tresp.ErrorCode != 0 || tresp.Port != b.srv.plaintext.port {
		t.Errorf("transaction key: %+v", tresp)
	}
	bad := kmsg.NewPtrFindCoordinatorRequest()
	bad.Version, bad.CoordinatorType, bad.CoordinatorKey = 3, 7, "x"
	bresp := c.do(bad).(*kmsg.FindCoordinatorResponse)
	if bresp.ErrorCode != kerr.InvalidRequest.Code || bresp.ErrorMessage == nil {
		t.Errorf("unknown key type: %+v", bresp)
	}
}

// TestGroupConsumeCommitResume: a franz-go group consumer reads a topic,
// commits, and a second one in the same group resumes after the commit;
// kadm lists, describes and deletes the group.
func TestGroupConsumeCommitResume(t *testing.T) {
	b := startGroupBroker(t)
	b.createTopic(t, "events", 3, nil)
	prod := b.client(t, kgo.DefaultProduceTopic("events"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	produce := func(from, to int) {
		for i := from; i < to; i++ {
			if err := prod.ProduceSync(ctx, kgo.StringRecord(fmt.Sprint(i))).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
	}
	consume := func(want int) map[string]bool {
		cl := b.client(t, kgo.ConsumerGroup("g1"), kgo.ConsumeTopics("events"), kgo.DisableAutoCommit(),
			kgo.SessionTimeout(6*time.Second), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		seen := map[string]bool{}
		for len(seen) < want {
			fs := cl.PollFetches(ctx)
			if err := ctx.Err(); err != nil {
				t.Fatalf("consumed %d of %d: %v", len(seen), want, err)
			}
			fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
			fs.EachRecord(func(r *kgo.Record) {
				if seen[string(r.Value)] {
					t.Errorf("record %s read twice", r.Value)
				}
				seen[string(r.Value)] = true
			})
		}
		if err := cl.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatalf("commit: %v", err)
		}
		cl.Close() // leaves the group
		return seen
	}
	produce(0, 30)
	if got := consume(30); len(got) != 30 {
		t.Fatalf("first run read %d", len(got))
	}
	produce(30, 45)
	got := consume(15)
	for i := 30; i < 45; i++ {
		if !got[fmt.Sprint(i)] {
			t.Errorf("second run missed %d", i)
		}
	}
	if len(got) != 15 {
		t.Errorf("second run read %d records, want the 15 after the commit", len(got))
	}

	adm := kadm.NewClient(b.client(t))
	offs, err := adm.FetchOffsets(ctx, "g1")
	if err != nil {
		t.Fatalf("fetch offsets: %v", err)
	}
	var total int64
	offs.Each(func(o kadm.OffsetResponse) { total += o.At })
	if total != 45 {
		t.Errorf("committed offsets sum to %d, want 45", total)
	}
	listed, err := adm.ListGroups(ctx)
	if err != nil || len(listed.Groups()) != 1 || listed.Groups()[0] != "g1" {
		t.Errorf("list groups: %v %v", listed.Groups(), err)
	}
	desc, err := adm.DescribeGroups(ctx, "g1")
	if err != nil || desc["g1"].State != "Empty" || desc["g1"].ProtocolType != "consumer" {
		t.Errorf("describe: %+v %v", desc["g1"], err)
	}
	dres, err := adm.DeleteGroups(ctx, "g1")
	if err != nil || dres["g1"].Err != nil {
		t.Fatalf("delete group: %v %v", err, dres["g1"].Err)
	}
	offs, err = adm.FetchOffsets(ctx, "g1")
	if err != nil || len(offs) != 0 {
		t.Errorf("offsets after delete: %v %v", offs, err)
	}
}

// TestOffsetCommitUnknownPartitions: partitions of topics that do not exist,
// or beyond a topic's partition count, get UNKNOWN_TOPIC_OR_PARTITION and
// are not stored; the request's other partitions are committed.
func TestOffsetCommitUnknownPartitions(t *testing.T) {
	b := startGroupBroker(t)
	b.createTopic(t, "known", 2, nil)
	c := b.dial(t)
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.Generation = 8, "simple", -1
	for _, tp := range []struct {
		topic string
		parts []int32
	}{{"known", []int32{0, 1, 2}}, {"missing", []int32{0}}} {
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = tp.topic
		for _, p := range tp.parts {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset = p, 10+int64(p)
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	resp := c.do(req).(*kmsg.OffsetCommitResponse)
	got := map[string]int16{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			got[fmt.Sprintf("%s/%d", rt.Topic, rp.Partition)] = rp.ErrorCode
		}
	}
	want := map[string]int16{"known/0": 0, "known/1": 0, "known/2": kerr.UnknownTopicOrPartition.Code, "missing/0": kerr.UnknownTopicOrPartition.Code}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("commit answers %v, want %v", got, want)
	}
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Version = 8
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = "simple"
	fetch.Groups = append(fetch.Groups, g)
	fresp := c.do(fetch).(*kmsg.OffsetFetchResponse)
	stored := map[string]int64{}
	for _, gr := range fresp.Groups {
		for _, ft := range gr.Topics {
			for _, fp := range ft.Partitions {
				stored[fmt.Sprintf("%s/%d", ft.Topic, fp.Partition)] = fp.Offset
			}
		}
	}
	if fmt.Sprint(stored) != fmt.Sprint(map[string]int64{"known/0": 10, "known/1": 11}) {
		t.Fatalf("stored offsets %v", stored)
	}
}

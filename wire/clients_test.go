package wire

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/engine/groups"
)

// Defects real clients hit (issue 15, finding 10).

// offsetFetchReq asks group for partitions of topic (nil topics: every
// committed partition), in the shape of version.
func offsetFetchReq(version int16, group, topic string, partitions []int32, all bool) *kmsg.OffsetFetchRequest {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = version
	if version >= 8 {
		g := kmsg.NewOffsetFetchRequestGroup()
		g.Group = group
		if !all {
			gt := kmsg.NewOffsetFetchRequestGroupTopic()
			gt.Topic, gt.Partitions = topic, partitions
			g.Topics = append(g.Topics, gt)
		}
		req.Groups = append(req.Groups, g)
		return req
	}
	req.Group = group
	if !all {
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic, rt.Partitions = topic, partitions
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// fetchedOffset is one partition of an OffsetFetch answer, whatever its
// version's shape.
type fetchedOffset struct {
	topic       string
	partition   int32
	offset      int64
	leaderEpoch int32
	metadata    *string
	code        int16
}

func offsetFetchAnswer(t *testing.T, resp *kmsg.OffsetFetchResponse) (int16, []fetchedOffset) {
	t.Helper()
	var out []fetchedOffset
	if resp.Version >= 8 {
		if len(resp.Groups) != 1 {
			t.Fatalf("v%d: %d groups in the answer", resp.Version, len(resp.Groups))
		}
		g := resp.Groups[0]
		for _, rt := range g.Topics {
			for _, p := range rt.Partitions {
				out = append(out, fetchedOffset{rt.Topic, p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode})
			}
		}
		return g.ErrorCode, out
	}
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			out = append(out, fetchedOffset{rt.Topic, p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode})
		}
	}
	return resp.ErrorCode, out
}

// TestOffsetFetchAnswersEveryPartitionAsked: a group that does not exist
// yet, and a group that committed some partitions only, answer every
// asked partition (offset -1, leader epoch -1, metadata "" where none is
// committed), as Kafka does, for every version; the all-partitions form
// lists only what was committed. librdkafka's assign() and sarama's offset
// manager wait for, or fail on, a partition missing from the answer.
func TestOffsetFetchAnswersEveryPartitionAsked(t *testing.T) {
	b := startGroupBroker(t)
	b.createTopic(t, "of-topic", 3, nil)
	c := b.dial(t)

	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Version, commit.Group, commit.Generation = 8, "committed-one", -1
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic = "of-topic"
	cp := kmsg.NewOffsetCommitRequestTopicPartition()
	cp.Partition, cp.Offset, cp.LeaderEpoch = 1, 5, -1
	ct.Partitions = append(ct.Partitions, cp)
	commit.Topics = append(commit.Topics, ct)
	if code := c.do(commit).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("commit: %d", code)
	}

	for _, v := range []int16{1, 2, 3, 4, 5, 6, 7, 8} {
		for _, group := range []string{"no-such-group", "committed-one"} {
			t.Run(fmt.Sprintf("v%d/%s", v, group), func(t *testing.T) {
				code, got := offsetFetchAnswer(t, c.do(offsetFetchReq(v, group, "of-topic", []int32{0, 1, 2}, false)).(*kmsg.OffsetFetchResponse))
				if code != 0 {
					t.Fatalf("group error %d", code)
				}
				if len(got) != 3 {
					t.Fatalf("answered %d partitions of 3 asked: %+v", len(got), got)
				}
				for i, p := range got {
					want := int64(-1)
					if group == "committed-one" && p.partition == 1 {
						want = 5
					}
					if p.topic != "of-topic" || p.partition != int32(i) || p.offset != want || p.code != 0 {
						t.Errorf("partition %d: %+v, want offset %d", i, p, want)
					}
					if want == -1 && (p.leaderEpoch != -1 || (v >= 3 && (p.metadata == nil || *p.metadata != ""))) {
						t.Errorf("partition %d without a commit: leader epoch %d, metadata %v", i, p.leaderEpoch, p.metadata)
					}
				}
			})
		}
		if v >= 2 {
			_, all := offsetFetchAnswer(t, c.do(offsetFetchReq(v, "no-such-group", "", nil, true)).(*kmsg.OffsetFetchResponse))
			if len(all) != 0 {
				t.Errorf("v%d all partitions of a group without commits: %+v", v, all)
			}
			_, all = offsetFetchAnswer(t, c.do(offsetFetchReq(v, "committed-one", "", nil, true)).(*kmsg.OffsetFetchResponse))
			if len(all) != 1 || all[0].partition != 1 || all[0].offset != 5 {
				t.Errorf("v%d all partitions: %+v, want only partition 1 at 5", v, all)
			}
		}
	}
}

// TestConsumerOffsetsListedAsInternal: Metadata lists __consumer_offsets as
// an internal topic whose partitions are the coordinator shards, each led
// by its owner at its epoch, in the all-topics form and when named; it is
// never auto-created, produced to, created or deleted by clients.
func TestConsumerOffsetsListedAsInternal(t *testing.T) {
	b := startGroupBroker(t)
	b.createTopic(t, "plain", 1, nil)
	c := b.dial(t)
	name := "__consumer_offsets"
	check := func(what string, v int16, topics []kmsg.MetadataResponseTopic) {
		t.Helper()
		var found *kmsg.MetadataResponseTopic
		for i := range topics {
			if tp := topics[i].Topic; tp != nil && *tp == name {
				found = &topics[i]
			} else if topics[i].IsInternal {
				t.Errorf("%s: %v is internal", what, tp)
			}
		}
		if found == nil {
			t.Fatalf("%s: %s not listed", what, name)
		}
		if found.ErrorCode != 0 || !found.IsInternal || len(found.Partitions) != groups.Shards {
			t.Fatalf("%s: code %d internal %v, %d partitions (want %d)", what, found.ErrorCode, found.IsInternal, len(found.Partitions), groups.Shards)
		}
		for i, p := range found.Partitions {
			if p.Partition != int32(i) || p.ErrorCode != 0 || p.Leader != 0 || (v >= 7 && p.LeaderEpoch < 1) || len(p.Replicas) != 1 || len(p.ISR) != 1 {
				t.Errorf("%s: shard %d: %+v", what, i, p)
			}
		}
	}
	for _, v := range []int16{1, 7, 12} {
		all := kmsg.NewPtrMetadataRequest()
		all.Version = v
		check(fmt.Sprintf("v%d all topics", v), v, c.do(all).(*kmsg.MetadataResponse).Topics)
		named := kmsg.NewPtrMetadataRequest()
		named.Version, named.AllowAutoTopicCreation = v, true
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = &name
		named.Topics = append(named.Topics, rt)
		check(fmt.Sprintf("v%d named", v), v, c.do(named).(*kmsg.MetadataResponse).Topics)
	}
	if _, err := b.eng.Partition(name, 0); err == nil {
		t.Fatalf("%s became a data topic", name)
	}

	p := c.produce(9, name, makeBatch(batchOpts{values: []string{"x"}}))
	if p.ErrorCode != kerr.InvalidTopicException.Code || p.ErrorMessage == nil {
		t.Errorf("produce to %s: code %d message %v, want INVALID_TOPIC_EXCEPTION", name, p.ErrorCode, p.ErrorMessage)
	}
	ct := c.do(createTopicsReq(7, false, name, 1, nil)).(*kmsg.CreateTopicsResponse).Topics[0]
	if ct.ErrorCode != kerr.InvalidTopicException.Code {
		t.Errorf("create %s: %d", name, ct.ErrorCode)
	}
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.Version, del.TimeoutMillis = 6, 5000
	dt := kmsg.NewDeleteTopicsRequestTopic()
	dt.Topic = &name
	del.Topics = append(del.Topics, dt)
	if code := c.do(del).(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode; code != kerr.InvalidTopicException.Code {
		t.Errorf("delete %s: %d", name, code)
	}
}

func assignment(partition int32, brokers ...int32) kmsg.CreateTopicsRequestTopicReplicaAssignment {
	a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	a.Partition, a.Replicas = partition, brokers
	return a
}

// TestCreateTopicsReplicaAssignmentIsAHint: a manual assignment of one
// replica per partition, as kafka-go, sarama and librdkafka's admin send,
// creates the topic (kaas places partitions itself); only a malformed one
// is refused, with Kafka's codes.
func TestCreateTopicsReplicaAssignmentIsAHint(t *testing.T) {
	b := startBroker(t, nil)
	c := b.dial(t)
	type tc struct {
		name       string
		partitions int32
		rf         int16
		assign     []kmsg.CreateTopicsRequestTopicReplicaAssignment
		code       int16
	}
	for _, tc := range []tc{
		{"ra-ok", -1, -1, []kmsg.CreateTopicsRequestTopicReplicaAssignment{assignment(0, 0), assignment(1, 0), assignment(2, 7)}, 0},
		{"ra-two-replicas", -1, -1, []kmsg.CreateTopicsRequestTopicReplicaAssignment{assignment(0, 0, 1)}, 0},
		{"ra-unordered", -1, -1, []kmsg.CreateTopicsRequestTopicReplicaAssignment{assignment(1, 0), assignment(0, 0)}, 0},
		{"ra-gap", -1, -1, []kmsg.CreateTopicsRequestTopicReplicaAssignment{assignment(0, 0), assignment(2, 0)}, kerr.InvalidReplicaAssignment.Code},
		{"ra-dup", -1, -1, []kmsg.CreateTopicsRequestTopicReplicaAssignment{assignment(0, 0), assignment(0, 0)}, kerr.InvalidReplicaAssignment.Code},
		{"ra-empty", -1, -1, []kmsg.CreateTopicsRequestTopicReplicaAssignment{assignment(0)}, kerr.InvalidReplicaAssignment.Code},
		{"ra-dup-broker", -1, -1, []kmsg.CreateTopicsRequestTopicReplicaAssignment{assignment(0, 1, 1)}, kerr.InvalidReplicaAssignment.Code},
		{"ra-negative", -1, -1, []kmsg.CreateTopicsRequestTopicReplicaAssignment{assignment(0, -3)}, kerr.InvalidReplicaAssignment.Code},
		{"ra-with-count", 2, -1, []kmsg.CreateTopicsRequestTopicReplicaAssignment{assignment(0, 0), assignment(1, 0)}, kerr.InvalidRequest.Code},
		{"ra-with-rf", -1, 1, []kmsg.CreateTopicsRequestTopicReplicaAssignment{assignment(0, 0)}, kerr.InvalidRequest.Code},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := createTopicsReq(7, false, tc.name, tc.partitions, nil)
			req.Topics[0].ReplicationFactor = tc.rf
			req.Topics[0].ReplicaAssignment = tc.assign
			st := c.do(req).(*kmsg.CreateTopicsResponse).Topics[0]
			if st.ErrorCode != tc.code {
				t.Fatalf("code %d (%s), want %d", st.ErrorCode, deref(st.ErrorMessage), tc.code)
			}
			if tc.code != 0 {
				if st.ErrorMessage == nil {
					t.Errorf("refused without a message")
				}
				return
			}
			if st.NumPartitions != int32(len(tc.assign)) || st.ReplicationFactor != 1 {
				t.Errorf("answer: %d partitions, replication factor %d", st.NumPartitions, st.ReplicationFactor)
			}
			if v, ok := b.eng.Topic(tc.name); !ok || len(v.Epochs) != len(tc.assign) {
				t.Errorf("topic: %+v %v", v, ok)
			}
		})
	}

	// CreatePartitions: an assignment for the new partitions is a hint too.
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.Version, cp.TimeoutMillis = 3, 15000
	ct := kmsg.NewCreatePartitionsRequestTopic()
	ct.Topic, ct.Count = "ra-ok", 5
	for range 2 {
		a := kmsg.NewCreatePartitionsRequestTopicAssignment()
		a.Replicas = []int32{0}
		ct.Assignment = append(ct.Assignment, a)
	}
	cp.Topics = append(cp.Topics, ct)
	if st := c.do(cp).(*kmsg.CreatePartitionsResponse).Topics[0]; st.ErrorCode != 0 {
		t.Fatalf("CreatePartitions with an assignment: %d %s", st.ErrorCode, deref(st.ErrorMessage))
	}
	ct.Count, ct.Assignment = 7, ct.Assignment[:1]
	cp.Topics[0] = ct
	if st := c.do(cp).(*kmsg.CreatePartitionsResponse).Topics[0]; st.ErrorCode != kerr.InvalidReplicaAssignment.Code {
		t.Fatalf("CreatePartitions with 1 assignment for 2 new partitions: %d %v", st.ErrorCode, st.ErrorMessage)
	}
}

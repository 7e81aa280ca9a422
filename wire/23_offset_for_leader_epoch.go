package wire

// OffsetForLeaderEpoch: versions 2-4.
//
// Behavior:
// * Answers from the partition's leader-epoch history (the manifest's):
//   the largest epoch at or below the requested one and the offset where it
//   ended, which is where the next epoch started; the current epoch ends at
//   the high watermark. Consumers use it after a leader epoch change to
//   detect truncation (KIP-320); kaas starts a new epoch at every open.
// * CurrentLeaderEpoch older than ours: FENCED_LEADER_EPOCH; newer:
//   UNKNOWN_LEADER_EPOCH. A partition this broker does not serve:
//   NOT_LEADER_OR_FOLLOWER; an unknown one: UNKNOWN_TOPIC_OR_PARTITION.
// * Authorization (Kafka's, for clients): DESCRIBE on each topic, else its
//   partitions are TOPIC_AUTHORIZATION_FAILED.
//
// Version notes:
// * v2: CurrentLeaderEpoch, ThrottleMillis (v0-1 are gone since Kafka 4.0)
// * v3: ReplicaID (kaas has no followers: every caller is a consumer)
// * v4: flexible

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleOffsetForLeaderEpoch(c *conn, kreq kmsg.Request, r *reply) {
	req := kreq.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		describable := c.allowedTopic(kmsg.ACLOperationDescribe, rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LeaderEpoch, sp.EndOffset = -1, -1
			part, err := c.s.eng.Partition(rt.Topic, rp.Partition)
			if !describable {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			} else if err != nil {
				sp.ErrorCode = errorCode(err)
			} else if code := epochCheck(rp.CurrentLeaderEpoch, part.Epoch()); code != 0 {
				sp.ErrorCode = code
			} else {
				sp.LeaderEpoch, sp.EndOffset = part.Log().EndOffsetForEpoch(rp.LeaderEpoch)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	r.finish(resp)
}

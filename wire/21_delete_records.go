package wire

// DeleteRecords: versions 0-2.
//
// Behavior:
// * Raises a partition's log start offset to the given offset, durably, and
//   answers the new low watermark; -1 means the high watermark. Segments
//   wholly below it are removed by the partition's owner.
// * Only the partition's owner serves it: elsewhere NOT_LEADER_OR_FOLLOWER
//   (the client refreshes metadata); an unknown topic or partition is
//   UNKNOWN_TOPIC_OR_PARTITION; an offset above the high watermark (or
//   below -1) is OFFSET_OUT_OF_RANGE, as in Kafka.
// * Failed partitions answer low watermark -1.
// * Authorization (Kafka's): DELETE on the topic, else every partition of
//   it is TOPIC_AUTHORIZATION_FAILED.
//
// Version notes:
// * v2: flexible

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleDeleteRecords(c *conn, kreq kmsg.Request, r *reply) {
	req := kreq.(*kmsg.DeleteRecordsRequest)
	c.async(r, func() {
		resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewDeleteRecordsResponseTopic()
			st.Topic = rt.Topic
			deletable := c.allowedTopic(kmsg.ACLOperationDelete, rt.Topic)
			for _, rp := range rt.Partitions {
				sp := kmsg.NewDeleteRecordsResponseTopicPartition()
				sp.Partition = rp.Partition
				if !deletable {
					sp.LowWatermark, sp.ErrorCode = -1, kerr.TopicAuthorizationFailed.Code
					st.Partitions = append(st.Partitions, sp)
					continue
				}
				low, err := c.s.eng.DeleteRecords(rt.Topic, rp.Partition, rp.Offset)
				sp.LowWatermark, sp.ErrorCode = low, errorCode(err)
				if err != nil {
					sp.LowWatermark = -1
				}
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		r.finish(resp)
	})
}

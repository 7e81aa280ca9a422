package wire

// ListOffsets: versions 1-7.
//
// Behavior:
// * -1 (latest) is the high watermark, or for read_committed (isolation
//   level 1) the last stable offset: the first offset of the oldest open
//   transaction; -2 (earliest) the log start offset; -3 (v7, max
//   timestamp) the batch holding the largest timestamp.
// * A timestamp finds the first record whose timestamp is at or after it,
//   answered with that record's offset and timestamp, as Kafka: the time
//   index is per batch, and the batch it finds is decoded (decompressed
//   where needed) to find the record. A LogAppendTime batch's records all
//   bear its append time. A stored batch that cannot be decoded answers
//   its base offset (before any matching record, never after).
// * No match: offset -1, timestamp -1, as Kafka.
// * Authorization (Kafka's): DESCRIBE on each topic, else its partitions
//   are TOPIC_AUTHORIZATION_FAILED.
//
// Version notes:
// * v2: isolation level
// * v4: CurrentLeaderEpoch and LeaderEpoch (KIP-320)
// * v6: flexible
// * v7: max timestamp (KIP-734)

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleListOffsets(c *conn, kreq kmsg.Request, r *reply) {
	req := kreq.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		var denied error
		if !c.allowedTopic(kmsg.ACLOperationDescribe, rt.Topic) {
			denied = topicDeniedError(kmsg.ACLOperationDescribe, rt.Topic)
		}
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.Timestamp, sp.Offset, sp.LeaderEpoch = -1, -1, -1
			part, err := c.s.eng.Partition(rt.Topic, rp.Partition)
			if denied != nil {
				err = denied
			}
			if err != nil {
				sp.ErrorCode = errorCode(err)
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			if code := epochCheck(rp.CurrentLeaderEpoch, part.Epoch()); code != 0 {
				sp.ErrorCode = code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			lg := part.Log()
			sp.LeaderEpoch = part.Epoch()
			switch rp.Timestamp {
			case -1:
				sp.Offset = lg.HighWatermark()
				if req.IsolationLevel == 1 {
					sp.Offset = part.LastStableOffset()
				}
			case -2:
				sp.Offset = lg.LogStartOffset()
			case -3:
				if off, ts, ok := lg.MaxTimestamp(); ok {
					sp.Offset, sp.Timestamp = off, ts
				}
			default:
				if off, ts, ok := lg.OffsetForTimestamp(rp.Timestamp); ok {
					sp.Offset, sp.Timestamp = off, ts
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	r.finish(resp)
}

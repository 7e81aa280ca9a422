package wire

// DescribeProducers: versions 0-0.
//
// Behavior:
// * Answered by each partition's owner from its producer state: every
//   producer with state at the partition, its epoch, last sequence, last
//   timestamp, the coordinator epoch of its last marker, and the first
//   offset of its open transaction (-1 if none). Other brokers answer
//   NOT_LEADER_OR_FOLLOWER, as Kafka (clients ask the leader).
// * Authorization (Kafka's): READ on the topic, else its partitions are
//   TOPIC_AUTHORIZATION_FAILED, with a message.

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleDescribeProducers(c *conn, kreq kmsg.Request, r *reply) {
	req := kreq.(*kmsg.DescribeProducersRequest)
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewDescribeProducersResponseTopic()
		rt.Topic = t.Topic
		var denied error
		if !c.allowedTopic(kmsg.ACLOperationRead, t.Topic) {
			denied = topicDeniedError(kmsg.ACLOperationRead, t.Topic)
		}
		for _, p := range t.Partitions {
			rp := kmsg.NewDescribeProducersResponseTopicPartition()
			rp.Partition = p
			part, err := c.s.eng.Partition(t.Topic, p)
			if denied != nil {
				err = denied
			}
			if err != nil {
				rp.ErrorCode, rp.ErrorMessage = errorCode(err), errMessage(err)
			} else {
				for _, pi := range part.Producers() {
					ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
					ap.ProducerID, ap.ProducerEpoch = pi.ProducerID, int32(pi.ProducerEpoch)
					ap.LastSequence, ap.LastTimestamp = pi.LastSequence, pi.LastTimestamp
					ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = pi.CoordinatorEpoch, pi.CurrentTxnStartOffset
					rp.ActiveProducers = append(rp.ActiveProducers, ap)
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	r.finish(resp)
}

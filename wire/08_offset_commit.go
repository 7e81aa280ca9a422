package wire

// OffsetCommit: versions 2-8.
//
// Behavior:
// * Routed to the group's coordinator, which appends one record per
//   partition to its shard's log and answers once they are durable and the
//   shard's fence re-checked: concurrent commits of every group of the
//   shard share one fsync (group commit).
// * Member commits are fenced by generation and member ID; a commit with
//   generation -1 and no member ID is a simple (admin) commit, accepted
//   only while the group has no members.
// * A partition of a topic that does not exist (or beyond its partition
//   count) gets UNKNOWN_TOPIC_OR_PARTITION and is not stored, as Kafka
//   answers; the others are committed.
// * When routing fails every partition gets the error (NOT_COORDINATOR,
//   COORDINATOR_LOAD_IN_PROGRESS), as Kafka answers.
//
// Version notes:
// * v2-4: RetentionTimeMillis (ignored since Kafka 2.1, here too)
// * v6: LeaderEpoch; v7: GroupInstanceID; v8: flexible
// * v0-1 are gone from Kafka 4 and not served.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleOffsetCommit(c *conn, kreq kmsg.Request, r *reply) {
	req := kreq.(*kmsg.OffsetCommitRequest)
	coord, err := c.s.eng.GroupCoordinator(req.Group)
	if err != nil {
		resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		resp.Topics = commitErrors(req.Topics, errorCode(err))
		r.finish(resp)
		return
	}
	known, unknown := c.splitKnownPartitions(req.Topics)
	c.async(r, func() {
		var resp *kmsg.OffsetCommitResponse
		if len(unknown) == 0 {
			resp = coord.OffsetCommit(c.ctx, req)
		} else {
			sub := *req
			sub.Topics = known
			resp = coord.OffsetCommit(c.ctx, &sub)
			resp.Topics = append(resp.Topics, commitErrors(unknown, kerr.UnknownTopicOrPartition.Code)...)
		}
		resp.Version = req.Version
		r.finish(resp)
	})
}

// splitKnownPartitions separates the partitions of existing topics from
// the others. It allocates only when some partition is unknown.
func (c *conn) splitKnownPartitions(topics []kmsg.OffsetCommitRequestTopic) (known, unknown []kmsg.OffsetCommitRequestTopic) {
	allKnown := true
	for _, t := range topics {
		n, ok := c.s.eng.TopicPartitions(t.Topic)
		for _, p := range t.Partitions {
			allKnown = allKnown && ok && p.Partition >= 0 && p.Partition < n
		}
	}
	if allKnown {
		return topics, nil
	}
	for _, t := range topics {
		n, ok := c.s.eng.TopicPartitions(t.Topic)
		kt, ut := t, t
		kt.Partitions, ut.Partitions = nil, nil
		for _, p := range t.Partitions {
			if ok && p.Partition >= 0 && p.Partition < n {
				kt.Partitions = append(kt.Partitions, p)
			} else {
				ut.Partitions = append(ut.Partitions, p)
			}
		}
		if len(kt.Partitions) > 0 {
			known = append(known, kt)
		}
		if len(ut.Partitions) > 0 {
			unknown = append(unknown, ut)
		}
	}
	return known, unknown
}

// commitErrors answers every partition of topics with code.
func commitErrors(topics []kmsg.OffsetCommitRequestTopic, code int16) []kmsg.OffsetCommitResponseTopic {
	out := make([]kmsg.OffsetCommitResponseTopic, 0, len(topics))
	for _, t := range topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		out = append(out, rt)
	}
	return out
}

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
// * When routing fails every partition gets the error (NOT_COORDINATOR,
//   COORDINATOR_LOAD_IN_PROGRESS), as Kafka answers.
//
// Version notes:
// * v2-4: RetentionTimeMillis (ignored since Kafka 2.1, here too)
// * v6: LeaderEpoch; v7: GroupInstanceID; v8: flexible
// * v0-1 are gone from Kafka 4 and not served.

import "github.com/twmb/franz-go/pkg/kmsg"

func handleOffsetCommit(c *conn, kreq kmsg.Request, r *reply) {
	req := kreq.(*kmsg.OffsetCommitRequest)
	coord, err := c.s.eng.GroupCoordinator(req.Group)
	if err != nil {
		resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		code := errorCode(err)
		for _, t := range req.Topics {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		r.finish(resp)
		return
	}
	c.async(r, func() {
		resp := coord.OffsetCommit(c.ctx, req)
		resp.Version = req.Version
		r.finish(resp)
	})
}

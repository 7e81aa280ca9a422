package wire

// OffsetCommit: versions 2-10.
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
// * Each commit is stored with the topic ID of the incarnation it is for,
//   and applies to that incarnation only (engine/groups/incarnations.go).
//   From v10 the request names topics by ID, the one the client consumed
//   under: an ID that is not a live topic's (deleted, perhaps recreated
//   with a new ID) gets UNKNOWN_TOPIC_ID and is not stored, so a commit
//   made for an old incarnation never lands on the new one.
// * With the authorizer on, READ on the group (else every partition gets
//   GROUP_AUTHORIZATION_FAILED), then READ on each topic: the partitions
//   of a topic the principal may not read get TOPIC_AUTHORIZATION_FAILED
//   and are not stored, as Kafka answers.
//
// Version notes:
// * v2-4: RetentionTimeMillis (ignored since Kafka 2.1, here too)
// * v6: LeaderEpoch; v7: GroupInstanceID; v8: flexible
// * v9: KIP-848 member epochs, for groups of the new protocol only
//   (kaas's are classic groups: the same as v8)
// * v10: topic IDs instead of names
// * v0-1 are gone from Kafka 4 and not served.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleOffsetCommit(c *conn, kreq kmsg.Request, r *reply) {
	req := kreq.(*kmsg.OffsetCommitRequest)
	if !c.allowedGroup(kmsg.ACLOperationRead, req.Group) {
		resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		resp.Topics = commitErrors(req.Topics, codeGroupAuthz)
		r.finish(resp)
		return
	}
	coord, err := c.s.eng.GroupCoordinator(req.Group)
	if err != nil {
		resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		resp.Topics = commitErrors(req.Topics, errorCode(err))
		r.finish(resp)
		return
	}
	topics, unknownIDs := req.Topics, []kmsg.OffsetCommitRequestTopic(nil)
	if req.Version >= 10 {
		topics, unknownIDs = c.namedByID(req.Topics)
	}
	topics, denied := splitAuthorizedTopics(c, kmsg.ACLOperationRead, topics, func(t kmsg.OffsetCommitRequestTopic) string { return t.Topic })
	known, unknown := c.splitKnownPartitions(topics)
	c.async(r, func() {
		sub := *req
		sub.Topics = known
		resp := coord.OffsetCommit(c.ctx, &sub)
		resp.Topics = append(resp.Topics, commitErrors(unknown, kerr.UnknownTopicOrPartition.Code)...)
		resp.Topics = append(resp.Topics, commitErrors(unknownIDs, kerr.UnknownTopicID.Code)...)
		resp.Topics = append(resp.Topics, commitErrors(denied, codeTopicAuthz)...)
		resp.Version = req.Version
		r.finish(resp)
	})
}

// namedByID fills in the names of topics named by ID (v10+), keeping the
// IDs (the coordinator checks them again against the live incarnation);
// topics whose ID is no live topic's are returned apart.
func (c *conn) namedByID(topics []kmsg.OffsetCommitRequestTopic) (named, unknown []kmsg.OffsetCommitRequestTopic) {
	named = make([]kmsg.OffsetCommitRequestTopic, 0, len(topics))
	for _, t := range topics {
		name, _, ok := c.s.topicByID(t.TopicID)
		if !ok {
			unknown = append(unknown, t)
			continue
		}
		t.Topic = name
		named = append(named, t)
	}
	return named, unknown
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
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		out = append(out, rt)
	}
	return out
}

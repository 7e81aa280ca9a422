package wire

// OffsetFetch: versions 1-8.
//
// Behavior:
// * Each group is routed to its coordinator, which answers from memory
//   with only durable commits. From v8 one request names several groups
//   (each routed on its own, each with its own error); before v8 the one
//   group's answer is converted to the older shape.
// * A partition with no committed offset gets offset -1 and no error; no
//   topics (v2+) means every partition the group committed.
// * With the authorizer on, DESCRIBE on each group (else the group's
//   GROUP_AUTHORIZATION_FAILED; before v2, on every partition asked), and
//   DESCRIBE on each topic, as Kafka: an all-topics fetch leaves out the
//   topics the principal may not describe, a named one answers their
//   partitions TOPIC_AUTHORIZATION_FAILED (offset -1).
//
// Version notes:
// * v2: top-level ErrorCode, null topics = all
// * v5: LeaderEpoch; v6: flexible; v7: RequireStable
// * v8: several groups (KIP-709)
// * v0 reads ZooKeeper offsets in Kafka and is gone from Kafka 4.

import "github.com/twmb/franz-go/pkg/kmsg"

func handleOffsetFetch(c *conn, kreq kmsg.Request, r *reply) {
	req := kreq.(*kmsg.OffsetFetchRequest)
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version >= 8 {
		for _, g := range req.Groups {
			resp.Groups = append(resp.Groups, c.offsetFetch(g, req.RequireStable))
		}
		r.finish(resp)
		return
	}
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = req.Group
	if req.Topics != nil {
		g.Topics = make([]kmsg.OffsetFetchRequestGroupTopic, 0, len(req.Topics))
		for _, t := range req.Topics {
			gt := kmsg.NewOffsetFetchRequestGroupTopic()
			gt.Topic, gt.Partitions = t.Topic, t.Partitions
			g.Topics = append(g.Topics, gt)
		}
	}
	out := c.offsetFetch(g, req.RequireStable)
	resp.ErrorCode = out.ErrorCode
	for _, t := range out.Topics {
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if req.Version < 2 && out.ErrorCode != 0 {
		// v1 has no group-level error: each asked partition carries it.
		resp.Topics = resp.Topics[:0]
		for _, t := range req.Topics {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.ErrorCode = p, -1, out.ErrorCode
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
	r.finish(resp)
}

func (c *conn) offsetFetch(g kmsg.OffsetFetchRequestGroup, requireStable bool) kmsg.OffsetFetchResponseGroup {
	if !c.allowedGroup(kmsg.ACLOperationDescribe, g.Group) {
		out := kmsg.NewOffsetFetchResponseGroup()
		out.Group, out.ErrorCode = g.Group, codeGroupAuthz
		return out
	}
	coord, err := c.s.eng.GroupCoordinator(g.Group)
	if err != nil {
		out := kmsg.NewOffsetFetchResponseGroup()
		out.Group, out.ErrorCode = g.Group, errorCode(err)
		return out
	}
	if g.Topics == nil {
		out := coord.OffsetFetch(g, requireStable)
		out.Group = g.Group
		out.Topics, _ = splitAuthorizedTopics(c, kmsg.ACLOperationDescribe, out.Topics, func(t kmsg.OffsetFetchResponseGroupTopic) string { return t.Topic })
		return out
	}
	asked := len(g.Topics)
	var denied []kmsg.OffsetFetchRequestGroupTopic
	g.Topics, denied = splitAuthorizedTopics(c, kmsg.ACLOperationDescribe, g.Topics, func(t kmsg.OffsetFetchRequestGroupTopic) string { return t.Topic })
	out := kmsg.NewOffsetFetchResponseGroup()
	if len(g.Topics) > 0 || asked == 0 {
		out = coord.OffsetFetch(g, requireStable)
	}
	out.Group = g.Group
	for _, t := range denied {
		rt := kmsg.NewOffsetFetchResponseGroupTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch, rp.ErrorCode = p, -1, -1, codeTopicAuthz
			rt.Partitions = append(rt.Partitions, rp)
		}
		out.Topics = append(out.Topics, rt)
	}
	return out
}

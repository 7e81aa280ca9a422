package wire

// OffsetDelete: versions 0-0.
//
// Behavior:
// * Routed to the group's coordinator, which deletes the committed offsets
//   of partitions no member is subscribed to (GROUP_SUBSCRIBED_TO_TOPIC
//   otherwise), durably before the answer.
// * With the authorizer on, DELETE on the group (else the top-level
//   GROUP_AUTHORIZATION_FAILED), then READ on each topic: the partitions
//   of a topic the principal may not read get TOPIC_AUTHORIZATION_FAILED
//   and keep their offsets, as Kafka answers.

import "github.com/twmb/franz-go/pkg/kmsg"

func handleOffsetDelete(c *conn, kreq kmsg.Request, r *reply) {
	req := kreq.(*kmsg.OffsetDeleteRequest)
	coord, err := c.s.eng.GroupCoordinator(req.Group)
	denied := !c.allowedGroup(kmsg.ACLOperationDelete, req.Group)
	if denied || err != nil {
		resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
		resp.ErrorCode = codeGroupAuthz
		if !denied {
			resp.ErrorCode = errorCode(err)
		}
		r.finish(resp)
		return
	}
	topics, deniedTopics := splitAuthorizedTopics(c, kmsg.ACLOperationRead, req.Topics, func(t kmsg.OffsetDeleteRequestTopic) string { return t.Topic })
	c.async(r, func() {
		sub := *req
		sub.Topics = topics
		resp := coord.OffsetDelete(c.ctx, &sub)
		resp.Version = req.Version
		for _, t := range deniedTopics {
			rt := kmsg.NewOffsetDeleteResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetDeleteResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, codeTopicAuthz
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		r.finish(resp)
	})
}

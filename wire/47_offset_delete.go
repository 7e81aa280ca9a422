package wire

// OffsetDelete: versions 0-0.
//
// Behavior:
// * Routed to the group's coordinator, which deletes the committed offsets
//   of partitions no member is subscribed to (GROUP_SUBSCRIBED_TO_TOPIC
//   otherwise), durably before the answer.

import "github.com/twmb/franz-go/pkg/kmsg"

func handleOffsetDelete(c *conn, kreq kmsg.Request, r *reply) {
	req := kreq.(*kmsg.OffsetDeleteRequest)
	coord, err := c.s.eng.GroupCoordinator(req.Group)
	if err != nil {
		resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
		resp.ErrorCode = errorCode(err)
		r.finish(resp)
		return
	}
	c.async(r, func() {
		resp := coord.OffsetDelete(c.ctx, req)
		resp.Version = req.Version
		r.finish(resp)
	})
}

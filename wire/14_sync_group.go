package wire

// SyncGroup: versions 0-5.
//
// Behavior:
// * Routed to the group's coordinator. Followers wait for the leader's
//   assignment; the leader's assignment is written to the shard's log
//   (durable and fenced) before anyone gets an answer, so a coordinator
//   that fails over keeps the generation and its assignment.
// * With the authorizer on, READ on the group, else
//   GROUP_AUTHORIZATION_FAILED.
//
// Version notes:
// * v3: GroupInstanceID; v4: flexible; v5: ProtocolType and Protocol,
//   checked against the group's

import "github.com/twmb/franz-go/pkg/kmsg"

func handleSyncGroup(c *conn, kreq kmsg.Request, r *reply) {
	req := kreq.(*kmsg.SyncGroupRequest)
	coord, err := c.s.eng.GroupCoordinator(req.Group)
	denied := !c.allowedGroup(kmsg.ACLOperationRead, req.Group)
	if denied || err != nil {
		resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = codeGroupAuthz
		if !denied {
			resp.ErrorCode = errorCode(err)
		}
		r.finish(resp)
		return
	}
	c.async(r, func() {
		resp := coord.SyncGroup(c.ctx, req)
		resp.Version = req.Version
		r.finish(resp)
	})
}

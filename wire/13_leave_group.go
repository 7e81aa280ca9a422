package wire

// LeaveGroup: versions 0-5.
//
// Behavior:
// * Routed to the group's coordinator. A group whose last member leaves
//   becomes Empty, which is written to the shard's log before the answer.
// * With the authorizer on, READ on the group, else
//   GROUP_AUTHORIZATION_FAILED.
//
// Version notes:
// * v3: a batch of members, each by member ID or group instance ID
//   (KIP-345), with per-member errors; v4: flexible; v5: Reason

import "github.com/twmb/franz-go/pkg/kmsg"

func handleLeaveGroup(c *conn, kreq kmsg.Request, r *reply) {
	req := kreq.(*kmsg.LeaveGroupRequest)
	coord, err := c.s.eng.GroupCoordinator(req.Group)
	denied := !c.allowedGroup(kmsg.ACLOperationRead, req.Group)
	if denied || err != nil {
		resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
		resp.ErrorCode = codeGroupAuthz
		if !denied {
			resp.ErrorCode = errorCode(err)
		}
		r.finish(resp)
		return
	}
	c.async(r, func() {
		resp := coord.LeaveGroup(c.ctx, req)
		resp.Version = req.Version
		r.finish(resp)
	})
}

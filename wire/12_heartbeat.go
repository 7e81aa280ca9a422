package wire

// Heartbeat: versions 0-4.
//
// Behavior:
// * Routed to the group's coordinator; answered from memory (a heartbeat
//   writes nothing).
// * With the authorizer on, READ on the group, else
//   GROUP_AUTHORIZATION_FAILED.
//
// Version notes:
// * v3: GroupInstanceID; v4: flexible

import "github.com/twmb/franz-go/pkg/kmsg"

func handleHeartbeat(c *conn, kreq kmsg.Request, r *reply) {
	req := kreq.(*kmsg.HeartbeatRequest)
	coord, err := c.s.eng.GroupCoordinator(req.Group)
	denied := !c.allowedGroup(kmsg.ACLOperationRead, req.Group)
	if denied || err != nil {
		resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = codeGroupAuthz
		if !denied {
			resp.ErrorCode = errorCode(err)
		}
		r.finish(resp)
		return
	}
	resp := coord.Heartbeat(req)
	resp.Version = req.Version
	r.finish(resp)
}

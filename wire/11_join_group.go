package wire

// JoinGroup: versions 0-9.
//
// Behavior:
// * Routed to the coordinator of the group's shard (engine/groups), which
//   answers once the rebalance completes: the request waits there while
//   the connection goes on reading (responses stay in request order).
// * NOT_COORDINATOR when this broker does not own the group's shard,
//   COORDINATOR_LOAD_IN_PROGRESS while it takes the shard over.
// * With the authorizer on, READ on the group, else
//   GROUP_AUTHORIZATION_FAILED.
//
// Version notes (handled by the coordinator):
// * v4: member ID required on first join (KIP-394)
// * v5: GroupInstanceID (static membership, KIP-345)
// * v6: flexible; v7: ProtocolType in the response; v8: Reason;
//   v9: SkipAssignment (always false)

import (
	"net"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/engine/groups"
)

func handleJoinGroup(c *conn, kreq kmsg.Request, r *reply) {
	req := kreq.(*kmsg.JoinGroupRequest)
	coord, err := c.s.eng.GroupCoordinator(req.Group)
	denied := !c.allowedGroup(kmsg.ACLOperationRead, req.Group)
	if denied || err != nil {
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode, resp.Generation, resp.MemberID = codeGroupAuthz, -1, req.MemberID
		if !denied {
			resp.ErrorCode = errorCode(err)
		}
		r.finish(resp)
		return
	}
	c.async(r, func() {
		host, _, _ := net.SplitHostPort(c.nc.RemoteAddr().String())
		resp := coord.JoinGroup(groups.WithClient(c.ctx, c.clientID, "/"+host), req)
		resp.Version = req.Version
		r.finish(resp)
	})
}

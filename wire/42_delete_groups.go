package wire

// DeleteGroups: versions 0-2.
//
// Behavior:
// * Each group is routed to its coordinator, which deletes an empty
//   group and its committed offsets (tombstones in the shard's log,
//   durable before the answer): GROUP_ID_NOT_FOUND if there is no such
//   group, NON_EMPTY_GROUP if it has members.
// * With the authorizer on, DELETE on each group, else
//   GROUP_AUTHORIZATION_FAILED in its entry.
//
// Version notes:
// * v2: flexible

import "github.com/twmb/franz-go/pkg/kmsg"

func handleDeleteGroups(c *conn, kreq kmsg.Request, r *reply) {
	req := kreq.(*kmsg.DeleteGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	c.async(r, func() {
		for _, name := range req.Groups {
			g := kmsg.NewDeleteGroupsResponseGroup()
			g.Group = name
			if !c.allowedGroup(kmsg.ACLOperationDelete, name) {
				g.ErrorCode = codeGroupAuthz
			} else if coord, err := c.s.eng.GroupCoordinator(name); err != nil {
				g.ErrorCode = errorCode(err)
			} else {
				g.ErrorCode = coord.DeleteGroup(c.ctx, name)
			}
			resp.Groups = append(resp.Groups, g)
		}
		r.finish(resp)
	})
}

package wire

// DescribeGroups: versions 0-5.
//
// Behavior:
// * Each group is routed to its coordinator; a group this broker does not
//   coordinate gets NOT_COORDINATOR (or COORDINATOR_LOAD_IN_PROGRESS) in
//   its own entry. An unknown group is described as Dead with no error, as
//   Kafka does.
// * With the authorizer on, DESCRIBE on each group, else
//   GROUP_AUTHORIZATION_FAILED (with a message, v6) in its entry.
// * Authorized operations (v3+, KIP-430), when asked for, are the group
//   operations (READ, DESCRIBE, DELETE) the caller may perform on the
//   group; all of them with the authorizer off.
//
// Version notes:
// * v3: IncludeAuthorizedOperations; v4: member GroupInstanceID;
//   v5: flexible

import "github.com/twmb/franz-go/pkg/kmsg"

func handleDescribeGroups(c *conn, kreq kmsg.Request, r *reply) {
	req := kreq.(*kmsg.DescribeGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, name := range req.Groups {
		if !c.allowedGroup(kmsg.ACLOperationDescribe, name) {
			g := kmsg.NewDescribeGroupsResponseGroup()
			g.Group, g.ErrorCode = name, codeGroupAuthz
			g.ErrorMessage = authzMessagePtr(groupDenied(kmsg.ACLOperationDescribe, name))
			g.AuthorizedOperations = kip430Unasked
			resp.Groups = append(resp.Groups, g)
			continue
		}
		coord, err := c.s.eng.GroupCoordinator(name)
		var g kmsg.DescribeGroupsResponseGroup
		if err != nil {
			g = kmsg.NewDescribeGroupsResponseGroup()
			g.Group, g.ErrorCode, g.ErrorMessage = name, errorCode(err), errMessage(err)
		} else {
			g = coord.DescribeGroup(name)
			g.Group = name
		}
		g.AuthorizedOperations = kip430Unasked
		if req.IncludeAuthorizedOperations {
			g.AuthorizedOperations = c.kip430Operations(kmsg.ACLResourceTypeGroup, name, groupACLOps)
		}
		resp.Groups = append(resp.Groups, g)
	}
	r.finish(resp)
}

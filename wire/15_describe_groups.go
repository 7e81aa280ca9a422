package wire

// DescribeGroups: versions 0-5.
//
// Behavior:
// * Each group is routed to its coordinator; a group this broker does not
//   coordinate gets NOT_COORDINATOR (or COORDINATOR_LOAD_IN_PROGRESS) in
//   its own entry. An unknown group is described as Dead with no error, as
//   Kafka does.
// * Authorized operations (v3+), when asked for, are every group
//   operation: kaas has no ACLs.
//
// Version notes:
// * v3: IncludeAuthorizedOperations; v4: member GroupInstanceID;
//   v5: flexible

import "github.com/twmb/franz-go/pkg/kmsg"

// groupOperations is READ, DELETE and DESCRIBE as a Kafka ACL operation
// bit set (the operations a group has).
const groupOperations = 1<<3 | 1<<6 | 1<<8

func handleDescribeGroups(c *conn, kreq kmsg.Request, r *reply) {
	req := kreq.(*kmsg.DescribeGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, name := range req.Groups {
		coord, err := c.s.eng.GroupCoordinator(name)
		var g kmsg.DescribeGroupsResponseGroup
		if err != nil {
			g = kmsg.NewDescribeGroupsResponseGroup()
			g.Group, g.ErrorCode, g.ErrorMessage = name, errorCode(err), errMessage(err)
		} else {
			g = coord.DescribeGroup(name)
			g.Group = name
		}
		g.AuthorizedOperations = -2147483648 // not asked for
		if req.IncludeAuthorizedOperations {
			g.AuthorizedOperations = groupOperations
		}
		resp.Groups = append(resp.Groups, g)
	}
	r.finish(resp)
}

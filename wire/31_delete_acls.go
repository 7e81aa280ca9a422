package wire

// DeleteAcls: versions 0-3.
//
// Behavior:
// * Removes every stored ACL a filter selects (ANY or a null field matches
//   every value, MATCH every ACL that applies to the named resource) and
//   answers, by filter in request order, the ACLs it removed; an ACL
//   two filters select is removed once and listed under both. It returns
//   once every live broker enforces the removal (engine DeleteACLs).
// * A filter with an UNKNOWN field is INVALID_REQUEST for that filter,
//   with a message; the others are still applied.
// * Needs ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED for every
//   filter, with a message); without an authorizer every filter is
//   SECURITY_DISABLED.
//
// Version notes:
// * v0 has no pattern type: every filter is LITERAL.
// * v2+: flexible.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/engine/acl"
)

func handleDeleteAcls(c *conn, kreq kmsg.Request, r *reply) {
	req := kreq.(*kmsg.DeleteACLsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	resp.Results = make([]kmsg.DeleteACLsResponseResult, len(req.Filters))
	for i := range resp.Results {
		resp.Results[i] = kmsg.NewDeleteACLsResponseResult()
	}
	if err := c.aclGate(kmsg.ACLOperationAlter); err != nil {
		for i := range resp.Results {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = errorCode(err), errMessage(err)
		}
		r.finish(resp)
		return
	}
	var valid []acl.Filter
	var at []int // the request filter each valid one came from
	for i, rf := range req.Filters {
		f := acl.Filter{ResourceType: rf.ResourceType, ResourceName: rf.ResourceName, PatternType: rf.ResourcePatternType,
			Principal: rf.Principal, Host: rf.Host, Operation: rf.Operation, Permission: rf.PermissionType}
		if req.Version == 0 {
			f.PatternType = kmsg.ACLResourcePatternTypeLiteral
		}
		if err := validateFilter(f); err != nil {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = errorCode(err), errMessage(err)
			continue
		}
		valid = append(valid, f)
		at = append(at, i)
	}
	if len(valid) == 0 {
		r.finish(resp)
		return
	}
	c.async(r, func() {
		matched, err := c.s.eng.DeleteACLs(c.ctx, valid)
		for j, i := range at {
			res := &resp.Results[i]
			if err != nil {
				res.ErrorCode, res.ErrorMessage = errorCode(err), errMessage(err)
				continue
			}
			for _, b := range matched[j] {
				m := kmsg.NewDeleteACLsResponseResultMatchingACL()
				m.ResourceType, m.ResourceName, m.ResourcePatternType = b.ResourceType, b.ResourceName, b.PatternType
				m.Principal, m.Host, m.Operation, m.PermissionType = b.Principal, b.Host, b.Operation, b.Permission
				res.MatchingACLs = append(res.MatchingACLs, m)
			}
		}
		r.finish(resp)
	})
}

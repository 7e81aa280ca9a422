package wire

// DescribeAcls: versions 0-3.
//
// Behavior:
// * Answers the ACLs the filter selects, as this broker enforces them,
//   grouped by resource pattern (sorted): ANY or a null field matches
//   every value, a pattern type of MATCH selects every ACL that applies
//   to the named resource (its literal name, the wildcard, its prefixes).
// * Needs DESCRIBE on the cluster (CLUSTER_AUTHORIZATION_FAILED, with a
//   message); a broker without an authorizer answers SECURITY_DISABLED.
// * A filter with an UNKNOWN field is INVALID_REQUEST, with a message.
//
// Version notes:
// * v0 has no pattern type: the filter and the answer are LITERAL.
// * v2+: flexible.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/engine/acl"
)

func handleDescribeAcls(c *conn, kreq kmsg.Request, r *reply) {
	req := kreq.(*kmsg.DescribeACLsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	f := acl.Filter{ResourceType: req.ResourceType, ResourceName: req.ResourceName, PatternType: req.ResourcePatternType,
		Principal: req.Principal, Host: req.Host, Operation: req.Operation, Permission: req.PermissionType}
	if req.Version == 0 {
		f.PatternType = kmsg.ACLResourcePatternTypeLiteral
	}
	err := c.aclGate(kmsg.ACLOperationDescribe)
	if err == nil {
		err = validateFilter(f)
	}
	var bindings []acl.Binding
	if err == nil {
		bindings, err = c.s.eng.DescribeACLs(f)
	}
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = errorCode(err), errMessage(err)
		r.finish(resp)
		return
	}
	resp.Resources = describedResources(bindings)
	r.finish(resp)
}

// describedResources groups bindings (sorted, so one pattern's are
// adjacent) by resource pattern.
func describedResources(bindings []acl.Binding) []kmsg.DescribeACLsResponseResource {
	var out []kmsg.DescribeACLsResponseResource
	for _, b := range bindings {
		if n := len(out); n == 0 || out[n-1].ResourceType != b.ResourceType ||
			out[n-1].ResourceName != b.ResourceName || out[n-1].ResourcePatternType != b.PatternType {
			res := kmsg.NewDescribeACLsResponseResource()
			res.ResourceType, res.ResourceName, res.ResourcePatternType = b.ResourceType, b.ResourceName, b.PatternType
			out = append(out, res)
		}
		a := kmsg.NewDescribeACLsResponseResourceACL()
		a.Principal, a.Host, a.Operation, a.PermissionType = b.Principal, b.Host, b.Operation, b.Permission
		last := &out[len(out)-1]
		last.ACLs = append(last.ACLs, a)
	}
	return out
}

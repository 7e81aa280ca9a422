package wire

// CreateAcls: versions 0-3.
//
// Behavior:
// * Stores each creation as one ACL and answers once every live broker
//   enforces them (engine CreateACLs); an ACL already stored is kept as it
//   is and answered as created.
// * Each creation is answered in request order: an invalid one (UNKNOWN or
//   ANY fields, an empty name or host, a principal not Type:name, a
//   CLUSTER resource not named kafka-cluster, a DELEGATION_TOKEN or USER
//   resource, which kaas has nothing to authorize) is INVALID_REQUEST with
//   its reason, and the valid ones are still stored.
// * Needs ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED for every
//   creation, with a message); without an authorizer every creation is
//   SECURITY_DISABLED.
//
// Version notes:
// * v0 has no pattern type: every creation is LITERAL.
// * v2+: flexible.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/engine/acl"
)

func handleCreateAcls(c *conn, kreq kmsg.Request, r *reply) {
	req := kreq.(*kmsg.CreateACLsRequest)
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	resp.Results = make([]kmsg.CreateACLsResponseResult, len(req.Creations))
	for i := range resp.Results {
		resp.Results[i] = kmsg.NewCreateACLsResponseResult()
	}
	if err := c.aclGate(kmsg.ACLOperationAlter); err != nil {
		for i := range resp.Results {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = errorCode(err), errMessage(err)
		}
		r.finish(resp)
		return
	}
	var valid []acl.Binding
	var at []int // the creation each valid binding came from
	for i, cr := range req.Creations {
		b := acl.Binding{ResourceType: cr.ResourceType, ResourceName: cr.ResourceName, PatternType: cr.ResourcePatternType,
			Principal: cr.Principal, Host: cr.Host, Operation: cr.Operation, Permission: cr.PermissionType}
		if req.Version == 0 {
			b.PatternType = kmsg.ACLResourcePatternTypeLiteral
		}
		if err := validateCreation(b); err != nil {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = errorCode(err), errMessage(err)
			continue
		}
		valid = append(valid, b)
		at = append(at, i)
	}
	if len(valid) == 0 {
		r.finish(resp)
		return
	}
	c.async(r, func() {
		if err := c.s.eng.CreateACLs(c.ctx, valid); err != nil {
			for _, i := range at {
				resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = errorCode(err), errMessage(err)
			}
		}
		r.finish(resp)
	})
}

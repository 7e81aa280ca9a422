package wire

// DescribeUserScramCredentials: versions 0-0.
//
// Behavior:
// * Reads the SCRAM credentials stored under the cluster directory (the
//   files kaasctl users writes; engine/auth) and answers each user's
//   mechanisms and iterations, never a salt or key.
// * Null or empty Users describes every user with a credential, sorted by
//   name. Otherwise each named user is answered once, in request order: a
//   user with no credential (or an empty name) is RESOURCE_NOT_FOUND, a
//   user named twice DUPLICATE_RESOURCE, each with Kafka's message.
// * More than 1000 users in one request is INVALID_REQUEST for the
//   request; a credential store that cannot be read fails the request
//   with its error.
// * Authorization (Kafka's): DESCRIBE on the cluster, else the request is
//   CLUSTER_AUTHORIZATION_FAILED, with a message.

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/engine/auth"
)

func handleDescribeUserScramCredentials(c *conn, kreq kmsg.Request, r *reply) {
	req := kreq.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	c.async(r, func() {
		resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
		var err error
		switch {
		case !c.allowedCluster(kmsg.ACLOperationDescribe):
			err = clusterDeniedError(kmsg.ACLOperationDescribe)
		case len(req.Users) == 0:
			resp.Results, err = describeAllScramUsers(c.s.eng.ListCredentials)
		default:
			resp.Results, err = describeScramUsers(req.Users, c.s.eng.LoadCredential)
		}
		if err != nil {
			resp.ErrorCode = errorCode(err)
			msg := err.Error()
			resp.ErrorMessage = &msg
			resp.Results = nil
		}
		r.finish(resp)
	})
}

// describeAllScramUsers answers every user with a stored credential.
func describeAllScramUsers(list func() ([]auth.Credential, error)) ([]kmsg.DescribeUserSCRAMCredentialsResponseResult, error) {
	creds, err := list()
	if err != nil {
		return nil, fmt.Errorf("describe SCRAM credentials: %w", err)
	}
	var out []kmsg.DescribeUserSCRAMCredentialsResponseResult
	for _, cr := range creds { // sorted by user, then mechanism
		typ := scramMechanismType(cr.Mechanism)
		if typ == 0 {
			continue
		}
		if len(out) == 0 || out[len(out)-1].User != cr.User {
			res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
			res.User = cr.User
			out = append(out, res)
		}
		last := &out[len(out)-1]
		last.CredentialInfos = append(last.CredentialInfos, scramCredentialInfo(typ, cr.Iterations))
	}
	return out, nil
}

// describeScramUsers answers the users a request names, each once.
func describeScramUsers(users []kmsg.DescribeUserSCRAMCredentialsRequestUser,
	load func(string, auth.Mechanism) (auth.Credential, bool, error)) ([]kmsg.DescribeUserSCRAMCredentialsResponseResult, error) {
	if len(users) > maxScramUsers {
		return nil, &codedError{code: kerr.InvalidRequest.Code,
			err: fmt.Errorf("a request describes at most %d users, this one names %d", maxScramUsers, len(users))}
	}
	count := map[string]int{}
	for _, u := range users {
		count[u.Name]++
	}
	answered := map[string]bool{}
	var out []kmsg.DescribeUserSCRAMCredentialsResponseResult
	for _, u := range users {
		if answered[u.Name] {
			continue
		}
		answered[u.Name] = true
		res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		res.User = u.Name
		var msg string
		switch {
		case u.Name == "":
			res.ErrorCode, msg = kerr.ResourceNotFound.Code, "Cannot describe SCRAM credentials for empty username"
		case count[u.Name] > 1:
			res.ErrorCode, msg = kerr.DuplicateResource.Code, "Cannot describe SCRAM credentials for the same user twice in a single request: "+u.Name
		default:
			for _, m := range scramMechanisms {
				cr, ok, err := load(u.Name, m.mech)
				if err != nil {
					res.ErrorCode, msg = errorCode(err), fmt.Sprintf("Error describing SCRAM credentials for user %s: %v", u.Name, err)
					res.CredentialInfos = nil
					break
				}
				if ok {
					res.CredentialInfos = append(res.CredentialInfos, scramCredentialInfo(m.typ, cr.Iterations))
				}
			}
			if res.ErrorCode == 0 && len(res.CredentialInfos) == 0 {
				res.ErrorCode, msg = kerr.ResourceNotFound.Code, "Attempt to describe a user credential that does not exist: "+u.Name
			}
		}
		if msg != "" {
			res.ErrorMessage = &msg
		}
		out = append(out, res)
	}
	return out, nil
}

func scramCredentialInfo(typ int8, iterations int) kmsg.DescribeUserSCRAMCredentialsResponseResultCredentialInfo {
	ci := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
	ci.Mechanism, ci.Iterations = typ, int32(iterations)
	return ci
}

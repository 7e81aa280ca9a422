package wire

// FindCoordinator: versions 0-4.
//
// Behavior:
// * A group's coordinator is the live broker that owns the group's shard
//   in the assignment (engine/coordinators.go). Any broker answers, from
//   the assignment it last read; a client that reaches a broker the
//   assignment has since moved away from gets NOT_COORDINATOR there and
//   asks again.
// * No broker owns the shard yet (start-up, or its owner died and the
//   controller has not reassigned it): COORDINATOR_NOT_AVAILABLE, which
//   clients retry.
// * A transactional ID (key type 1) hashes to a coordinator shard like a
//   group ID, and the shard's owner coordinates it too.
// * With the authorizer on, each key needs DESCRIBE on its group (key
//   type 0) or transactional ID (key type 1): else
//   GROUP_AUTHORIZATION_FAILED or TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
//   with a message, for that key (v4 batches answer each key on its own).
//
// Version notes:
// * v1: KeyType, ErrorMessage
// * v3: flexible
// * v4: batched CoordinatorKeys (KIP-699)

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleFindCoordinator(c *conn, kreq kmsg.Request, r *reply) {
	req := kreq.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	if req.Version <= 3 {
		co := c.findCoordinator(req.CoordinatorType, req.CoordinatorKey)
		resp.NodeID, resp.Host, resp.Port, resp.ErrorCode = co.NodeID, co.Host, co.Port, co.ErrorCode
		if req.Version >= 1 {
			resp.ErrorMessage = co.ErrorMessage
		}
		r.finish(resp)
		return
	}
	for _, key := range req.CoordinatorKeys {
		resp.Coordinators = append(resp.Coordinators, c.findCoordinator(req.CoordinatorType, key))
	}
	r.finish(resp)
}

func (c *conn) findCoordinator(keyType int8, key string) kmsg.FindCoordinatorResponseCoordinator {
	co := kmsg.NewFindCoordinatorResponseCoordinator()
	co.Key, co.NodeID, co.Port = key, -1, -1
	if keyType != 0 && keyType != 1 {
		co.ErrorCode = kerr.InvalidRequest.Code
		msg := "unknown coordinator key type"
		co.ErrorMessage = &msg
		return co
	}
	if keyType == 0 && !c.allowedGroup(kmsg.ACLOperationDescribe, key) {
		co.ErrorCode, co.ErrorMessage = codeGroupAuthz, authzMessagePtr(groupDenied(kmsg.ACLOperationDescribe, key))
		return co
	}
	if keyType == 1 && !c.allowedTxn(kmsg.ACLOperationDescribe, key) {
		co.ErrorCode, co.ErrorMessage = codeTxnAuthz, authzMessagePtr(txnDenied(kmsg.ACLOperationDescribe, key))
		return co
	}
	b, err := c.s.eng.GroupCoordinatorBroker(key)
	if err != nil {
		co.ErrorCode, co.ErrorMessage = errorCode(err), errMessage(err)
		return co
	}
	co.NodeID = b.ID
	co.Host, co.Port = c.listener.address(c.s.eng, b)
	return co
}

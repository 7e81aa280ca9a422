package wire

// AddOffsetsToTxn: versions 0-4.
//
// Behavior:
// * Routed to the transactional ID's coordinator, which adds the group to
//   the ongoing transaction (its offset commits end with the transaction)
//   and answers once that is durable. The client then sends
//   TxnOffsetCommit to the group's coordinator.
// * With the authorizer on, WRITE on the transactional ID (else
//   TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then READ on the group (else
//   GROUP_AUTHORIZATION_FAILED).
//
// Version notes:
// * v2: PRODUCER_FENCED instead of INVALID_PRODUCER_EPOCH (KIP-588)
// * v3: flexible

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleAddOffsetsToTxn(c *conn, kreq kmsg.Request, r *reply) {
	req := kreq.(*kmsg.AddOffsetsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	if !c.allowedTxn(kmsg.ACLOperationWrite, req.TransactionalID) {
		resp.ErrorCode = codeTxnAuthz
		r.finish(resp)
		return
	}
	if !c.allowedGroup(kmsg.ACLOperationRead, req.Group) {
		resp.ErrorCode = codeGroupAuthz
		r.finish(resp)
		return
	}
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		r.finish(resp)
		return
	}
	tc, err := c.s.eng.TxnCoordinator(req.TransactionalID)
	if err != nil {
		resp.ErrorCode = errorCode(err)
		r.finish(resp)
		return
	}
	c.async(r, func() {
		code := tc.AddOffsets(c.ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group)
		resp.ErrorCode = fencedCode(code, req.Version, 2)
		r.finish(resp)
	})
}

package wire

// EndTxn: versions 0-4.
//
// Behavior:
// * Routed to the transactional ID's coordinator. The answer comes once
//   the decision (PrepareCommit or PrepareAbort) is durable in the
//   coordinator's shard log: from then on the outcome survives any crash.
//   The coordinator then has a marker written by every partition's owner
//   and completes the transaction; until it has, the producer's next
//   transaction gets CONCURRENT_TRANSACTIONS, which clients retry.
// * With the authorizer on, WRITE on the transactional ID, else
//   TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
//
// Version notes:
// * v2: PRODUCER_FENCED instead of INVALID_PRODUCER_EPOCH (KIP-588)
// * v3: flexible
// * v5 (KIP-890 part 2, an epoch bump per transaction) is not served:
//   clients keep to AddPartitionsToTxn, and partition owners verify
//   (KIP-890 part 1).

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleEndTxn(c *conn, kreq kmsg.Request, r *reply) {
	req := kreq.(*kmsg.EndTxnRequest)
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	if !c.allowedTxn(kmsg.ACLOperationWrite, req.TransactionalID) {
		resp.ErrorCode = codeTxnAuthz
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
		code := tc.EndTxn(c.ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit)
		resp.ErrorCode = fencedCode(code, req.Version, 2)
		r.finish(resp)
	})
}

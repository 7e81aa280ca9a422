package wire

// InitProducerID: versions 0-5.
//
// Behavior:
// * Idempotent producers (no transactional ID) get a producer ID never
//   issued before, from a block reserved by exclusive create on the volume,
//   at epoch 0. A producer re-initialising (v3+, KIP-360) gets a new ID.
// * Transactional producers are answered by their transactional ID's
//   coordinator (the owner of its coordinator shard, as for groups): the
//   ID keeps its producer ID and gets the next epoch, which fences every
//   older instance; an ongoing transaction is aborted first (the answer is
//   CONCURRENT_TRANSACTIONS until the abort completes, and clients retry).
//   The new epoch is durable in the shard's log before the answer.
// * With the authorizer on, a transactional producer needs WRITE on its
//   transactional ID (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an
//   idempotent one IDEMPOTENT_WRITE on the cluster or WRITE on some topic
//   (KIP-679), else CLUSTER_AUTHORIZATION_FAILED.
//
// Version notes:
// * v2: flexible
// * v3: ProducerID and ProducerEpoch in the request (KIP-360)
// * v4: PRODUCER_FENCED instead of INVALID_PRODUCER_EPOCH (KIP-588)

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleInitProducerID(c *conn, kreq kmsg.Request, r *reply) {
	req := kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		txnID := *req.TransactionalID
		if !c.allowedTxn(kmsg.ACLOperationWrite, txnID) {
			resp.ErrorCode = codeTxnAuthz
			r.finish(resp)
			return
		}
		if txnID == "" {
			resp.ErrorCode = kerr.InvalidRequest.Code
			r.finish(resp)
			return
		}
		tc, err := c.s.eng.TxnCoordinator(txnID)
		if err != nil {
			resp.ErrorCode = errorCode(err)
			r.finish(resp)
			return
		}
		c.async(r, func() {
			timeout := time.Duration(req.TransactionTimeoutMillis) * time.Millisecond
			pid, epoch, code := tc.InitProducerID(c.ctx, txnID, timeout, req.ProducerID, req.ProducerEpoch)
			resp.ErrorCode = fencedCode(code, req.Version, 4)
			if code == 0 {
				resp.ProducerID, resp.ProducerEpoch = pid, epoch
			}
			r.finish(resp)
		})
		return
	}
	if !c.allowedCluster(kmsg.ACLOperationIdempotentWrite) && !c.allowedAnyOf(kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTopic) {
		resp.ErrorCode = codeClusterAuthz
		r.finish(resp)
		return
	}
	c.async(r, func() {
		id, err := c.s.eng.NextProducerID()
		if err != nil {
			c.s.log.Error(err, "issue producer id")
			resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		} else {
			resp.ProducerID, resp.ProducerEpoch = id, 0
		}
		r.finish(resp)
	})
}

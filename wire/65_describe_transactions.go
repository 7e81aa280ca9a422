package wire

// DescribeTransactions: versions 0-0.
//
// Behavior:
// * Each transactional ID is described by its coordinator: state, producer
//   ID and epoch, timeout, start time and partitions. Asked elsewhere,
//   NOT_COORDINATOR (clients find the coordinator first); an unknown ID,
//   TRANSACTIONAL_ID_NOT_FOUND.
// * With the authorizer on, DESCRIBE on each transactional ID, else
//   TRANSACTIONAL_ID_AUTHORIZATION_FAILED in its entry.

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleDescribeTransactions(c *conn, kreq kmsg.Request, r *reply) {
	req := kreq.(*kmsg.DescribeTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	for _, id := range req.TransactionalIDs {
		tc, err := c.s.eng.TxnCoordinator(id)
		denied := !c.allowedTxn(kmsg.ACLOperationDescribe, id)
		if denied || err != nil {
			st := kmsg.NewDescribeTransactionsResponseTransactionState()
			st.TransactionalID, st.ErrorCode = id, codeTxnAuthz
			if !denied {
				st.ErrorCode = errorCode(err)
			}
			st.ProducerID, st.ProducerEpoch, st.StartTimestamp = -1, -1, -1
			resp.TransactionStates = append(resp.TransactionStates, st)
			continue
		}
		st := tc.Describe(id)
		st.TransactionalID = id
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	r.finish(resp)
}

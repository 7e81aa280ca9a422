package wire

// ListTransactions: versions 0-1.
//
// Behavior:
// * Each broker lists the transactional IDs of the coordinator shards it
//   serves (clients ask every broker and merge, as for ListGroups),
//   filtered by state, producer ID and (v1, KIP-994) how long the
//   transaction has been running. Unknown state names are listed back in
//   UnknownStateFilters.
// * With the authorizer on, only the transactional IDs the principal may
//   DESCRIBE are listed, as Kafka.

import (
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

var txnStates = map[string]bool{
	"Empty": true, "Ongoing": true, "PrepareCommit": true, "PrepareAbort": true,
	"CompleteCommit": true, "CompleteAbort": true, "Dead": true, "PrepareEpochFence": true,
}

func handleListTransactions(c *conn, kreq kmsg.Request, r *reply) {
	req := kreq.(*kmsg.ListTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	var states []string
	for _, s := range req.StateFilters {
		if txnStates[s] {
			states = append(states, s)
		} else {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, s)
		}
	}
	if len(req.StateFilters) > 0 && len(states) == 0 {
		r.finish(resp) // only unknown states: nothing matches
		return
	}
	minDuration := time.Duration(req.DurationFilterMillis) * time.Millisecond
	for _, tc := range c.s.eng.TxnCoordinators() {
		for _, st := range tc.List(states, req.ProducerIDFilters, minDuration) {
			if c.allowedTxn(kmsg.ACLOperationDescribe, st.TransactionalID) {
				resp.TransactionStates = append(resp.TransactionStates, st)
			}
		}
	}
	sort.Slice(resp.TransactionStates, func(i, j int) bool {
		return resp.TransactionStates[i].TransactionalID < resp.TransactionStates[j].TransactionalID
	})
	r.finish(resp)
}

package txns

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
)

// EndTxn commits or aborts txnID's transaction: it answers once the
// decision is durable; markers and completion follow in the background.
//
// As Kafka: a decision repeated while its markers are written answers
// CONCURRENT_TRANSACTIONS (retriable), after its completion 0; the other
// decision, or ending with no transaction, INVALID_TXN_STATE.
func (c *Coordinator) EndTxn(ctx context.Context, txnID string, producerID int64, epoch int16, commit bool) int16 {
	c.mu.Lock()
	t, code := c.producerOf(txnID, producerID, epoch)
	if code != 0 {
		c.mu.Unlock()
		return code
	}
	same := t.state == stateCompleteCommit || t.state == statePrepareCommit
	if !commit {
		same = t.state == stateCompleteAbort || t.state == statePrepareAbort
	}
	switch {
	case t.state == stateOngoing:
		now := c.nowMs()
		done := c.write("transaction decision", endChange(t, t.decided(commit, now), now))
		c.mu.Unlock()
		return answer(await(ctx, done))
	case same && prepared(t.state):
		code = kerr.ConcurrentTransactions.Code
	case same:
		code = 0
	default:
		code = kerr.InvalidTxnState.Code
	}
	c.mu.Unlock()
	return code
}

// endInBackground writes the markers of t's prepared transaction, then its
// completion. The markers are retried every MarkerRetry until written or
// the coordinator closes: the decision is durable, so the end state is
// known and re-driven (by the next owner too, if this one stops first).
// Under the lock.
func (c *Coordinator) endInBackground(t *txn) {
	if c.closed {
		return
	}
	m := t.markers(t.id, c.cfg.Epoch)
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		if (len(m.Partitions) > 0 || len(m.Groups) > 0) && !c.writeMarkers(m) {
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		// Nothing else changes a prepared transaction; this only guards
		// against a close (or a bug) in between.
		if c.closed || c.txns[t.id] != t || t.pending || !prepared(t.state) ||
			t.producerID != m.ProducerID || t.epoch != m.ProducerEpoch {
			return
		}
		// Errors are logged and fail the shard in write; no one waits.
		c.write("transaction completion", change{t: t, next: t.completed(c.nowMs())})
	}()
}

// writeMarkers calls the MarkerWriter until it succeeds; false if the
// coordinator closed first.
func (c *Coordinator) writeMarkers(m Markers) bool {
	for attempt := 1; ; attempt++ {
		err := c.cfg.Markers.WriteMarkers(c.ctx, m)
		if err == nil {
			return true
		}
		if c.ctx.Err() != nil {
			return false
		}
		log := c.log.V(1)
		if attempt == 1 {
			log = c.log
		}
		log.Info("transaction markers not written yet; retrying", "transactionalID", m.TransactionalID,
			"producerID", m.ProducerID, "epoch", m.ProducerEpoch, "commit", m.Commit, "attempt", attempt, "err", err.Error())
		if !c.sleep(c.cfg.MarkerRetry) {
			return false
		}
	}
}

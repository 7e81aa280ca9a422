package txns

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
)

// producerOf is txnID's state if producerID/epoch is its current producer,
// with no change of it pending; else the code to answer. Kafka's checks,
// in Kafka's order. Under the lock.
func (c *Coordinator) producerOf(txnID string, producerID int64, epoch int16) (*txn, int16) {
	if !validID(txnID) {
		return nil, kerr.InvalidRequest.Code
	}
	if code := c.refusal(); code != 0 {
		return nil, code
	}
	t := c.txns[txnID]
	switch {
	case t == nil || t.producerID != producerID:
		return nil, kerr.InvalidProducerIDMapping.Code
	case t.epoch != epoch:
		return nil, kerr.ProducerFenced.Code
	case t.pending:
		return nil, kerr.ConcurrentTransactions.Code
	}
	return t, 0
}

// add adds partitions and group to txnID's transaction; one code for all.
func (c *Coordinator) add(ctx context.Context, txnID string, producerID int64, epoch int16, parts []TopicPartition, group string) int16 {
	var giveUp <-chan struct{} // closed when EndWait has passed
	for {
		c.mu.Lock()
		t, code := c.producerOf(txnID, producerID, epoch)
		if code == 0 && !idle(t.state) && t.state != stateOngoing {
			code = kerr.ConcurrentTransactions.Code // its end is being written
		}
		if code == kerr.ConcurrentTransactions.Code && c.cfg.EndWait > 0 {
			if giveUp == nil {
				ch := make(chan struct{})
				timer := c.cfg.Clock.AfterFunc(c.cfg.EndWait, func() { close(ch) })
				defer timer.Stop()
				giveUp = ch
			}
			settled := c.settled
			c.mu.Unlock()
			select {
			case <-settled:
				continue // look again
			case <-giveUp:
			case <-ctx.Done():
			case <-c.ctx.Done():
			}
			return code
		}
		if code != 0 {
			c.mu.Unlock()
			return code
		}
		return c.addLocked(ctx, t, parts, group)
	}
}

// addLocked adds to t's transaction; c.mu is held and released.
func (c *Coordinator) addLocked(ctx context.Context, t *txn, parts []TopicPartition, group string) int16 {
	next, changed := t.withAdded(parts, group, c.nowMs())
	if !changed {
		c.mu.Unlock()
		return 0
	}
	done := c.write("transaction partitions", change{t: t, next: next})
	c.mu.Unlock()
	return answer(await(ctx, done))
}

// AddPartitions adds partitions to txnID's transaction, starting one if
// none is ongoing; one error code per partition, in order.
func (c *Coordinator) AddPartitions(ctx context.Context, txnID string, producerID int64, epoch int16, parts []TopicPartition) []int16 {
	code := c.add(ctx, txnID, producerID, epoch, parts, "")
	codes := make([]int16, len(parts))
	for i := range codes {
		codes[i] = code
	}
	return codes
}

// AddOffsets adds group's offsets to txnID's transaction, starting one if
// none is ongoing: its end completes the transaction's offset commits in
// the group (Markers.Groups).
func (c *Coordinator) AddOffsets(ctx context.Context, txnID string, producerID int64, epoch int16, group string) int16 {
	if group == "" {
		return kerr.InvalidGroupID.Code
	}
	return c.add(ctx, txnID, producerID, epoch, nil, group)
}

// VerifyPartitions answers, without writing, whether each partition is in
// txnID's ongoing transaction at producerID/epoch (KIP-890 part 1: a
// partition owner asks before it accepts the transaction's first batch).
// Only durable additions count. A wrong epoch of the current producer ID
// is PRODUCER_FENCED; anything else but a durable ongoing transaction with
// the partition is INVALID_TXN_STATE.
func (c *Coordinator) VerifyPartitions(txnID string, producerID int64, epoch int16, parts []TopicPartition) []int16 {
	codes := make([]int16, len(parts))
	c.mu.Lock()
	defer c.mu.Unlock()
	code := c.refusal()
	t := c.txns[txnID]
	switch {
	case code != 0:
	case t == nil || !t.stored || t.producerID != producerID:
		code = kerr.InvalidTxnState.Code
	case t.epoch != epoch:
		code = kerr.ProducerFenced.Code
	case t.state != stateOngoing:
		code = kerr.InvalidTxnState.Code
	}
	for i, tp := range parts {
		codes[i] = code
		if code != 0 {
			continue
		}
		if _, ok := t.partitions[tp]; !ok {
			codes[i] = kerr.InvalidTxnState.Code
		}
	}
	return codes
}

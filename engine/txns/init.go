package txns

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// initResult is what InitProducerID decided under the lock.
type initResult struct {
	producerID int64
	epoch      int16
	code       int16
	done       <-chan error // a write to wait for, or nil
	needID     bool         // decide again with a fresh producer ID
}

// InitProducerID gives txnID its producer ID and a new epoch (KIP-360:
// producerID/epoch are -1 or the producer's current pair).
//
// A new ID gets a fresh producer ID at epoch 0. An ID with no transaction
// in progress gets its epoch bumped (a fresh producer ID at epoch 0 once
// the epoch is exhausted), which fences older instances of the producer.
// An ID with an ongoing transaction is fenced: its transaction is aborted
// at a bumped epoch and the call answers CONCURRENT_TRANSACTIONS, so that
// the producer retries once the abort is complete and gets the next
// epoch. A producer that sends a pair gets PRODUCER_FENCED unless it is
// the current pair, or the pair it had before the last InitProducerID (a
// retry: it gets the current pair). The wire layer maps PRODUCER_FENCED to
// INVALID_PRODUCER_EPOCH for versions before it existed.
func (c *Coordinator) InitProducerID(ctx context.Context, txnID string, timeout time.Duration, producerID int64, epoch int16) (int64, int16, int16) {
	if !validID(txnID) {
		return -1, -1, kerr.InvalidRequest.Code
	}
	if timeout <= 0 || timeout > c.cfg.MaxTimeout {
		return -1, -1, kerr.InvalidTransactionTimeout.Code
	}
	// A producer ID block may need reserving on the volume: that happens
	// off the lock, and the decision is taken again with the ID in hand
	// (an ID unused in the end is skipped, never reused).
	fresh := int64(-1)
	for {
		c.mu.Lock()
		r := c.initLocked(txnID, timeout, producerID, epoch, fresh)
		c.mu.Unlock()
		if !r.needID {
			if r.done != nil {
				if err := await(ctx, r.done); err != nil {
					return -1, -1, answer(err)
				}
			}
			return r.producerID, r.epoch, r.code
		}
		var err error
		if fresh, err = c.cfg.IDs.Next(); err != nil {
			c.log.Error(err, "allocating a producer ID", "transactionalID", txnID)
			return -1, -1, kerr.CoordinatorNotAvailable.Code
		}
	}
}

func (c *Coordinator) initLocked(txnID string, timeout time.Duration, producerID int64, epoch int16, fresh int64) initResult {
	if code := c.refusal(); code != 0 {
		return initResult{producerID: -1, epoch: -1, code: code}
	}
	now := c.nowMs()
	t := c.txns[txnID]
	if t == nil {
		// A pair sent for an unknown ID (it expired) is ignored, as Kafka
		// does: the producer starts over with a new producer ID.
		if fresh < 0 {
			return initResult{needID: true}
		}
		t = &txn{id: txnID, meta: meta{producerID: fresh, epoch: -1, lastProducerID: -1, lastEpoch: -1, state: stateEmpty}}
		c.txns[txnID] = t
		next := t.initialized(fresh, 0, -1, -1, timeout, now)
		return initResult{producerID: fresh, epoch: 0, done: c.write("new transactional ID", change{t: t, next: next})}
	}
	fencedResult := initResult{producerID: -1, epoch: -1, code: kerr.ProducerFenced.Code}
	busy := initResult{producerID: -1, epoch: -1, code: kerr.ConcurrentTransactions.Code}
	if t.pending {
		return busy
	}
	given := producerID >= 0 || epoch >= 0
	retry := false
	if given {
		switch {
		case producerID == t.producerID && epoch == t.epoch:
		case t.lastEpoch >= 0 && producerID == t.lastProducerID && epoch == t.lastEpoch:
			retry = true
		default:
			return fencedResult
		}
	}
	switch {
	case t.state == stateOngoing:
		if retry {
			// The producer already started a transaction at the
			// current pair: this is a stale duplicate.
			return fencedResult
		}
		busy.done = c.write("producer fence", endChange(t, t.fenced(now), now))
		return busy
	case idle(t.state):
		if retry {
			return initResult{producerID: t.producerID, epoch: t.epoch}
		}
		// Remember the pair replaced only for a producer that sent it:
		// a new instance (no pair) must leave nothing to retry with.
		lastID, lastEpoch := int64(-1), int16(-1)
		if given {
			lastID, lastEpoch = t.producerID, t.epoch
		}
		var next meta
		if epochExhausted(t.epoch) {
			if fresh < 0 {
				return initResult{needID: true}
			}
			next = t.initialized(fresh, 0, lastID, lastEpoch, timeout, now)
		} else {
			next = t.initialized(t.producerID, t.epoch+1, lastID, lastEpoch, timeout, now)
		}
		return initResult{producerID: next.producerID, epoch: next.epoch, done: c.write("producer epoch bump", change{t: t, next: next})}
	default: // PrepareCommit, PrepareAbort: the client backs off and retries
		return busy
	}
}

package txns

import (
	"slices"
	"strings"
)

// scheduleCheck arms the next pass of check. Under the lock.
func (c *Coordinator) scheduleCheck() {
	c.checkTimer = c.cfg.Clock.AfterFunc(c.cfg.AbortCheck, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.closed {
			return
		}
		c.check()
		c.scheduleCheck()
	})
}

// check aborts ongoing transactions older than their timeout and removes
// transactional IDs idle longer than IDExpiration, in one batch. Under the
// lock.
//
// A timed-out transaction is fenced as Kafka does: aborted at a bumped
// epoch, so the producer that let it time out is fenced and the markers
// carry the new epoch. An ID is idle from its last transition (Kafka's
// txnLastUpdateTimestamp; it may have been stamped by a previous owner's
// clock, which at a scale of days does not matter).
func (c *Coordinator) check() {
	now := c.nowMs()
	expiration := c.cfg.IDExpiration.Milliseconds()
	var changes []change
	for _, t := range c.txns {
		switch {
		case t.pending:
		case t.state == stateOngoing && now-t.timeoutFromMs > t.timeout.Milliseconds():
			c.log.Info("aborting a timed-out transaction", "transactionalID", t.id,
				"producerID", t.producerID, "epoch", t.epoch, "timeout", t.timeout)
			ch := endChange(t, t.fenced(now), now)
			ch.timedOut = true
			changes = append(changes, ch)
		case idle(t.state) && now-t.updateMs >= expiration:
			next := t.meta
			next.state = stateDead
			changes = append(changes, change{t: t, next: next})
		}
	}
	if len(changes) == 0 {
		return
	}
	// In ID order, so the log reads the same for the same state.
	slices.SortFunc(changes, func(a, b change) int { return strings.Compare(a.t.id, b.t.id) })
	c.write("transaction timeouts and expirations", changes...)
}

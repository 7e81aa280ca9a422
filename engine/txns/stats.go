package txns

import "sync/atomic"

// Counts are running totals of transaction ends, for the metrics: a
// transaction counts once its completion is durable (the owner that
// completes one a previous owner decided counts it).
type Counts struct {
	Committed atomic.Int64
	Aborted   atomic.Int64
	// TimedOut counts the aborts of transactions that ran past their
	// timeout; each is counted in Aborted too, once its abort completes.
	TimedOut atomic.Int64
}

// count adds a settled change to the counts. Under the lock.
func (c *Coordinator) count(ch change) {
	n := c.cfg.Counts
	if n == nil {
		return
	}
	switch ch.next.state {
	case stateCompleteCommit:
		n.Committed.Add(1)
	case stateCompleteAbort:
		n.Aborted.Add(1)
	}
	if ch.timedOut {
		n.TimedOut.Add(1)
	}
}

// StateCounts counts the shard's transactional IDs by state, with Kafka's
// state names (Empty, Ongoing, PrepareCommit, ...). IDs whose first
// record is not durable yet are left out, as List leaves them out.
func (c *Coordinator) StateCounts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	out := make(map[string]int, 4)
	for _, t := range c.txns {
		if t.stored {
			out[t.state.String()]++
		}
	}
	return out
}

package groups

import (
	"sort"
)

// scheduleExpiry arms the next offset-expiry pass (offsets.retention.check
// .interval.ms). Called under the lock.
func (c *Coordinator) scheduleExpiry() {
	c.expiryTimer = c.clock.AfterFunc(c.cfg.RetentionCheck, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.closed {
			return
		}
		c.expireOffsets()
		c.scheduleExpiry()
	})
}

// expireOffsets is KIP-211's retention: only groups without members lose
// offsets. A group with a protocol type (it had members) keeps each offset
// for OffsetsRetention after the later of going Empty and the commit; a
// group of simple commits only (no protocol type) from each commit.
// Pending transactional offsets do not expire. An Empty group left with no
// offsets, committed or pending, is removed. One Append carries every
// tombstone of the pass.
func (c *Coordinator) expireOffsets() {
	now := c.clock.Now()
	retention := c.cfg.OffsetsRetention.Milliseconds()
	ids := make([]string, 0, len(c.groups))
	for id, g := range c.groups {
		// In-flight commits are left for the next pass: their records
		// would land after our tombstones.
		if g.state == stateEmpty && g.commitsInFlight == 0 {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	var recs []Record
	for _, id := range ids {
		g := c.groups[id]
		emptySince := g.stateSince.UnixMilli()
		for _, tp := range g.sortedPartitions() {
			base := g.offsets[tp].committedAt
			if g.protocolType != "" {
				base = max(base, emptySince)
			}
			if now.UnixMilli()-base >= retention {
				recs = append(recs, offsetTombstone(id, tp))
				delete(g.offsets, tp)
			}
		}
		if len(g.offsets) == 0 && len(g.pending) == 0 && len(g.txnOffsets) == 0 {
			recs = append(recs, groupTombstone(id))
			c.forgetGroup(g)
		}
	}
	if len(recs) > 0 {
		c.log.V(1).Info("expiring offsets and groups", "records", len(recs))
		c.appendInBackground(recs, "offset expiry")
	}
}

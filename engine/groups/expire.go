package groups

import (
	"sort"
)

// scheduleExpiry arms the next offset-expiry pass (offsets.retention.check
// .interval.ms). Called under the lock.
func (c *Coordinator) scheduleExpiry() {
	c.expiryTimer = c.clock.AfterFunc(c.cfg.RetentionCheck, c.expiryPass)
}

// expiryPass expires offsets by retention, then drops those of topic
// incarnations that are no longer live (incarnations.go). The incarnations
// are resolved off the lock: that may read the desired state on the volume.
func (c *Coordinator) expiryPass() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.expireOffsets()
	suspects := c.committedStamps()
	c.mu.Unlock()

	var stale map[topicStamp]bool
	if len(suspects) > 0 {
		in := c.newIncarnations()
		for _, s := range suspects {
			if in.stale(s.topic, s.id) {
				if stale == nil {
					stale = make(map[topicStamp]bool)
				}
				stale[s] = true
			}
		}
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	if stale != nil {
		c.dropStaleOffsets(stale)
	}
	c.scheduleExpiry()
}

// topicStamp is a topic name with the incarnation an offset was committed
// for.
type topicStamp struct {
	topic string
	id    [16]byte
}

// committedStamps lists, sorted, the distinct (topic, topic ID) pairs of
// every committed offset of the shard; none without Topics. Called under
// the lock.
func (c *Coordinator) committedStamps() []topicStamp {
	if c.cfg.Topics == nil {
		return nil
	}
	seen := make(map[topicStamp]bool)
	for _, g := range c.groups {
		for tp, o := range g.offsets {
			seen[topicStamp{tp.topic, o.topicID}] = true
		}
	}
	out := make([]topicStamp, 0, len(seen))
	for s := range seen {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].topic != out[j].topic {
			return out[i].topic < out[j].topic
		}
		return string(out[i].id[:]) < string(out[j].id[:])
	})
	return out
}

// dropStaleOffsets tombstones the committed offsets of the stale
// incarnations, as Kafka deletes the offsets of a deleted topic, in every
// group without commits in flight (their records would land after the
// tombstones: the next pass takes them). An Empty group left with nothing
// is removed. One Append carries the pass's records. Called under the
// lock.
func (c *Coordinator) dropStaleOffsets(stale map[topicStamp]bool) {
	ids := make([]string, 0, len(c.groups))
	for id, g := range c.groups {
		if g.commitsInFlight == 0 {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	var recs []Record
	dropped := 0
	for _, id := range ids {
		g := c.groups[id]
		any := false
		for _, tp := range g.sortedPartitions() {
			if stale[topicStamp{tp.topic, g.offsets[tp].topicID}] {
				recs = append(recs, offsetTombstone(id, tp))
				delete(g.offsets, tp)
				any = true
				dropped++
			}
		}
		if any && g.state == stateEmpty && len(g.offsets) == 0 && len(g.pending) == 0 && len(g.txnOffsets) == 0 {
			recs = append(recs, groupTombstone(id))
			c.forgetGroup(g)
		}
	}
	if len(recs) > 0 {
		c.log.Info("dropping the committed offsets of deleted topic incarnations", "offsets", dropped, "records", len(recs))
		c.appendInBackground(recs, "offsets of deleted topics")
	}
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

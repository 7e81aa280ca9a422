package groups

// GroupStats is what the metrics see of one group: its state, its members
// and, when asked for, its committed offsets.
type GroupStats struct {
	Group   string
	State   string
	Members int
	// Offsets are the group's visible commits (transactional commits of a
	// transaction still running are not); nil unless asked for.
	Offsets []CommittedOffset
}

// CommittedOffset is one partition's visible commit.
type CommittedOffset struct {
	Topic     string
	Partition int32
	Offset    int64
}

// Stats lists the shard's groups. withOffsets says which groups' commits
// to copy: reading a group's name and state is cheap, but a group may
// have committed for thousands of partitions, so the caller picks the
// ones it reports (nil: none). The coordinator's lock is held while it
// runs; withOffsets must not call back into the coordinator.
func (c *Coordinator) Stats(withOffsets func(group string) bool) []GroupStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	out := make([]GroupStats, 0, len(c.groups))
	for _, g := range c.groups {
		s := GroupStats{Group: g.id, State: g.state.String(), Members: len(g.members)}
		if withOffsets != nil && withOffsets(g.id) {
			s.Offsets = make([]CommittedOffset, 0, len(g.offsets))
			for tp, o := range g.offsets {
				s.Offsets = append(s.Offsets, CommittedOffset{Topic: tp.topic, Partition: tp.partition, Offset: o.offset})
			}
		}
		out = append(out, s)
	}
	return out
}

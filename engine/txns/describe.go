package txns

import (
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/engine/groups"
)

// offsetsTopic is how Describe shows the groups of a transaction: as Kafka
// shows them, the __consumer_offsets partition of each group, which in
// kaas is its coordinator shard.
const offsetsTopic = "__consumer_offsets"

// Describe describes one transactional ID (DescribeTransactions): its
// durable state.
func (c *Coordinator) Describe(txnID string) kmsg.DescribeTransactionsResponseTransactionState {
	d := kmsg.NewDescribeTransactionsResponseTransactionState()
	d.TransactionalID = txnID
	c.mu.Lock()
	defer c.mu.Unlock()
	if d.ErrorCode = c.refusal(); d.ErrorCode != 0 {
		return d
	}
	t := c.txns[txnID]
	if t == nil || !t.stored {
		d.ErrorCode = kerr.TransactionalIDNotFound.Code
		return d
	}
	d.State = t.state.String()
	d.TimeoutMillis = int32(t.timeout / time.Millisecond)
	d.StartTimestamp = t.startMs
	d.ProducerID = t.producerID
	d.ProducerEpoch = t.epoch
	for _, tp := range t.sortedPartitions() {
		d.Topics = appendPartition(d.Topics, tp)
	}
	shards := make([]int32, 0, len(t.groups))
	for g := range t.groups {
		if s := groups.ShardOf(g); !slices.Contains(shards, s) {
			shards = append(shards, s)
		}
	}
	slices.Sort(shards)
	for _, s := range shards {
		d.Topics = appendPartition(d.Topics, TopicPartition{offsetsTopic, s})
	}
	return d
}

// appendPartition appends tp to topics, grouped by topic in order.
func appendPartition(topics []kmsg.DescribeTransactionsResponseTransactionStateTopic, tp TopicPartition) []kmsg.DescribeTransactionsResponseTransactionStateTopic {
	if n := len(topics); n == 0 || topics[n-1].Topic != tp.Topic {
		t := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
		t.Topic = tp.Topic
		topics = append(topics, t)
	}
	t := &topics[len(topics)-1]
	t.Partitions = append(t.Partitions, tp.Partition)
	return topics
}

// List lists the shard's transactional IDs, filtered as ListTransactions
// asks (empty filters match all; minDuration <= 0 matches all).
//
// States match case-insensitively. minDuration > 0 keeps only running
// transactions (Ongoing, PrepareCommit, PrepareAbort) started more than
// minDuration ago (KIP-994); Kafka compares the start timestamp of every
// state, which makes IDs without a transaction (start -1) match too.
// Sorted by transactional ID.
func (c *Coordinator) List(states []string, producerIDs []int64, minDuration time.Duration) []kmsg.ListTransactionsResponseTransactionState {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.refusal() != 0 {
		return nil
	}
	now := c.nowMs()
	var out []kmsg.ListTransactionsResponseTransactionState
	for _, t := range c.txns {
		state := t.state.String()
		switch {
		case !t.stored:
		case len(states) > 0 && !slices.ContainsFunc(states, func(s string) bool { return strings.EqualFold(s, state) }):
		case len(producerIDs) > 0 && !slices.Contains(producerIDs, t.producerID):
		case minDuration > 0 && (idle(t.state) || now-t.startMs <= minDuration.Milliseconds()):
		default:
			l := kmsg.NewListTransactionsResponseTransactionState()
			l.TransactionalID = t.id
			l.ProducerID = t.producerID
			l.TransactionState = state
			out = append(out, l)
		}
	}
	slices.SortFunc(out, func(a, b kmsg.ListTransactionsResponseTransactionState) int {
		return strings.Compare(a.TransactionalID, b.TransactionalID)
	})
	return out
}

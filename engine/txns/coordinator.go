package txns

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CONTRACT STUB: the helper that owns engine/txns replaces this file.

// Coordinator serves the transactional IDs of one shard.
type Coordinator struct{ cfg Config }

// New returns a coordinator with no transactional IDs. Replay records into
// it, then Start it.
func New(cfg Config) *Coordinator { return &Coordinator{cfg: cfg} }

// IsRecord reports whether a shard-log record is a transaction record.
func IsRecord(key []byte) bool {
	return len(key) >= 2 && int16(uint16(key[0])<<8|uint16(key[1])) == RecordKeyVersion
}

// Replay applies one transaction record (IsRecord) from the shard log.
func (c *Coordinator) Replay(r Record) error { return nil }

// Start begins serving after loading: it resumes the ends of transactions
// found prepared (markers, then completion) and the timeout checks.
func (c *Coordinator) Start() {}

// Close stops timers and background marker writes; waiting calls answer
// NOT_COORDINATOR. Nothing is written.
func (c *Coordinator) Close() {}

// InitProducerID gives txnID its producer ID and a new epoch (KIP-360:
// producerID/epoch are -1 or the producer's current pair).
func (c *Coordinator) InitProducerID(ctx context.Context, txnID string, timeout time.Duration, producerID int64, epoch int16) (int64, int16, int16) {
	return -1, -1, kerr.CoordinatorNotAvailable.Code
}

// AddPartitions adds partitions to txnID's transaction, starting one if
// none is ongoing; one error code per partition, in order.
func (c *Coordinator) AddPartitions(ctx context.Context, txnID string, producerID int64, epoch int16, parts []TopicPartition) []int16 {
	return make([]int16, len(parts))
}

// VerifyPartitions answers, without writing, whether each partition is in
// txnID's ongoing transaction at producerID/epoch (KIP-890 part 1: a
// partition owner asks before it accepts the transaction's first batch).
func (c *Coordinator) VerifyPartitions(txnID string, producerID int64, epoch int16, parts []TopicPartition) []int16 {
	return make([]int16, len(parts))
}

// AddOffsets adds group's offsets to txnID's transaction.
func (c *Coordinator) AddOffsets(ctx context.Context, txnID string, producerID int64, epoch int16, group string) int16 {
	return kerr.CoordinatorNotAvailable.Code
}

// EndTxn commits or aborts txnID's transaction: it answers once the
// decision is durable; markers and completion follow in the background.
func (c *Coordinator) EndTxn(ctx context.Context, txnID string, producerID int64, epoch int16, commit bool) int16 {
	return kerr.CoordinatorNotAvailable.Code
}

// Describe describes one transactional ID (DescribeTransactions).
func (c *Coordinator) Describe(txnID string) kmsg.DescribeTransactionsResponseTransactionState {
	return kmsg.NewDescribeTransactionsResponseTransactionState()
}

// List lists the shard's transactional IDs, filtered as ListTransactions
// asks (empty filters match all; minDuration <= 0 matches all).
func (c *Coordinator) List(states []string, producerIDs []int64, minDuration time.Duration) []kmsg.ListTransactionsResponseTransactionState {
	return nil
}

package engine

import (
	"context"
	"errors"
)

// CONTRACT STUB: the helper that owns partition transactions replaces this
// file (and extends producers.go and partition.go).

// ErrTxnUnverified refuses the first transactional batch of a producer's
// transaction at a partition until the transaction coordinator has
// confirmed the partition is in the producer's ongoing transaction
// (KIP-890 part 1). The caller verifies (Engine.VerifyTxn), calls
// Verified, and appends again. It wraps a *TxnUnverifiedError.
var ErrTxnUnverified = errors.New("transactional batch awaits verification with its transaction coordinator")

// TxnUnverifiedError names the producer a batch needs verifying for.
type TxnUnverifiedError struct {
	ProducerID    int64
	ProducerEpoch int16
}

func (e *TxnUnverifiedError) Error() string { return ErrTxnUnverified.Error() }
func (e *TxnUnverifiedError) Unwrap() error { return ErrTxnUnverified }

// AbortedTxn is one aborted transaction in a partition's log: its producer,
// its first offset and the offset of its abort marker.
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64
	LastOffset  int64
}

// ProducerInfo describes one producer's state at a partition
// (DescribeProducers).
type ProducerInfo struct {
	ProducerID            int64
	ProducerEpoch         int16
	LastSequence          int32
	LastTimestamp         int64
	CoordinatorEpoch      int32
	CurrentTxnStartOffset int64 // -1: no ongoing transaction
}

// Verified records that the coordinator confirmed producerID's ongoing
// transaction at epoch includes this partition: its next transactional
// batch is accepted. A marker for the producer clears it.
func (p *Partition) Verified(producerID int64, epoch int16) {}

// WriteMarker appends a commit or abort control batch for producerID at
// epoch and waits until it is durable. A producer with no ongoing
// transaction here gets no marker (a re-sent marker is a no-op). An epoch
// older than the producer's is refused with ErrInvalidProducerEpoch.
func (p *Partition) WriteMarker(ctx context.Context, producerID int64, epoch int16, commit bool, coordinatorEpoch int32) error {
	return errors.New("markers are not written yet")
}

// LastStableOffset is the offset below which every transaction is decided
// (and durable): the first offset of the oldest ongoing transaction, or
// the high watermark.
func (p *Partition) LastStableOffset() int64 { return p.log.HighWatermark() }

// AbortedTransactions appends to dst the aborted transactions that
// overlap [from, to): those whose abort marker is at or after from and
// whose first offset is below to, ordered by first offset.
func (p *Partition) AbortedTransactions(from, to int64, dst []AbortedTxn) []AbortedTxn { return dst }

// Producers describes the partition's producers (DescribeProducers).
func (p *Partition) Producers() []ProducerInfo { return nil }

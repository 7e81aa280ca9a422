package dataplane

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Transactions at a partition (KIP-98, with KIP-890 part 1 verification).
//
// A producer's first transactional batch here starts its transaction (its
// first offset joins the ongoing queue, which bounds the last stable
// offset) and is taken only once the coordinator verified the partition is
// in the producer's transaction (Verified). The coordinator ends it with a
// marker (WriteMarker): a control batch appended through the log, after
// which an abort joins the aborted list that read_committed fetches get.
// The transaction leaves the ongoing queue only once its marker is
// durable, so the last stable offset never passes a marker a crash could
// lose. All of it is rebuilt at open from the snapshot and the log
// (producers.go).

var (
	// ErrTxnUnverified refuses the first transactional batch of a
	// producer's transaction at a partition until the transaction
	// coordinator has confirmed the partition is in the producer's ongoing
	// transaction (KIP-890 part 1). The caller verifies (Engine.VerifyTxn),
	// calls Verified, and appends again. It wraps a *TxnUnverifiedError.
	ErrTxnUnverified = errors.New("transactional batch awaits verification with its transaction coordinator")
	// ErrInvalidTxnState refuses a non-transactional batch from a producer
	// with a transaction open at the partition (Kafka: INVALID_TXN_STATE).
	ErrInvalidTxnState = errors.New("invalid transaction state")
	// ErrTxnCoordinatorFenced refuses a marker from a coordinator epoch
	// older than the one that wrote the producer's last marker here
	// (Kafka: TRANSACTION_COORDINATOR_FENCED): a deposed coordinator.
	ErrTxnCoordinatorFenced = errors.New("transaction coordinator epoch is older than the last marker's")
)

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
func (p *Partition) Verified(producerID int64, epoch int16) {
	if producerID < 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	e := p.producers.m[producerID]
	if e == nil {
		_ = p.producers.makeRoom() // the coordinator vouches for it: never refused
		e = newProducerEntry(epoch)
		p.producers.put(producerID, e)
	}
	e.Verified = int32(epoch)
}

// WriteMarker appends a commit or abort control batch for producerID at
// epoch and waits until it is durable. A producer with no ongoing
// transaction here gets no marker (a re-sent marker is a no-op, though it
// waits for an earlier marker of the producer that is not known durable
// yet). An epoch older than the producer's is refused with
// ErrInvalidProducerEpoch, a coordinator epoch older than its last
// marker's with ErrTxnCoordinatorFenced. If the sync fails, the error is
// returned and the transaction stays undecided for the last stable offset
// (a failed log is reopened elsewhere, where the replay finds the marker or
// not; after a cancelled wait the marker is made durable in the
// background).
func (p *Partition) WriteMarker(ctx context.Context, producerID int64, epoch int16, commit bool, coordinatorEpoch int32) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ErrPartitionClosed
	}
	ps := p.producers
	e := ps.m[producerID]
	if e != nil && e.persisted() && epoch < e.Epoch {
		p.mu.Unlock()
		return fmt.Errorf("%w: marker for producer %d at epoch %d, current %d", ErrInvalidProducerEpoch, producerID, epoch, e.Epoch)
	}
	if e == nil || e.TxnFirst < 0 {
		if e != nil {
			e.Verified = -1
		}
		first, pending := ps.pendingMarker(producerID)
		p.mu.Unlock()
		if pending < 0 {
			return nil
		}
		return p.awaitMarker(ctx, producerID, first, pending)
	}
	if coordinatorEpoch < e.CoordinatorEpoch {
		p.mu.Unlock()
		return fmt.Errorf("%w: marker for producer %d from coordinator epoch %d, last %d", ErrTxnCoordinatorFenced, producerID, coordinatorEpoch, e.CoordinatorEpoch)
	}
	ts := time.Now().UnixMilli()
	p.markerBuf = appendMarkerBatch(p.markerBuf[:0], producerID, epoch, commit, coordinatorEpoch, ts)
	ar, err := p.log.Append(p.markerBuf)
	if err != nil {
		p.mu.Unlock()
		if p.log.Err() != nil && p.onFailure != nil {
			p.onFailure(p)
		}
		return err
	}
	first := ps.applyMarker(marker{pid: producerID, epoch: epoch, commit: commit,
		coordinatorEpoch: coordinatorEpoch, timestamp: ts, offset: ar.BaseOffset})
	p.appendedLocked(ar, len(p.markerBuf))
	p.mu.Unlock()
	return p.awaitMarker(ctx, producerID, first, ar.BaseOffset)
}

// awaitMarker waits until the marker at offset, which ended producerID's
// transaction started at first, is durable, and then takes the
// transaction out of the ongoing queue.
func (p *Partition) awaitMarker(ctx context.Context, producerID, first, offset int64) error {
	if err := p.Sync(ctx, offset); err != nil {
		if p.log.Err() == nil && ctx.Err() != nil {
			// Only the wait was cut short: the marker is in the log and
			// the next sync round makes it durable.
			go func() {
				if p.Sync(context.Background(), offset) == nil {
					p.completeTxn(producerID, first)
				}
			}()
		}
		return err
	}
	p.completeTxn(producerID, first)
	return nil
}

func (p *Partition) completeTxn(producerID, first int64) {
	p.mu.Lock()
	p.producers.completeTxn(producerID, first)
	p.mu.Unlock()
	// The last stable offset may have moved: read_committed fetches
	// waiting for data look again.
	p.notifyWatchers()
}

// LastStableOffset is the offset below which every transaction is decided
// (and durable): the first offset of the oldest ongoing transaction, or
// the high watermark; never below the log start (a transaction whose start
// retention removed cannot hold consumers before the log).
func (p *Partition) LastStableOffset() int64 {
	lso := min(p.producers.firstUnstable.Load(), p.log.HighWatermark())
	return max(lso, p.log.LogStartOffset())
}

// AbortedTransactions appends to dst the aborted transactions that
// overlap [from, to): those whose abort marker is at or after from and
// whose first offset is below to, ordered by first offset.
func (p *Partition) AbortedTransactions(from, to int64, dst []AbortedTxn) []AbortedTxn {
	v := p.producers.abortedPub.Load()
	if v == nil || from >= to {
		return dst
	}
	i, _ := slices.BinarySearchFunc(v.list, from, func(a AbortedTxn, from int64) int { return cmp.Compare(a.LastOffset, from) })
	n0 := len(dst)
	for _, a := range v.list[i:] {
		if a.LastOffset-v.maxSpan >= to {
			break // this one and every later one start at or after to
		}
		if a.FirstOffset < to {
			dst = append(dst, a)
		}
	}
	slices.SortFunc(dst[n0:], func(a, b AbortedTxn) int {
		if c := cmp.Compare(a.FirstOffset, b.FirstOffset); c != 0 {
			return c
		}
		return cmp.Compare(a.LastOffset, b.LastOffset)
	})
	return dst
}

// Producers describes the partition's producers (DescribeProducers).
func (p *Partition) Producers() []ProducerInfo {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]ProducerInfo, 0, len(p.producers.m))
	for pid, e := range p.producers.m {
		if !e.persisted() {
			continue
		}
		last := int32(-1)
		if n := len(e.Batches); n > 0 {
			last = e.Batches[n-1].LastSeq
		}
		out = append(out, ProducerInfo{ProducerID: pid, ProducerEpoch: e.Epoch, LastSequence: last,
			LastTimestamp: e.LastTimestamp, CoordinatorEpoch: e.CoordinatorEpoch, CurrentTxnStartOffset: e.TxnFirst})
	}
	slices.SortFunc(out, func(a, b ProducerInfo) int { return cmp.Compare(a.ProducerID, b.ProducerID) })
	return out
}

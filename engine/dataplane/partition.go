// Package dataplane is what a produce or fetch touches: the partitions this
// broker leads, each an open log (volume/partlog) with its producer state
// (idempotence and its bound), the transactions open at it, and the
// retention its owner enforces. The engine opens, routes and releases
// partitions; once the routing table has found one, produce and fetch go
// straight to it.
package dataplane

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/partlog"
)

// Partition is one partition this broker owns and serves. Produce and fetch
// go straight to its log; the reconciler only opens and closes it.
type Partition struct {
	Topic   string
	Index   int32
	TopicID string
	// Traffic is what clients produced and fetched here (metrics).
	Traffic Traffic

	fsys volume.FS
	dir  string
	log  *partlog.Log
	// watchers are told (non-blocking send) whenever the high watermark
	// may have moved: long-poll fetches waiting for data of this partition.
	watchMu  sync.Mutex
	watchers map[chan<- struct{}]struct{}
	// onFailure is told when the log refuses writes for good.
	onFailure func(*Partition)
	// onClosed is told once, when close has closed the log's handles.
	onClosed func()

	logger logr.Logger

	// mu serialises the producer-state check with the append it guards.
	mu            sync.Mutex
	producers     *producerState
	sinceSnapshot int64 // bytes appended since the last producer snapshot
	markerBuf     []byte
	closed        bool

	// expireProducers forgets producers idle this long (0: never) when a
	// snapshot is taken; now is the broker's clock.
	expireProducers time.Duration
	now             func() time.Time

	// rules are the topic's produce rules (producerules.go); nil until
	// set: NoProduceRules.
	rules atomic.Pointer[ProduceRules]
}

// expireProducersLocked applies the producer expiration before a snapshot.
func (p *Partition) expireProducersLocked() {
	if p.expireProducers > 0 && p.now != nil {
		p.producers.expire(p.now().Add(-p.expireProducers).UnixMilli())
	}
}

// snapshotEveryBytes bounds the log a recovery replays for producer state.
const snapshotEveryBytes = 64 << 20

var (
	// ErrPartitionClosed means the partition was released while a request
	// was in flight; the client retries against fresh metadata.
	ErrPartitionClosed = errors.New("partition is closed")
	// ErrInvalidRecord refuses batches kaas does not accept from clients.
	ErrInvalidRecord = errors.New("invalid record")
)

// Log exposes the partition's log for reads.
func (p *Partition) Log() *partlog.Log { return p.log }

// Dir is the partition's directory on the volume.
func (p *Partition) Dir() string { return p.dir }

// Epoch is the leader epoch this broker holds the partition at.
func (p *Partition) Epoch() int32 { return p.log.Epoch() }

// ProduceResult is what a produce of one batch answers.
type ProduceResult struct {
	BaseOffset     int64
	LogStartOffset int64
}

// Append validates one batch against producer state and appends it. It does
// not wait for durability: the caller waits with Sync (so the appends of one
// connection keep their order while their fsyncs are shared).
//
// A transactional batch that would start the producer's transaction here
// is refused with a *TxnUnverifiedError until Verified (see
// txnpartition.go); a non-transactional one from a producer with a
// transaction open here, with ErrInvalidTxnState.
func (p *Partition) Append(batch []byte) (lastOffset int64, res ProduceResult, err error) {
	c, err := partlog.Check(batch)
	if err != nil {
		return 0, res, err
	}
	return p.AppendChecked(c)
}

// AppendChecked is Append of a batch already validated by partlog.Check
// (the produce path checks every batch of a request before appending any).
func (p *Partition) AppendChecked(c partlog.Checked) (lastOffset int64, res ProduceResult, err error) {
	h, batch := c.Header(), c.Bytes()
	if h.IsControl() {
		return 0, res, fmt.Errorf("%w: clients may not write control batches", ErrInvalidRecord)
	}
	if h.IsTransactional() && h.ProducerID < 0 {
		return 0, res, fmt.Errorf("%w: a transactional batch needs a producer ID", ErrInvalidRecord)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return 0, res, ErrPartitionClosed
	}
	ps := p.producers
	var e *producerEntry
	if h.ProducerID >= 0 {
		e = ps.m[h.ProducerID]
		dup, isDup, err := checkEntry(e, h)
		if err != nil {
			return 0, res, err
		}
		if isDup {
			p.log.ReleaseReserved() // nothing appended: no round follows
			return dup.LastOffset, ProduceResult{BaseOffset: dup.BaseOffset, LogStartOffset: p.log.LogStartOffset()}, nil
		}
		if err := checkTxn(e, h); err != nil {
			return 0, res, err
		}
		if e == nil {
			if err := ps.makeRoom(); err != nil { // a new producer, under the cap
				return 0, res, fmt.Errorf("%s/%d: %w", p.Topic, p.Index, err)
			}
		}
	}
	ar, err := p.log.AppendChecked(c)
	if err != nil {
		if p.log.Err() != nil && p.onFailure != nil {
			p.onFailure(p)
		}
		return 0, res, err
	}
	if h.ProducerID >= 0 {
		ps.recordEntry(e, h, ar.BaseOffset, ar.LastOffset)
	}
	p.appendedLocked(ar, len(batch))
	return ar.LastOffset, ProduceResult{BaseOffset: ar.BaseOffset, LogStartOffset: p.log.LogStartOffset()}, nil
}

// appendedLocked notes n bytes appended (p.mu held) and snapshots producer
// state at each roll and every snapshotEveryBytes, so recovery after a
// crash replays a bounded tail. The state is serialised here, under the
// mutex (microseconds even for thousands of producers), and written by
// the first Sync that covers it, outside the mutex: a snapshot never names
// data the log may lose, and appends go on while it is written. A newer
// due snapshot replaces one not written yet. A failed snapshot only means
// a longer replay, so it is logged, not returned.
func (p *Partition) appendedLocked(ar partlog.AppendResult, n int) {
	p.sinceSnapshot += int64(n)
	if !ar.Rolled && p.sinceSnapshot < snapshotEveryBytes {
		return
	}
	p.sinceSnapshot = 0
	ps := p.producers
	ps.dropAbortedBelow(p.log.LogStartOffset())
	p.expireProducersLocked()
	s := &pendingSnapshot{offset: ar.LastOffset + 1, epoch: p.log.Epoch()}
	s.data = ps.encodeSnapshot(s.offset, s.epoch)
	ps.snapNext = s
	ps.snapPending.Store(true)
}

// pendingSnapshot is producer state serialised under the mutex, to be
// written outside it.
type pendingSnapshot struct {
	offset int64
	epoch  int32
	data   []byte
}

// writePendingSnapshot writes the due snapshot if the log is durable and
// fence-checked below it (through synced) and no other is being written.
func (p *Partition) writePendingSnapshot(synced int64) {
	ps := p.producers
	p.mu.Lock()
	s := ps.snapNext
	if s == nil || s.offset-1 > synced || ps.snapWriting {
		p.mu.Unlock()
		return
	}
	ps.snapNext = nil
	ps.snapPending.Store(false)
	ps.snapWriting = true
	ps.snapWG.Add(1)
	p.mu.Unlock()
	defer ps.snapWG.Done()
	if err := writeSnapshot(p.fsys, p.dir, s.data, s.offset, s.epoch); err != nil {
		p.logger.Error(err, "producer-state snapshot failed; recovery will replay more of the log")
	}
	p.mu.Lock()
	ps.snapWriting = false
	p.mu.Unlock()
}

// WaitSnapshot waits for a producer snapshot being written in the
// background, if any.
func (p *Partition) WaitSnapshot() { p.producers.snapWG.Wait() }

// Sync waits until offset is durable and the fence re-checked (shared with
// concurrent produce requests: group commit). The first Sync to cover a
// due producer-state snapshot writes it before returning (once per roll or
// snapshotEveryBytes).
func (p *Partition) Sync(ctx context.Context, offset int64) error {
	return p.SyncLater(offset).Wait(ctx)
}

// ReserveWrite waits until the partition may take an append: at once
// unless the broker already holds as many partitions with appends waiting
// for their fsync as its descriptors allow (partlog.WriteSlots), then
// until one of them is durable or ctx ends.
func (p *Partition) ReserveWrite(ctx context.Context) error {
	return p.log.ReserveWrite(ctx)
}

// ReleaseReserved gives back the write slot a ReserveWrite took for an
// append that was not made (partlog.Log.ReleaseReserved).
func (p *Partition) ReleaseReserved() { p.log.ReleaseReserved() }

// SyncLater is Sync in two halves (partlog.Log.SyncLater): the round is
// asked for now; PendingSync.Wait waits for it and does what Sync does
// after.
func (p *Partition) SyncLater(offset int64) PendingSync {
	return PendingSync{p: p, sync: p.log.SyncLater(offset), offset: offset}
}

// PendingSync is a partition's round asked for by SyncLater.
type PendingSync struct {
	p      *Partition
	sync   partlog.PendingSync
	offset int64
}

// Wait waits for the round, as Sync does.
func (s PendingSync) Wait(ctx context.Context) error {
	return s.p.synced(s.sync.Wait(ctx), s.offset)
}

// synced is what follows a sync through offset that ended with err.
func (p *Partition) synced(err error, offset int64) error {
	if err != nil && p.log.Err() != nil && p.onFailure != nil {
		p.onFailure(p)
	}
	if err == nil {
		p.notifyWatchers()
		if p.producers.snapPending.Load() {
			p.writePendingSnapshot(offset)
		}
	}
	return err
}

// Watch asks for a non-blocking send on ch whenever the high watermark may
// have moved, until Unwatch. ch should have a buffer of one: a waiter that
// has not looked yet still learns that something changed.
func (p *Partition) Watch(ch chan<- struct{}) {
	p.watchMu.Lock()
	if p.watchers == nil {
		p.watchers = map[chan<- struct{}]struct{}{}
	}
	p.watchers[ch] = struct{}{}
	p.watchMu.Unlock()
}

// Unwatch stops the sends Watch asked for.
func (p *Partition) Unwatch(ch chan<- struct{}) {
	p.watchMu.Lock()
	delete(p.watchers, ch)
	p.watchMu.Unlock()
}

func (p *Partition) notifyWatchers() {
	p.watchMu.Lock()
	for ch := range p.watchers {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	p.watchMu.Unlock()
}

// Produce appends one batch and waits for it to be durable.
func (p *Partition) Produce(ctx context.Context, batch []byte) (ProduceResult, error) {
	last, res, err := p.Append(batch)
	if err != nil {
		return res, err
	}
	return res, p.Sync(ctx, last)
}

// close snapshots producer state and closes the log's handles.
func (p *Partition) Close() error {
	ps := p.producers
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true // no append from here on
	ps.snapNext = nil
	ps.snapPending.Store(false)
	p.mu.Unlock()
	ps.snapWG.Wait() // the snapshot being written, if any
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	if p.log.Err() == nil {
		end := p.log.LogEndOffset()
		if err := p.log.Sync(context.Background(), end-1); err == nil && end > p.log.LogStartOffset() {
			ps.dropAbortedBelow(p.log.LogStartOffset())
			p.expireProducersLocked()
			epoch := p.log.Epoch()
			if err := writeSnapshot(p.fsys, p.dir, ps.encodeSnapshot(end, epoch), end, epoch); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := p.log.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close log %s/%d: %w", p.Topic, p.Index, err))
	}
	if p.onClosed != nil {
		p.onClosed()
	}
	p.notifyWatchers() // waiting fetches look again and find it gone
	return errors.Join(errs...)
}

// DeleteRecordsBefore raises the partition's log start offset to offset
// (Kafka's DeleteRecords; -1 means the high watermark) and returns the new
// log start offset, the partition's low watermark. The log makes the new
// start durable before it returns and then removes the segments wholly
// below it (volume/partlog: DeleteRecordsBefore). An offset beyond the high
// watermark gives an error wrapping partlog.ErrOffsetOutOfRange.
//
// Producer state is kept (as Kafka keeps it): the sequences of producers
// whose batches are all below the new start still deduplicate their
// retries. So that a reopen keeps them too (a snapshot below the log start
// is not usable), a snapshot at the log end is made due (see logStartMoved).
func (p *Partition) DeleteRecordsBefore(offset int64) (int64, error) {
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return p.log.LogStartOffset(), ErrPartitionClosed
	}
	before := p.log.LogStartOffset()
	start, err := p.log.DeleteRecordsBefore(offset)
	if err != nil {
		if p.log.Err() != nil && p.onFailure != nil {
			p.onFailure(p)
		}
		return start, err
	}
	if start > before {
		p.logStartMoved(start)
	}
	return start, nil
}

// logStartMoved updates the producer state after the log start moved to
// start: aborted transactions wholly below it are forgotten (no read can
// reach them), the producers themselves are kept, and a snapshot as of the
// log end is made due, written at once when the log is durable up to there
// or else by the first Sync that covers it. Older snapshots are pruned by
// that write (writeSnapshot) and by the retention pass.
func (p *Partition) logStartMoved(start int64) { p.snapshotAtEnd(start) }

// SnapshotAtEnd makes a producer snapshot due at the log end now: after a
// cleaning pass removed abort markers, so that the next load does not find
// their entries.
func (p *Partition) SnapshotAtEnd() { p.snapshotAtEnd(-1) }

// snapshotAtEnd takes a producer snapshot at the log end, dropping first
// the aborted entries below start (>= 0).
func (p *Partition) snapshotAtEnd(start int64) {
	ps := p.producers
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	if start >= 0 {
		ps.dropAbortedBelow(start)
	}
	p.expireProducersLocked()
	end := p.log.LogEndOffset()
	s := &pendingSnapshot{offset: end, epoch: p.log.Epoch()}
	s.data = ps.encodeSnapshot(s.offset, s.epoch)
	ps.snapNext = s
	ps.snapPending.Store(true)
	p.sinceSnapshot = 0
	p.mu.Unlock()
	if p.log.HighWatermark() >= end {
		p.writePendingSnapshot(end - 1)
	}
}

// Reconfigure applies new log limits (a topic's segment.bytes, segment.ms,
// max.message.bytes and message.timestamp.type) to the open log: appends
// after it see them. Nothing already written changes.
func (p *Partition) Reconfigure(l partlog.Limits) error {
	if err := p.log.Reconfigure(l); err != nil {
		return fmt.Errorf("reconfigure %s/%d: %w", p.Topic, p.Index, err)
	}
	return nil
}

package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"

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

	fsys volume.FS
	dir  string
	log  *partlog.Log
	// watchers are told (non-blocking send) whenever the high watermark
	// may have moved: long-poll fetches waiting for data of this partition.
	watchMu  sync.Mutex
	watchers map[chan<- struct{}]struct{}
	// onFailure is told when the log refuses writes for good.
	onFailure func(*Partition)

	logger logr.Logger

	// mu serialises the producer-state check with the append it guards.
	mu            sync.Mutex
	producers     producerState
	sinceSnapshot int64 // bytes appended since the last producer snapshot
	closed        bool
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
func (p *Partition) Append(batch []byte) (lastOffset int64, res ProduceResult, err error) {
	h, err := partlog.ParseBatchHeader(batch)
	if err != nil {
		return 0, res, err
	}
	if h.IsControl() {
		return 0, res, fmt.Errorf("%w: clients may not write control batches", ErrInvalidRecord)
	}
	if h.IsTransactional() {
		return 0, res, fmt.Errorf("%w: transactional batches are not supported yet", ErrInvalidRecord)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return 0, res, ErrPartitionClosed
	}
	dup, isDup, err := p.producers.check(h)
	if err != nil {
		return 0, res, err
	}
	if isDup {
		return dup.LastOffset, ProduceResult{BaseOffset: dup.BaseOffset, LogStartOffset: p.log.LogStartOffset()}, nil
	}
	ar, err := p.log.Append(batch)
	if err != nil {
		if p.log.Err() != nil && p.onFailure != nil {
			p.onFailure(p)
		}
		return 0, res, err
	}
	p.producers.record(h, ar.BaseOffset, ar.LastOffset)
	p.sinceSnapshot += int64(len(batch))
	if ar.Rolled || p.sinceSnapshot >= snapshotEveryBytes {
		// Snapshot at each roll and every snapshotEveryBytes, so recovery
		// after a crash replays a bounded tail. The snapshot includes this
		// batch; if a crash truncates the log below it, recovery takes an
		// older one. The batch is appended either way: a failed snapshot
		// only means a longer replay, so it is logged, not returned.
		p.sinceSnapshot = 0
		if err := writeSnapshot(p.fsys, p.dir, p.producers, ar.LastOffset+1); err != nil {
			p.logger.Error(err, "producer-state snapshot failed; recovery will replay more of the log")
		}
	}
	return ar.LastOffset, ProduceResult{BaseOffset: ar.BaseOffset, LogStartOffset: p.log.LogStartOffset()}, nil
}

// Sync waits until offset is durable and the fence re-checked (shared with
// concurrent produce requests: group commit).
func (p *Partition) Sync(ctx context.Context, offset int64) error {
	err := p.log.Sync(ctx, offset)
	if err != nil && p.log.Err() != nil && p.onFailure != nil {
		p.onFailure(p)
	}
	if err == nil {
		p.notifyWatchers()
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
func (p *Partition) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	var errs []error
	if p.log.Err() == nil {
		end := p.log.LogEndOffset()
		if err := p.log.Sync(context.Background(), end-1); err == nil && end > p.log.LogStartOffset() {
			if err := writeSnapshot(p.fsys, p.dir, p.producers, end); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := p.log.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close log %s/%d: %w", p.Topic, p.Index, err))
	}
	p.notifyWatchers() // waiting fetches look again and find it gone
	return errors.Join(errs...)
}

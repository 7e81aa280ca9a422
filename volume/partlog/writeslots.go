package partlog

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// ErrNoWriteSlot is returned by ReserveWrite when no write slot became free
// before its context ended: the broker has as many partitions with appends
// not yet fsynced as its file descriptors allow. The append was not made;
// it may be retried.
var ErrNoWriteSlot = errors.New("partlog: too many partitions with appends waiting for their fsync")

// WriteSlots bounds the logs that hold appends not yet fsynced. Such a log
// keeps its active segment's append and fsync handles open until its next
// group-commit round (closing them could lose the report of a write
// error), so without a bound a produce to tens of thousands of partitions
// at once would hold two descriptors each and run the process out of
// them. A log takes a slot before its first append after a clean round
// (ReserveWrite, which waits: back-pressure on the producer, not an error)
// and gives it back when a round finds nothing appended since its fsync.
//
// The zero value is unbounded.
type WriteSlots struct {
	mu      sync.Mutex
	max     int // 0: unbounded
	held    int
	waiters []chan struct{} // FIFO; each closed when handed a slot

	waits, overflows atomic.Int64
}

// NewWriteSlots returns slots for at most n logs at once (n <= 0: no bound).
func NewWriteSlots(n int) *WriteSlots {
	return &WriteSlots{max: max(n, 0)}
}

var (
	defaultSlotsOnce sync.Once
	defaultSlots     *WriteSlots
)

// DefaultWriteSlots is the process-wide bound that logs opened without
// Config.WriteSlots share: unbounded until the broker sizes it (SetMax)
// from its descriptor budget.
func DefaultWriteSlots() *WriteSlots {
	defaultSlotsOnce.Do(func() { defaultSlots = NewWriteSlots(0) })
	return defaultSlots
}

// SetMax changes the bound (n <= 0: none); waiters a larger bound frees
// are woken.
func (w *WriteSlots) SetMax(n int) {
	w.mu.Lock()
	w.max = max(n, 0)
	w.handOffLocked()
	w.mu.Unlock()
}

// WriteSlotStats describes the slots.
type WriteSlotStats struct {
	Max, Held, Waiting int
	// Waits counts reservations that had to wait; Overflows, appends made
	// without a slot because a round gave theirs back between the
	// reservation and the append.
	Waits, Overflows int64
}

// Stats returns the slots' figures.
func (w *WriteSlots) Stats() WriteSlotStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return WriteSlotStats{Max: w.max, Held: w.held, Waiting: len(w.waiters), Waits: w.waits.Load(), Overflows: w.overflows.Load()}
}

// tryAcquire takes a slot if one is free and nobody waits for one.
func (w *WriteSlots) tryAcquire() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.max > 0 && (w.held >= w.max || len(w.waiters) > 0) {
		return false
	}
	w.held++
	return true
}

// acquire takes a slot, waiting in turn for one until ctx ends.
func (w *WriteSlots) acquire(ctx context.Context) error {
	if w.tryAcquire() {
		return nil
	}
	w.waits.Add(1)
	ch := make(chan struct{})
	w.mu.Lock()
	w.waiters = append(w.waiters, ch)
	w.handOffLocked() // a slot freed since tryAcquire
	w.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		w.mu.Lock()
		defer w.mu.Unlock()
		select {
		case <-ch: // handed a slot meanwhile: give it on
			w.held--
			w.handOffLocked()
		default:
			for i, c := range w.waiters {
				if c == ch {
					w.waiters = append(w.waiters[:i], w.waiters[i+1:]...)
					break
				}
			}
		}
		return fmt.Errorf("%w: %w", ErrNoWriteSlot, context.Cause(ctx))
	}
}

// release gives a slot back, to the first waiter if any.
func (w *WriteSlots) release() {
	w.mu.Lock()
	w.held--
	w.handOffLocked()
	w.mu.Unlock()
}

// handOffLocked hands free slots to waiters, first come first served.
func (w *WriteSlots) handOffLocked() {
	for len(w.waiters) > 0 && (w.max == 0 || w.held < w.max) {
		w.held++
		close(w.waiters[0])
		w.waiters[0] = nil
		w.waiters = w.waiters[1:]
	}
}

// ReserveWrite waits until l may hold appends not yet fsynced: at once if
// it holds a write slot (it has appends waiting for their round), else
// until a slot is free or ctx ends (ErrNoWriteSlot); ErrClosed once l is
// closed. An append without a reservation still works: it takes a free
// slot or, if none is, goes over the bound (counted in Overflows).
func (l *Log) ReserveWrite(ctx context.Context) error {
	if l.slotHeld.Load() {
		return nil
	}
	if err := l.slots.acquire(ctx); err != nil {
		return fmt.Errorf("%s: %w", l.dir, err)
	}
	if !l.slotHeld.CompareAndSwap(false, true) {
		l.slots.release() // another append reserved meanwhile
		return nil
	}
	if l.isClosed.Load() {
		// Close may have given its slot back before this one was
		// taken: give it back here (the swap makes it once).
		l.releaseSlot()
		return ErrClosed
	}
	return nil
}

// takeSlotLocked makes sure l holds a slot before an append (l.mu held).
func (l *Log) takeSlotLocked() {
	if l.slotHeld.Load() {
		return
	}
	if !l.slots.tryAcquire() {
		l.slots.overflows.Add(1)
		l.slots.mu.Lock()
		l.slots.held++
		l.slots.mu.Unlock()
	}
	l.slotHeld.Store(true)
}

// releaseSlotIfClean gives l's slot back at the end of a round whose
// snapshot counted written appends, if they are all durable and nothing
// was appended since.
func (l *Log) releaseSlotIfClean(written uint64) {
	if !l.slotHeld.Load() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.written.Load() == written && l.synced.Load() == written && l.slotHeld.CompareAndSwap(true, false) {
		l.slots.release()
	}
}

// ReleaseReserved gives back the slot a ReserveWrite took for an append
// that was not made (refused, or a retry answered from producer state), so
// that a client sending bad batches to many partitions cannot hold their
// slots: l keeps its slot only while it has appends not yet durable, whose
// round gives it back.
func (l *Log) ReleaseReserved() {
	if !l.slotHeld.Load() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.written.Load() == l.synced.Load() && l.slotHeld.CompareAndSwap(true, false) {
		l.slots.release()
	}
}

// releaseSlot gives l's slot back at Close.
func (l *Log) releaseSlot() {
	if l.slotHeld.CompareAndSwap(true, false) {
		l.slots.release()
	}
}

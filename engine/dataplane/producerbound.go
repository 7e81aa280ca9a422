package dataplane

import (
	"errors"
	"fmt"
	"slices"
)

// The bound on a partition's producer entries (issue 15, finding 9b). Any
// client may send idempotent batches under made-up producer IDs, and each
// ID used to cost an entry kept for producer.id.expiration.ms (24 h): a
// flood of IDs grew memory, snapshots and takeover replays without limit.
// Kafka bounds the rate of new IDs per principal (KIP-936); kaas has no
// principals yet, so it bounds the entries of each partition instead: at
// the cap, a new producer evicts the least recently used entry that has
// no transaction open or being decided here and no verification pending.
// An evicted producer is what an expired one is: its next batch is taken
// as from a new producer (any sequence, as Kafka does for an unknown
// producer), so only its deduplication window is lost. Recently active
// producers, the ones whose retries deduplication is for, stay. Entries
// with a transaction are never evicted (the last stable offset and the
// aborted list depend on them); when every entry has one, a new producer
// is refused with ErrProducerStateFull, which is retriable.
//
// Memory: an entry with its five batch ranges and map slot measures about
// 170 bytes (TestProducerEntryMemory), so the default cap of 2,000 costs
// at most ~0.35 MB per partition, and a snapshot at most 2,000 × 151
// bytes (~300 KB). 2,000 is far more producers than write one partition
// at once (each is a client instance that keeps retrying), and evicting
// an idle one costs nothing but the deduplication of a producer that has
// stopped sending.

// ErrProducerStateFull refuses a new producer at a partition whose
// producer table is full of producers with transactions in progress.
var ErrProducerStateFull = errors.New("producer state of the partition is full")

// producerLRU is an intrusive recency list of producer entries: head is
// the most recently used, tail the least. It allocates nothing.
type producerLRU struct {
	head, tail *producerEntry
}

func (l *producerLRU) pushFront(e *producerEntry) {
	e.prev, e.next = nil, l.head
	if l.head != nil {
		l.head.prev = e
	}
	l.head = e
	if l.tail == nil {
		l.tail = e
	}
}

func (l *producerLRU) unlink(e *producerEntry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else if l.head == e {
		l.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else if l.tail == e {
		l.tail = e.prev
	}
	e.prev, e.next = nil, nil
}

func (l *producerLRU) touch(e *producerEntry) {
	if l.head == e {
		return
	}
	l.unlink(e)
	l.pushFront(e)
}

// put installs a new entry as the most recently used.
func (ps *producerState) put(pid int64, e *producerEntry) {
	e.pid = pid
	ps.m[pid] = e
	ps.lru.pushFront(e)
}

// remove forgets pid's entry e.
func (ps *producerState) remove(pid int64, e *producerEntry) {
	delete(ps.m, pid)
	ps.lru.unlink(e)
}

// evictable reports whether e can be forgotten without changing what the
// partition answers beyond deduplication: no transaction open here, no
// marker of its transaction still to become durable, no verification
// pending.
func (ps *producerState) evictable(e *producerEntry) bool {
	if e.TxnFirst >= 0 || e.Verified >= 0 {
		return false
	}
	_, pending := ps.pendingMarker(e.pid)
	return pending < 0
}

// evictOne forgets the least recently used evictable entry; false if none.
func (ps *producerState) evictOne() bool {
	for e := ps.lru.tail; e != nil; e = e.prev {
		if ps.evictable(e) {
			ps.remove(e.pid, e)
			ps.evicted++
			return true
		}
	}
	return false
}

// makeRoom makes room for one new entry under the cap: nil if there is
// room (after an eviction if needed), ErrProducerStateFull if every entry
// has a transaction in progress.
func (ps *producerState) makeRoom() error {
	if ps.limit <= 0 || len(ps.m) < ps.limit {
		return nil
	}
	if ps.evictOne() {
		return nil
	}
	return fmt.Errorf("%w: its %d producer entries all have transactions in progress (retry when one ends)", ErrProducerStateFull, len(ps.m))
}

// setLimit sets the cap and evicts down to it (least recently used first).
func (ps *producerState) setLimit(limit int) {
	ps.limit = limit
	for limit > 0 && len(ps.m) > limit && ps.evictOne() {
	}
}

// linkLoaded links the entries of a decoded snapshot into the recency
// list, least recent (oldest last timestamp) first: the file keeps no
// order.
func (ps *producerState) linkLoaded() {
	es := make([]*producerEntry, 0, len(ps.m))
	for pid, e := range ps.m {
		e.pid = pid
		es = append(es, e)
	}
	slices.SortFunc(es, func(a, b *producerEntry) int {
		if a.LastTimestamp != b.LastTimestamp {
			if a.LastTimestamp < b.LastTimestamp {
				return -1
			}
			return 1
		}
		if a.pid < b.pid {
			return -1
		}
		return 1
	})
	for _, e := range es {
		ps.lru.pushFront(e)
	}
}

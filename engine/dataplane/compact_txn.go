package dataplane

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/kaas-dev/kaas/volume/partlog"
)

// Transactions and producers as the log cleaner sees them.

// cleanerTxns is Kafka's CleanedTransactionMetadata over one walk of a
// range in offset order: which data batches belong to aborted transactions
// (discardable), and which markers no batch of their transaction precedes
// any more (removable). It spans a whole pass, not one group of segments:
// a marker whose data an earlier group of the same pass still holds is
// kept, so a group whose swap fails never leaves data without its marker.
type cleanerTxns struct {
	// pending holds the aborted transactions of the range not yet
	// reached, by first offset.
	pending []AbortedTxn
	// aborted and committed are the producers whose transaction the walk
	// is inside: an aborted one with whether a batch of it was seen, a
	// committed one (a transactional batch of no aborted transaction).
	aborted   map[int64]*abortedInPass
	committed map[int64]struct{}
}

type abortedInPass struct {
	txn  AbortedTxn
	seen bool
}

// newCleanerTxns starts a walk; aborted is the partition's aborted list
// overlapping the range (Partition.AbortedTransactions).
func newCleanerTxns(aborted []AbortedTxn) cleanerTxns {
	pending := slices.Clone(aborted)
	sortAbortedByFirst(pending)
	return cleanerTxns{pending: pending, aborted: map[int64]*abortedInPass{}, committed: map[int64]struct{}{}}
}

// reach enters the aborted transactions that start at or before offset.
func (t *cleanerTxns) reach(offset int64) {
	for len(t.pending) > 0 && t.pending[0].FirstOffset <= offset {
		a := t.pending[0]
		t.pending = t.pending[1:]
		if t.aborted[a.ProducerID] == nil {
			t.aborted[a.ProducerID] = &abortedInPass{txn: a}
		}
	}
}

// onData notes a data batch and reports whether it belongs to an aborted
// transaction (Kafka's onBatchRead).
func (t *cleanerTxns) onData(h partlog.BatchHeader) (discard bool) {
	t.reach(h.LastOffset())
	if !h.IsTransactional() {
		return false
	}
	if a := t.aborted[h.ProducerID]; a != nil {
		a.seen = true
		return true
	}
	t.committed[h.ProducerID] = struct{}{}
	return false
}

// onControl notes a control batch and reports whether its marker may go
// once its delete horizon passes (Kafka's onControlBatchRead): an abort or
// commit marker none of whose transaction's batches this walk met, and an
// empty control batch (cleaned already). entry is the aborted list's entry
// an abort marker ends, when it has one.
func (t *cleanerTxns) onControl(h partlog.BatchHeader, typ int16, empty bool) (removable bool, entry AbortedTxn, hasEntry bool) {
	t.reach(h.LastOffset())
	if empty {
		return true, AbortedTxn{}, false
	}
	switch typ {
	case controlAbort:
		a := t.aborted[h.ProducerID]
		delete(t.aborted, h.ProducerID)
		if a == nil {
			return true, AbortedTxn{}, false
		}
		return !a.seen, a.txn, true
	case controlCommit:
		_, seen := t.committed[h.ProducerID]
		delete(t.committed, h.ProducerID)
		return !seen, AbortedTxn{}, false
	}
	return false, AbortedTxn{}, false
}

// LastRecord is where a live producer's state lies in the log (Kafka's
// LastRecord): the cleaner keeps that batch, emptied if need be, so a
// replay of the cleaned log still finds the producer's epoch and last
// sequence, and a retry of its last batch is still a duplicate.
type LastRecord struct {
	// LastDataOffset is the last offset of the producer's last data batch
	// at its current epoch; -1 when its last entry is a marker, whose
	// control batches of Epoch are then kept.
	LastDataOffset int64
	Epoch          int16
}

// keeps reports whether h is the batch lr keeps.
func (lr LastRecord) keeps(h partlog.BatchHeader) bool {
	if lr.LastDataOffset >= 0 {
		return h.LastOffset() == lr.LastDataOffset
	}
	return h.IsControl() && h.ProducerEpoch == lr.Epoch
}

// lastRecords copies, per live producer (an entry that holds a batch or a
// marker), the batch the cleaner must keep. Producers only move forward,
// so a copy taken at plan time keeps at most a batch too many.
func (ps *producerState) lastRecords() map[int64]LastRecord {
	out := make(map[int64]LastRecord, len(ps.m))
	for pid, e := range ps.m {
		switch {
		case len(e.Batches) > 0:
			out[pid] = LastRecord{LastDataOffset: e.Batches[len(e.Batches)-1].LastOffset, Epoch: e.Epoch}
		case e.CoordinatorEpoch >= 0:
			out[pid] = LastRecord{LastDataOffset: -1, Epoch: e.Epoch}
		}
	}
	return out
}

// dropAborted forgets the aborted transactions the cleaner removed the
// abort markers of (matched by producer and marker offset) and returns how
// many it forgot. An entry whose marker is gone would make a read_committed
// consumer skip its producer's later transactions: it must go before the
// segment without the marker is swapped in. Removing absent entries is a
// no-op, so a caller may pass the same entries again. The list is copied,
// never edited in place: published views stay valid.
func (ps *producerState) dropAborted(removed []AbortedTxn) int {
	type entryKey struct{ pid, offset int64 }
	set := make(map[entryKey]struct{}, len(removed))
	for _, r := range removed {
		set[entryKey{r.ProducerID, r.LastOffset}] = struct{}{}
	}
	gone := func(a AbortedTxn) bool {
		_, ok := set[entryKey{a.ProducerID, a.LastOffset}]
		return ok
	}
	n := 0
	for _, a := range ps.aborted {
		if gone(a) {
			n++
		}
	}
	if n == 0 {
		return 0
	}
	kept := make([]AbortedTxn, 0, len(ps.aborted)-n)
	var span int64
	for _, a := range ps.aborted {
		if !gone(a) {
			kept = append(kept, a)
			span = max(span, a.LastOffset-a.FirstOffset)
		}
	}
	if len(kept) == 0 {
		kept = nil
	}
	ps.aborted, ps.abortMaxSpan = kept, span
	ps.publishAborted()
	return n
}

// replayEmptyControl applies, on replay, a control batch the cleaner
// emptied: its marker and its transaction's data are gone, and it stays
// only to carry a live producer's epoch. It moves the producer to that
// epoch with no transaction effect. The marker's coordinator epoch is
// gone with it: the entry gets 0, the lowest, which fences no
// coordinator but keeps the entry, and so its epoch's fencing, in the
// state (an entry with neither batch nor marker counts as unknown).
func (ps *producerState) replayEmptyControl(h partlog.BatchHeader) {
	e := ps.markerEntry(h.ProducerID, h.ProducerEpoch)
	e.CoordinatorEpoch = max(e.CoordinatorEpoch, 0)
	e.LastTimestamp = h.MaxTimestamp
}

// LastRecords is, per live producer, the batch the log cleaner keeps for
// it (LastRecord), as of now.
func (p *Partition) LastRecords() map[int64]LastRecord {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.producers.lastRecords()
}

// DropAborted forgets the aborted transactions whose abort markers a
// cleaning pass removed (Filter.RemovedAborts) and returns how many it
// forgot. Call it before swapping in the segments without the markers.
func (p *Partition) DropAborted(removed []AbortedTxn) int {
	if len(removed) == 0 {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.producers.dropAborted(removed)
}

// sortAbortedByFirst orders aborted entries as a walk reaches them.
func sortAbortedByFirst(list []AbortedTxn) {
	slices.SortFunc(list, func(a, b AbortedTxn) int {
		if c := cmp.Compare(a.FirstOffset, b.FirstOffset); c != 0 {
			return c
		}
		return cmp.Compare(a.LastOffset, b.LastOffset)
	})
}

// errFoundMarker stops a scan at the batch it looked for.
var errFoundMarker = errors.New("found")

// dropCleanedAborts drops the aborted entries a snapshot (taken below
// from) lists whose abort markers are no longer in the log: a cleaning
// pass removed them, and the process crashed between its swap and the
// producer snapshot that would have forgotten them, or an older snapshot
// was the usable one. Such an entry would make read_committed consumers
// skip its producer's later transactions. Only markers inside cleaned
// segments can be gone, and those are few (a marker goes once its
// horizon passed), so each is checked with one header read.
func (ps *producerState) dropCleanedAborts(lg *partlog.Log, from int64) error {
	var cleaned []partlog.SegmentInfo
	for _, s := range lg.Segments() {
		if s.Gen > 0 && s.Base < from {
			cleaned = append(cleaned, s)
		}
	}
	if len(cleaned) == 0 {
		return nil
	}
	inCleaned := func(off int64) bool {
		for _, s := range cleaned {
			if off >= s.Base && off < s.EndOffset {
				return true
			}
		}
		return false
	}
	var gone []AbortedTxn
	for _, a := range ps.aborted {
		if a.LastOffset >= from || !inCleaned(a.LastOffset) {
			continue
		}
		found := false
		err := lg.Scan(a.LastOffset, func(h partlog.BatchHeader) error {
			found = h.BaseOffset == a.LastOffset && h.IsControl() && h.ProducerID == a.ProducerID && h.NumRecords > 0
			return errFoundMarker
		})
		if err != nil && !errors.Is(err, errFoundMarker) {
			return fmt.Errorf("check the abort marker at offset %d: %w", a.LastOffset, err)
		}
		if !found {
			gone = append(gone, a)
		}
	}
	ps.dropAborted(gone)
	return nil
}

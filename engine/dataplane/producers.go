package dataplane

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/partlog"
)

// Producer state of one partition (Kafka's ProducerStateManager): per
// producer ID, its epoch and the sequence ranges of its last five batches
// (Kafka's in-flight limit), so a retried batch is answered with its
// original offset and a gap is refused; and the partition's transactions:
// each producer's ongoing transaction here, the queue of transactions not
// yet decided (which bounds the last stable offset) and the aborted ones
// (which read_committed fetches list). It is rebuilt at open from a
// snapshot and the log after it (the second half of this file).

const keepBatches = 5

// DefaultMaxProducersPerPartition bounds a partition's producer entries
// when the broker sets no other bound.
const DefaultMaxProducersPerPartition = 2000

type batchRange struct {
	FirstSeq   int32
	LastSeq    int32
	BaseOffset int64
	LastOffset int64
}

type producerEntry struct {
	Epoch   int16
	Batches []batchRange // oldest first, at most keepBatches
	// LastTimestamp is the max timestamp of the producer's last batch or
	// marker (DescribeProducers).
	LastTimestamp int64
	// CoordinatorEpoch is the coordinator epoch of the producer's last
	// marker here, -1 if none: a marker from an older coordinator is
	// refused.
	CoordinatorEpoch int32
	// TxnFirst is the first offset of the producer's ongoing transaction
	// at this partition, -1 if none.
	TxnFirst int64
	// Verified is the producer epoch at which the transaction coordinator
	// confirmed this partition is in the producer's ongoing transaction
	// (KIP-890 verification guard), -1 if none. Not persisted: after a
	// reopen the producer's next first batch is verified again.
	Verified int32

	// pid, prev and next place the entry in its partition's recency list
	// (producerbound.go).
	pid        int64
	prev, next *producerEntry
}

func newProducerEntry(epoch int16) *producerEntry {
	return &producerEntry{Epoch: epoch, Batches: make([]batchRange, 0, keepBatches), CoordinatorEpoch: -1, TxnFirst: -1, Verified: -1}
}

// persisted reports whether the entry holds anything the log implies; an
// entry made only to hold a verification guard is neither snapshotted nor
// described.
func (e *producerEntry) persisted() bool {
	return len(e.Batches) > 0 || e.TxnFirst >= 0 || e.CoordinatorEpoch >= 0
}

// setEpoch moves the entry to a newer epoch: the batches of the old one
// say nothing about the new one's sequences. The ongoing transaction, the
// coordinator epoch and the guard stay (Kafka: an epoch bump does not end
// a transaction; its marker does).
func (e *producerEntry) setEpoch(epoch int16) {
	if epoch != e.Epoch {
		e.Epoch = epoch
		e.Batches = e.Batches[:0]
	}
}

// ongoingTxn is a transaction of the queue that bounds the last stable
// offset: open (marker -1), or ended by a marker at marker that is not yet
// known durable.
type ongoingTxn struct {
	pid    int64
	first  int64
	marker int64
}

// abortedView is the aborted list as published to lock-free readers.
type abortedView struct {
	list []AbortedTxn // by LastOffset (marker order)
	// maxSpan is the largest LastOffset-FirstOffset in list: an entry
	// whose marker is at or after to+maxSpan starts at or after to.
	maxSpan int64
}

// producerState is guarded by the partition mutex, except the atomics.
type producerState struct {
	m map[int64]*producerEntry
	// lru orders m's entries by last use and limit caps them (0: no cap;
	// producerbound.go); evicted counts the entries the cap forgot.
	lru     producerLRU
	limit   int
	evicted uint64
	// ongoing holds the undecided transactions by first offset (they are
	// added at the log end, in log order).
	ongoing []ongoingTxn
	// aborted is the list of aborted transactions by marker offset. It is
	// only ever appended to or resliced from the front, never changed in
	// place, so the views published in abortedPub stay valid.
	aborted      []AbortedTxn
	abortMaxSpan int64

	// firstUnstable is ongoing[0].first, or MaxInt64: the fetch path reads
	// it without the mutex.
	firstUnstable atomic.Int64
	abortedPub    atomic.Pointer[abortedView]

	// snapNext is the snapshot due, written by the first Sync that covers
	// it (snapPending says so without the mutex); snapWriting is set, and
	// snapWG counts, while one is written. snapNext and snapWriting are
	// under the partition mutex.
	snapNext    *pendingSnapshot
	snapPending atomic.Bool
	snapWriting bool
	snapWG      sync.WaitGroup
}

func newProducerState() *producerState {
	ps := &producerState{m: map[int64]*producerEntry{}, limit: DefaultMaxProducersPerPartition}
	ps.firstUnstable.Store(math.MaxInt64)
	return ps
}

var (
	// ErrOutOfOrderSequence is a gap in a producer's sequence numbers.
	ErrOutOfOrderSequence = errors.New("out of order sequence number")
	// ErrInvalidProducerEpoch is a batch from an epoch older than the current one.
	ErrInvalidProducerEpoch = errors.New("producer epoch is older than the current one")
)

func lastSeq(h partlog.BatchHeader) int32 {
	s := int64(h.BaseSequence) + int64(h.LastOffsetDelta)
	if s > math.MaxInt32 {
		s -= math.MaxInt32 + 1
	}
	return int32(s)
}

func nextSeq(s int32) int32 {
	if s == math.MaxInt32 {
		return 0
	}
	return s + 1
}

// check decides what to do with a batch: append it (dup false, err nil),
// answer it as a duplicate of an earlier append, or refuse it.
func (ps *producerState) check(h partlog.BatchHeader) (dup batchRange, isDup bool, err error) {
	if h.ProducerID < 0 {
		return batchRange{}, false, nil
	}
	return checkEntry(ps.m[h.ProducerID], h)
}

// checkEntry is check for the producer's entry e (nil if unknown).
func checkEntry(e *producerEntry, h partlog.BatchHeader) (dup batchRange, isDup bool, err error) {
	if e == nil || !e.persisted() {
		// A producer unknown here (new, or its state expired, or known
		// only by a verification) starts anywhere.
		return batchRange{}, false, nil
	}
	switch {
	case h.ProducerEpoch < e.Epoch:
		return batchRange{}, false, fmt.Errorf("%w: producer %d epoch %d, current %d", ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch, e.Epoch)
	case h.ProducerEpoch > e.Epoch:
		if h.BaseSequence != 0 {
			return batchRange{}, false, fmt.Errorf("%w: producer %d new epoch %d must start at sequence 0, got %d", ErrOutOfOrderSequence, h.ProducerID, h.ProducerEpoch, h.BaseSequence)
		}
		return batchRange{}, false, nil
	}
	last := lastSeq(h)
	for _, b := range e.Batches {
		if b.FirstSeq == h.BaseSequence && b.LastSeq == last {
			return b, true, nil
		}
	}
	// No batch at this epoch yet (only a marker, or a verification): as
	// Kafka, any sequence starts it.
	if n := len(e.Batches); n > 0 {
		if want := nextSeq(e.Batches[n-1].LastSeq); h.BaseSequence != want {
			return batchRange{}, false, fmt.Errorf("%w: producer %d expected sequence %d, got %d", ErrOutOfOrderSequence, h.ProducerID, want, h.BaseSequence)
		}
	}
	return batchRange{}, false, nil
}

// checkTxn applies the transaction rules to a batch of a producer (ID >= 0)
// that passed checkEntry: a transactional batch needs an ongoing
// transaction at its epoch or a verification of it; a non-transactional
// one is refused while the producer has a transaction open here.
func checkTxn(e *producerEntry, h partlog.BatchHeader) error {
	if !h.IsTransactional() {
		if e != nil && e.TxnFirst >= 0 {
			return fmt.Errorf("%w: producer %d has a transaction open since offset %d; its non-transactional batch is refused", ErrInvalidTxnState, h.ProducerID, e.TxnFirst)
		}
		return nil
	}
	if e != nil && ((e.TxnFirst >= 0 && e.Epoch == h.ProducerEpoch) || e.Verified == int32(h.ProducerEpoch)) {
		return nil
	}
	return &TxnUnverifiedError{ProducerID: h.ProducerID, ProducerEpoch: h.ProducerEpoch}
}

// record notes an appended data batch at [base, last].
func (ps *producerState) record(h partlog.BatchHeader, base, last int64) {
	if h.ProducerID < 0 {
		return
	}
	ps.recordEntry(ps.m[h.ProducerID], h, base, last)
}

// recordEntry is record for the producer's entry e (nil if unknown).
func (ps *producerState) recordEntry(e *producerEntry, h partlog.BatchHeader, base, last int64) {
	if e == nil {
		// Append made room already; a replay evicts here. A table full
		// of transactions takes the entry anyway: the batch is in the log.
		_ = ps.makeRoom()
		e = newProducerEntry(h.ProducerEpoch)
		ps.put(h.ProducerID, e)
	} else {
		e.setEpoch(h.ProducerEpoch)
		ps.lru.touch(e)
	}
	if len(e.Batches) == keepBatches {
		copy(e.Batches, e.Batches[1:])
		e.Batches = e.Batches[:keepBatches-1]
	}
	e.Batches = append(e.Batches, batchRange{FirstSeq: h.BaseSequence, LastSeq: lastSeq(h), BaseOffset: base, LastOffset: last})
	e.LastTimestamp = h.MaxTimestamp
	if h.IsTransactional() && e.TxnFirst < 0 {
		e.TxnFirst = base
		ps.ongoing = append(ps.ongoing, ongoingTxn{pid: h.ProducerID, first: base, marker: -1})
		if len(ps.ongoing) == 1 {
			ps.firstUnstable.Store(base)
		}
	}
}

// marker is a transaction marker (a control batch's producer and record).
type marker struct {
	pid              int64
	epoch            int16
	commit           bool
	coordinatorEpoch int32
	timestamp        int64
	offset           int64
}

// markerEntry is the entry of a marker's producer, made if new (a marker
// is never refused: it is in the log) and moved to the marker's epoch if
// that is newer.
func (ps *producerState) markerEntry(pid int64, epoch int16) *producerEntry {
	e := ps.m[pid]
	if e == nil {
		_ = ps.makeRoom()
		e = newProducerEntry(epoch)
		ps.put(pid, e)
		return e
	}
	if epoch > e.Epoch {
		e.setEpoch(epoch)
	}
	ps.lru.touch(e)
	return e
}

// applyMarker ends the producer's transaction with m (the caller checked
// the epochs) and returns the ended transaction's first offset, -1 if it
// had none here. An abort joins the aborted list. The transaction stays in
// the ongoing queue, marked with the marker's offset, until
// completeTxn: the last stable offset must not pass a marker that is not
// durable.
func (ps *producerState) applyMarker(m marker) int64 {
	e := ps.markerEntry(m.pid, m.epoch)
	e.CoordinatorEpoch = m.coordinatorEpoch
	e.LastTimestamp = m.timestamp
	e.Verified = -1
	first := e.TxnFirst
	if first < 0 {
		return -1
	}
	e.TxnFirst = -1
	for i := range ps.ongoing {
		if o := &ps.ongoing[i]; o.pid == m.pid && o.first == first {
			o.marker = m.offset
			break
		}
	}
	if !m.commit {
		ps.addAborted(AbortedTxn{ProducerID: m.pid, FirstOffset: first, LastOffset: m.offset})
	}
	return first
}

// completeTxn removes a decided transaction from the ongoing queue once its
// marker is durable.
func (ps *producerState) completeTxn(pid, first int64) {
	for i, o := range ps.ongoing {
		if o.pid == pid && o.first == first {
			ps.ongoing = slices.Delete(ps.ongoing, i, i+1)
			if i == 0 {
				ps.publishFirstUnstable()
			}
			return
		}
	}
}

// expire forgets the producers idle since before cutoffMs (their last
// batch's or marker's timestamp): no transaction open or being decided
// here, no verification pending. Kafka's producer.id.expiration.ms: without
// it a partition keeps an entry for every producer that ever wrote to it
// (each restart of an idempotent producer is a new ID), and snapshots and
// takeovers grow with them. A batch of a forgotten producer is taken as
// from a new one, as Kafka does. It returns how many were forgotten.
func (ps *producerState) expire(cutoffMs int64) int {
	n := 0
	for pid, e := range ps.m {
		if e.TxnFirst >= 0 || e.Verified >= 0 || e.LastTimestamp >= cutoffMs {
			continue
		}
		if _, pending := ps.pendingMarker(pid); pending >= 0 {
			continue
		}
		ps.remove(pid, e)
		n++
	}
	return n
}

// pendingMarker returns the largest offset of a marker of pid whose
// transaction is still in the ongoing queue (written, not known durable),
// with that transaction's first offset; -1 if none.
func (ps *producerState) pendingMarker(pid int64) (first, offset int64) {
	first, offset = -1, -1
	for _, o := range ps.ongoing {
		if o.pid == pid && o.marker > offset {
			first, offset = o.first, o.marker
		}
	}
	return first, offset
}

func (ps *producerState) publishFirstUnstable() {
	if len(ps.ongoing) == 0 {
		ps.firstUnstable.Store(math.MaxInt64)
		return
	}
	ps.firstUnstable.Store(ps.ongoing[0].first)
}

func (ps *producerState) addAborted(a AbortedTxn) {
	ps.aborted = append(ps.aborted, a)
	ps.abortMaxSpan = max(ps.abortMaxSpan, a.LastOffset-a.FirstOffset)
	ps.publishAborted()
}

// dropAbortedBelow forgets aborted transactions whose marker is below
// logStart: no fetch can reach them.
func (ps *producerState) dropAbortedBelow(logStart int64) {
	i := 0
	for i < len(ps.aborted) && ps.aborted[i].LastOffset < logStart {
		i++
	}
	if i == 0 {
		return
	}
	ps.aborted = ps.aborted[i:]
	if len(ps.aborted) == 0 {
		ps.aborted, ps.abortMaxSpan = nil, 0
	}
	ps.publishAborted()
}

func (ps *producerState) publishAborted() {
	if len(ps.aborted) == 0 {
		ps.abortedPub.Store(nil)
		return
	}
	ps.abortedPub.Store(&abortedView{list: ps.aborted, maxSpan: ps.abortMaxSpan})
}

// rebuildOngoing fills the ongoing queue from the entries (after a load).
func (ps *producerState) rebuildOngoing() {
	ps.ongoing = ps.ongoing[:0]
	for pid, e := range ps.m {
		if e.TxnFirst >= 0 {
			ps.ongoing = append(ps.ongoing, ongoingTxn{pid: pid, first: e.TxnFirst, marker: -1})
		}
	}
	slices.SortFunc(ps.ongoing, func(a, b ongoingTxn) int {
		if a.first != b.first {
			return cmp.Compare(a.first, b.first)
		}
		return cmp.Compare(a.pid, b.pid)
	})
	ps.publishFirstUnstable()
}

// Snapshots. <partition dir>/<offset %020d>-e<epoch>.producers holds the
// state as of offset (every batch below it applied), written by the owner
// at leader epoch epoch once the log below offset was durable and
// fence-checked. Written atomically; at open the newest one the
// version-conditional rule (partlog.CheckSnapshot) accepts is loaded and
// the log after it replayed. Names of the first format, <offset>.producers
// (no epoch: nothing tells a fenced owner's late write apart), are never
// loaded: a partition that has only those replays its whole log once, and
// the next snapshot's retention removes them.
//
// The file (big-endian):
//
//	header (36 bytes)
//	  magic "KPSS" | version u16 | flags u16 (0) | offset i64 | epoch i32
//	  | producers u32 | aborted u32 | body length u64
//	producers × pid i64 | epoch i16 | coordinator epoch i32
//	  | last timestamp i64 | ongoing txn first offset i64 (-1 none)
//	  | batches u8 (<= 5) | batches × (first seq i32 | last seq i32
//	  | base offset i64 | last offset i64)
//	aborted × pid i64 | first offset i64 | marker offset i64 (marker order)
//	crc u32: CRC-32C of header and body
//
// JSON took 1.1 ms to encode (under the partition mutex) and 5 ms to
// decode for 1,000 producers; this takes microseconds.
const (
	snapshotSuffix     = ".producers"
	snapshotNameFormat = "%020d-e%d" + snapshotSuffix
	snapMagic          = "KPSS"
	snapVersion        = 1
	snapHeaderSize     = 36
	snapEntryFixed     = 8 + 2 + 4 + 8 + 8 + 1
	snapBatchSize      = 4 + 4 + 8 + 8
	snapAbortedSize    = 8 + 8 + 8
)

var (
	castagnoli = crc32.MakeTable(crc32.Castagnoli)

	errBadProducerSnapshot = errors.New("bad producer-state snapshot")
)

// snapshotName is the name of the snapshot as of offset written at epoch.
func snapshotName(offset int64, epoch int32) string {
	return fmt.Sprintf(snapshotNameFormat, offset, epoch)
}

// parseSnapshotName parses a name made by snapshotName, rejecting names
// that do not round-trip exactly (temp files among them).
func parseSnapshotName(name string) (offset int64, epoch int32, ok bool) {
	if !strings.HasSuffix(name, snapshotSuffix) || strings.HasPrefix(name, ".") {
		return 0, 0, false
	}
	if _, err := fmt.Sscanf(name, snapshotNameFormat, &offset, &epoch); err != nil {
		return 0, 0, false
	}
	if offset < 0 || epoch < 0 || snapshotName(offset, epoch) != name {
		return 0, 0, false
	}
	return offset, epoch, true
}

// isLegacySnapshotName recognises the first format's <offset>.producers.
func isLegacySnapshotName(name string) bool {
	digits, ok := strings.CutSuffix(name, snapshotSuffix)
	if !ok || digits == "" {
		return false
	}
	_, err := strconv.ParseUint(digits, 10, 63)
	return err == nil
}

// snapshotFile is one snapshot name found in the partition directory.
type snapshotFile struct {
	offset int64
	epoch  int32
	name   string
}

// listSnapshots returns the snapshots in dir, newest (highest offset, then
// highest epoch) first, and the names of first-format ones. The listing
// may be stale on a shared volume: that only hides a snapshot, and the
// replay covers what it would have.
func listSnapshots(fsys volume.FS, dir string) (files []snapshotFile, legacy []string, err error) {
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("list producer snapshots in %s: %w", dir, err)
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	files, legacy = snapshotsIn(names)
	return files, legacy, nil
}

// snapshotsIn is listSnapshots of a listing already made.
func snapshotsIn(names []string) (files []snapshotFile, legacy []string) {
	for _, n := range names {
		if off, epoch, ok := parseSnapshotName(n); ok {
			files = append(files, snapshotFile{offset: off, epoch: epoch, name: n})
		} else if isLegacySnapshotName(n) {
			legacy = append(legacy, n)
		}
	}
	slices.SortFunc(files, func(a, b snapshotFile) int {
		if c := cmp.Compare(b.offset, a.offset); c != 0 {
			return c
		}
		return cmp.Compare(b.epoch, a.epoch)
	})
	return files, legacy
}

// SnapshotOffsets lists the producer snapshot offsets in a partition
// directory, ascending.
func SnapshotOffsets(fsys volume.FS, dir string) ([]int64, error) {
	files, _, err := listSnapshots(fsys, dir)
	if err != nil {
		return nil, err
	}
	out := make([]int64, len(files))
	for i, f := range files {
		out[len(files)-1-i] = f.offset
	}
	return out, nil
}

// encodeSnapshot serialises the state as of offset for the owner at epoch.
// It runs under the partition mutex: one allocation, no per-producer work
// beyond copying its fields.
func (ps *producerState) encodeSnapshot(offset int64, epoch int32) []byte {
	size := snapHeaderSize + len(ps.m)*(snapEntryFixed+keepBatches*snapBatchSize) + len(ps.aborted)*snapAbortedSize + 4
	b := make([]byte, snapHeaderSize, size)
	be := binary.BigEndian
	var count uint32
	for pid, e := range ps.m {
		if !e.persisted() {
			continue
		}
		count++
		b = be.AppendUint64(b, uint64(pid))
		b = be.AppendUint16(b, uint16(e.Epoch))
		b = be.AppendUint32(b, uint32(e.CoordinatorEpoch))
		b = be.AppendUint64(b, uint64(e.LastTimestamp))
		b = be.AppendUint64(b, uint64(e.TxnFirst))
		b = append(b, byte(len(e.Batches)))
		for _, r := range e.Batches {
			b = be.AppendUint32(b, uint32(r.FirstSeq))
			b = be.AppendUint32(b, uint32(r.LastSeq))
			b = be.AppendUint64(b, uint64(r.BaseOffset))
			b = be.AppendUint64(b, uint64(r.LastOffset))
		}
	}
	for _, a := range ps.aborted {
		b = be.AppendUint64(b, uint64(a.ProducerID))
		b = be.AppendUint64(b, uint64(a.FirstOffset))
		b = be.AppendUint64(b, uint64(a.LastOffset))
	}
	copy(b, snapMagic)
	be.PutUint16(b[4:], snapVersion)
	be.PutUint16(b[6:], 0)
	be.PutUint64(b[8:], uint64(offset))
	be.PutUint32(b[16:], uint32(epoch))
	be.PutUint32(b[20:], count)
	be.PutUint32(b[24:], uint32(len(ps.aborted)))
	be.PutUint64(b[28:], uint64(len(b)-snapHeaderSize))
	return be.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// decodeSnapshot checks the whole file (length, version, CRC, and every
// offset below the snapshot's) and loads it into a fresh state.
func decodeSnapshot(b []byte) (ps *producerState, offset int64, epoch int32, err error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", errBadProducerSnapshot, fmt.Sprintf(format, args...))
	}
	if len(b) < snapHeaderSize+4 {
		return nil, 0, 0, bad("%d bytes", len(b))
	}
	be := binary.BigEndian
	if string(b[:4]) != snapMagic {
		return nil, 0, 0, bad("magic %q", b[:4])
	}
	if v := be.Uint16(b[4:]); v != snapVersion {
		return nil, 0, 0, bad("version %d", v)
	}
	end := len(b) - 4
	if crc := crc32.Checksum(b[:end], castagnoli); crc != be.Uint32(b[end:]) {
		return nil, 0, 0, bad("crc %08x, computed %08x", be.Uint32(b[end:]), crc)
	}
	offset, epoch = int64(be.Uint64(b[8:])), int32(be.Uint32(b[16:]))
	nProd, nAborted := be.Uint32(b[20:]), be.Uint32(b[24:])
	if bodyLen := be.Uint64(b[28:]); bodyLen != uint64(end-snapHeaderSize) {
		return nil, 0, 0, bad("body length %d in a %d-byte file", bodyLen, len(b))
	}
	if offset < 0 || epoch < 0 {
		return nil, 0, 0, bad("offset %d, epoch %d", offset, epoch)
	}
	below := func(o int64) bool { return o >= 0 && o < offset }
	body := b[snapHeaderSize:end]
	if uint64(nProd)*snapEntryFixed > uint64(len(body)) {
		return nil, 0, 0, bad("%d producers in %d bytes", nProd, len(body))
	}
	ps = newProducerState()
	ps.m = make(map[int64]*producerEntry, nProd)
	// Entries and their batch arrays come from two slabs: three
	// allocations (and the map) instead of two per producer.
	entries := make([]producerEntry, nProd)
	slab := make([]batchRange, int(nProd)*keepBatches)
	for i := uint32(0); i < nProd; i++ {
		if len(body) < snapEntryFixed {
			return nil, 0, 0, bad("producer %d truncated", i)
		}
		pid := int64(be.Uint64(body))
		e := &entries[i]
		*e = producerEntry{
			Epoch:            int16(be.Uint16(body[8:])),
			CoordinatorEpoch: int32(be.Uint32(body[10:])),
			LastTimestamp:    int64(be.Uint64(body[14:])),
			TxnFirst:         int64(be.Uint64(body[22:])),
			Verified:         -1,
		}
		n := int(body[30])
		body = body[snapEntryFixed:]
		if pid < 0 || ps.m[pid] != nil || n > keepBatches || len(body) < n*snapBatchSize || (e.TxnFirst != -1 && !below(e.TxnFirst)) {
			return nil, 0, 0, bad("producer %d (ID %d) malformed", i, pid)
		}
		e.Batches = slab[:n:keepBatches]
		slab = slab[keepBatches:]
		for j := range e.Batches {
			r := batchRange{FirstSeq: int32(be.Uint32(body)), LastSeq: int32(be.Uint32(body[4:])),
				BaseOffset: int64(be.Uint64(body[8:])), LastOffset: int64(be.Uint64(body[16:]))}
			if !below(r.BaseOffset) || !below(r.LastOffset) || r.LastOffset < r.BaseOffset {
				return nil, 0, 0, bad("producer %d batch [%d, %d] outside [0, %d)", pid, r.BaseOffset, r.LastOffset, offset)
			}
			e.Batches[j] = r
			body = body[snapBatchSize:]
		}
		ps.m[pid] = e
	}
	if uint64(len(body)) != uint64(nAborted)*snapAbortedSize {
		return nil, 0, 0, bad("%d bytes for %d aborted transactions", len(body), nAborted)
	}
	for i := uint32(0); i < nAborted; i++ {
		a := AbortedTxn{ProducerID: int64(be.Uint64(body)), FirstOffset: int64(be.Uint64(body[8:])), LastOffset: int64(be.Uint64(body[16:]))}
		body = body[snapAbortedSize:]
		if !below(a.FirstOffset) || !below(a.LastOffset) || a.FirstOffset > a.LastOffset ||
			(len(ps.aborted) > 0 && a.LastOffset < ps.aborted[len(ps.aborted)-1].LastOffset) {
			return nil, 0, 0, bad("aborted transaction %+v", a)
		}
		ps.aborted = append(ps.aborted, a)
		ps.abortMaxSpan = max(ps.abortMaxSpan, a.LastOffset-a.FirstOffset)
	}
	ps.linkLoaded()
	return ps, offset, epoch, nil
}

// writeSnapshot writes a snapshot encoded by encodeSnapshot atomically and
// removes the snapshots older than the newest one below it (and any of the
// first format). The caller has waited until the log below offset is
// durable: a snapshot never names data the log may lose.
func writeSnapshot(fsys volume.FS, dir string, data []byte, offset int64, epoch int32) error {
	if err := volume.WriteFileAtomic(fsys, path.Join(dir, snapshotName(offset, epoch)), data); err != nil {
		return fmt.Errorf("producer snapshot at %d: %w", offset, err)
	}
	return pruneSnapshots(fsys, dir, offset)
}

// pruneSnapshots keeps the snapshots at or above keep and the newest one
// below it, and removes the rest and every first-format one. A leftover is
// harmless (an older snapshot is never used while a newer valid one
// exists), so the caller only logs an error.
func pruneSnapshots(fsys volume.FS, dir string, keep int64) error {
	files, legacy, err := listSnapshots(fsys, dir)
	if err != nil {
		return err
	}
	victims := legacy
	kept := false
	for _, f := range files {
		if f.offset >= keep {
			continue
		}
		if !kept {
			kept = true
			continue
		}
		victims = append(victims, f.name)
	}
	var errs []error
	for _, n := range victims {
		if err := fsys.Remove(path.Join(dir, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if len(victims) > 0 {
		if err := fsys.SyncDir(dir); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("prune producer snapshots: %w", errors.Join(errs...))
	}
	return nil
}

// loadProducerState rebuilds producer state for an opened log: the newest
// usable snapshot, then a replay of only the batches after it (from the log
// start without one). It reports how many batches it replayed. Snapshots
// beyond their writer's epoch are removed first: those of the opener's own
// epoch (a reopen at the same epoch after a torn tail) must be gone before
// its log end grows past them, so failing to remove one fails the load.
// At most limit producers are kept (0: no cap), the least recently used
// evicted first (producerbound.go).
//
// listing is the directory's names as the log's Open just listed them
// (partlog.Log.OpenListing), nil to list it here.
func loadProducerState(fsys volume.FS, dir string, lg *partlog.Log, limit int, listing []string) (*producerState, int64, error) {
	var files []snapshotFile
	if listing != nil {
		files, _ = snapshotsIn(listing)
	} else {
		var err error
		if files, _, err = listSnapshots(fsys, dir); err != nil {
			return nil, 0, err
		}
	}
	logStart := lg.LogStartOffset()
	var usable []snapshotFile
	var ownStale error
	removed := false
	for _, f := range files {
		switch partlog.CheckSnapshotAgainst(f.offset, f.epoch, logStart, lg.EndOffsetForEpoch) {
		case partlog.SnapshotUsable:
			usable = append(usable, f)
		case partlog.SnapshotBeyondEpoch:
			err := fsys.Remove(path.Join(dir, f.name))
			switch {
			case err == nil:
				removed = true
			case errors.Is(err, fs.ErrNotExist):
			case f.epoch == lg.Epoch():
				ownStale = errors.Join(ownStale, fmt.Errorf("remove stale producer snapshot %s: %w", f.name, err))
			}
		}
	}
	if removed {
		if err := fsys.SyncDir(dir); err != nil {
			ownStale = errors.Join(ownStale, fmt.Errorf("remove stale producer snapshots: sync dir: %w", err))
		}
	}
	if ownStale != nil {
		return nil, 0, ownStale
	}
	var ps *producerState
	from := logStart
	for _, f := range usable {
		b, err := volume.ReadFile(fsys, path.Join(dir, f.name))
		if err != nil {
			continue // an older snapshot or the replay gives the same state
		}
		st, off, epoch, err := decodeSnapshot(b)
		if err != nil || off != f.offset || epoch != f.epoch {
			continue
		}
		ps, from = st, off
		break
	}
	if ps == nil {
		ps = newProducerState()
	}
	ps.setLimit(limit)
	replayed, err := ps.replay(lg, from)
	if err != nil {
		return nil, 0, err
	}
	ps.dropAbortedBelow(logStart)
	if err := ps.dropCleanedAborts(lg, from); err != nil {
		return nil, 0, err
	}
	ps.rebuildOngoing()
	ps.publishAborted()
	return ps, replayed, nil
}

// replay applies the log's batches from offset from on: data batches
// record their producer's sequences and start transactions, control
// batches (markers, rare and small: their record is read from the log)
// end them. Everything replayed is durable, so ended transactions leave
// the ongoing queue at once.
func (ps *producerState) replay(lg *partlog.Log, from int64) (int64, error) {
	var replayed int64
	var buf []byte
	err := lg.Scan(from, func(h partlog.BatchHeader) error {
		if h.BaseOffset < from {
			return nil
		}
		replayed++
		return ps.replayBatch(h, lg, &buf)
	})
	if err != nil {
		return 0, fmt.Errorf("replay producer state from %d: %w", from, err)
	}
	return replayed, nil
}

// batchReader reads a batch of a log (partlog.Log.Read).
type batchReader interface {
	Read(offset int64, maxBytes int, dst []byte) ([]byte, error)
}

// replayBatch applies one batch of the log, h its header; a control
// batch's marker is read with r into *buf.
func (ps *producerState) replayBatch(h partlog.BatchHeader, r batchReader, buf *[]byte) error {
	if !h.IsControl() {
		ps.record(h, h.BaseOffset, h.LastOffset())
		return nil
	}
	if h.ProducerID < 0 {
		return nil
	}
	if h.NumRecords == 0 {
		ps.replayEmptyControl(h) // a marker the cleaner removed
		return nil
	}
	b, err := r.Read(h.BaseOffset, int(h.Size()), (*buf)[:0])
	*buf = b
	if err != nil {
		return fmt.Errorf("read control batch at %d: %w", h.BaseOffset, err)
	}
	if int64(len(b)) < h.Size() {
		return fmt.Errorf("%w: control batch at %d: read %d of %d bytes", partlog.ErrCorruptLog, h.BaseOffset, len(b), h.Size())
	}
	if _, err := partlog.ValidateBatch(b[:h.Size()]); err != nil {
		return fmt.Errorf("%w: control batch at %d: %v", partlog.ErrCorruptLog, h.BaseOffset, err)
	}
	typ, coordEpoch, ok := parseControlRecord(b[:h.Size()])
	if !ok {
		return fmt.Errorf("%w: control batch at %d: malformed control record", partlog.ErrCorruptLog, h.BaseOffset)
	}
	if typ != controlAbort && typ != controlCommit {
		return nil // not a transaction marker
	}
	m := marker{pid: h.ProducerID, epoch: h.ProducerEpoch, commit: typ == controlCommit,
		coordinatorEpoch: coordEpoch, timestamp: h.MaxTimestamp, offset: h.BaseOffset}
	if first := ps.applyMarker(m); first >= 0 {
		ps.completeTxn(m.pid, first)
	}
	return nil
}

// Transaction markers: a control batch (RecordBatch v2, attributes
// transactional|control, base sequence -1) holding one record whose key is
// int16 version 0 + int16 type (0 abort, 1 commit) and whose value is
// int16 version 0 + int32 coordinator epoch.
const (
	attrTransactional = 0x10
	attrControl       = 0x20

	controlAbort  = 0
	controlCommit = 1

	// markerRecordSize is the marker's record: length varint (1 byte),
	// attributes, timestamp delta and offset delta (1 byte each), key
	// length and key (1+4), value length and value (1+6), header count (1).
	markerRecordSize = 17
	markerBatchSize  = partlog.BatchHeaderSize + markerRecordSize
)

// appendMarkerBatch appends a marker batch to dst, CRC-32C included. Base
// offset and partition leader epoch are the log's to stamp.
func appendMarkerBatch(dst []byte, pid int64, epoch int16, commit bool, coordinatorEpoch int32, ts int64) []byte {
	n0 := len(dst)
	dst = partlog.StartBatch(dst, markerBatchSize)
	be := binary.BigEndian
	typ := uint16(controlAbort)
	if commit {
		typ = controlCommit
	}
	dst = binary.AppendVarint(dst, markerRecordSize-1)   // record length
	dst = append(dst, 0)                                 // attributes
	dst = binary.AppendVarint(dst, 0)                    // timestamp delta
	dst = binary.AppendVarint(dst, 0)                    // offset delta
	dst = binary.AppendVarint(dst, 4)                    // key length
	dst = be.AppendUint16(dst, 0)                        // key version
	dst = be.AppendUint16(dst, typ)                      // type
	dst = binary.AppendVarint(dst, 6)                    // value length
	dst = be.AppendUint16(dst, 0)                        // value version
	dst = be.AppendUint32(dst, uint32(coordinatorEpoch)) // coordinator epoch
	dst = binary.AppendVarint(dst, 0)                    // headers
	partlog.FinishBatch(dst[n0:], partlog.BatchHeader{
		PartitionLeaderEpoch: -1,
		Attributes:           attrTransactional | attrControl,
		FirstTimestamp:       ts,
		MaxTimestamp:         ts,
		ProducerID:           pid,
		ProducerEpoch:        epoch,
		BaseSequence:         -1,
		NumRecords:           1,
	})
	return dst
}

// parseControlRecord reads the type and (for markers) the coordinator
// epoch of the first record of a control batch.
func parseControlRecord(batch []byte) (typ int16, coordinatorEpoch int32, ok bool) {
	r := batch[partlog.BatchHeaderSize:]
	length, n := binary.Varint(r)
	if n <= 0 || length < 0 || length > int64(len(r)-n) {
		return 0, 0, false
	}
	r = r[n : n+int(length)]
	if len(r) < 1 {
		return 0, 0, false
	}
	r = r[1:]     // attributes
	for range 2 { // timestamp delta, offset delta
		if _, n = binary.Varint(r); n <= 0 {
			return 0, 0, false
		}
		r = r[n:]
	}
	kl, n := binary.Varint(r)
	if n <= 0 || kl < 4 || kl > int64(len(r)-n) {
		return 0, 0, false
	}
	key := r[n : n+int(kl)]
	r = r[n+int(kl):]
	typ = int16(binary.BigEndian.Uint16(key[2:]))
	if typ != controlAbort && typ != controlCommit {
		return typ, 0, true
	}
	vl, n := binary.Varint(r)
	if n <= 0 || vl < 6 || vl > int64(len(r)-n) {
		return 0, 0, false
	}
	return typ, int32(binary.BigEndian.Uint32(r[n+2:])), true
}

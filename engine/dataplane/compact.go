package dataplane

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/kaas-dev/kaas/volume/partlog"
	"github.com/kaas-dev/kaas/volume/records"
)

// The log cleaner's policy on one partition, with Kafka's semantics
// (LogCleaner's Cleaner): BuildOffsetMap maps each key of the dirty range
// to its last offset, then a Filter decides, batch by batch over
// [log start, map end), what survives: the latest record of every key at
// its own offset, tombstones and transaction markers until their delete
// horizon, nothing of aborted transactions, and the last batch of every
// live producer. It reads and writes no files: the caller feeds it the
// stored batches and writes what it returns.

// BatchIter yields the stored batches of a range, whole, in offset order.
type BatchIter interface {
	// Next moves to the next batch and reports whether there is one.
	Next() bool
	// Batch is the current batch and the base offset the source expects
	// it at (its index entry); the bytes stay valid until the next Next.
	Batch() (offset int64, batch []byte)
	// Err is what ended the walk early; nil at the end of the range.
	Err() error
}

// DecodeLimit is how far a batch's records may inflate for the cleaner to
// decode them, given the topic's max.message.bytes. A batch beyond it is
// kept as it is: keeping is always safe, only removal can lose data.
func DecodeLimit(maxMessageBytes int) int { return max(4*maxMessageBytes, 64<<20) }

// storedBatch checks what the cleaner relies on before it reads or copies
// a batch: a stored header, the length and offset the source gave, and
// the CRC (a rewrite would otherwise put a valid CRC on corrupt records).
func storedBatch(offset int64, b []byte) (partlog.BatchHeader, error) {
	h, err := partlog.ParseStoredBatchHeader(b)
	switch {
	case err != nil:
		return h, fmt.Errorf("batch at offset %d: %w", offset, err)
	case h.BaseOffset != offset:
		return h, fmt.Errorf("%w: batch expected at offset %d has base offset %d", partlog.ErrCorruptBatch, offset, h.BaseOffset)
	case h.Size() != int64(len(b)):
		return h, fmt.Errorf("%w: batch at offset %d: %d bytes, its header says %d", partlog.ErrCorruptBatch, offset, len(b), h.Size())
	case crc32.Checksum(b[records.OffAttributes:], castagnoli) != h.CRC:
		return h, fmt.Errorf("%w: batch at offset %d: CRC mismatch", partlog.ErrCorruptBatch, offset)
	}
	return h, nil
}

// controlType is the marker type of a control batch; empty when the
// cleaner already removed its marker. it is left on the batch.
func controlType(it *records.Iter, h partlog.BatchHeader, b []byte, limit int) (typ int16, empty bool, err error) {
	if h.NumRecords == 0 {
		return 0, true, nil
	}
	if err := it.Reset(b, limit); err != nil {
		return 0, false, fmt.Errorf("control batch at offset %d: %w", h.BaseOffset, err)
	}
	if !it.Next() {
		return 0, false, fmt.Errorf("control batch at offset %d: %w", h.BaseOffset, it.Err())
	}
	// The Iter checked the key: version 0, type abort or commit.
	return int16(binary.BigEndian.Uint16(it.Record().Key[2:])), false, nil
}

// MapResult is what a map build covered.
type MapResult struct {
	// End is where the pass stops: the filter keeps every record at or
	// above it, and it is the next pass's first dirty offset.
	End int64
	// Full says the map filled before the range's end.
	Full bool
	// Batches and Records count what was read; Undecodable the batches
	// beyond the decode limit, which put no key.
	Batches, Records, Undecodable int64
}

// BuildOffsetMap clears m and maps the keys of the dirty range
// [firstDirty, end) that src walks (it may start below firstDirty, at the
// batch holding it): every keyed record at or above firstDirty, except
// those of control batches and aborted transactions (aborted: the
// partition's aborted list overlapping the range), so an aborted newer
// value never removes a committed older one. It stops at the first batch
// reaching end, and when the map is full (MapResult.Full): the pass then
// cleans only below MapResult.End. A batch beyond limit (DecodeLimit)
// puts nothing: older values of its keys are kept, never wrongly removed.
func BuildOffsetMap(m *OffsetMap, src BatchIter, firstDirty, end int64, aborted []AbortedTxn, limit int) (MapResult, error) {
	m.Clear()
	txns := newCleanerTxns(aborted)
	it := records.AcquireIter()
	defer it.Release()
	var res MapResult
	for src.Next() {
		offset, b := src.Batch()
		h, err := storedBatch(offset, b)
		if err != nil {
			return res, fmt.Errorf("offset map: %w", err)
		}
		if h.LastOffset() >= end {
			break
		}
		res.Batches++
		if h.IsControl() {
			typ, empty, err := controlType(it, h, b, limit)
			if err != nil {
				return res, fmt.Errorf("offset map: %w", err)
			}
			txns.onControl(h, typ, empty)
		} else if !txns.onData(h) && h.LastOffset() >= firstDirty {
			full, err := mapBatch(m, it, h, b, firstDirty, limit, &res)
			if err != nil {
				return res, fmt.Errorf("offset map: batch at offset %d: %w", h.BaseOffset, err)
			}
			if full {
				res.Full = true
				break
			}
		}
		if h.LastOffset() >= firstDirty {
			m.noteLatest(h.LastOffset())
		}
	}
	if err := src.Err(); err != nil {
		return res, fmt.Errorf("offset map: read the dirty range: %w", err)
	}
	res.End = max(firstDirty, m.LatestOffset()+1)
	return res, nil
}

// mapBatch puts the keyed records of a data batch at or above firstDirty;
// full reports that a key did not fit.
func mapBatch(m *OffsetMap, it *records.Iter, h partlog.BatchHeader, b []byte, firstDirty int64, limit int, res *MapResult) (full bool, err error) {
	if err := it.Reset(b, limit); errors.Is(err, records.ErrTooLarge) {
		res.Undecodable++
		return false, nil
	} else if err != nil {
		return false, err
	}
	for it.Next() {
		r := it.Record()
		res.Records++
		offset := h.BaseOffset + int64(r.OffsetDelta)
		if r.Key == nil || offset < firstDirty {
			continue
		}
		if !m.Put(r.Key, offset) {
			return true, nil
		}
	}
	return false, it.Err()
}

// FilterConfig is what a pass's filter decides with.
type FilterConfig struct {
	// MapEnd is MapResult.End: records at or above it are kept.
	MapEnd int64
	// End is the first uncleanable offset: a batch reaching it is copied
	// as it is, outside the transaction bookkeeping.
	End int64
	// Now is the pass's clock (Unix ms), for delete horizons.
	Now int64
	// DeleteRetentionMs is the topic's delete.retention.ms: how long a
	// tombstone or removable marker stays after the pass that first kept it.
	DeleteRetentionMs int64
	// DecodeLimit bounds what a batch may inflate to (DecodeLimit).
	DecodeLimit int
}

// Outcome is what the filter made of a batch.
type Outcome int8

const (
	// BatchDropped: nothing is written.
	BatchDropped Outcome = iota
	// BatchCopied: the batch is written as it was.
	BatchCopied
	// BatchRewritten: the batch is written with fewer records or a new
	// delete horizon, under its own offsets, producer fields and codec.
	BatchRewritten
	// BatchEmptied: only its header is written, no records, to keep a
	// live producer's state.
	BatchEmptied
)

// CleanStats counts what a filter read, wrote and removed (metrics).
type CleanStats struct {
	BatchesRead, BytesRead, RecordsRead int64
	BytesWritten                        int64
	Copied, Rewritten, Emptied, Dropped int64 // batches, by outcome
	// KeptUndecodable counts batches beyond the decode limit, kept as
	// they were.
	KeptUndecodable int64
	// Records removed, by reason: superseded by a later record of their
	// key, tombstones past their horizon, keyless (Kafka counts them
	// invalid), of aborted transactions; and markers removed.
	Superseded, Tombstones, Keyless, Aborted, Markers int64
	// NextHorizon is when (Unix ms) a later pass has more to remove, 0 if
	// never without new writes: the earliest delete horizon of a tombstone
	// or marker the pass kept, or now when it removed an aborted
	// transaction's data (its marker may go in the next pass). The
	// partition is due for cleaning then even if nothing more is written.
	NextHorizon int64
}

// noteHorizon records that a batch kept until horizon was written.
func (s *CleanStats) noteHorizon(horizon int64) {
	if s.NextHorizon == 0 || horizon < s.NextHorizon {
		s.NextHorizon = horizon
	}
}

// recordFate is the filter's decision on one record of a data batch.
type recordFate int8

const (
	recordKept recordFate = iota
	recordSuperseded
	recordKeyless
	recordTombstone
)

// Filter decides what survives of each batch of one pass, in offset
// order (Kafka's cleanInto with its RecordFilter). Take one per pass with
// NewFilter, feed it every batch from the log start through the segments
// holding the map's end, and Close it.
type Filter struct {
	cfg  FilterConfig
	m    *OffsetMap
	live map[int64]LastRecord
	txns cleanerTxns
	it   *records.Iter
	enc  *records.Encoder
	// h is the batch being filtered; kept its records' fates (by index),
	// decided once and read back by keep when the batch is rewritten.
	h    partlog.BatchHeader
	kept []bool
	keep func(*records.Record) bool
	// tombstonesStay is set once an undecodable batch is kept: its keys
	// are not in the map, so a later tombstone may be all that hides one
	// of its values.
	tombstonesStay bool
	removed        []AbortedTxn
	stats          CleanStats
}

// NewFilter starts a pass's filter over the map m (BuildOffsetMap's),
// with aborted, the partition's aborted list overlapping
// [log start, cfg.End), and live, its producers' last batches at plan time
// (Partition.LastRecords).
func NewFilter(cfg FilterConfig, m *OffsetMap, aborted []AbortedTxn, live map[int64]LastRecord) *Filter {
	f := &Filter{cfg: cfg, m: m, live: live, txns: newCleanerTxns(aborted),
		it: records.AcquireIter(), enc: records.AcquireEncoder()}
	f.keep = func(r *records.Record) bool { return f.kept[r.Index] }
	return f
}

// Close gives back the filter's decoder and encoder.
func (f *Filter) Close() {
	if f.it != nil {
		f.it.Release()
		f.enc.Release()
		f.it, f.enc = nil, nil
	}
}

// Stats is what the filter counted so far.
func (f *Filter) Stats() CleanStats { return f.stats }

// RemovedAborts lists the aborted list's entries whose abort markers the
// filter removed so far (Partition.DropAborted takes them before the swap).
func (f *Filter) RemovedAborts() []AbortedTxn { return f.removed }

// Batch filters one stored batch found at offset and appends what
// survives of it to dst.
func (f *Filter) Batch(dst []byte, offset int64, batch []byte) ([]byte, Outcome, error) {
	h, err := storedBatch(offset, batch)
	if err != nil {
		return dst, BatchDropped, fmt.Errorf("clean: %w", err)
	}
	start := len(dst)
	var out Outcome
	switch {
	case h.LastOffset() >= f.cfg.End:
		dst, out = append(dst, batch...), BatchCopied
	case h.IsControl():
		dst, out, err = f.control(dst, h, batch)
	default:
		dst, out, err = f.data(dst, h, batch)
	}
	if err != nil {
		return dst[:start], BatchDropped, fmt.Errorf("clean batch at offset %d: %w", offset, err)
	}
	f.stats.BatchesRead++
	f.stats.BytesRead += int64(len(batch))
	f.stats.BytesWritten += int64(len(dst) - start)
	switch out {
	case BatchCopied:
		f.stats.Copied++
	case BatchRewritten:
		f.stats.Rewritten++
	case BatchEmptied:
		f.stats.Emptied++
	default:
		f.stats.Dropped++
	}
	return dst, out, nil
}

// lastOfLive reports whether h is the batch a live producer's state needs.
func (f *Filter) lastOfLive(h partlog.BatchHeader) bool {
	lr, ok := f.live[h.ProducerID]
	return ok && h.ProducerID >= 0 && lr.keeps(h)
}

// control filters a control batch: kept as it is, unless its marker is
// removable (see cleanerTxns.onControl): then it gets a delete horizon the
// first time, and goes once the horizon has passed, emptied if it is a live
// producer's last.
func (f *Filter) control(dst []byte, h partlog.BatchHeader, b []byte) ([]byte, Outcome, error) {
	typ, empty, err := controlType(f.it, h, b, f.cfg.DecodeLimit)
	if err != nil {
		return dst, BatchDropped, err
	}
	removable, entry, hasEntry := f.txns.onControl(h, typ, empty)
	switch {
	case empty:
		return f.emptyOrDrop(dst, h, b)
	case removable && h.HasDeleteHorizon() && f.cfg.Now >= h.FirstTimestamp:
		f.stats.Markers++
		if hasEntry {
			f.removed = append(f.removed, entry)
		}
		return f.emptyOrDrop(dst, h, b)
	case removable && !h.HasDeleteHorizon():
		f.h, f.kept = h, append(f.kept[:0], true)
		f.stats.noteHorizon(f.cfg.Now + f.cfg.DeleteRetentionMs)
		return f.rewrite(dst, f.cfg.Now+f.cfg.DeleteRetentionMs)
	case removable:
		f.stats.noteHorizon(h.FirstTimestamp)
	}
	return append(dst, b...), BatchCopied, nil
}

// data filters a data batch: an aborted one loses its records, any other
// the records record retention refuses.
func (f *Filter) data(dst []byte, h partlog.BatchHeader, b []byte) ([]byte, Outcome, error) {
	if f.txns.onData(h) {
		f.stats.Aborted += int64(h.NumRecords)
		if h.NumRecords > 0 {
			// Its abort marker becomes removable in the next pass.
			f.stats.noteHorizon(f.cfg.Now)
		}
		return f.emptyOrDrop(dst, h, b)
	}
	if h.NumRecords == 0 {
		return f.emptyOrDrop(dst, h, b)
	}
	if err := f.it.Reset(b, f.cfg.DecodeLimit); errors.Is(err, records.ErrTooLarge) {
		f.stats.KeptUndecodable++
		f.tombstonesStay = true
		return append(dst, b...), BatchCopied, nil
	} else if err != nil {
		return dst, BatchDropped, err
	}
	f.h, f.kept = h, f.kept[:0]
	n, tombstone := int32(0), false
	for f.it.Next() {
		r := f.it.Record()
		f.stats.RecordsRead++
		fate := f.fate(r)
		f.kept = append(f.kept, fate == recordKept)
		switch fate {
		case recordKept:
			n++
			tombstone = tombstone || r.Value == nil
		case recordSuperseded:
			f.stats.Superseded++
		case recordKeyless:
			f.stats.Keyless++
		case recordTombstone:
			f.stats.Tombstones++
		}
	}
	if err := f.it.Err(); err != nil {
		return dst, BatchDropped, err
	}
	needHorizon := tombstone && !h.HasDeleteHorizon()
	switch {
	case needHorizon:
		f.stats.noteHorizon(f.cfg.Now + f.cfg.DeleteRetentionMs)
	case tombstone:
		f.stats.noteHorizon(h.FirstTimestamp)
	}
	switch {
	case n == 0:
		return f.emptyOrDrop(dst, h, b)
	case n == h.NumRecords && !needHorizon:
		return append(dst, b...), BatchCopied, nil
	case needHorizon:
		return f.rewrite(dst, f.cfg.Now+f.cfg.DeleteRetentionMs)
	}
	return f.rewrite(dst, records.NoHorizon)
}

// fate is record retention (Kafka's shouldRetainRecord) for a record of
// the data batch f.h.
func (f *Filter) fate(r *records.Record) recordFate {
	offset := f.h.BaseOffset + int64(r.OffsetDelta)
	switch {
	case offset >= f.cfg.MapEnd:
		return recordKept // the map has not seen what follows it
	case r.Key == nil:
		return recordKeyless
	case offset < f.m.Get(r.Key):
		return recordSuperseded
	case r.Value == nil && f.h.HasDeleteHorizon() && f.cfg.Now >= f.h.FirstTimestamp && !f.tombstonesStay:
		return recordTombstone
	}
	return recordKept
}

// rewrite appends f.h's batch with only its f.kept records.
func (f *Filter) rewrite(dst []byte, horizon int64) ([]byte, Outcome, error) {
	out, err := partlog.BuildBatch(dst, f.enc, f.it, f.keep, horizon)
	if err != nil {
		return dst, BatchDropped, err
	}
	return out, BatchRewritten, nil
}

// emptyOrDrop disposes of a batch none of whose records stays: kept as an
// empty batch if it is a live producer's last (Kafka's RETAIN_EMPTY),
// else dropped (DELETE_EMPTY).
func (f *Filter) emptyOrDrop(dst []byte, h partlog.BatchHeader, b []byte) ([]byte, Outcome, error) {
	switch {
	case !f.lastOfLive(h):
		return dst, BatchDropped, nil
	case h.NumRecords == 0:
		return append(dst, b...), BatchCopied, nil
	}
	return appendEmptyBatch(dst, h), BatchEmptied, nil
}

// appendEmptyBatch appends h's batch without records as Kafka writes one
// (DefaultRecordBatch.writeEmptyHeader): the same offsets, producer fields
// and timestamp type, no codec, no horizon, both timestamps the max. It
// needs only the header, so an undecodable aborted batch can be emptied.
func appendEmptyBatch(dst []byte, h partlog.BatchHeader) []byte {
	e := h
	e.NumRecords = 0
	e.Attributes &^= records.AttrCompressionMask | records.AttrDeleteHorizon
	e.FirstTimestamp = h.MaxTimestamp
	start := len(dst)
	dst = partlog.StartBatch(dst, partlog.BatchHeaderSize)
	partlog.FinishBatch(dst[start:], e)
	return dst
}

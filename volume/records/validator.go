package records

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
)

// Validator decodes the records of one batch at a time. It keeps its
// decompressors and buffers between batches, so a warm Validator allocates
// nothing; it is not safe for concurrent use. Take one from the pool with
// Acquire, give it back with Release.
type Validator struct {
	s stream
	c codecs
	// The last record's key and value, as stream offsets (Iter slices
	// them out of a decompressed records section).
	key, value field
}

// field is where a key or value lies in the stream: n bytes at at (n -1:
// null).
type field struct {
	at int64
	n  int32
}

var pool = sync.Pool{New: func() any { return new(Validator) }}

// inUse bounds the Validators in use at once. Validating is CPU work, so
// more at once than a few per CPU gains nothing, and each one in use may
// hold a decoder window (ZstdMaxWindow) and a decoded snappy block: the
// bound keeps that memory from growing with the number of producers.
var inUse = make(chan struct{}, 4*runtime.GOMAXPROCS(0))

// Acquire takes a Validator from a process-wide pool, waiting while
// cap(inUse) are in use. The pool holds only Validators not in use, and
// drops them at GC: memory follows the number of batches being validated
// at once, not the number of connections.
func Acquire() *Validator {
	inUse <- struct{}{}
	return pool.Get().(*Validator)
}

// Release gives v back to the pool; v must not be used afterwards.
func (v *Validator) Release() {
	pool.Put(v)
	<-inUse
}

// Validate checks every record of batch, a RecordBatch v2 whose header and
// CRC are already checked (partlog.ValidateBatch), as Kafka's broker does:
// a known codec whose stream decodes to its end; exactly NumRecords
// records, each with a positive length its fields fill exactly, an offset
// delta equal to its index, keys and values null (-1) or present, headers
// with non-null keys; nothing after the last record; and for a control
// batch, one record with a transaction marker's key and value. The records
// may inflate to at most limit bytes (ErrTooLarge beyond). Errors wrap
// ErrCorrupt, ErrInvalid or ErrTooLarge and name the record and field.
func (v *Validator) Validate(batch []byte, limit int) error {
	return v.walk(batch, limit, false, nil)
}

// Each calls fn with the offset delta and timestamp of every record of
// batch, in order, until fn returns false, checking the records as
// Validate does on the way. A LogAppendTime batch's records all take its
// max timestamp.
func (v *Validator) Each(batch []byte, limit int, fn func(offsetDelta int32, timestamp int64) bool) error {
	return v.walk(batch, limit, false, fn)
}

// NullKey reports whether the record Each (or EachStored) last passed to
// its fn has a null key; it is only meaningful inside fn.
func (v *Validator) NullKey() bool { return v.key.n < 0 }

// ValidateStored checks batch as it may lie in a partition's log, which
// the log cleaner may have rewritten as Kafka's does (docs/volume.md,
// Layout): it is Validate except that the batch may hold fewer records
// than its last offset delta + 1, or none (a control batch too: one kept
// empty for its producer's state), and the records' offset deltas need
// only increase strictly, up to the last offset delta. A batch with no
// records may have no records section at all, whatever its codec, as
// Kafka reads no records of an empty batch. The produce path never uses
// it: a produced batch is dense (Validate).
func (v *Validator) ValidateStored(batch []byte, limit int) error {
	return v.walk(batch, limit, true, nil)
}

// EachStored is Each over a stored batch, checked as ValidateStored does.
func (v *Validator) EachStored(batch []byte, limit int, fn func(offsetDelta int32, timestamp int64) bool) error {
	return v.walk(batch, limit, true, fn)
}

// FirstAtOrAfter returns the first record of batch, a stored batch
// (ValidateStored), in offset order, whose timestamp is at or after ts
// (Kafka's ListOffsets by timestamp within a batch): its offset delta and
// timestamp. ok is false when no record is, and for a batch with no
// records.
func (v *Validator) FirstAtOrAfter(batch []byte, ts int64, limit int) (offsetDelta int32, timestamp int64, ok bool, err error) {
	if len(batch) < BatchHeaderSize {
		return 0, 0, false, fmt.Errorf("%w: %d bytes, shorter than a batch header", ErrCorrupt, len(batch))
	}
	var h BatchHeader
	h.Decode(batch)
	if h.LogAppendTime() {
		// Every record bears the max timestamp: the first record answers.
		// A dense batch's is at delta 0; a cleaned one's is decoded.
		if h.MaxTimestamp < ts || h.NumRecords == 0 {
			return 0, 0, false, nil
		}
		if h.Dense() {
			return 0, h.MaxTimestamp, true, nil
		}
	}
	err = v.walk(batch, limit, true, func(d int32, t int64) bool {
		if t >= ts {
			offsetDelta, timestamp, ok = d, t, true
			return false
		}
		return true
	})
	return offsetDelta, timestamp, ok, err
}

// walk checks the records of batch, calling fn (if non-nil) with each. A
// stored batch may be sparse (ValidateStored); otherwise every offset
// delta equals its record's index.
func (v *Validator) walk(batch []byte, limit int, stored bool, fn func(int32, int64) bool) error {
	h, err := begin(batch, stored)
	if err != nil {
		return err
	}
	if h.NumRecords == 0 && len(batch) == BatchHeaderSize {
		return nil // a cleaned batch kept empty: nothing to decode
	}
	codec := int(h.Compression())
	if err := v.c.open(&v.s, codec, batch[BatchHeaderSize:], int64(limit)); err != nil {
		return err
	}
	defer v.release()
	next := int64(0) // the lowest offset delta the next record may have
	for i := range h.NumRecords {
		tsDelta, offsetDelta, err := v.step(&h, i, &next, stored)
		if err != nil {
			return err
		}
		if fn != nil && !fn(offsetDelta, recordTime(&h, tsDelta)) {
			return nil
		}
	}
	return v.finish(h.NumRecords, codec)
}

// begin decodes batch's header and checks its record count.
func begin(batch []byte, stored bool) (BatchHeader, error) {
	var h BatchHeader
	if len(batch) < BatchHeaderSize {
		return h, fmt.Errorf("%w: %d bytes, shorter than a batch header", ErrCorrupt, len(batch))
	}
	h.Decode(batch)
	return h, checkCount(h, stored)
}

// step reads record i of the batch h, whose offset delta must be at least
// *next (and, in a produced batch, i), and moves *next past it.
func (v *Validator) step(h *BatchHeader, i int32, next *int64, stored bool) (tsDelta int64, offsetDelta int32, err error) {
	lo, hi := i, i
	if stored {
		if *next > int64(h.LastOffsetDelta) {
			return 0, 0, fmt.Errorf("%w: record %d: after a record at the last offset delta %d", ErrInvalid, i, h.LastOffsetDelta)
		}
		lo, hi = int32(*next), h.LastOffsetDelta
	}
	tsDelta, offsetDelta, err = v.record(i, h.IsControl(), lo, hi)
	*next = int64(offsetDelta) + 1
	return tsDelta, offsetDelta, err
}

// recordTime is the timestamp of a record of h. With a delete horizon
// (KIP-534) the first timestamp field is the horizon and the deltas are
// relative to it, so the sum is the record's timestamp in either case.
func recordTime(h *BatchHeader, tsDelta int64) int64 {
	if h.LogAppendTime() {
		return h.MaxTimestamp
	}
	return h.FirstTimestamp + tsDelta
}

// finish checks that nothing follows the last of n records, in the stream
// or (codec's) compressed bytes.
func (v *Validator) finish(n int32, codec int) error {
	end, err := v.s.atEnd()
	if err != nil {
		return fmt.Errorf("after the last record: %w", err)
	}
	if !end {
		return fmt.Errorf("%w: bytes after the last of %d records", ErrInvalid, n)
	}
	return v.c.checkLeftover(codec)
}

// checkCount checks the header's record count against its last offset
// delta: equal to it + 1 in a produced batch, at most that in a stored one
// (none at all in a batch kept empty). A control batch holds one marker,
// or none once cleaned.
func checkCount(h BatchHeader, stored bool) error {
	n, last := int64(h.NumRecords), int64(h.LastOffsetDelta)
	switch {
	case !stored && (n < 1 || n != last+1), stored && (last < 0 || n < 0 || n > last+1):
		return fmt.Errorf("%w: %d records for last offset delta %d", ErrInvalid, h.NumRecords, h.LastOffsetDelta)
	case h.IsControl() && n > 1, h.IsControl() && !stored && n != 1:
		return fmt.Errorf("%w: a control batch of %d records, want 1", ErrInvalid, h.NumRecords)
	}
	return nil
}

func (v *Validator) release() {
	v.s = stream{window: v.s.window}
	v.c.release()
}

// bad wraps what went wrong reading a field of record i: a short or
// malformed field is an invalid record; a decompressor's failure or the
// limit stays what it is.
func bad(i int32, field string, err error) error {
	if errors.Is(err, ErrCorrupt) || errors.Is(err, ErrTooLarge) {
		return fmt.Errorf("record %d: %s: %w", i, field, err)
	}
	return fmt.Errorf("%w: record %d: %s: %v", ErrInvalid, i, field, err)
}

// record reads record i (DefaultRecord's layout), whose offset delta must
// lie in [lo, hi], and returns its timestamp and offset deltas.
func (v *Validator) record(i int32, control bool, lo, hi int32) (tsDelta int64, offsetDelta int32, err error) {
	s := &v.s
	length, err := s.varint()
	if err != nil {
		return 0, 0, bad(i, "length", err)
	}
	if length <= 0 {
		return 0, 0, fmt.Errorf("%w: record %d: length %d", ErrInvalid, i, length)
	}
	if rem := s.remaining(); int64(length) > rem {
		if s.src != nil { // what is left is the limit, not the data
			return 0, 0, fmt.Errorf("%w: record %d: length %d, past the %d-byte limit", ErrTooLarge, i, length, s.limit)
		}
		return 0, 0, fmt.Errorf("%w: record %d: length %d, only %d bytes left", ErrInvalid, i, length, rem)
	}
	end := s.offset() + int64(length)
	if _, err := s.byte(); err != nil { // attributes: unused in v2
		return 0, 0, bad(i, "attributes", err)
	}
	tsDelta, err = s.varlong()
	if err != nil {
		return 0, 0, bad(i, "timestamp delta", err)
	}
	offsetDelta, err = s.varint()
	if err != nil {
		return 0, 0, bad(i, "offset delta", err)
	}
	switch {
	case lo == hi && offsetDelta != lo:
		return 0, 0, fmt.Errorf("%w: record %d: offset delta %d, want %d", ErrInvalid, i, offsetDelta, lo)
	case offsetDelta < lo || offsetDelta > hi:
		return 0, 0, fmt.Errorf("%w: record %d: offset delta %d, want %d to %d", ErrInvalid, i, offsetDelta, lo, hi)
	}
	keyLen, err := v.bytesField(i, "key", end, control, false)
	if err != nil {
		return 0, 0, err
	}
	v.key = field{at: s.offset() - int64(max(keyLen, 0)), n: keyLen}
	if control && keyLen < 4 {
		return 0, 0, fmt.Errorf("%w: record %d: a control key of %d bytes, want 4 (-1: null)", ErrInvalid, i, keyLen)
	}
	valueLen, err := v.bytesField(i, "value", end, false, control)
	if err != nil {
		return 0, 0, err
	}
	v.value = field{at: s.offset() - int64(max(valueLen, 0)), n: valueLen}
	if control && valueLen < 6 {
		return 0, 0, fmt.Errorf("%w: record %d: a transaction marker value of %d bytes, want at least 6", ErrInvalid, i, valueLen)
	}
	headers, err := s.varint()
	if err != nil {
		return 0, 0, bad(i, "header count", err)
	}
	if headers < 0 || int64(headers)*2 > end-s.offset() { // a header takes at least 2 bytes
		return 0, 0, fmt.Errorf("%w: record %d: %d headers in %d bytes", ErrInvalid, i, headers, max(end-s.offset(), 0))
	}
	for h := range headers {
		kl, err := s.varint()
		if err != nil {
			return 0, 0, bad(i, "header key length", err)
		}
		if kl < 0 { // DefaultRecord: "Invalid negative header key size"
			return 0, 0, fmt.Errorf("%w: record %d: header %d: key length %d (header keys may not be null)", ErrInvalid, i, h, kl)
		}
		if err := v.skipWithin(i, "header key", kl, end); err != nil {
			return 0, 0, err
		}
		vl, err := s.varint()
		if err != nil {
			return 0, 0, bad(i, "header value length", err)
		}
		if vl < -1 {
			return 0, 0, fmt.Errorf("%w: record %d: header %d: value length %d", ErrInvalid, i, h, vl)
		}
		if vl > 0 {
			if err := v.skipWithin(i, "header value", vl, end); err != nil {
				return 0, 0, err
			}
		}
	}
	if at := s.offset(); at != end {
		return 0, 0, fmt.Errorf("%w: record %d: length %d, its fields take %d bytes", ErrInvalid, i, length, int64(length)+at-end)
	}
	return tsDelta, offsetDelta, nil
}

// bytesField reads a length-prefixed key or value (-1: null) and skips or
// checks its bytes. It returns the length.
func (v *Validator) bytesField(i int32, field string, end int64, controlKey, controlValue bool) (int32, error) {
	n, err := v.s.varint()
	if err != nil {
		return 0, bad(i, field+" length", err)
	}
	if n < -1 {
		return 0, fmt.Errorf("%w: record %d: %s length %d", ErrInvalid, i, field, n)
	}
	if n <= 0 {
		return n, nil
	}
	if left := end - v.s.offset(); int64(n) > left {
		return 0, fmt.Errorf("%w: record %d: a %s of %d bytes in the record's last %d", ErrInvalid, i, field, n, max(left, 0))
	}
	skip := int64(n)
	switch {
	case controlKey && n >= 4:
		// ControlRecordType: version 0, type 0 (abort) or 1 (commit).
		var key [4]byte
		if err := v.s.read(key[:]); err != nil {
			return 0, bad(i, "control key", err)
		}
		version, typ := int16(binary.BigEndian.Uint16(key[:])), int16(binary.BigEndian.Uint16(key[2:]))
		if version != 0 || (typ != 0 && typ != 1) {
			return 0, fmt.Errorf("%w: record %d: control key version %d type %d, want version 0, type 0 (abort) or 1 (commit)", ErrInvalid, i, version, typ)
		}
		skip -= 4
	case controlKey:
		return 0, fmt.Errorf("%w: record %d: a control key of %d bytes, want 4", ErrInvalid, i, n)
	case controlValue && n >= 2:
		var version [2]byte
		if err := v.s.read(version[:]); err != nil {
			return 0, bad(i, "marker value", err)
		}
		if ver := int16(binary.BigEndian.Uint16(version[:])); ver < 0 {
			return 0, fmt.Errorf("%w: record %d: transaction marker version %d", ErrInvalid, i, ver)
		}
		skip -= 2
	}
	if err := v.s.skip(skip); err != nil {
		return 0, bad(i, field, err)
	}
	return n, nil
}

// skipWithin skips n bytes of a field that must end by the record's end.
func (v *Validator) skipWithin(i int32, field string, n int32, end int64) error {
	if left := end - v.s.offset(); int64(n) > left {
		return fmt.Errorf("%w: record %d: a %s of %d bytes in the record's last %d", ErrInvalid, i, field, n, max(left, 0))
	}
	if err := v.s.skip(int64(n)); err != nil {
		return bad(i, field, err)
	}
	return nil
}

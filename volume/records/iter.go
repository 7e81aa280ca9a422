package records

import "sync"

// Record is one record of a batch as an Iter yields it. Its slices point
// into the Iter's records section: they stay valid until the Iter's next
// Reset or Release.
type Record struct {
	Index          int32 // the record's position in the batch, from 0
	OffsetDelta    int32
	TimestampDelta int64
	// Timestamp is the record's: the batch's first timestamp (its delete
	// horizon, if set) plus the delta, or a LogAppendTime batch's max
	// timestamp.
	Timestamp  int64
	Key, Value []byte // nil: null
	Control    bool   // a transaction marker: its batch is a control batch
	// Raw is the record as stored, from its length varint through its
	// last header: what a rewrite copies.
	Raw []byte
}

// Iter walks the records of one stored batch, the log cleaner's reader: it
// decompresses the records section once, into a buffer it keeps between
// batches, and yields the records from there with the checks
// ValidateStored makes, so a warm Iter allocates nothing. It accepts what
// ValidateStored accepts; a refused batch ends the walk with Err set. Take
// one with AcquireIter, give it back with Release; it is not safe for
// concurrent use.
type Iter struct {
	v       Validator
	h       BatchHeader
	batch   []byte
	section []byte // the records section, decompressed or the batch's own
	buf     []byte // storage for decompressed sections
	bad     error  // Reset's error: every walk ends with it
	err     error
	next    int64 // the lowest offset delta the next record may have
	i       int32
	done    bool
	rec     Record
}

var iters = sync.Pool{New: func() any { return new(Iter) }}

// AcquireIter takes an Iter from a process-wide pool. It holds a
// decompressor as a Validator does, so it counts against Acquire's bound:
// a caller must not hold a Validator while it waits for an Iter.
func AcquireIter() *Iter {
	inUse <- struct{}{}
	return iters.Get().(*Iter)
}

// Release gives it back to the pool; it must not be used afterwards.
func (it *Iter) Release() {
	it.drop()
	iters.Put(it)
	<-inUse
}

// drop forgets the batch and a buffer too big to keep.
func (it *Iter) drop() {
	it.batch, it.section, it.rec = nil, nil, Record{}
	it.v.s.resetSlice(nil)
	if cap(it.buf) > keepBufferBytes {
		it.buf = nil
	}
}

// Reset points it at batch, a stored RecordBatch v2 whose header and CRC
// are checked (partlog.ParseStoredBatchHeader), and decompresses its
// records, at most limit bytes (ErrTooLarge beyond). An error is also what
// every walk over batch ends with (Err). batch must stay unchanged while
// it is in use.
func (it *Iter) Reset(batch []byte, limit int) error {
	it.batch, it.section = batch, nil
	h, err := begin(batch, true)
	it.h = h
	if err == nil && !(h.NumRecords == 0 && len(batch) == BatchHeaderSize) {
		it.section, err = it.load(batch[BatchHeaderSize:], int(h.Compression()), limit)
	}
	it.bad = err
	it.Rewind()
	return err
}

// load returns payload's records section: payload itself if uncompressed.
func (it *Iter) load(payload []byte, codec, limit int) ([]byte, error) {
	if codec == codecNone {
		return payload, nil
	}
	out, err := it.v.inflate(it.buf[:0], codec, payload, limit)
	if cap(out) <= keepBufferBytes {
		it.buf = out[:0]
	}
	return out, err
}

// Rewind starts the walk over from the first record, with no decompression
// again: the log cleaner decides on a first walk and rewrites on a second.
func (it *Iter) Rewind() {
	it.v.s.resetSlice(it.section)
	it.i, it.next, it.done, it.err = 0, 0, it.bad != nil, it.bad
}

// Header is the header of the batch it walks.
func (it *Iter) Header() BatchHeader { return it.h }

// Batch is the batch it walks.
func (it *Iter) Batch() []byte { return it.batch }

// Next moves to the next record and reports whether there is one. At the
// end of the walk, Err says whether the batch was valid: the check that
// nothing follows the last record is made by the Next that returns false.
func (it *Iter) Next() bool {
	if it.done {
		return false
	}
	if it.i == it.h.NumRecords {
		it.done, it.err = true, it.v.finish(it.i, codecNone) // inflate checked the compressed stream's end
		return false
	}
	start := int(it.v.s.offset())
	tsDelta, offsetDelta, err := it.v.step(&it.h, it.i, &it.next, true)
	if err != nil {
		it.done, it.err = true, err
		return false
	}
	it.rec = Record{
		Index:          it.i,
		OffsetDelta:    offsetDelta,
		TimestampDelta: tsDelta,
		Timestamp:      recordTime(&it.h, tsDelta),
		Key:            it.slice(it.v.key),
		Value:          it.slice(it.v.value),
		Control:        it.h.IsControl(),
		Raw:            it.section[start:it.v.s.offset()],
	}
	it.i++
	return true
}

// slice is f's bytes in the section, nil for null.
func (it *Iter) slice(f field) []byte {
	if f.n < 0 {
		return nil
	}
	return it.section[f.at : f.at+int64(f.n)]
}

// Record is the record Next moved to; it changes with the next call.
func (it *Iter) Record() *Record { return &it.rec }

// Err is what ended the walk: nil once Next has passed the last record of
// a valid batch.
func (it *Iter) Err() error { return it.err }

package partlog

import (
	"github.com/kaas-dev/kaas/volume/records"
)

// timestampLookupMaxBytes bounds what one batch may inflate to while
// ListOffsets looks for a record in it. Past it the answer falls back to the
// batch (its base offset), as does any batch that cannot be decoded.
const timestampLookupMaxBytes = 128 << 20

// recordAtOrAfter finds, in the batch h at position at of v's segment (whose
// max timestamp is >= ts), the first record whose timestamp is >= ts, as
// Kafka's FileRecords.searchForTimestamp does. ok is false when none is (a
// max timestamp the records do not bear out, or a cleaned batch kept with
// no records): the search goes on with the next batch. A LogAppendTime
// batch's records all take its max timestamp. A batch that cannot be read
// or decoded (stored before records were validated) answers its base
// offset and max timestamp: an answer that may precede the record, never
// follow it.
//
// Only a dense batch (as produced) answers without decoding: a cleaned one
// may have lost the records at its base offset, so its records' own offset
// deltas answer (docs/volume.md, Layout).
func (l *Log) recordAtOrAfter(v readView, at int64, h BatchHeader, ts int64) (offset, timestamp int64, ok bool) {
	switch {
	case h.NumRecords == 0:
		return 0, 0, false
	case h.Dense() && (h.LogAppendTime() || h.NumRecords == 1): // the first record bears the max timestamp
		return h.BaseOffset, h.MaxTimestamp, true
	}
	batch := make([]byte, h.Size())
	if err := readFullAt(v.f, batch, at); err != nil {
		l.log.Error(err, "offset for timestamp: reading a batch failed", "segment", v.seg.name, "position", at)
		return h.BaseOffset, h.MaxTimestamp, true
	}
	rv := records.Acquire()
	defer rv.Release()
	delta, timestamp, found, err := rv.FirstAtOrAfter(batch, ts, timestampLookupMaxBytes)
	if err != nil {
		l.log.Error(err, "offset for timestamp: decoding a batch failed; answering its base offset", "segment", v.seg.name, "offset", h.BaseOffset)
		return h.BaseOffset, h.MaxTimestamp, true
	}
	if !found {
		return 0, 0, false
	}
	return h.BaseOffset + int64(delta), timestamp, true
}

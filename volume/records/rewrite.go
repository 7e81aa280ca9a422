package records

import (
	"encoding/binary"
	"fmt"
	"math"
)

// NoHorizon asks AppendRetained for no new delete horizon.
const NoHorizon int64 = -1

// AppendRetained appends to dst the records section of the batch it walks
// (Iter.Reset; the walk is rewound first) rewritten as Kafka's log cleaner
// rewrites a batch (MemoryRecords.filterTo), and returns the header of the
// rewritten batch, for the caller to frame (partlog.BuildBatch): the
// records keep keeps, copied byte for byte, compressed with the batch's
// codec at its default level.
//
// The header keeps the base offset, last offset delta, partition leader
// epoch, attributes and producer fields, so offsets and producer sequences
// stay; NumRecords is the kept count and MaxTimestamp the largest kept
// record's timestamp (a LogAppendTime batch keeps its own). A horizon
// other than NoHorizon becomes the batch's delete horizon (KIP-534:
// AttrDeleteHorizon, the first timestamp field), and the kept records'
// timestamp deltas are re-encoded against it so their timestamps stay.
// With no record kept the batch is Kafka's empty batch: no records
// section, codec none, no horizon, both timestamps the header's max.
// BatchLength, Magic and CRC are left to the framing.
func (e *Encoder) AppendRetained(dst []byte, it *Iter, keep func(*Record) bool, horizon int64) ([]byte, BatchHeader, error) {
	h := it.Header()
	it.Rewind()
	raw, n := e.raw[:0], int32(0)
	maxTS := int64(math.MinInt64)
	for it.Next() {
		r := it.Record()
		if !keep(r) {
			continue
		}
		n++
		maxTS = max(maxTS, h.FirstTimestamp+r.TimestampDelta)
		if horizon == NoHorizon {
			raw = append(raw, r.Raw...)
			continue
		}
		var err error
		if raw, err = appendRebased(raw, r.Raw, h.FirstTimestamp-horizon); err != nil {
			return dst, h, fmt.Errorf("record %d: %w", r.Index, err)
		}
	}
	if cap(raw) <= keepBufferBytes {
		e.raw = raw[:0]
	}
	if err := it.Err(); err != nil {
		return dst, h, err
	}
	out := h
	out.NumRecords = n
	if n == 0 { // DefaultRecordBatch.writeEmptyHeader
		out.Attributes &^= AttrCompressionMask | AttrDeleteHorizon
		out.FirstTimestamp = h.MaxTimestamp
		return dst, out, nil
	}
	if !h.LogAppendTime() {
		out.MaxTimestamp = maxTS
	}
	if horizon != NoHorizon {
		out.Attributes |= AttrDeleteHorizon
		out.FirstTimestamp = horizon
	}
	dst, err := e.Compress(dst, Codec(h.Compression()), DefaultLevel, raw)
	return dst, out, err
}

// appendRebased appends rec, a record Iter checked, with shift added to
// its timestamp delta: the length varint and the delta are re-encoded, the
// rest copied.
func appendRebased(dst, rec []byte, shift int64) ([]byte, error) {
	length, n1 := binary.Varint(rec)
	tsDelta, n2 := binary.Varint(rec[n1+1:]) // after the attributes byte
	if n1 <= 0 || n2 <= 0 {
		return dst, fmt.Errorf("%w: a record Iter accepted does not parse", ErrInvalid)
	}
	rest := rec[n1+1+n2:]
	newDelta := tsDelta + shift // wraps as the reader's base + delta does
	newLen := length - int64(n2) + int64(varintLen(newDelta))
	if newLen > math.MaxInt32 {
		return dst, fmt.Errorf("%w: a record of %d bytes once rebased", ErrTooLarge, newLen)
	}
	dst = binary.AppendVarint(dst, newLen)
	dst = append(dst, rec[n1])
	dst = binary.AppendVarint(dst, newDelta)
	return append(dst, rest...), nil
}

// varintLen is the size of v as a zigzag varint.
func varintLen(v int64) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutVarint(b[:], v)
}

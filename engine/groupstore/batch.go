package groupstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"

	"github.com/kaas-dev/kaas/volume/partlog"
)

// The store writes and reads its own batches only: uncompressed Kafka
// RecordBatch v2 with no producer, no headers, one timestamp. partlog
// owns the header: the store writes the records between its StartBatch
// and FinishBatch.
const batchHeaderSize = partlog.BatchHeaderSize

// errBadBatch means a batch of the shard log is not one the store wrote.
var errBadBatch = errors.New("not a group-store record batch")

// varintLen is the size of v as a zigzag varint (Kafka's varint and
// varlong, and encoding/binary's Varint).
func varintLen(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	return (bits.Len64(u|1) + 6) / 7
}

// bytesFieldLen is the size of a nullable byte field: varint length (-1 for
// nil) and the bytes.
func bytesFieldLen(b []byte) int {
	if b == nil {
		return 1
	}
	return varintLen(int64(len(b))) + len(b)
}

// recordBodyLen is the size of record i after its length varint:
// attributes, timestamp delta, offset delta, key, value, header count.
func recordBodyLen(i int, r Record) int {
	return 1 + 1 + varintLen(int64(i)) + bytesFieldLen(r.Key) + bytesFieldLen(r.Value) + 1
}

// batchSize is the encoded size of recs as one batch.
func batchSize(recs []Record) int {
	n := batchHeaderSize
	for i, r := range recs {
		body := recordBodyLen(i, r)
		n += varintLen(int64(body)) + body
	}
	return n
}

func appendBytesField(dst, b []byte) []byte {
	if b == nil {
		return binary.AppendVarint(dst, -1)
	}
	dst = binary.AppendVarint(dst, int64(len(b)))
	return append(dst, b...)
}

// encodeBatch encodes recs (at least one) as one batch timestamped ts into
// buf's storage, reusing it when it is big enough. Base offset and leader
// epoch are left for partlog.Append to stamp.
func encodeBatch(buf []byte, recs []Record, ts int64) []byte {
	b := partlog.StartBatch(buf[:0], batchSize(recs))
	for i, r := range recs {
		b = binary.AppendVarint(b, int64(recordBodyLen(i, r)))
		b = append(b, 0)                     // attributes
		b = binary.AppendVarint(b, 0)        // timestamp delta
		b = binary.AppendVarint(b, int64(i)) // offset delta
		b = appendBytesField(b, r.Key)       // key
		b = appendBytesField(b, r.Value)     // value (nil: tombstone)
		b = binary.AppendVarint(b, 0)        // no headers
	}
	partlog.FinishBatch(b, partlog.BatchHeader{
		PartitionLeaderEpoch: -1,
		LastOffsetDelta:      int32(len(recs) - 1),
		FirstTimestamp:       ts,
		MaxTimestamp:         ts,
		ProducerID:           -1, // no producer
		ProducerEpoch:        -1,
		BaseSequence:         -1,
		NumRecords:           int32(len(recs)),
	})
	return b
}

// decodeBatch checks that b is exactly one valid batch (CRC included) of
// the store's shape and calls fn with each record's offset, key and value.
// key and value alias b; a nil value is a tombstone.
func decodeBatch(b []byte, fn func(offset int64, key, value []byte)) error {
	h, err := partlog.ValidateBatch(b)
	if err != nil {
		return err
	}
	if h.Compression() != 0 || h.IsControl() {
		return fmt.Errorf("%w: batch at offset %d has attributes %#x", errBadBatch, h.BaseOffset, h.Attributes)
	}
	rest := b[batchHeaderSize:]
	for i := int32(0); i < h.NumRecords; i++ {
		n, k := binary.Varint(rest)
		if k <= 0 || n < 0 || n > int64(len(rest)-k) {
			return fmt.Errorf("%w: record %d of batch %d: bad length", errBadBatch, i, h.BaseOffset)
		}
		rec := rest[k : k+int(n)]
		rest = rest[k+int(n):]
		delta, key, value, err := parseRecord(rec)
		if err != nil {
			return fmt.Errorf("%w: record %d of batch %d: %v", errBadBatch, i, h.BaseOffset, err)
		}
		if delta < 0 || delta > int64(h.LastOffsetDelta) {
			return fmt.Errorf("%w: record %d of batch %d: offset delta %d", errBadBatch, i, h.BaseOffset, delta)
		}
		fn(h.BaseOffset+delta, key, value)
	}
	if len(rest) != 0 {
		return fmt.Errorf("%w: %d bytes after the last record of batch %d", errBadBatch, len(rest), h.BaseOffset)
	}
	return nil
}

// parseRecord parses one record body (after its length). Headers, which
// the store never writes, are skipped.
func parseRecord(r []byte) (delta int64, key, value []byte, err error) {
	if len(r) < 1 {
		return 0, nil, nil, errors.New("empty record")
	}
	r = r[1:]                                  // attributes
	if _, r, err = readVarint(r); err != nil { // timestamp delta
		return 0, nil, nil, err
	}
	if delta, r, err = readVarint(r); err != nil {
		return 0, nil, nil, err
	}
	if key, r, err = readBytesField(r); err != nil {
		return 0, nil, nil, err
	}
	if value, r, err = readBytesField(r); err != nil {
		return 0, nil, nil, err
	}
	headers, r, err := readVarint(r)
	if err != nil || headers < 0 {
		return 0, nil, nil, fmt.Errorf("bad header count %d: %v", headers, err)
	}
	for ; headers > 0; headers-- {
		if _, r, err = readBytesField(r); err != nil {
			return 0, nil, nil, err
		}
		if _, r, err = readBytesField(r); err != nil {
			return 0, nil, nil, err
		}
	}
	if len(r) != 0 {
		return 0, nil, nil, fmt.Errorf("%d trailing bytes", len(r))
	}
	return delta, key, value, nil
}

func readVarint(b []byte) (int64, []byte, error) {
	v, k := binary.Varint(b)
	if k <= 0 {
		return 0, b, errors.New("bad varint")
	}
	return v, b[k:], nil
}

// readBytesField reads a nullable byte field; length -1 is nil, 0 is empty
// but not nil.
func readBytesField(b []byte) ([]byte, []byte, error) {
	n, b, err := readVarint(b)
	switch {
	case err != nil:
		return nil, b, err
	case n == -1:
		return nil, b, nil
	case n < -1 || n > int64(len(b)):
		return nil, b, fmt.Errorf("bad field length %d", n)
	}
	return b[:n:n], b[n:], nil
}

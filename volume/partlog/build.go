package partlog

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"

	"github.com/kaas-dev/kaas/volume/records"
)

// StartBatch begins a RecordBatch v2 at the end of dst: it makes room for
// size more bytes (the whole batch, if the caller knows it) and appends a
// zeroed header. Append the records after it, then FinishBatch the bytes
// from the header on.
func StartBatch(dst []byte, size int) []byte {
	dst = slices.Grow(dst, size)
	n := len(dst)
	dst = dst[:n+BatchHeaderSize]
	clear(dst[n:])
	return dst
}

// FinishBatch writes h into the header of batch (StartBatch's header and
// the records appended after it): every field but BatchLength, Magic and
// CRC is h's; the magic is 2, the batch length is len(batch)'s, and the
// CRC-32C is computed last, over the finished attributes-to-end bytes.
func FinishBatch(batch []byte, h BatchHeader) {
	be := binary.BigEndian
	be.PutUint64(batch[offBaseOffset:], uint64(h.BaseOffset))
	be.PutUint32(batch[offBatchLength:], uint32(len(batch)-batchLengthOverhead))
	be.PutUint32(batch[offPartitionLeaderEpoch:], uint32(h.PartitionLeaderEpoch))
	batch[offMagic] = supportedMagic
	be.PutUint16(batch[offAttributes:], uint16(h.Attributes))
	be.PutUint32(batch[offLastOffsetDelta:], uint32(h.LastOffsetDelta))
	be.PutUint64(batch[offFirstTimestamp:], uint64(h.FirstTimestamp))
	be.PutUint64(batch[offMaxTimestamp:], uint64(h.MaxTimestamp))
	be.PutUint64(batch[offProducerID:], uint64(h.ProducerID))
	be.PutUint16(batch[offProducerEpoch:], uint16(h.ProducerEpoch))
	be.PutUint32(batch[offBaseSequence:], uint32(h.BaseSequence))
	be.PutUint32(batch[offNumRecords:], uint32(h.NumRecords))
	be.PutUint32(batch[offCRC:], crc32.Checksum(batch[offAttributes:], castagnoli))
}

// BuildBatch appends to dst the batch it walks (records.Iter.Reset), as
// the log cleaner rewrites it: only the records keep keeps, byte for byte,
// under the batch's own header, codec and offsets, with horizon (unless
// records.NoHorizon) as its delete horizon; with no record kept, the
// header-only empty batch Kafka keeps for a producer's state
// (records.Encoder.AppendRetained has the rules). The CRC is recomputed.
// A batch whose records keep keeps all, with no new horizon, is better
// copied as it is: this one recompresses.
func BuildBatch(dst []byte, e *records.Encoder, it *records.Iter, keep func(*records.Record) bool, horizon int64) ([]byte, error) {
	start := len(dst)
	dst = StartBatch(dst, len(it.Batch()))
	dst, h, err := e.AppendRetained(dst, it, keep, horizon)
	if err != nil {
		return dst[:start], fmt.Errorf("rewrite the batch at offset %d: %w", h.BaseOffset, err)
	}
	FinishBatch(dst[start:], h)
	return dst, nil
}

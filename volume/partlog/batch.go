package partlog

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/kaas-dev/kaas/volume/records"
)

// The RecordBatch v2 header's layout is volume/records' (its one
// definition); the short names below are this package's for it.
const (
	offBaseOffset           = records.OffBaseOffset
	offBatchLength          = records.OffBatchLength
	offPartitionLeaderEpoch = records.OffPartitionLeaderEpoch
	offMagic                = records.OffMagic
	offCRC                  = records.OffCRC
	offAttributes           = records.OffAttributes // the CRC covers [offAttributes, end)
	offLastOffsetDelta      = records.OffLastOffsetDelta
	offFirstTimestamp       = records.OffFirstTimestamp
	offMaxTimestamp         = records.OffMaxTimestamp
	offProducerID           = records.OffProducerID
	offProducerEpoch        = records.OffProducerEpoch
	offBaseSequence         = records.OffBaseSequence
	offNumRecords           = records.OffNumRecords

	// BatchHeaderSize is the size of a RecordBatch v2 header, up to and
	// including the record count.
	BatchHeaderSize = records.BatchHeaderSize
	// batchLengthOverhead is the part of a batch not counted by batchLength:
	// baseOffset and batchLength themselves.
	batchLengthOverhead = records.BatchLengthOverhead
	// supportedMagic is the only message format kaas stores.
	supportedMagic = records.Magic

	attrTimestampType = records.AttrLogAppendTime
)

// castagnoli is the CRC-32C table Kafka uses for batch checksums.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// BatchHeader is the decoded fixed header of a RecordBatch v2.
type BatchHeader = records.BatchHeader

// ParseBatchHeader decodes the fixed header at the start of b. It checks only
// what the header alone can tell (size, magic, length fields, a record count
// of exactly last offset delta + 1, as every produced batch has); ValidateBatch
// also checks the whole batch and its CRC. Errors wrap ErrCorruptBatch.
func ParseBatchHeader(b []byte) (BatchHeader, error) {
	h, err := parseHeader(b)
	if err == nil && !h.Dense() { // the last offset delta is >= 0: at least one record
		err = fmt.Errorf("%w: %d records for last offset delta %d", ErrCorruptBatch, h.NumRecords, h.LastOffsetDelta)
	}
	return h, err
}

// ParseStoredBatchHeader is ParseBatchHeader for a batch read back from a
// log, which the log cleaner may have rewritten (docs/volume.md, Layout):
// it may hold fewer records than last offset delta + 1, or none; its
// offsets still run from its base to its last offset. Appends and the
// recovery of a log's tail (never cleaned) keep ParseBatchHeader.
func ParseStoredBatchHeader(b []byte) (BatchHeader, error) {
	h, err := parseHeader(b)
	if err == nil && (h.NumRecords < 0 || int64(h.NumRecords) > int64(h.LastOffsetDelta)+1) {
		err = fmt.Errorf("%w: %d records for last offset delta %d", ErrCorruptBatch, h.NumRecords, h.LastOffsetDelta)
	}
	return h, err
}

// parseHeader decodes b's header and checks what both parsers check.
func parseHeader(b []byte) (BatchHeader, error) {
	if len(b) < BatchHeaderSize {
		return BatchHeader{}, fmt.Errorf("%w: %d bytes, need at least the %d-byte header", ErrCorruptBatch, len(b), BatchHeaderSize)
	}
	var h BatchHeader
	h.Decode(b)
	if h.Magic != supportedMagic {
		return h, fmt.Errorf("%w: magic %d, only %d is supported", ErrCorruptBatch, h.Magic, supportedMagic)
	}
	if h.BatchLength < BatchHeaderSize-batchLengthOverhead {
		return h, fmt.Errorf("%w: batch length %d is shorter than the header", ErrCorruptBatch, h.BatchLength)
	}
	if h.LastOffsetDelta < 0 {
		return h, fmt.Errorf("%w: negative last offset delta %d", ErrCorruptBatch, h.LastOffsetDelta)
	}
	return h, nil
}

// ValidateBatch checks that b is exactly one well-formed RecordBatch v2:
// header fields sane, batch length matching len(b), and the CRC-32C over
// bytes [21, len(b)) matching. Errors wrap ErrCorruptBatch.
func ValidateBatch(b []byte) (BatchHeader, error) {
	h, err := ParseBatchHeader(b)
	if err != nil {
		return h, err
	}
	if h.Size() != int64(len(b)) {
		return h, fmt.Errorf("%w: batch length field says %d bytes, got %d", ErrCorruptBatch, h.Size(), len(b))
	}
	if crc := crc32.Checksum(b[offAttributes:], castagnoli); crc != h.CRC {
		return h, fmt.Errorf("%w: crc %08x, computed %08x", ErrCorruptBatch, h.CRC, crc)
	}
	return h, nil
}

// Checked is a batch ValidateBatch accepted, with its header, so that the
// produce path checks a batch's CRC once: Log.AppendChecked takes it as it
// is. Its bytes are still the caller's (Append stamps the offset and epoch
// into them).
type Checked struct {
	bytes  []byte
	header BatchHeader
}

// Check validates b as ValidateBatch does and returns it checked.
func Check(b []byte) (Checked, error) {
	h, err := ValidateBatch(b)
	if err != nil {
		return Checked{}, err
	}
	return Checked{bytes: b, header: h}, nil
}

// Bytes is the batch.
func (c Checked) Bytes() []byte { return c.bytes }

// Header is the batch's header.
func (c Checked) Header() BatchHeader { return c.header }

// stampBatch overwrites the two header fields the broker owns and the CRC
// does not cover: the base offset and the partition leader epoch.
func stampBatch(b []byte, baseOffset int64, epoch int32) {
	binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(baseOffset))
	binary.BigEndian.PutUint32(b[offPartitionLeaderEpoch:], uint32(epoch))
}

// stampLogAppendTime sets batch's timestamp type to LogAppendTime and its
// max timestamp to ts, and recomputes the CRC, as Kafka's broker does for
// message.timestamp.type=LogAppendTime. The first timestamp and the records
// (with their deltas) stay as the producer wrote them; readers take every
// record's timestamp from the max timestamp. It returns the new attributes
// and max timestamp.
func stampLogAppendTime(batch []byte, ts int64) (int16, int64) {
	attrs := binary.BigEndian.Uint16(batch[offAttributes:]) | attrTimestampType
	binary.BigEndian.PutUint16(batch[offAttributes:], attrs)
	binary.BigEndian.PutUint64(batch[offMaxTimestamp:], uint64(ts))
	binary.BigEndian.PutUint32(batch[offCRC:], crc32.Checksum(batch[offAttributes:], castagnoli))
	return int16(attrs), ts
}

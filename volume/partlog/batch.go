package partlog

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Layout of a Kafka RecordBatch v2 header (KIP-98). Offsets are byte
// positions from the start of the batch.
const (
	offBaseOffset           = 0
	offBatchLength          = 8
	offPartitionLeaderEpoch = 12
	offMagic                = 16
	offCRC                  = 17
	offAttributes           = 21 // the CRC covers [offAttributes, end)
	offLastOffsetDelta      = 23
	offFirstTimestamp       = 27
	offMaxTimestamp         = 35
	offProducerID           = 43
	offProducerEpoch        = 51
	offBaseSequence         = 53
	offNumRecords           = 57

	// BatchHeaderSize is the size of a RecordBatch v2 header, up to and
	// including the record count.
	BatchHeaderSize = 61
	// batchLengthOverhead is the part of a batch not counted by batchLength:
	// baseOffset and batchLength themselves.
	batchLengthOverhead = 12
	// supportedMagic is the only message format kaas stores.
	supportedMagic = 2
)

// Attribute bits of a RecordBatch v2.
const (
	attrCompressionMask = 0x07
	attrTimestampType   = 0x08
	attrTransactional   = 0x10
	attrControl         = 0x20
)

// castagnoli is the CRC-32C table Kafka uses for batch checksums.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// BatchHeader is the decoded fixed header of a RecordBatch v2.
type BatchHeader struct {
	BaseOffset           int64
	BatchLength          int32 // bytes after the BatchLength field
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	FirstTimestamp       int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	NumRecords           int32
}

// Size is the total size in bytes of the batch on the wire and on disk.
func (h BatchHeader) Size() int64 { return int64(h.BatchLength) + batchLengthOverhead }

// LastOffset is the offset of the batch's last record.
func (h BatchHeader) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// NextOffset is the offset following the batch.
func (h BatchHeader) NextOffset() int64 { return h.LastOffset() + 1 }

// Compression is the codec id of the batch's records: 0 none, 1 gzip,
// 2 snappy, 3 lz4, 4 zstd.
func (h BatchHeader) Compression() int8 { return int8(h.Attributes & attrCompressionMask) }

// LogAppendTime reports whether the batch's timestamps are broker append times.
func (h BatchHeader) LogAppendTime() bool { return h.Attributes&attrTimestampType != 0 }

// IsTransactional reports whether the batch belongs to a transaction.
func (h BatchHeader) IsTransactional() bool { return h.Attributes&attrTransactional != 0 }

// IsControl reports whether the batch holds a control record (a transaction marker).
func (h BatchHeader) IsControl() bool { return h.Attributes&attrControl != 0 }

// ParseBatchHeader decodes the fixed header at the start of b. It checks only
// what the header alone can tell (size, magic, length fields); ValidateBatch
// also checks the whole batch and its CRC. Errors wrap ErrCorruptBatch.
func ParseBatchHeader(b []byte) (BatchHeader, error) {
	if len(b) < BatchHeaderSize {
		return BatchHeader{}, fmt.Errorf("%w: %d bytes, need at least the %d-byte header", ErrCorruptBatch, len(b), BatchHeaderSize)
	}
	h := BatchHeader{
		BaseOffset:           int64(binary.BigEndian.Uint64(b[offBaseOffset:])),
		BatchLength:          int32(binary.BigEndian.Uint32(b[offBatchLength:])),
		PartitionLeaderEpoch: int32(binary.BigEndian.Uint32(b[offPartitionLeaderEpoch:])),
		Magic:                int8(b[offMagic]),
		CRC:                  binary.BigEndian.Uint32(b[offCRC:]),
		Attributes:           int16(binary.BigEndian.Uint16(b[offAttributes:])),
		LastOffsetDelta:      int32(binary.BigEndian.Uint32(b[offLastOffsetDelta:])),
		FirstTimestamp:       int64(binary.BigEndian.Uint64(b[offFirstTimestamp:])),
		MaxTimestamp:         int64(binary.BigEndian.Uint64(b[offMaxTimestamp:])),
		ProducerID:           int64(binary.BigEndian.Uint64(b[offProducerID:])),
		ProducerEpoch:        int16(binary.BigEndian.Uint16(b[offProducerEpoch:])),
		BaseSequence:         int32(binary.BigEndian.Uint32(b[offBaseSequence:])),
		NumRecords:           int32(binary.BigEndian.Uint32(b[offNumRecords:])),
	}
	if h.Magic != supportedMagic {
		return h, fmt.Errorf("%w: magic %d, only %d is supported", ErrCorruptBatch, h.Magic, supportedMagic)
	}
	if h.BatchLength < BatchHeaderSize-batchLengthOverhead {
		return h, fmt.Errorf("%w: batch length %d is shorter than the header", ErrCorruptBatch, h.BatchLength)
	}
	if h.LastOffsetDelta < 0 {
		return h, fmt.Errorf("%w: negative last offset delta %d", ErrCorruptBatch, h.LastOffsetDelta)
	}
	if h.NumRecords < 1 || int64(h.NumRecords) != int64(h.LastOffsetDelta)+1 {
		return h, fmt.Errorf("%w: %d records for last offset delta %d", ErrCorruptBatch, h.NumRecords, h.LastOffsetDelta)
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

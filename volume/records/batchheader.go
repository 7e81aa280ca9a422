package records

import "encoding/binary"

// Layout of a Kafka RecordBatch v2 header (KIP-98), the one definition of
// it: partlog checks, stamps and builds batches with these. Offsets are
// byte positions from the start of the batch.
const (
	OffBaseOffset           = 0
	OffBatchLength          = 8
	OffPartitionLeaderEpoch = 12
	OffMagic                = 16
	OffCRC                  = 17
	OffAttributes           = 21 // the CRC covers [OffAttributes, end)
	OffLastOffsetDelta      = 23
	OffFirstTimestamp       = 27
	OffMaxTimestamp         = 35
	OffProducerID           = 43
	OffProducerEpoch        = 51
	OffBaseSequence         = 53
	OffNumRecords           = 57

	// BatchHeaderSize is the size of a RecordBatch v2 header, up to and
	// including the record count: where the records begin.
	BatchHeaderSize = 61
	// BatchLengthOverhead is the part of a batch its batch length does not
	// count: the base offset and the batch length themselves.
	BatchLengthOverhead = 12
	// Magic is the message format version of a RecordBatch v2, the only
	// one kaas stores.
	Magic = 2
)

// Attribute bits of a RecordBatch v2.
const (
	AttrCompressionMask = 0x07
	AttrLogAppendTime   = 0x08
	AttrTransactional   = 0x10
	AttrControl         = 0x20
	// AttrDeleteHorizon (KIP-534) marks a batch the log cleaner has
	// rewritten with a delete horizon: its first timestamp field holds the
	// horizon, and the records' timestamp deltas are relative to it. Only
	// stored (cleaned) batches carry it.
	AttrDeleteHorizon = 0x40
)

// Codec ids (attributes & 0x07). 5, 6 and 7 do not exist.
const (
	codecNone   = 0
	codecGzip   = 1
	codecSnappy = 2
	codecLZ4    = 3
	codecZstd   = 4
)

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

// Decode reads the fixed header at the start of b, which holds at least
// BatchHeaderSize bytes, into h. It checks nothing: partlog.ParseBatchHeader
// checks what the header alone can tell, the Validator the records. (It
// fills h in place: the header is 64 bytes, and the produce path decodes
// one per batch.)
func (h *BatchHeader) Decode(b []byte) {
	be := binary.BigEndian
	_ = b[BatchHeaderSize-1] // one bounds check for the reads below
	h.BaseOffset = int64(be.Uint64(b[OffBaseOffset:]))
	h.BatchLength = int32(be.Uint32(b[OffBatchLength:]))
	h.PartitionLeaderEpoch = int32(be.Uint32(b[OffPartitionLeaderEpoch:]))
	h.Magic = int8(b[OffMagic])
	h.CRC = be.Uint32(b[OffCRC:])
	h.Attributes = int16(be.Uint16(b[OffAttributes:]))
	h.LastOffsetDelta = int32(be.Uint32(b[OffLastOffsetDelta:]))
	h.FirstTimestamp = int64(be.Uint64(b[OffFirstTimestamp:]))
	h.MaxTimestamp = int64(be.Uint64(b[OffMaxTimestamp:]))
	h.ProducerID = int64(be.Uint64(b[OffProducerID:]))
	h.ProducerEpoch = int16(be.Uint16(b[OffProducerEpoch:]))
	h.BaseSequence = int32(be.Uint32(b[OffBaseSequence:]))
	h.NumRecords = int32(be.Uint32(b[OffNumRecords:]))
}

// Size is the total size in bytes of the batch on the wire and on disk.
func (h BatchHeader) Size() int64 { return int64(h.BatchLength) + BatchLengthOverhead }

// LastOffset is the offset of the batch's last record.
func (h BatchHeader) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// NextOffset is the offset following the batch.
func (h BatchHeader) NextOffset() int64 { return h.LastOffset() + 1 }

// Compression is the codec id of the batch's records: 0 none, 1 gzip,
// 2 snappy, 3 lz4, 4 zstd.
func (h BatchHeader) Compression() int8 { return int8(h.Attributes & AttrCompressionMask) }

// LogAppendTime reports whether the batch's timestamps are broker append times.
func (h BatchHeader) LogAppendTime() bool { return h.Attributes&AttrLogAppendTime != 0 }

// IsTransactional reports whether the batch belongs to a transaction.
func (h BatchHeader) IsTransactional() bool { return h.Attributes&AttrTransactional != 0 }

// HasDeleteHorizon reports whether the batch carries a KIP-534 delete
// horizon in its first timestamp field (AttrDeleteHorizon).
func (h BatchHeader) HasDeleteHorizon() bool { return h.Attributes&AttrDeleteHorizon != 0 }

// Dense reports whether the batch holds a record at every offset from its
// base to its last offset, as every produced batch does; a batch the log
// cleaner rewrote may hold fewer, or none.
func (h BatchHeader) Dense() bool { return int64(h.NumRecords) == int64(h.LastOffsetDelta)+1 }

// IsControl reports whether the batch holds a control record (a transaction marker).
func (h BatchHeader) IsControl() bool { return h.Attributes&AttrControl != 0 }

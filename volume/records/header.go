package records

import "encoding/binary"

// The RecordBatch v2 header fields this package reads (byte positions from
// the start of the batch; partlog owns the full header).
const (
	offAttributes      = 21
	offLastOffsetDelta = 23
	offFirstTimestamp  = 27
	offMaxTimestamp    = 35
	offNumRecords      = 57
	headerSize         = 61
)

// Attribute bits.
const (
	attrCodecMask     = 0x07
	attrLogAppendTime = 0x08
	attrControl       = 0x20
)

// Codec ids (attributes & 0x07). 5, 6 and 7 do not exist.
const (
	codecNone   = 0
	codecGzip   = 1
	codecSnappy = 2
	codecLZ4    = 3
	codecZstd   = 4
)

// header is what the record walk needs from a batch header.
type header struct {
	attributes      int16
	lastOffsetDelta int32
	firstTimestamp  int64
	maxTimestamp    int64
	numRecords      int32
}

func parseHeader(b []byte) header {
	be := binary.BigEndian
	return header{
		attributes:      int16(be.Uint16(b[offAttributes:])),
		lastOffsetDelta: int32(be.Uint32(b[offLastOffsetDelta:])),
		firstTimestamp:  int64(be.Uint64(b[offFirstTimestamp:])),
		maxTimestamp:    int64(be.Uint64(b[offMaxTimestamp:])),
		numRecords:      int32(be.Uint32(b[offNumRecords:])),
	}
}

func (h header) codec() int          { return int(h.attributes & attrCodecMask) }
func (h header) control() bool       { return h.attributes&attrControl != 0 }
func (h header) logAppendTime() bool { return h.attributes&attrLogAppendTime != 0 }

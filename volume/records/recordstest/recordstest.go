// Package recordstest builds RecordBatch v2 bytes with compressed or
// deliberately malformed records, the way real clients write them, for the
// tests of volume/records and of the produce path above it.
package recordstest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Codec is how a batch's records are compressed. Snappy comes in the two
// framings clients use: a raw block (librdkafka, franz-go's Compress) and
// xerial chunks (the Java client, franz-go's streaming compressor).
type Codec int

const (
	None Codec = iota
	Gzip
	Snappy       // one raw snappy block
	SnappyXerial // the xerial framing
	LZ4
	Zstd
)

// Codecs lists every codec, for table-driven tests.
var Codecs = []Codec{None, Gzip, Snappy, SnappyXerial, LZ4, Zstd}

func (c Codec) String() string {
	return [...]string{"none", "gzip", "snappy", "snappy-xerial", "lz4", "zstd"}[c]
}

// ID is the codec's id in a batch's attributes.
func (c Codec) ID() int16 {
	return [...]int16{0, 1, 2, 2, 3, 4}[c]
}

// Compress compresses raw with c.
func Compress(c Codec, raw []byte) []byte {
	var buf bytes.Buffer
	switch c {
	case None:
		return raw
	case Gzip:
		w := gzip.NewWriter(&buf)
		_, _ = w.Write(raw)
		_ = w.Close()
	case Snappy:
		return s2.EncodeSnappy(nil, raw)
	case SnappyXerial:
		return Xerial(raw, 32<<10)
	case LZ4:
		w := lz4.NewWriter(&buf)
		_, _ = w.Write(raw)
		_ = w.Close()
	case Zstd:
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
		if err != nil {
			panic(err)
		}
		defer enc.Close()
		return enc.EncodeAll(raw, nil)
	default:
		panic(fmt.Sprintf("codec %d", c))
	}
	return buf.Bytes()
}

// XerialHeader is the xerial stream header the Java client writes: magic,
// version 1, minimum compatible version 1.
var XerialHeader = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1}

// Xerial frames raw as the Java client does: the header, then chunks of at
// most chunk input bytes, each a big-endian length and a raw snappy block.
func Xerial(raw []byte, chunk int) []byte {
	out := append([]byte(nil), XerialHeader...)
	for len(raw) > 0 {
		n := min(chunk, len(raw))
		block := s2.EncodeSnappy(nil, raw[:n])
		out = binary.BigEndian.AppendUint32(out, uint32(len(block)))
		out = append(out, block...)
		raw = raw[n:]
	}
	return out
}

// Record is one record to encode. OffsetDelta and TimestampDelta are
// written as given (valid batches number them 0, 1, 2...).
type Record struct {
	TimestampDelta int64
	OffsetDelta    int32
	Key, Value     []byte // nil: null
	Headers        []kmsg.Header
}

// Values makes one record per value, offset and timestamp deltas 0, 1, 2...
func Values(values ...string) []Record {
	out := make([]Record, len(values))
	for i, v := range values {
		out[i] = Record{TimestampDelta: int64(i), OffsetDelta: int32(i), Value: []byte(v)}
	}
	return out
}

// Text makes n records of size-byte compressible values (log-like text),
// keyed, offset deltas 0..n-1, timestamp deltas 0..n-1.
func Text(n, size int) []Record {
	out := make([]Record, n)
	for i := range out {
		line := fmt.Sprintf("2024-05-01T12:00:%02d.%03dZ INFO request handled path=/api/v1/items/%d status=200 bytes=%d ", i%60, i, i*7, i*13)
		v := bytes.Repeat([]byte(line), size/len(line)+1)[:size]
		out[i] = Record{TimestampDelta: int64(i), OffsetDelta: int32(i), Key: fmt.Appendf(nil, "key-%d", i), Value: v}
	}
	return out
}

// EncodeRecords encodes recs as a batch's (uncompressed) records section.
func EncodeRecords(recs []Record) []byte {
	var out []byte
	for _, r := range recs {
		kr := kmsg.Record{TimestampDelta64: r.TimestampDelta, OffsetDelta: r.OffsetDelta, Key: r.Key, Value: r.Value, Headers: r.Headers}
		kr.Length = int32(len(kr.AppendTo(nil)) - 1) // the zero length takes one byte
		out = kr.AppendTo(out)
	}
	return out
}

// Batch describes a RecordBatch v2.
type Batch struct {
	Codec      Codec
	Attributes int16  // other attribute bits: 0x08 LogAppendTime, 0x10 transactional, 0x20 control
	CodecID    *int16 // the codec id written in the attributes, when not Codec.ID() (e.g. 5)
	Records    []Record
	Raw        []byte // the uncompressed records section to compress instead of Records
	Payload    []byte // the records section as stored, instead of compressing anything
	NumRecords *int32 // the header's record count, when not len(Records)
	FirstTS    int64
	MaxTS      *int64 // default: FirstTS + the largest timestamp delta
	ProducerID int64  // 0 means -1 (no producer)
}

// Bytes encodes b with a valid header and CRC.
func (b Batch) Bytes() []byte {
	n := int32(len(b.Records))
	if b.NumRecords != nil {
		n = *b.NumRecords
	}
	payload := b.Payload
	if payload == nil {
		raw := b.Raw
		if raw == nil {
			raw = EncodeRecords(b.Records)
		}
		payload = Compress(b.Codec, raw)
	}
	maxTS := b.FirstTS
	for _, r := range b.Records {
		maxTS = max(maxTS, b.FirstTS+r.TimestampDelta)
	}
	if b.MaxTS != nil {
		maxTS = *b.MaxTS
	}
	id := b.Codec.ID()
	if b.CodecID != nil {
		id = *b.CodecID
	}
	pid := b.ProducerID
	if pid == 0 {
		pid = -1
	}
	out := make([]byte, 0, 61+len(payload))
	be := binary.BigEndian
	out = be.AppendUint64(out, 0)                            // base offset
	out = be.AppendUint32(out, uint32(49+len(payload)))      // batch length
	out = be.AppendUint32(out, 0xffffffff)                   // partition leader epoch
	out = append(out, 2)                                     // magic
	out = be.AppendUint32(out, 0)                            // crc, below
	out = be.AppendUint16(out, uint16(b.Attributes&^7|id&7)) // attributes
	out = be.AppendUint32(out, uint32(n-1))                  // last offset delta
	out = be.AppendUint64(out, uint64(b.FirstTS))
	out = be.AppendUint64(out, uint64(maxTS))
	out = be.AppendUint64(out, uint64(pid))
	out = be.AppendUint16(out, 0xffff) // producer epoch -1
	out = be.AppendUint32(out, 0xffffffff)
	out = be.AppendUint32(out, uint32(n))
	out = append(out, payload...)
	FixCRC(out)
	return out
}

// FixCRC recomputes a batch's CRC-32C after an edit.
func FixCRC(batch []byte) {
	binary.BigEndian.PutUint32(batch[17:], crc32.Checksum(batch[21:], castagnoli))
}

// Int32 and Int64 return pointers, for the optional Batch fields.
func Int32(v int32) *int32 { return &v }
func Int64(v int64) *int64 { return &v }
func Int16(v int16) *int16 { return &v }

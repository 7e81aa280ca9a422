package records

import (
	"encoding/binary"
	"hash/crc32"
)

// AppendRaw appends the records section of batch, decompressed, to dst:
// at most limit bytes of it (ErrTooLarge beyond). batch is a RecordBatch
// v2 whose records Validate accepted, so only the limit and the
// decompressor can fail here.
func (v *Validator) AppendRaw(dst, batch []byte, limit int) ([]byte, error) {
	var h BatchHeader
	h.Decode(batch)
	payload := batch[BatchHeaderSize:]
	codec := int(h.Compression())
	if codec == codecNone {
		return append(dst, payload...), nil
	}
	return v.inflate(dst, codec, payload, limit)
}

// inflate appends payload, compressed with codec, decompressed to dst: at
// most limit bytes (ErrTooLarge beyond). Compressed bytes after the end of
// the stream are ErrCorrupt, as Validate finds them.
func (v *Validator) inflate(dst []byte, codec int, payload []byte, limit int) ([]byte, error) {
	if err := v.c.open(&v.s, codec, payload, int64(limit)); err != nil {
		return dst, err
	}
	defer v.release()
	s := &v.s
	for {
		if err := s.fill(windowSize); err != nil {
			return dst, err
		}
		if s.pos == s.end {
			break
		}
		dst = append(dst, s.buf[s.pos:s.end]...)
		s.pos = s.end
	}
	return dst, v.c.checkLeftover(codec)
}

// Recompress appends to dst batch rewritten with its records compressed
// with codec at level, as Kafka's broker rewrites a produced batch for a
// topic's compression.type: the records are the same bytes, so offsets,
// offset deltas and timestamps stay; the header's fields all stay but the
// codec bits, the batch length and the CRC. batch's records must have
// passed v.Validate; at most limit bytes are decompressed.
func (e *Encoder) Recompress(dst []byte, v *Validator, batch []byte, codec Codec, level, limit int) ([]byte, error) {
	raw, err := v.AppendRaw(e.raw[:0], batch, limit)
	if err != nil {
		return dst, err
	}
	if cap(raw) <= keepBufferBytes {
		e.raw = raw[:0]
	}
	start := len(dst)
	dst = append(dst, batch[:BatchHeaderSize]...)
	if dst, err = e.Compress(dst, codec, level, raw); err != nil {
		return dst[:start], err
	}
	b := dst[start:]
	be := binary.BigEndian
	be.PutUint32(b[OffBatchLength:], uint32(len(b)-BatchLengthOverhead))
	attrs := be.Uint16(b[OffAttributes:])
	be.PutUint16(b[OffAttributes:], attrs&^AttrCompressionMask|uint16(codec))
	be.PutUint32(b[OffCRC:], crc32.Checksum(b[OffAttributes:], castagnoli))
	return dst, nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

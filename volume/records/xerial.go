package records

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/klauspost/compress/snappy"
)

// The xerial snappy framing the Java client writes: a 16-byte header (an
// 8-byte magic, then the version and the minimum compatible version as
// big-endian int32s), then chunks, each a big-endian int32 length and one
// raw snappy block. Anything else under the snappy codec is one raw block
// (librdkafka, franz-go), as the Java and franz-go readers decide.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const xerialHeaderSize = 16

func isXerial(b []byte) bool { return bytes.HasPrefix(b, xerialMagic) }

// xerialReader decodes xerial chunks one at a time into a reused buffer.
type xerialReader struct {
	src   []byte // chunks not decoded yet
	buf   []byte // the decoded chunk
	pos   int    // read position in buf
	limit int64  // decoded bytes still allowed
}

func (x *xerialReader) reset(payload []byte, limit int64) error {
	if len(payload) < xerialHeaderSize {
		return fmt.Errorf("%w: snappy: a %d-byte xerial header", ErrCorrupt, len(payload))
	}
	// The Java reader refuses a stream that needs a newer reader than 1.
	if compat := int32(binary.BigEndian.Uint32(payload[12:])); compat < 1 {
		return fmt.Errorf("%w: snappy: xerial compatible version %d", ErrCorrupt, compat)
	}
	x.src, x.buf, x.pos, x.limit = payload[xerialHeaderSize:], x.buf[:0], 0, limit
	return nil
}

func (x *xerialReader) Read(p []byte) (int, error) {
	for x.pos == len(x.buf) {
		if len(x.src) == 0 {
			return 0, io.EOF
		}
		if len(x.src) < 4 {
			return 0, fmt.Errorf("%w: snappy: %d bytes where a xerial chunk length belongs", ErrCorrupt, len(x.src))
		}
		size := int64(binary.BigEndian.Uint32(x.src))
		if size > int64(len(x.src)-4) {
			return 0, fmt.Errorf("%w: snappy: a xerial chunk of %d bytes, %d left", ErrCorrupt, size, len(x.src)-4)
		}
		block := x.src[4 : 4+size]
		x.src = x.src[4+size:]
		n, err := snappy.DecodedLen(block)
		if err != nil {
			return 0, fmt.Errorf("%w: snappy: %v", ErrCorrupt, err)
		}
		if int64(n) > x.limit {
			return 0, fmt.Errorf("%w: more than %d bytes decompressed", ErrTooLarge, x.limit)
		}
		x.limit -= int64(n)
		out, err := snappy.DecodeStrict(x.buf[:0], block)
		if err != nil {
			return 0, fmt.Errorf("%w: snappy: %v", ErrCorrupt, err)
		}
		x.buf, x.pos = out, 0
	}
	n := copy(p, x.buf[x.pos:])
	x.pos += n
	return n, nil
}

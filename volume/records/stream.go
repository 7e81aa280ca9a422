package records

import (
	"errors"
	"fmt"
	"io"
)

// windowSize is the window a decompressed stream is parsed through. Record
// fields are small; keys and values are skipped through it.
const windowSize = 32 << 10

// errEnd means the records ended (the batch's bytes, or the decompressed
// stream, cleanly) where more was needed.
var errEnd = errors.New("the records end")

// stream is what the record walk reads: either a batch's uncompressed
// records section in place (src nil), or a decompressor read through a
// fixed window. buf[pos:end] is unread; base is the stream offset of buf[0].
type stream struct {
	buf      []byte
	pos, end int
	base     int64
	src      io.Reader
	window   []byte // the window's storage, reused across batches
	pulled   int64  // bytes taken from src
	limit    int64  // most bytes src may yield
	eof      bool   // src is exhausted
}

func (s *stream) resetSlice(b []byte) {
	*s = stream{buf: b, end: len(b), window: s.window, limit: int64(len(b))}
}

func (s *stream) resetReader(src io.Reader, limit int64) {
	if s.window == nil {
		s.window = make([]byte, windowSize)
	}
	*s = stream{buf: s.window, src: src, window: s.window, limit: limit}
}

// offset is how many bytes of the stream have been consumed.
func (s *stream) offset() int64 { return s.base + int64(s.pos) }

// remaining is at most how many bytes the stream can still yield.
func (s *stream) remaining() int64 { return s.limit - s.offset() }

// fill tries to have at least want (<= windowSize) bytes buffered. Fewer
// remain only at the end of the stream; an error is the decompressor's or
// the limit's, never the end.
func (s *stream) fill(want int) error {
	if s.end-s.pos >= want || s.src == nil || s.eof {
		return nil
	}
	n := copy(s.buf, s.buf[s.pos:s.end])
	s.base += int64(s.pos)
	s.pos, s.end = 0, n
	for s.end < want {
		m, err := s.src.Read(s.buf[s.end:])
		s.end += m
		s.pulled += int64(m)
		if s.pulled > s.limit {
			return fmt.Errorf("%w: more than %d bytes decompressed", ErrTooLarge, s.limit)
		}
		if err == io.EOF {
			s.eof = true
			return nil
		}
		if err != nil {
			return decompressError(err)
		}
		if m == 0 {
			return fmt.Errorf("%w: decompress: no progress", ErrCorrupt)
		}
	}
	return nil
}

// byte reads one byte.
func (s *stream) byte() (byte, error) {
	if s.pos == s.end {
		if err := s.fill(1); err != nil {
			return 0, err
		}
		if s.pos == s.end {
			return 0, errEnd
		}
	}
	b := s.buf[s.pos]
	s.pos++
	return b, nil
}

// varint reads a zigzag varint of at most 5 bytes that fits 32 bits, as
// Kafka's ByteUtils.readVarint.
func (s *stream) varint() (int32, error) {
	v, err := s.uvarint(5)
	return int32(uint32(v)>>1) ^ -int32(v&1), err
}

// varlong reads a zigzag varint of at most 10 bytes (ByteUtils.readVarlong).
func (s *stream) varlong() (int64, error) {
	v, err := s.uvarint(10)
	return int64(v>>1) ^ -int64(v&1), err
}

var (
	errVarintLong  = errors.New("varint too long")
	errVarintRange = errors.New("varint out of range")
)

func (s *stream) uvarint(maxLen int) (uint64, error) {
	if s.end-s.pos < maxLen {
		if err := s.fill(maxLen); err != nil {
			return 0, err
		}
	}
	b := s.buf[s.pos:s.end]
	var v uint64
	for i := 0; i < maxLen; i++ {
		if i == len(b) {
			return 0, errEnd
		}
		c := b[i]
		v |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			if (maxLen == 5 && v > 0xffffffff) || (maxLen == 10 && i == 9 && c > 1) {
				return 0, errVarintRange
			}
			s.pos += i + 1
			return v, nil
		}
	}
	return 0, errVarintLong
}

// read fills p from the stream.
func (s *stream) read(p []byte) error {
	for len(p) > 0 {
		if s.pos == s.end {
			if err := s.fill(min(len(p), windowSize)); err != nil {
				return err
			}
			if s.pos == s.end {
				return errEnd
			}
		}
		n := copy(p, s.buf[s.pos:s.end])
		s.pos += n
		p = p[n:]
	}
	return nil
}

// skip consumes n bytes without keeping them.
func (s *stream) skip(n int64) error {
	for {
		if have := int64(s.end - s.pos); n <= have {
			s.pos += int(n)
			return nil
		} else {
			n -= have
			s.pos = s.end
		}
		if s.src == nil {
			return errEnd
		}
		if err := s.fill(int(min(n, windowSize))); err != nil {
			return err
		}
		if s.pos == s.end {
			return errEnd
		}
	}
}

// atEnd consumes the rest of the stream and reports whether it was empty;
// for a decompressor, reaching its end also checks its trailer.
func (s *stream) atEnd() (bool, error) {
	if s.pos < s.end {
		return false, nil
	}
	if err := s.fill(1); err != nil {
		return false, err
	}
	return s.pos == s.end, nil
}

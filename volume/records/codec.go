package records

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// ZstdMaxWindow bounds the window a zstd frame may declare: the decoder
// allocates the window up front, whatever the frame's size, so an
// unbounded one would let a 100-byte batch cost 128 MiB. 8 MiB is what the
// zstd format asks every decoder to support and covers every level up to
// 19 (Kafka's compression.zstd.level defaults to 3: a 2 MiB window).
const ZstdMaxWindow = 8 << 20

// keepBufferBytes is the largest snappy output buffer a Validator keeps
// between batches; a larger one (a batch near the limit) is dropped.
const keepBufferBytes = 4 << 20

// codecs is a Validator's decompressor state, created on first use and
// reset per batch.
type codecs struct {
	src    bytes.Reader // the compressed bytes
	gz     gzip.Reader
	lz     *lz4.Reader
	zd     *zstd.Decoder
	xerial xerialReader
	block  []byte // a decoded raw snappy block
}

// open points s at the records of payload, compressed with codec.
func (c *codecs) open(s *stream, codec int, payload []byte, limit int64) error {
	switch codec {
	case codecNone:
		s.resetSlice(payload)
	case codecGzip:
		c.src.Reset(payload)
		if err := c.gz.Reset(&c.src); err != nil {
			return fmt.Errorf("%w: gzip: %v", ErrCorrupt, err)
		}
		s.resetReader(&c.gz, limit)
	case codecSnappy:
		if isXerial(payload) {
			if err := c.xerial.reset(payload, limit); err != nil {
				return err
			}
			s.resetReader(&c.xerial, limit)
			return nil
		}
		n, err := snappy.DecodedLen(payload)
		if err != nil {
			return fmt.Errorf("%w: snappy: %v", ErrCorrupt, err)
		}
		if int64(n) > limit {
			return fmt.Errorf("%w: a snappy block of %d bytes, over the %d-byte limit", ErrTooLarge, n, limit)
		}
		out, err := snappy.DecodeStrict(c.block[:0], payload)
		if err != nil {
			return fmt.Errorf("%w: snappy: %v", ErrCorrupt, err)
		}
		c.block = out[:0]
		s.resetSlice(out)
	case codecLZ4:
		if c.lz == nil {
			c.lz = lz4.NewReader(nil)
		}
		c.src.Reset(payload)
		c.lz.Reset(&c.src)
		s.resetReader(c.lz, limit)
	case codecZstd:
		if c.zd == nil {
			zd, err := zstd.NewReader(nil,
				zstd.WithDecoderConcurrency(1), // decode on the caller's goroutine
				zstd.WithDecoderLowmem(true),
				zstd.WithDecoderMaxWindow(ZstdMaxWindow),
				zstd.WithDecoderMaxMemory(ZstdMaxWindow))
			if err != nil {
				return fmt.Errorf("zstd decoder: %w", err)
			}
			c.zd = zd
		}
		c.src.Reset(payload)
		if err := c.zd.Reset(&c.src); err != nil {
			return fmt.Errorf("%w: zstd: %v", ErrCorrupt, err)
		}
		s.resetReader(c.zd, limit)
	default:
		return fmt.Errorf("%w: compression codec %d does not exist", ErrCorrupt, codec)
	}
	return nil
}

// checkLeftover refuses compressed bytes the decompressor left unread
// after the end of its stream (the codecs other than gzip, lz4 and zstd
// read all of theirs).
func (c *codecs) checkLeftover(codec int) error {
	switch codec {
	case codecGzip, codecLZ4, codecZstd:
		if n := c.src.Len(); n > 0 {
			return fmt.Errorf("%w: %d bytes after the end of the compressed stream", ErrCorrupt, n)
		}
	}
	return nil
}

// release drops the references to the batch and buffers too big to keep.
func (c *codecs) release() {
	c.src.Reset(nil)
	if c.zd != nil {
		_ = c.zd.Reset(nil)
	}
	c.xerial.src = nil
	if cap(c.block) > keepBufferBytes {
		c.block = nil
	}
	if cap(c.xerial.buf) > keepBufferBytes {
		c.xerial.buf = nil
	}
}

// decompressError classifies an error a decompressor returned.
func decompressError(err error) error {
	switch {
	case errors.Is(err, ErrCorrupt), errors.Is(err, ErrTooLarge):
		return err
	case errors.Is(err, zstd.ErrWindowSizeExceeded), errors.Is(err, zstd.ErrDecoderSizeExceeded):
		return fmt.Errorf("%w: zstd: %v (at most %d bytes)", ErrTooLarge, err, ZstdMaxWindow)
	default:
		return fmt.Errorf("%w: decompress: %v", ErrCorrupt, err)
	}
}

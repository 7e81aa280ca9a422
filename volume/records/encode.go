package records

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Codec is a compression codec id of a RecordBatch v2 (attributes & 0x07).
type Codec int8

// The codecs a batch may be written with.
const (
	CodecNone   Codec = codecNone
	CodecGzip   Codec = codecGzip
	CodecSnappy Codec = codecSnappy
	CodecLZ4    Codec = codecLZ4
	CodecZstd   Codec = codecZstd
)

// DefaultLevel asks a codec for its default level (Kafka's
// compression.<codec>.level defaults: gzip -1, lz4 9, zstd 3).
const DefaultLevel = -1 << 31

// Encoder compresses a batch's records section, for the broker's
// recompression on append (compression.type) and the log cleaner's
// rewrites (AppendRetained, framed by partlog.BuildBatch).
// It keeps its compressors between batches; it is not safe for concurrent
// use. Take one with AcquireEncoder, give it back with Release.
type Encoder struct {
	raw     []byte // a decompressed records section (Recompress)
	out     bytes.Buffer
	gz      *gzip.Writer
	gzLevel int
	lz      *lz4.Writer
	lzLevel int
	zd      *zstd.Encoder
	zdLevel int
}

var encoders = sync.Pool{New: func() any { return new(Encoder) }}

// AcquireEncoder takes an Encoder from a process-wide pool: creating a
// zstd or gzip compressor costs far more than one batch's compression. An
// Encoder that has used zstd holds some 1.7 MiB; the pool drops idle ones
// at GC, and a caller that holds a Validator while it encodes (Recompress
// needs one) is bounded by Acquire's limit.
func AcquireEncoder() *Encoder { return encoders.Get().(*Encoder) }

// Release gives e back to the pool; e must not be used afterwards.
func (e *Encoder) Release() {
	if e.out.Cap() > keepBufferBytes {
		e.out = bytes.Buffer{}
	}
	encoders.Put(e)
}

// Compress appends raw, a batch's uncompressed records section,
// compressed with codec at level (DefaultLevel: the codec's default), to
// dst. The output is what Kafka's own producer and broker write, so every
// client decodes it: gzip; snappy in the xerial framing of 32 KiB chunks;
// an LZ4 frame of 64 KiB independent blocks without checksums; one zstd
// frame.
func (e *Encoder) Compress(dst []byte, codec Codec, level int, raw []byte) ([]byte, error) {
	switch codec {
	case CodecNone:
		return append(dst, raw...), nil
	case CodecSnappy:
		return appendXerial(dst, raw), nil
	case CodecZstd:
		zd, err := e.zstd(level)
		if err != nil {
			return dst, err
		}
		return zd.EncodeAll(raw, dst), nil
	case CodecGzip, CodecLZ4:
		e.out.Reset()
		if err := e.stream(codec, level, raw); err != nil {
			return dst, err
		}
		return append(dst, e.out.Bytes()...), nil
	}
	return dst, fmt.Errorf("compress: codec %d does not exist", codec)
}

// stream compresses raw into e.out with a streaming codec.
func (e *Encoder) stream(codec Codec, level int, raw []byte) error {
	if codec == CodecGzip {
		if level == DefaultLevel {
			level = gzip.DefaultCompression
		}
		if e.gz == nil || e.gzLevel != level {
			gz, err := gzip.NewWriterLevel(&e.out, level)
			if err != nil {
				return fmt.Errorf("gzip level %d: %w", level, err)
			}
			e.gz, e.gzLevel = gz, level
		}
		e.gz.Reset(&e.out)
		if _, err := e.gz.Write(raw); err != nil {
			return fmt.Errorf("gzip: %w", err)
		}
		if err := e.gz.Close(); err != nil {
			return fmt.Errorf("gzip: %w", err)
		}
		return nil
	}
	if level == DefaultLevel {
		level = 9
	}
	if e.lz == nil || e.lzLevel != level {
		e.lz, e.lzLevel = lz4.NewWriter(&e.out), level
	}
	e.lz.Reset(&e.out)
	// Kafka's own LZ4 writer: 64 KiB independent blocks, no checksums.
	if err := e.lz.Apply(lz4.BlockSizeOption(lz4.Block64Kb), lz4.ChecksumOption(false),
		lz4.CompressionLevelOption(lz4Level(level))); err != nil {
		return fmt.Errorf("lz4 level %d: %w", level, err)
	}
	if _, err := e.lz.Write(raw); err != nil {
		return fmt.Errorf("lz4: %w", err)
	}
	if err := e.lz.Close(); err != nil {
		return fmt.Errorf("lz4: %w", err)
	}
	return nil
}

// lz4Level maps Kafka's compression.lz4.level (1-17) to the library's as
// Kafka's own LZ4 writer does: the default, 9, is LZ4's fast compressor
// (what Kafka wrote before levels existed); any other level is LZ4 HC at
// that level, whose strongest here is 9, so 10-17 compress as HC 9.
func lz4Level(level int) lz4.CompressionLevel {
	switch {
	case level == 9:
		return lz4.Fast
	case level > 9:
		return lz4.Level9
	}
	return lz4HC[max(level, 1)-1]
}

var lz4HC = [...]lz4.CompressionLevel{lz4.Level1, lz4.Level2, lz4.Level3, lz4.Level4, lz4.Level5, lz4.Level6, lz4.Level7, lz4.Level8}

func (e *Encoder) zstd(level int) (*zstd.Encoder, error) {
	if level == DefaultLevel {
		level = 3
	}
	if e.zd != nil && e.zdLevel == level {
		return e.zd, nil
	}
	// Negative (fast) levels are the library's fastest. The window stays
	// within what every decoder, this package's included, must accept.
	zd, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1),
		zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(max(level, 1))),
		zstd.WithWindowSize(ZstdMaxWindow))
	if err != nil {
		return nil, fmt.Errorf("zstd level %d: %w", level, err)
	}
	e.zd, e.zdLevel = zd, level
	return zd, nil
}

// xerialChunk is the input size of one xerial chunk (the Java client's
// default block size).
const xerialChunk = 32 << 10

// appendXerial frames raw as Kafka's Java producer and broker do: the
// xerial header (version 1, compatible with 1), then chunks of one raw
// snappy block each behind its big-endian length.
func appendXerial(dst, raw []byte) []byte {
	dst = append(dst, xerialMagic...)
	dst = binary.BigEndian.AppendUint32(dst, 1)
	dst = binary.BigEndian.AppendUint32(dst, 1)
	for len(raw) > 0 {
		n := min(xerialChunk, len(raw))
		at, most := len(dst), snappy.MaxEncodedLen(n)
		dst = slices.Grow(dst, 4+most)[:at+4+most]
		block := snappy.Encode(dst[at+4:], raw[:n])
		binary.BigEndian.PutUint32(dst[at:], uint32(len(block)))
		dst = dst[:at+4+len(block)]
		raw = raw[n:]
	}
	return dst
}

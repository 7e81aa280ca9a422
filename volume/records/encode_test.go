package records

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	rt "github.com/kaas-dev/kaas/volume/records/recordstest"
)

// targets are the codecs a topic's compression.type may ask for, each at
// its default and at the ends of Kafka's level range.
var targets = []struct {
	codec  Codec
	levels []int
}{
	{CodecNone, []int{DefaultLevel}},
	{CodecGzip, []int{DefaultLevel, 1, 9}},
	{CodecSnappy, []int{DefaultLevel}},
	{CodecLZ4, []int{DefaultLevel, 1, 5, 9, 17}},
	{CodecZstd, []int{DefaultLevel, -131072, 22}},
}

// checkRecompressed checks out, batch recompressed with codec: valid for
// this package and for a franz-go consumer, every header field but the
// codec, length and CRC unchanged, the same records section once
// decompressed, and a right CRC.
func checkRecompressed(t *testing.T, v *Validator, batch, out []byte, codec Codec) {
	t.Helper()
	if err := v.Validate(out, 1<<24); err != nil {
		t.Fatalf("Validate(recompressed): %v", err)
	}
	if err := franzDecodes(out); err != nil {
		t.Fatalf("franz-go cannot decode the recompressed batch: %v", err)
	}
	var in, got BatchHeader
	in.Decode(batch)
	got.Decode(out)
	if got.Compression() != int8(codec) {
		t.Fatalf("codec %d, want %d", got.Compression(), codec)
	}
	if crc := crc32.Checksum(out[OffAttributes:], castagnoli); got.CRC != crc {
		t.Fatalf("CRC %08x, want %08x", got.CRC, crc)
	}
	if got.Size() != int64(len(out)) {
		t.Fatalf("batch length says %d bytes, the batch has %d", got.Size(), len(out))
	}
	in.Attributes &^= AttrCompressionMask
	got.Attributes &^= AttrCompressionMask
	in.BatchLength, got.BatchLength, in.CRC, got.CRC = 0, 0, 0, 0
	if in != got {
		t.Fatalf("header changed:\n got %+v\nwant %+v", got, in)
	}
	wantRaw, err := v.AppendRaw(nil, batch, 1<<24)
	if err != nil {
		t.Fatal(err)
	}
	gotRaw, err := v.AppendRaw(nil, out, 1<<24)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(gotRaw, wantRaw) {
		t.Fatalf("records differ after recompression: %d bytes, want %d", len(gotRaw), len(wantRaw))
	}
}

// TestRecompress: every codec to every codec and level, through this
// package's decoders and franz-go's; the producer's fields and timestamps
// survive.
func TestRecompress(t *testing.T) {
	recs := rt.Text(60, 2000) // > 64 KiB raw: several LZ4 blocks and xerial chunks
	recs[3].Headers = []kmsg.Header{{Key: "h", Value: []byte("v")}}
	recs[4].Key, recs[5].Value = nil, nil
	v := new(Validator)
	e := new(Encoder)
	for _, src := range rt.Codecs {
		batch := rt.Batch{Codec: src, Attributes: AttrTransactional, Records: recs, FirstTS: 1_700_000_000_000, ProducerID: 42}.Bytes()
		binary.BigEndian.PutUint64(batch[OffBaseOffset:], 1234)
		binary.BigEndian.PutUint32(batch[OffBaseSequence:], 7)
		rt.FixCRC(batch)
		for _, tg := range targets {
			for _, level := range tg.levels {
				t.Run(fmt.Sprintf("%s-to-%d-level-%d", src, tg.codec, level), func(t *testing.T) {
					out, err := e.Recompress([]byte("prefix"), v, batch, tg.codec, level, 1<<24)
					if err != nil {
						t.Fatalf("Recompress: %v", err)
					}
					if string(out[:6]) != "prefix" {
						t.Fatalf("dst's bytes were overwritten")
					}
					checkRecompressed(t, v, batch, out[6:], tg.codec)
				})
			}
		}
	}
}

// TestRecompressLimit: a batch that inflates past the limit is refused
// with ErrTooLarge, as validation refuses it.
func TestRecompressLimit(t *testing.T) {
	batch := rt.Batch{Codec: rt.Zstd, Records: rt.Text(10, 1000)}.Bytes()
	e, v := new(Encoder), new(Validator)
	if _, err := e.Recompress(nil, v, batch, CodecGzip, DefaultLevel, 500); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Recompress past the limit: %v, want ErrTooLarge", err)
	}
}

// TestCompressUnknownCodec: codec ids 5-7 do not exist.
func TestCompressUnknownCodec(t *testing.T) {
	if _, err := new(Encoder).Compress(nil, 5, DefaultLevel, []byte("x")); err == nil {
		t.Fatal("Compress with codec 5 succeeded")
	}
}

// FuzzRecompress: any batch this package accepts, recompressed with any
// codec and level, is accepted again, decodes in franz-go to the same
// records section, and keeps its header.
func FuzzRecompress(f *testing.F) {
	for i, s := range fuzzSeeds() {
		f.Add(s.payload, s.codec, s.count, uint8(i), int32(i-3))
	}
	v, e := new(Validator), new(Encoder)
	f.Fuzz(func(t *testing.T, payload []byte, codec uint8, count int32, target uint8, level int32) {
		batch := rt.Batch{Payload: payload, NumRecords: &count, CodecID: rt.Int16(int16(codec & 7))}.Bytes()
		if v.Validate(batch, fuzzLimit) != nil {
			return
		}
		tc := Codec(target % 5)
		lv := int(level)
		switch tc { // Kafka's ranges, as the topic config checks them
		case CodecGzip:
			lv = 1 + int(uint32(level)%9)
		case CodecLZ4:
			lv = 1 + int(uint32(level)%17)
		case CodecZstd:
			lv = int(level%22) + 1
		}
		out, err := e.Recompress(nil, v, batch, tc, lv, fuzzLimit)
		if err != nil {
			t.Fatalf("Recompress of a valid batch: %v", err)
		}
		checkRecompressed(t, v, batch, out, tc)
	})
}

// BenchmarkRecompress: the cost of compression.type on append, per target
// codec at its default level, for a batch of 100 keyed 1 KiB records
// produced uncompressed: "text" is log-like text (very compressible),
// "random" random bytes (incompressible). "passthrough" is the
// producer-codec path (the records check alone), the baseline; each codec
// is the records check plus the re-encoding. bytes/s counts the
// uncompressed records; ratio is stored size over produced size.
func BenchmarkRecompress(b *testing.B) {
	rnd := rand.New(rand.NewPCG(1, 2))
	random := rt.Text(100, 1024)
	for i := range random {
		for j := range random[i].Value {
			random[i].Value[j] = byte(rnd.Uint32())
		}
	}
	for _, data := range []struct {
		name string
		recs []rt.Record
	}{{"text", rt.Text(100, 1024)}, {"random", random}} {
		raw := int64(len(rt.EncodeRecords(data.recs)))
		batch := rt.Batch{Codec: rt.None, Records: data.recs}.Bytes()
		v, e := new(Validator), new(Encoder)
		b.Run(data.name+"/passthrough", func(b *testing.B) {
			b.SetBytes(raw)
			b.ReportAllocs()
			for b.Loop() {
				if err := v.Validate(batch, 100<<20); err != nil {
					b.Fatal(err)
				}
			}
		})
		names := map[Codec]string{CodecGzip: "gzip", CodecSnappy: "snappy", CodecLZ4: "lz4", CodecZstd: "zstd"}
		for _, c := range []Codec{CodecGzip, CodecSnappy, CodecLZ4, CodecZstd} {
			b.Run(data.name+"/"+names[c], func(b *testing.B) {
				var out []byte
				b.SetBytes(raw)
				b.ReportAllocs()
				for b.Loop() {
					if err := v.Validate(batch, 100<<20); err != nil {
						b.Fatal(err)
					}
					var err error
					if out, err = e.Recompress(out[:0], v, batch, c, DefaultLevel, 100<<20); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(len(out))/float64(len(batch)), "ratio")
			})
		}
	}
}

package partlog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/volume/records"
	rt "github.com/kaas-dev/kaas/volume/records/recordstest"
)

const rewriteLimit = 1 << 24

// genBatch is a random stored batch of codec holding n records (one
// marker if attrs has the control bit) at sparse offset deltas, with null,
// empty and present keys and values, headers, timestamp deltas of either
// sign (extreme ones too), and every header field set.
func genBatch(rnd *rand.Rand, codec rt.Codec, n int, attrs int16) []byte {
	if attrs&records.AttrControl != 0 {
		n = min(n, 1)
	}
	recs := make([]rt.Record, n)
	delta := int32(0)
	for i := range recs {
		delta += int32(rnd.IntN(3))
		r := rt.Record{OffsetDelta: delta, TimestampDelta: rnd.Int64N(2000) - 1000}
		delta++
		if rnd.IntN(16) == 0 {
			r.TimestampDelta = int64(rnd.Uint64())
		}
		r.Key, r.Value = genBytes(rnd), genBytes(rnd)
		if rnd.IntN(4) == 0 {
			r.Headers = []kmsg.Header{{Key: "h", Value: genBytes(rnd)}}
		}
		if attrs&records.AttrControl != 0 {
			r.Key, r.Value, r.Headers = []byte{0, 0, 0, byte(rnd.IntN(2))}, []byte{0, 0, 0, 0, 0, 7}, nil
		}
		recs[i] = r
	}
	b := rt.Batch{Codec: codec, Attributes: attrs, Records: recs, FirstTS: 1_700_000_000_000 + rnd.Int64N(1e9), ProducerID: 1 + rnd.Int64N(1e6)}.Bytes()
	be := binary.BigEndian
	be.PutUint32(b[offLastOffsetDelta:], uint32(delta-1+int32(rnd.IntN(3)))) // the records at the end may be gone too
	if n == 0 {
		be.PutUint32(b[offLastOffsetDelta:], uint32(rnd.IntN(5)))
	}
	be.PutUint16(b[offProducerEpoch:], uint16(rnd.IntN(100)))
	be.PutUint32(b[offBaseSequence:], uint32(rnd.IntN(1e6)))
	rt.FixCRC(b)
	stampBatch(b, rnd.Int64N(1e12), int32(rnd.IntN(100)))
	return b
}

// genBytes is nil, empty or a few random bytes.
func genBytes(rnd *rand.Rand) []byte {
	switch rnd.IntN(6) {
	case 0:
		return nil
	case 1:
		return []byte{}
	}
	b := make([]byte, rnd.IntN(40))
	for i := range b {
		b[i] = byte('a' + rnd.IntN(26))
	}
	return b
}

// keepMask keeps record i when bit i%64 of mask is set.
func keepMask(mask uint64) func(*records.Record) bool {
	return func(r *records.Record) bool { return mask>>(r.Index%64)&1 == 1 }
}

// walkRecords is every record of batch, copied.
func walkRecords(t testing.TB, batch []byte) []records.Record {
	t.Helper()
	it := new(records.Iter)
	if err := it.Reset(batch, rewriteLimit); err != nil {
		t.Fatalf("Iter.Reset: %v", err)
	}
	var out []records.Record
	for it.Next() {
		r := *it.Record()
		r.Raw = append([]byte(nil), r.Raw...)
		out = append(out, r)
	}
	if err := it.Err(); err != nil {
		t.Fatalf("Iter: %v", err)
	}
	return out
}

// afterTimestamp is raw, a record, but its length and timestamp delta:
// all a rebased record keeps byte for byte.
func afterTimestamp(raw []byte) []byte {
	_, n1 := binary.Varint(raw)
	_, n2 := binary.Varint(raw[n1+1:])
	return append([]byte{raw[n1]}, raw[n1+1+n2:]...)
}

// checkRewrite checks out, in rewritten keeping what keep keeps with
// horizon: a valid stored batch with a right CRC that franz-go decodes,
// in's header but for the count, codec, timestamps and horizon bit Kafka's
// cleaner changes, and the kept records, byte for byte (but for a rebased
// timestamp delta), at their offsets and timestamps.
func checkRewrite(t testing.TB, in, out []byte, keep func(*records.Record) bool, horizon int64) {
	t.Helper()
	got, err := ParseStoredBatchHeader(out)
	if err != nil {
		t.Fatalf("ParseStoredBatchHeader: %v", err)
	}
	if got.Size() != int64(len(out)) {
		t.Fatalf("batch length says %d bytes, the batch has %d", got.Size(), len(out))
	}
	if crc := crc32.Checksum(out[offAttributes:], castagnoli); crc != got.CRC {
		t.Fatalf("CRC %08x, computed %08x", got.CRC, crc)
	}
	if err := new(records.Validator).ValidateStored(out, rewriteLimit); err != nil {
		t.Fatalf("ValidateStored: %v", err)
	}
	if err := rt.FranzDecode(out, true); err != nil {
		t.Fatalf("franz-go: %v", err)
	}
	var h BatchHeader
	h.Decode(in)
	var kept []records.Record
	maxTS := int64(math.MinInt64)
	for _, r := range walkRecords(t, in) {
		if keep(&r) {
			kept = append(kept, r)
			maxTS = max(maxTS, h.FirstTimestamp+r.TimestampDelta)
		}
	}
	want := h
	want.NumRecords = int32(len(kept))
	switch {
	case len(kept) == 0:
		want.Attributes &^= records.AttrCompressionMask | records.AttrDeleteHorizon
		want.FirstTimestamp = h.MaxTimestamp
		if len(out) != BatchHeaderSize {
			t.Fatalf("an empty batch of %d bytes", len(out))
		}
	case horizon != records.NoHorizon:
		want.Attributes |= records.AttrDeleteHorizon
		want.FirstTimestamp = horizon
	}
	if len(kept) > 0 && !h.LogAppendTime() {
		want.MaxTimestamp = maxTS
	}
	want.BatchLength, want.CRC = got.BatchLength, got.CRC
	if got != want {
		t.Fatalf("header\n got %+v\nwant %+v", got, want)
	}
	outRecs := walkRecords(t, out)
	if len(outRecs) != len(kept) {
		t.Fatalf("%d records, kept %d", len(outRecs), len(kept))
	}
	for i, r := range outRecs {
		k := kept[i]
		if r.OffsetDelta != k.OffsetDelta || got.FirstTimestamp+r.TimestampDelta != h.FirstTimestamp+k.TimestampDelta {
			t.Fatalf("record %d: offset delta %d, timestamp %d; was %d, %d", i, r.OffsetDelta,
				got.FirstTimestamp+r.TimestampDelta, k.OffsetDelta, h.FirstTimestamp+k.TimestampDelta)
		}
		if got.FirstTimestamp == h.FirstTimestamp && !bytes.Equal(r.Raw, k.Raw) ||
			!bytes.Equal(afterTimestamp(r.Raw), afterTimestamp(k.Raw)) {
			t.Fatalf("record %d: bytes %x, were %x", i, r.Raw, k.Raw)
		}
	}
}

// TestBuildBatch: per codec, the rewrites the log cleaner makes round-trip
// through this package's parser, volume/records' decoders and franz-go's.
func TestBuildBatch(t *testing.T) {
	const hz = 1_800_000_000_000
	recs := rt.Text(40, 300) // > 32 KiB: several xerial chunks
	for i := range recs {
		recs[i].TimestampDelta = int64(i * 7 % 13) // max not at the end
	}
	recs[3].Value = nil // a tombstone
	recs[5].Key = nil
	sparseRecs := []rt.Record{recs[0], recs[1], recs[2]}
	sparseRecs[0].OffsetDelta, sparseRecs[1].OffsetDelta, sparseRecs[2].OffsetDelta = 2, 5, 6
	marker := []rt.Record{{Key: []byte{0, 0, 0, 0}, Value: []byte{0, 0, 0, 0, 0, 3}, TimestampDelta: 4}}
	for _, c := range rt.Codecs {
		batch := func(attrs int16, recs []rt.Record, last int32) []byte {
			b := rt.Batch{Codec: c, Attributes: attrs, Records: recs, FirstTS: 1_700_000_000_000, ProducerID: 77}.Bytes()
			binary.BigEndian.PutUint32(b[offLastOffsetDelta:], uint32(last))
			rt.FixCRC(b)
			stampBatch(b, 5000, 3)
			return b
		}
		empty := batch(0, nil, 4)[:BatchHeaderSize]
		binary.BigEndian.PutUint32(empty[offBatchLength:], BatchHeaderSize-batchLengthOverhead)
		rt.FixCRC(empty)
		tests := []struct {
			name    string
			in      []byte
			mask    uint64
			horizon int64
		}{
			{"keep all", batch(0, recs, 39), math.MaxUint64, records.NoHorizon},
			{"keep none", batch(records.AttrTransactional, recs, 39), 0, records.NoHorizon},
			{"keep none, horizon asked", batch(0, recs, 39), 0, hz},
			{"keep alternate", batch(0, recs, 39), 0xaaaa_aaaa_aaaa_aaaa, records.NoHorizon},
			{"keep the last", batch(0, recs, 39), 1 << 39, records.NoHorizon},
			{"horizon", batch(records.AttrTransactional, recs, 39), 0x5555_5555_5555_5555, hz},
			{"horizon moved", batch(records.AttrDeleteHorizon, recs, 39), 0xf0f0, hz},
			{"keep none of a horizon batch", batch(records.AttrDeleteHorizon, recs, 39), 0, records.NoHorizon},
			{"horizon kept", batch(records.AttrDeleteHorizon, recs, 39), 0xf0f0, records.NoHorizon},
			{"horizon before the records", batch(0, recs, 39), math.MaxUint64, 1000},
			{"log append time", batch(records.AttrLogAppendTime, recs, 39), 0b1011, records.NoHorizon},
			{"log append time, horizon", batch(records.AttrLogAppendTime, recs, 39), 0b1011, hz},
			{"sparse", batch(0, sparseRecs, 9), 0b101, records.NoHorizon},
			{"marker, horizon", batch(records.AttrTransactional|records.AttrControl, marker, 0), 1, hz},
			{"marker dropped", batch(records.AttrTransactional|records.AttrControl, marker, 0), 0, hz},
			{"empty stays empty", empty, math.MaxUint64, hz},
		}
		e, it := new(records.Encoder), new(records.Iter)
		for _, tc := range tests {
			t.Run(c.String()+"/"+tc.name, func(t *testing.T) {
				if err := it.Reset(tc.in, rewriteLimit); err != nil {
					t.Fatal(err)
				}
				keep := keepMask(tc.mask)
				out, err := BuildBatch([]byte("prefix"), e, it, keep, tc.horizon)
				if err != nil {
					t.Fatalf("BuildBatch: %v", err)
				}
				if string(out[:6]) != "prefix" {
					t.Fatal("dst's bytes were overwritten")
				}
				out = out[6:]
				checkRewrite(t, tc.in, out, keep, tc.horizon)
				if h, _ := ParseStoredBatchHeader(out); h.NumRecords > 0 && h.Compression() != int8(c.ID()) {
					t.Fatalf("codec %d, want the batch's %d", h.Compression(), c.ID())
				}
			})
		}
	}
}

// TestBuildBatchRefuses: a batch whose records do not decode is not
// rewritten, and dst is left as it was.
func TestBuildBatchRefuses(t *testing.T) {
	bad := rt.Batch{Codec: rt.Gzip, Records: rt.Values("a", "b"), NumRecords: rt.Int32(1)}.Bytes()
	e, it := new(records.Encoder), new(records.Iter)
	_ = it.Reset(bad, rewriteLimit) // the count is found wrong by the walk
	out, err := BuildBatch([]byte("prefix"), e, it, keepMask(math.MaxUint64), records.NoHorizon)
	if !errors.Is(err, records.ErrInvalid) || string(out) != "prefix" {
		t.Fatalf("BuildBatch of a bad batch: %q, %v", out, err)
	}
}

// TestBuildBatchAllocs: a warm Encoder and Iter rewrite a batch with no
// allocation, for every codec.
func TestBuildBatchAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool drops items")
	}
	rnd := rand.New(rand.NewPCG(3, 4))
	for _, c := range rt.Codecs {
		in := genBatch(rnd, c, 200, 0)
		e, it := new(records.Encoder), new(records.Iter)
		keep := keepMask(0x1234_5678_9abc_def0)
		var out []byte
		rewrite := func() {
			if err := it.Reset(in, rewriteLimit); err != nil {
				t.Fatal(err)
			}
			var err error
			if out, err = BuildBatch(out[:0], e, it, keep, 1_800_000_000_000); err != nil {
				t.Fatal(err)
			}
		}
		rewrite()
		if n := testing.AllocsPerRun(10, rewrite); n != 0 {
			t.Errorf("%s: %.1f allocations per batch", c, n)
		}
	}
}

// FuzzRewriteBatch: whatever the batch, codec, keep mask and horizon, the
// rewrite is a valid stored batch with a right CRC, the input's offsets,
// producer fields and the kept records byte for byte at their absolute
// timestamps (checkRewrite). A non-empty payload is taken as the records
// section instead of a generated one: what Iter refuses, BuildBatch
// refuses, leaving dst as it was.
func FuzzRewriteBatch(f *testing.F) {
	i := uint64(0)
	for _, c := range rt.Codecs {
		for _, attrs := range []uint8{0, records.AttrTransactional, records.AttrLogAppendTime, records.AttrDeleteHorizon, records.AttrTransactional | records.AttrControl} {
			for _, mask := range []uint64{0, math.MaxUint64, 0xa5a5_a5a5_a5a5_a5a5} {
				i++
				f.Add(i, uint8(i%70), uint8(c), attrs, mask, int64(i%2)*1_800_000_000_000-int64(1-i%2), []byte(nil), int32(0))
			}
		}
	}
	// One record with non-canonical varints (a 2-byte length and offset
	// delta) and unused attributes set, which a rebase re-encodes or copies.
	odd := []byte{0x92, 0x00, 0x05, 0x02, 0x80, 0x00, 0x02, 'k', 0x02, 'v', 0x00}
	f.Add(uint64(1), uint8(1), uint8(0), uint8(0), uint64(1), int64(1_800_000_000_000), odd, int32(3))
	f.Add(uint64(1), uint8(1), uint8(0), uint8(0), uint64(1), int64(-1), odd, int32(3))
	e := new(records.Encoder)
	it := new(records.Iter)
	f.Fuzz(func(t *testing.T, seed uint64, n, codec, attrs uint8, mask uint64, horizon int64, payload []byte, last int32) {
		rnd := rand.New(rand.NewPCG(seed, seed>>32))
		c := rt.Codecs[int(codec)%len(rt.Codecs)]
		at := int16(attrs) & (records.AttrTransactional | records.AttrLogAppendTime | records.AttrDeleteHorizon | records.AttrControl)
		if horizon < 0 {
			horizon = records.NoHorizon
		}
		var in []byte
		if len(payload) > 0 {
			in = rt.Batch{Payload: payload, NumRecords: rt.Int32(int32(n)), CodecID: rt.Int16(c.ID()), Attributes: at}.Bytes()
			binary.BigEndian.PutUint32(in[offLastOffsetDelta:], uint32(last))
			rt.FixCRC(in)
		} else {
			in = genBatch(rnd, c, int(n), at)
		}
		keep := keepMask(mask)
		resetErr := it.Reset(in, rewriteLimit)
		valid := resetErr == nil
		if valid {
			for it.Next() {
			}
			valid = it.Err() == nil
		}
		if len(payload) == 0 && !valid {
			t.Fatalf("a generated batch is refused: %v, %v", resetErr, it.Err())
		}
		out, err := BuildBatch([]byte("prefix"), e, it, keep, horizon)
		switch {
		case !valid && err == nil:
			t.Fatal("BuildBatch rewrote a batch Iter refuses")
		case !valid && string(out) != "prefix":
			t.Fatalf("a refused rewrite left %q", out)
		case !valid:
			return
		case err != nil:
			t.Fatalf("BuildBatch: %v", err)
		}
		checkRewrite(t, in, out[6:], keep, horizon)
	})
}

// BenchmarkBuildBatch: the log cleaner's rewrite of a batch of 100 keyed
// 1 KiB text records keeping every other one, per codec, without and with
// a new delete horizon (which re-encodes every kept record's timestamp
// delta). bytes/s counts the input's uncompressed records.
func BenchmarkBuildBatch(b *testing.B) {
	recs := rt.Text(100, 1024)
	raw := int64(len(rt.EncodeRecords(recs)))
	for _, c := range rt.Codecs {
		in := rt.Batch{Codec: c, Records: recs, FirstTS: 1_700_000_000_000}.Bytes()
		for _, hz := range []int64{records.NoHorizon, 1_800_000_000_000} {
			name := fmt.Sprintf("%s/horizon=%v", c, hz != records.NoHorizon)
			b.Run(name, func(b *testing.B) {
				e, it := records.AcquireEncoder(), records.AcquireIter()
				defer e.Release()
				defer it.Release()
				keep := keepMask(0x5555_5555_5555_5555)
				var out []byte
				b.SetBytes(raw)
				b.ReportAllocs()
				for b.Loop() {
					if err := it.Reset(in, rewriteLimit); err != nil {
						b.Fatal(err)
					}
					var err error
					if out, err = BuildBatch(out[:0], e, it, keep, hz); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

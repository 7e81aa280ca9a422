package records

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	rt "github.com/kaas-dev/kaas/volume/records/recordstest"
)

const testLimit = 1 << 20

// validBatches are batches real clients write, for every codec.
func validBatches(t testing.TB) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	withHeaders := rt.Values("a", "", "c")
	withHeaders[0].Headers = []kmsg.Header{{Key: "h", Value: []byte("v")}, {Key: "", Value: nil}}
	withHeaders[1].Key = []byte{}
	withHeaders[2].Value = nil
	for _, c := range rt.Codecs {
		out[c.String()+"/one"] = rt.Batch{Codec: c, Records: rt.Values("a")}.Bytes()
		out[c.String()+"/headers, empty and null fields"] = rt.Batch{Codec: c, Records: withHeaders}.Bytes()
		out[c.String()+"/100 text records"] = rt.Batch{Codec: c, Records: rt.Text(100, 1024), FirstTS: 1700000000000}.Bytes()
		out[c.String()+"/transaction marker"] = rt.Batch{Codec: c, Attributes: 0x30, Records: []rt.Record{{Key: []byte{0, 0, 0, 1}, Value: []byte{0, 0, 0, 0, 0, 7}}}}.Bytes()
		out[c.String()+"/log append time"] = rt.Batch{Codec: c, Attributes: 0x08, Records: rt.Values("a", "b")}.Bytes()
	}
	raw := rt.EncodeRecords(rt.Text(50, 300))
	out["snappy-xerial/small chunks"] = rt.Batch{Codec: rt.SnappyXerial, Payload: rt.Xerial(raw, 100), NumRecords: rt.Int32(50)}.Bytes()
	// franz-go's own compressor, as its producer uses it.
	for _, cc := range []kgo.CompressionCodec{kgo.GzipCompression(), kgo.SnappyCompression(), kgo.Lz4Compression(), kgo.ZstdCompression()} {
		comp, err := kgo.DefaultCompressor(cc)
		if err != nil {
			t.Fatal(err)
		}
		payload, codec := comp.Compress(new(bytes.Buffer), raw)
		b := rt.Batch{Payload: append([]byte(nil), payload...), NumRecords: rt.Int32(50), CodecID: rt.Int16(int16(codec))}.Bytes()
		out["franz-go/"+[]string{"", "gzip", "snappy", "lz4", "zstd"}[codec]] = b
	}
	return out
}

func TestValidateAccepts(t *testing.T) {
	v := Acquire()
	defer v.Release()
	for name, b := range validBatches(t) {
		if err := v.Validate(b, testLimit); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if err := franzDecodes(b); err != nil {
			t.Errorf("%s: franz-go cannot decode a batch the test calls valid: %v", name, err)
		}
	}
}

// TestValidateRefuses: every poison batch, every codec, is refused with
// the right kind of error and a message naming the fault.
func TestValidateRefuses(t *testing.T) {
	v := Acquire()
	defer v.Release()
	want := map[rt.Want]error{rt.Corrupt: ErrCorrupt, rt.Invalid: ErrInvalid, rt.TooLarge: ErrTooLarge}
	for _, tc := range rt.Poison(testLimit) {
		err := v.Validate(tc.Batch, testLimit)
		if !errors.Is(err, want[tc.Want]) {
			t.Errorf("%s: %v, want %s", tc.Name, err, tc.Want)
			continue
		}
		// The same Validator must go on working after a refusal.
		if err := v.Validate(rt.Batch{Codec: tc.Codec, Records: rt.Values("a", "b")}.Bytes(), testLimit); err != nil {
			t.Errorf("%s: a valid batch after it: %v", tc.Name, err)
		}
	}
}

// TestValidateMessages: messages say which record and what.
func TestValidateMessages(t *testing.T) {
	v := Acquire()
	defer v.Release()
	tests := []struct {
		batch []byte
		want  string
	}{
		{rt.Batch{Raw: rt.Raw(rt.Good(0, "a"), rt.Good(1, "b"), rt.Good(2, "c"), rt.Good(5, "d")), NumRecords: rt.Int32(4)}.Bytes(), "record 3: offset delta 5, want 3"},
		{rt.Batch{Codec: rt.Zstd, Raw: rt.Raw(rt.Good(0, "a"), rt.Good(0, "b")), NumRecords: rt.Int32(2)}.Bytes(), "record 1: offset delta 0, want 1"},
		{rt.Batch{Records: rt.Values("a"), CodecID: rt.Int16(5)}.Bytes(), "compression codec 5 does not exist"},
		{rt.Batch{Raw: rt.Raw(rt.Good(0, "a"), rt.Good(1, "b")), NumRecords: rt.Int32(3)}.Bytes(), "record 2: length"},
		{rt.Batch{Raw: append(rt.Raw(rt.Good(0, "a")), 1, 2), NumRecords: rt.Int32(1)}.Bytes(), "bytes after the last of 1 records"},
		{rt.Batch{Raw: rt.Raw(rt.RawRecord{KeyLen: -1, ValueLen: -1, HeaderCount: 1, Headers: []byte{1, 2, 3}}), NumRecords: rt.Int32(1)}.Bytes(), "record 0: header 0: key length -1"},
	}
	for _, tc := range tests {
		if err := v.Validate(tc.batch, testLimit); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want it to say %q", err, tc.want)
		}
	}
}

// TestValidateBounds: the limit holds for every codec whatever the
// records claim, and a zstd window past ZstdMaxWindow is refused before
// it is allocated.
func TestValidateBounds(t *testing.T) {
	v := Acquire()
	defer v.Release()
	big := rt.EncodeRecords([]rt.Record{{Value: make([]byte, 64<<10)}})
	for _, c := range rt.Codecs {
		b := rt.Batch{Codec: c, Raw: big, NumRecords: rt.Int32(1)}.Bytes()
		// Uncompressed records are bounded by the request, not the limit.
		if err := v.Validate(b, 64<<10); c != rt.None && !errors.Is(err, ErrTooLarge) {
			t.Errorf("%s: 64 KiB of records under a 64 KiB limit: %v", c, err)
		}
		if err := v.Validate(b, 65<<10); err != nil {
			t.Errorf("%s: under a 65 KiB limit: %v", c, err)
		}
	}
	// A zstd frame header declaring a 1 GiB window, then nothing.
	frame := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 0xa8}
	b := rt.Batch{Codec: rt.Zstd, Payload: frame, NumRecords: rt.Int32(1)}.Bytes()
	if err := v.Validate(b, testLimit); !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrCorrupt) {
		t.Errorf("zstd 1 GiB window: %v", err)
	}
}

func TestFirstAtOrAfter(t *testing.T) {
	v := Acquire()
	defer v.Release()
	recs := rt.Values("a", "b", "c", "d")
	for i, d := range []int64{0, 10, 40, 20} {
		recs[i].TimestampDelta = d
	}
	tests := []struct {
		ts     int64
		delta  int32
		at     int64
		ok     bool
		append bool
	}{
		{0, 0, 1000, true, false},
		{1000, 0, 1000, true, false},
		{1001, 1, 1010, true, false},
		{1015, 2, 1040, true, false},
		{1040, 2, 1040, true, false},
		{1041, 0, 0, false, false},
		{1, 0, 9999, true, true},
		{9999, 0, 9999, true, true},
		{10000, 0, 0, false, true},
	}
	for _, c := range rt.Codecs {
		for _, tc := range tests {
			bt := rt.Batch{Codec: c, Records: recs, FirstTS: 1000}
			if tc.append {
				bt.Attributes, bt.MaxTS = 0x08, rt.Int64(9999)
			}
			d, at, ok, err := v.FirstAtOrAfter(bt.Bytes(), tc.ts, testLimit)
			if err != nil || ok != tc.ok || (ok && (d != tc.delta || at != tc.at)) {
				t.Errorf("%s, log append time %v: FirstAtOrAfter(%d) = %d, %d, %v, %v; want %d, %d, %v", c, tc.append, tc.ts, d, at, ok, err, tc.delta, tc.at, tc.ok)
			}
		}
	}
}

// TestValidateAllocs: a warm Validator allocates nothing, for every codec.
func TestValidateAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool drops items")
	}
	v := new(Validator)
	for _, c := range rt.Codecs {
		b := rt.Batch{Codec: c, Records: rt.Text(100, 1024)}.Bytes()
		if err := v.Validate(b, testLimit); err != nil {
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(20, func() { _ = v.Validate(b, testLimit) }); n != 0 {
			t.Errorf("%s: %.1f allocations per batch", c, n)
		}
	}
}

// TestNullKey: inside Each's fn, NullKey tells the record's null key (-1)
// from an empty or present one, for every codec.
func TestNullKey(t *testing.T) {
	keys := [][]byte{[]byte("k"), nil, {}, nil, []byte("key")}
	want := []bool{false, true, false, true, false}
	recs := make([]rt.Record, len(keys))
	for i, k := range keys {
		recs[i] = rt.Record{OffsetDelta: int32(i), TimestampDelta: int64(i), Key: k, Value: []byte("v")}
	}
	v := new(Validator)
	for _, c := range rt.Codecs {
		var got []bool
		err := v.Each(rt.Batch{Codec: c, Records: recs}.Bytes(), testLimit, func(int32, int64) bool {
			got = append(got, v.NullKey())
			return true
		})
		if err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: null keys %v, want %v", c, got, want)
		}
	}
}

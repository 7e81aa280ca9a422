package recordstest

import (
	"encoding/binary"
	"math/rand/v2"
)

// Want is the kind of refusal a poison batch must get.
type Want int

const (
	// Corrupt: the bytes cannot be decoded at all (unknown codec, a
	// broken or truncated compressed stream): CORRUPT_MESSAGE.
	Corrupt Want = iota + 1
	// Invalid: the records decode but break the record format (lengths,
	// varints, offset deltas, headers, count): INVALID_RECORD, as Kafka's
	// DefaultRecord and LogValidator answer.
	Invalid
	// TooLarge: the records inflate past the decompression bound:
	// MESSAGE_TOO_LARGE.
	TooLarge
)

func (w Want) String() string {
	return [...]string{"accepted", "corrupt", "invalid", "too large"}[w]
}

// Case is one batch a validator must refuse.
type Case struct {
	Name  string
	Codec Codec
	Batch []byte
	Want  Want
}

// RawRecord encodes one record field by field, without checking anything:
// lengths are written as given. Length 0 means the true body length.
type RawRecord struct {
	Length         int64
	TimestampDelta int64
	OffsetDelta    int64
	KeyLen         int64 // -1 null
	Key            []byte
	ValueLen       int64
	Value          []byte
	HeaderCount    int64
	Headers        []byte // encoded headers, as they should follow the count
	Extra          []byte // bytes inside the record after the headers
}

// Good returns a well-formed RawRecord with offset delta i.
func Good(i int, value string) RawRecord {
	return RawRecord{TimestampDelta: int64(i), OffsetDelta: int64(i), KeyLen: -1, ValueLen: int64(len(value)), Value: []byte(value)}
}

// Append encodes r onto dst.
func (r RawRecord) Append(dst []byte) []byte {
	var body []byte
	body = append(body, 0) // attributes
	body = binary.AppendVarint(body, r.TimestampDelta)
	body = binary.AppendVarint(body, r.OffsetDelta)
	body = binary.AppendVarint(body, r.KeyLen)
	body = append(body, r.Key...)
	body = binary.AppendVarint(body, r.ValueLen)
	body = append(body, r.Value...)
	body = binary.AppendVarint(body, r.HeaderCount)
	body = append(body, r.Headers...)
	body = append(body, r.Extra...)
	length := r.Length
	if length == 0 {
		length = int64(len(body))
	}
	dst = binary.AppendVarint(dst, length)
	return append(dst, body...)
}

// Raw encodes records one after the other.
func Raw(recs ...RawRecord) []byte {
	var out []byte
	for _, r := range recs {
		out = r.Append(out)
	}
	return out
}

// header encodes one record header.
func header(keyLen int64, key string, valueLen int64, value string) []byte {
	b := binary.AppendVarint(nil, keyLen)
	b = append(b, key...)
	b = binary.AppendVarint(b, valueLen)
	return append(b, value...)
}

// Poison lists batches every validator must refuse, for each codec, with
// what they must get. limit is the decompression bound the validator is
// given; the bombs are sized from it.
func Poison(limit int) []Case {
	var out []Case
	add := func(name string, c Codec, b Batch, want Want) {
		b.Codec = c
		out = append(out, Case{Name: c.String() + "/" + name, Codec: c, Batch: b.Bytes(), Want: want})
	}
	n := Int32
	for _, c := range Codecs {
		// Record format: the records decompress fine but are wrong.
		add("repeated offset deltas", c, Batch{Raw: Raw(Good(0, "a"), Good(0, "b")), NumRecords: n(2)}, Invalid)
		add("offset deltas out of order", c, Batch{Raw: Raw(Good(1, "a"), Good(0, "b")), NumRecords: n(2)}, Invalid)
		add("offset deltas from 1", c, Batch{Raw: Raw(Good(1, "a"), Good(2, "b")), NumRecords: n(2)}, Invalid)
		add("varint never ends", c, Batch{Raw: []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, NumRecords: n(1)}, Invalid)
		add("record length past the end", c, Batch{Raw: Raw(RawRecord{Length: 1000, KeyLen: -1, ValueLen: 1, Value: []byte("a")}), NumRecords: n(1)}, Invalid)
		add("record length zero", c, Batch{Raw: append(Raw(Good(0, "a")), 0), NumRecords: n(2)}, Invalid)
		add("record length negative", c, Batch{Raw: Raw(RawRecord{Length: -2048, KeyLen: -1, ValueLen: 1, Value: []byte("a")}), NumRecords: n(1)}, Invalid)
		add("record longer than its fields", c, Batch{Raw: Raw(RawRecord{KeyLen: -1, ValueLen: 1, Value: []byte("a"), Extra: []byte{0}}), NumRecords: n(1)}, Invalid)
		add("record shorter than its fields", c, Batch{Raw: func() []byte {
			r := Raw(Good(0, "abc"), Good(1, "d"))
			r[0] -= 2 // zigzag: length - 1
			return r
		}(), NumRecords: n(2)}, Invalid)
		add("key length -2", c, Batch{Raw: Raw(RawRecord{KeyLen: -2, ValueLen: 1, Value: []byte("a")}), NumRecords: n(1)}, Invalid)
		add("key past the record", c, Batch{Raw: Raw(RawRecord{KeyLen: 50, Key: []byte("k"), ValueLen: -1}), NumRecords: n(1)}, Invalid)
		add("value length -3", c, Batch{Raw: Raw(RawRecord{KeyLen: -1, ValueLen: -3}), NumRecords: n(1)}, Invalid)
		add("negative header count", c, Batch{Raw: Raw(RawRecord{KeyLen: -1, ValueLen: -1, HeaderCount: -1}), NumRecords: n(1)}, Invalid)
		add("header count past the record", c, Batch{Raw: Raw(RawRecord{KeyLen: -1, ValueLen: -1, HeaderCount: 1 << 20}), NumRecords: n(1)}, Invalid)
		add("null header key", c, Batch{Raw: Raw(RawRecord{KeyLen: -1, ValueLen: -1, HeaderCount: 1, Headers: header(-1, "", 1, "v")}), NumRecords: n(1)}, Invalid)
		add("header value length -2", c, Batch{Raw: Raw(RawRecord{KeyLen: -1, ValueLen: -1, HeaderCount: 1, Headers: header(1, "k", -2, "")}), NumRecords: n(1)}, Invalid)
		add("bytes after the last record", c, Batch{Raw: append(Raw(Good(0, "a")), 7, 7, 7), NumRecords: n(1)}, Invalid)
		add("fewer records than the count", c, Batch{Raw: Raw(Good(0, "a"), Good(1, "b")), NumRecords: n(3)}, Invalid)
		add("empty records section", c, Batch{Raw: []byte{}, NumRecords: n(1)}, Invalid)
		add("control batch without a control key", c, Batch{Attributes: 0x30, Records: Values("v")}, Invalid)
		if c == None {
			for _, id := range []int16{5, 6, 7} {
				add("codec "+string(rune('0'+id)), c, Batch{Records: Values("a", "b"), CodecID: Int16(id)}, Corrupt)
			}
			continue
		}
		// The compressed stream itself is broken.
		rng := rand.New(rand.NewPCG(uint64(c), 42))
		junk := make([]byte, 200)
		for i := range junk {
			junk[i] = byte(rng.Uint32())
		}
		if c == Snappy {
			junk[0] = 100 // a raw block's decoded length: small, so decoding fails, not the limit
		}
		add("random bytes", c, Batch{Payload: junk, NumRecords: n(2)}, Corrupt)
		whole := Compress(c, EncodeRecords(Text(20, 200)))
		add("truncated stream", c, Batch{Payload: whole[:len(whole)/2], NumRecords: n(20)}, Corrupt)
		add("stream missing its last byte", c, Batch{Payload: whole[:len(whole)-1], NumRecords: n(20)}, Corrupt)
		add("junk after the stream", c, Batch{Payload: append(append([]byte(nil), whole...), junk[:16]...), NumRecords: n(20)}, Corrupt)
		// Bombs: well-formed records that inflate past the limit, in
		// many records each below it, and in one record above it.
		big := make([]byte, limit/4+1)
		var recs []Record
		for i := range 5 {
			recs = append(recs, Record{OffsetDelta: int32(i), TimestampDelta: int64(i), Value: big})
		}
		add("bomb of records", c, Batch{Records: recs}, TooLarge)
		add("bomb in one record", c, Batch{Records: []Record{{Value: make([]byte, limit+1)}}}, TooLarge)
	}
	return out
}

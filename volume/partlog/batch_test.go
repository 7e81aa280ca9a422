package partlog

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/kaas-dev/kaas/volume/partlog/partlogtest"
)

func TestValidateBatch(t *testing.T) {
	good := partlogtest.MakeBatch(3, 10, 1234, 7, 1, 40)
	h, err := ValidateBatch(good)
	if err != nil {
		t.Fatalf("ValidateBatch(good): %v", err)
	}
	want := BatchHeader{BaseOffset: 0, BatchLength: int32(len(good) - 12), PartitionLeaderEpoch: -1, Magic: 2, CRC: h.CRC,
		LastOffsetDelta: 2, FirstTimestamp: 1234, MaxTimestamp: 1234, ProducerID: 7, ProducerEpoch: 1, BaseSequence: 40, NumRecords: 3}
	if h != want {
		t.Fatalf("header = %+v, want %+v", h, want)
	}

	mutate := func(f func(b []byte) []byte) []byte {
		b := append([]byte(nil), good...)
		return f(b)
	}
	tests := []struct {
		name  string
		batch []byte
	}{
		{"empty", nil},
		{"short header", good[:BatchHeaderSize-1]},
		{"truncated", good[:len(good)-1]},
		{"trailing byte", append(append([]byte(nil), good...), 0)},
		{"magic 1", mutate(func(b []byte) []byte { b[offMagic] = 1; return b })},
		{"crc flipped", mutate(func(b []byte) []byte { b[offCRC] ^= 1; return b })},
		{"payload flipped", mutate(func(b []byte) []byte { b[len(b)-1] ^= 1; return b })},
		{"negative last offset delta", mutate(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[offLastOffsetDelta:], 0xffffffff)
			return b
		})},
		{"record count mismatch", mutate(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[offNumRecords:], 9)
			return b
		})},
		{"batch length too small", mutate(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[offBatchLength:], 10)
			return b
		})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ValidateBatch(tt.batch); !errors.Is(err, ErrCorruptBatch) {
				t.Fatalf("ValidateBatch = %v, want ErrCorruptBatch", err)
			}
		})
	}
}

func TestBatchHeaderAttributes(t *testing.T) {
	tests := []struct {
		attrs       int16
		compression int8
		txn, ctrl   bool
	}{
		{0, 0, false, false},
		{0x04, 4, false, false},
		{0x10, 0, true, false},
		{0x30, 0, true, true},
		{0x13, 3, true, false},
	}
	for _, tt := range tests {
		h := BatchHeader{Attributes: tt.attrs}
		if h.Compression() != tt.compression || h.IsTransactional() != tt.txn || h.IsControl() != tt.ctrl {
			t.Errorf("attrs %#x: compression %d txn %v control %v", tt.attrs, h.Compression(), h.IsTransactional(), h.IsControl())
		}
	}
}

func TestStampKeepsCRCValid(t *testing.T) {
	b := partlogtest.MakeBatch(2, 5, 1, -1, -1, -1)
	stampBatch(b, 1<<40, 17)
	h, err := ValidateBatch(b)
	if err != nil {
		t.Fatalf("stamped batch invalid: %v", err)
	}
	if h.BaseOffset != 1<<40 || h.PartitionLeaderEpoch != 17 {
		t.Fatalf("stamped header %+v", h)
	}
}

func TestSegmentNames(t *testing.T) {
	tests := []struct {
		name  string
		base  int64
		epoch int32
		ok    bool
	}{
		{"00000000000000000000-e0.log", 0, 0, true},
		{"00000000000000001234-e17.log", 1234, 17, true},
		{segmentStem(1<<62, 1<<30) + segmentExt, 1 << 62, 1 << 30, true},
		{"1234-e17.log", 0, 0, false},
		{"00000000000000001234-e17.index", 0, 0, false},
		{"00000000000000001234-e17.log.tmp", 0, 0, false},
		{"00000000000000001234-e017.log", 0, 0, false},
		{".00000000000000001234-e17.log.tmp-0123456789abcdef", 0, 0, false},
		{"manifest.json", 0, 0, false},
		{"manifest-e3.json", 0, 0, false},
	}
	for _, tt := range tests {
		base, epoch, ok := parseSegmentName(tt.name)
		if ok != tt.ok || (ok && (base != tt.base || epoch != tt.epoch)) {
			t.Errorf("parseSegmentName(%q) = %d, %d, %v; want %d, %d, %v", tt.name, base, epoch, ok, tt.base, tt.epoch, tt.ok)
		}
	}
}

func TestManifestNames(t *testing.T) {
	tests := []struct {
		name  string
		epoch int32
		ok    bool
	}{
		{"manifest-e0.json", 0, true},
		{"manifest-e17.json", 17, true},
		{manifestName(1<<31 - 1), 1<<31 - 1, true},
		{"manifest.json", 0, false},
		{"manifest-e017.json", 0, false},
		{"manifest-e-1.json", 0, false},
		{"manifest-e+1.json", 0, false},
		{"manifest-e1.json.tmp", 0, false},
		{"manifest-e1.jsonx", 0, false},
		{".manifest-e1.json.tmp-0123456789abcdef", 0, false},
		{"00000000000000001234-e17.log", 0, false},
	}
	for _, tt := range tests {
		epoch, ok := parseManifestName(tt.name)
		if ok != tt.ok || (ok && epoch != tt.epoch) {
			t.Errorf("parseManifestName(%q) = %d, %v; want %d, %v", tt.name, epoch, ok, tt.epoch, tt.ok)
		}
	}
}

func TestMakeBatchRecords(t *testing.T) {
	b := partlogtest.Make(partlogtest.Options{NumRecords: 4, ValueSize: 3, Timestamp: 100, TimestampStep: 10, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1})
	h, err := ValidateBatch(b)
	if err != nil {
		t.Fatal(err)
	}
	if h.FirstTimestamp != 100 || h.MaxTimestamp != 130 {
		t.Fatalf("timestamps %d..%d", h.FirstTimestamp, h.MaxTimestamp)
	}
	recs, err := partlogtest.Records(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 4 {
		t.Fatalf("%d records", len(recs))
	}
	for i, r := range recs {
		if r.OffsetDelta != int32(i) || len(r.Value) != 3 || r.Value[0] != byte(i) {
			t.Fatalf("record %d = %+v", i, r)
		}
	}
}

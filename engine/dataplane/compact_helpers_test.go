package dataplane

import (
	"encoding/binary"
	"testing"

	"github.com/kaas-dev/kaas/volume/partlog"
	"github.com/kaas-dev/kaas/volume/records"
	"github.com/kaas-dev/kaas/volume/records/recordstest"
)

// Stored batches for the cleaner's tests, built as producers and the
// marker path write them.

// kv is one record: a nil key is keyless, a nil value a tombstone.
type kv struct{ key, value []byte }

func rec(key, value string) kv { return kv{key: []byte(key), value: []byte(value)} }
func tomb(key string) kv       { return kv{key: []byte(key)} }
func keyless(value string) kv  { return kv{value: []byte(value)} }

var testEncoder = records.AcquireEncoder()

// spec describes a data batch at base; pid 0 means no producer.
type spec struct {
	base  int64
	pid   int64
	epoch int16
	seq   int32
	txn   bool
	codec recordstest.Codec
	ts    int64
	recs  []kv
}

func (s spec) bytes() []byte {
	rs := make([]recordstest.Record, len(s.recs))
	for i, r := range s.recs {
		rs[i] = recordstest.Record{TimestampDelta: int64(i), OffsetDelta: int32(i), Key: r.key, Value: r.value}
	}
	var attrs int16
	if s.txn {
		attrs = records.AttrTransactional
	}
	batch := recordstest.Batch{Codec: s.codec, Attributes: attrs, Records: rs, FirstTS: s.ts, ProducerID: s.pid}
	if c := s.codec; c == recordstest.Gzip || c == recordstest.LZ4 || c == recordstest.Zstd {
		// A pooled encoder: a fresh zstd or gzip compressor per batch
		// would cost the model test most of its time.
		var err error
		if batch.Payload, err = testEncoder.Compress(nil, records.Codec(c.ID()), records.DefaultLevel, recordstest.EncodeRecords(rs)); err != nil {
			panic(err)
		}
	}
	b := batch.Bytes()
	binary.BigEndian.PutUint64(b[records.OffBaseOffset:], uint64(s.base))
	if s.pid > 0 {
		binary.BigEndian.PutUint16(b[records.OffProducerEpoch:], uint16(s.epoch))
		binary.BigEndian.PutUint32(b[records.OffBaseSequence:], uint32(s.seq))
	}
	recordstest.FixCRC(b)
	return b
}

// markerAt is a transaction marker at base, as WriteMarker appends it.
func markerAt(base, pid int64, epoch int16, commit bool, ts int64) []byte {
	b := appendMarkerBatch(nil, pid, epoch, commit, 0, ts)
	binary.BigEndian.PutUint64(b[records.OffBaseOffset:], uint64(base)) // outside the CRC
	return b
}

// sliceIter is a BatchIter over batches in memory.
type sliceIter struct {
	batches [][]byte
	i       int
}

func (s *sliceIter) Next() bool { s.i++; return s.i <= len(s.batches) }
func (s *sliceIter) Batch() (int64, []byte) {
	b := s.batches[s.i-1]
	return int64(binary.BigEndian.Uint64(b)), b
}
func (s *sliceIter) Err() error { return nil }

func iterOf(batches ...[]byte) *sliceIter { return &sliceIter{batches: batches} }

// outRec is a record read back from a batch, at its absolute offset.
type outRec struct {
	offset     int64
	ts         int64
	key, value []byte
	control    bool
}

// decode reads a stored batch back, checking it as a reader of the log
// would (stored header, CRC, records).
func decode(t testing.TB, b []byte) (partlog.BatchHeader, []outRec) {
	t.Helper()
	h, err := storedBatch(int64(binary.BigEndian.Uint64(b)), b)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	v := records.Acquire()
	err = v.ValidateStored(b, 1<<26)
	v.Release()
	if err != nil {
		t.Fatalf("decode batch at %d: %v", h.BaseOffset, err)
	}
	if h.NumRecords == 0 {
		return h, nil
	}
	it := records.AcquireIter()
	defer it.Release()
	if err := it.Reset(b, 1<<26); err != nil {
		t.Fatalf("decode batch at %d: %v", h.BaseOffset, err)
	}
	var out []outRec
	for it.Next() {
		r := it.Record()
		out = append(out, outRec{offset: h.BaseOffset + int64(r.OffsetDelta), ts: r.Timestamp,
			key: clone(r.Key), value: clone(r.Value), control: r.Control})
	}
	if err := it.Err(); err != nil {
		t.Fatalf("decode batch at %d: %v", h.BaseOffset, err)
	}
	return h, out
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

// mapOf builds a map over batches for the filter tests.
func mapOf(t testing.TB, budget int, firstDirty, end int64, aborted []AbortedTxn, batches ...[]byte) (*OffsetMap, MapResult) {
	t.Helper()
	m, err := NewOffsetMap(budget)
	if err != nil {
		t.Fatal(err)
	}
	res, err := BuildOffsetMap(m, iterOf(batches...), firstDirty, end, aborted, 1<<26)
	if err != nil {
		t.Fatal(err)
	}
	return m, res
}

// filterAll runs a filter over batches and returns its output, batch by batch.
func filterAll(t testing.TB, f *Filter, batches ...[]byte) ([][]byte, []Outcome) {
	t.Helper()
	var outs [][]byte
	var outcomes []Outcome
	for _, b := range batches {
		out, o, err := f.Batch(nil, int64(binary.BigEndian.Uint64(b)), b)
		if err != nil {
			t.Fatal(err)
		}
		outcomes = append(outcomes, o)
		if len(out) > 0 {
			outs = append(outs, out)
		}
	}
	return outs, outcomes
}

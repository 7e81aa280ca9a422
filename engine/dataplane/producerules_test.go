package dataplane

import (
	"context"
	"errors"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/memfs"
	"github.com/kaas-dev/kaas/volume/partlog"
	"github.com/kaas-dev/kaas/volume/records"
	rt "github.com/kaas-dev/kaas/volume/records/recordstest"
)

// ruleNow is the owner's clock in these tests.
var ruleNow = time.UnixMilli(1_700_000_000_000)

// openRulesPartition opens a partition whose clock stands at ruleNow, with
// rules and a max.message.bytes of maxBatch (0: the default).
func openRulesPartition(t testing.TB, rules ProduceRules, maxBatch int32) *Partition {
	t.Helper()
	fsys := memfs.New()
	if err := volume.MkdirAllSync(fsys, txnDir); err != nil {
		t.Fatal(err)
	}
	p, _, err := Open(fsys, txnDir, OpenOptions{Topic: "t", Rules: &rules,
		Log: partlog.Config{Epoch: 1, MaxBatchBytes: maxBatch, Logger: logr.Discard(), Now: func() time.Time { return ruleNow }},
		Now: func() time.Time { return ruleNow }, Logger: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// tsBatch is a batch whose records carry the given absolute timestamps.
func tsBatch(attrs int16, ts ...int64) []byte {
	recs := make([]rt.Record, len(ts))
	for i, v := range ts {
		recs[i] = rt.Record{OffsetDelta: int32(i), TimestampDelta: v - ts[0], Value: []byte("v")}
	}
	return rt.Batch{Records: recs, FirstTS: ts[0], Attributes: attrs}.Bytes()
}

// checkPrepare prepares batch on a partition with rules: with kind nil it
// must be accepted, else refused as a RecordsRefusedError of kind with the
// partition message msg and the record errors want.
func checkPrepare(t *testing.T, rules ProduceRules, batch []byte, kind error, msg string, want []RecordError) {
	t.Helper()
	p := openRulesPartition(t, rules, 0)
	c, err := partlog.CheckProduced(batch)
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Prepare(c, 1<<20)
	if kind == nil {
		if err != nil {
			t.Fatalf("refused: %v", err)
		}
		return
	}
	var refused *RecordsRefusedError
	if !errors.As(err, &refused) || !errors.Is(err, kind) {
		t.Fatalf("error %v, want a RecordsRefusedError of %v", err, kind)
	}
	if err.Error() != msg {
		t.Errorf("message\n got %q\nwant %q", err, msg)
	}
	if !reflect.DeepEqual(refused.Records, want) {
		t.Errorf("record errors\n got %v\nwant %v", refused.Records, want)
	}
}

// TestPrepareTimestamps: CreateTime records outside
// [now-before, now+after] refuse the batch with INVALID_TIMESTAMP and one
// record error each, worded as Kafka's LogValidator words them; -1 and
// LogAppendTime topics are never checked.
func TestPrepareTimestamps(t *testing.T) {
	now := ruleNow.UnixMilli()
	bounds := func(before, after int64) ProduceRules {
		r := NoProduceRules
		r.TimestampBefore, r.TimestampAfter = before, after
		return r
	}
	for _, tc := range []struct {
		name  string
		rules ProduceRules
		batch []byte
		want  []RecordError
	}{
		{"no bounds", NoProduceRules, tsBatch(0, 0, math.MaxInt64/2), nil},
		{"at the bounds", bounds(1000, 500), tsBatch(0, now-1000, now, now+500), nil},
		{"one too old", bounds(1000, 500), tsBatch(0, now, now-1001), []RecordError{
			{1, "Timestamp 1699999998999 of message with offset 1 is out of range. The timestamp should be within [1699999999000, 1700000000500]"}}},
		{"every bad record listed", bounds(1000, 500), tsBatch(0, now+501, now, now-5000), []RecordError{
			{0, "Timestamp 1700000000501 of message with offset 0 is out of range. The timestamp should be within [1699999999000, 1700000000500]"},
			{2, "Timestamp 1699999995000 of message with offset 2 is out of range. The timestamp should be within [1699999999000, 1700000000500]"}}},
		{"no timestamp", bounds(0, 0), tsBatch(0, -1), nil},
		{"after bound only", bounds(math.MaxInt64, 0), tsBatch(0, 0, now), nil},
		{"after bound only, future", bounds(math.MaxInt64, 0), tsBatch(0, now+1), []RecordError{
			{0, "Timestamp 1700000000001 of message with offset 0 is out of range. The timestamp should be within [-9223370336854775807, 1700000000000]"}}},
		{"LogAppendTime topic", ProduceRules{TimestampBefore: 0, TimestampAfter: 0, Codec: Producer}, tsBatch(0, 0), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var kind error
			if tc.want != nil {
				kind = ErrInvalidTimestamp
			}
			checkPrepare(t, tc.rules, tc.batch, kind, "One or more records have been rejected due to invalid timestamp", tc.want)
		})
	}
}

// TestPrepareRecompress: a batch of another codec than the topic's is
// stored with the topic's, records, offsets, timestamps and producer
// fields kept; a batch of the topic's codec, or any under producer, is
// stored as it came; max.message.bytes applies to the recompressed batch.
func TestPrepareRecompress(t *testing.T) {
	recs := rt.Text(40, 512)
	for _, tc := range []struct {
		name      string
		topic     records.Codec
		produced  rt.Codec
		wantCodec int8
		sameBytes bool
	}{
		{"producer keeps gzip", Producer, rt.Gzip, 1, true},
		{"zstd topic, none produced", records.CodecZstd, rt.None, 4, false},
		{"lz4 topic, snappy produced", records.CodecLZ4, rt.Snappy, 3, false},
		{"uncompressed topic, gzip produced", records.CodecNone, rt.Gzip, 0, false},
		{"snappy topic, xerial snappy produced", records.CodecSnappy, rt.SnappyXerial, 2, true},
		{"gzip topic, zstd produced", records.CodecGzip, rt.Zstd, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rules := NoProduceRules
			rules.Codec, rules.Level = tc.topic, records.DefaultLevel
			p := openRulesPartition(t, rules, 0)
			in := rt.Batch{Codec: tc.produced, Records: recs, FirstTS: 1000, ProducerID: 9}.Bytes()
			c, err := partlog.CheckProduced(in)
			if err != nil {
				t.Fatal(err)
			}
			out, err := p.Prepare(c, 1<<20)
			if err != nil {
				t.Fatalf("Prepare: %v", err)
			}
			if got := out.Header().Compression(); got != tc.wantCodec {
				t.Fatalf("stored codec %d, want %d", got, tc.wantCodec)
			}
			if same := &out.Bytes()[0] == &in[0]; same != tc.sameBytes {
				t.Fatalf("batch passed through as it came: %v, want %v", same, tc.sameBytes)
			}
			last, _, err := p.AppendChecked(out)
			if err != nil {
				t.Fatalf("append: %v", err)
			}
			if err := p.Sync(context.Background(), last); err != nil {
				t.Fatal(err)
			}
			stored, err := p.Log().Read(0, 1<<20, nil)
			if err != nil {
				t.Fatal(err)
			}
			v := records.Acquire()
			defer v.Release()
			want, _ := v.AppendRaw(nil, in, 1<<20)
			got, err := v.AppendRaw(nil, stored, 1<<20)
			if err != nil || string(got) != string(want) {
				t.Fatalf("stored records differ from the produced ones (%v)", err)
			}
			hi, _ := partlog.ParseBatchHeader(in)
			hs, _ := partlog.ParseBatchHeader(stored)
			if hs.ProducerID != hi.ProducerID || hs.BaseSequence != hi.BaseSequence || hs.FirstTimestamp != hi.FirstTimestamp ||
				hs.MaxTimestamp != hi.MaxTimestamp || hs.LastOffsetDelta != hi.LastOffsetDelta || hs.NumRecords != hi.NumRecords {
				t.Fatalf("header changed: stored %+v, produced %+v", hs, hi)
			}
		})
	}
	t.Run("max.message.bytes on the result", func(t *testing.T) {
		rules := NoProduceRules
		rules.Codec = records.CodecNone
		p := openRulesPartition(t, rules, 8<<10)
		in := rt.Batch{Codec: rt.Zstd, Records: recs}.Bytes() // ~1 KiB compressed, 20 KiB raw
		c, err := partlog.CheckProduced(in)
		if err != nil {
			t.Fatal(err)
		}
		out, err := p.Prepare(c, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := p.AppendChecked(out); !errors.Is(err, partlog.ErrBatchTooLarge) {
			t.Fatalf("append of a recompressed batch over max.message.bytes: %v", err)
		}
	})
}

// TestPrepareNoAllocs: with Kafka's defaults, and with timestamp bounds
// and required keys the records meet, the produce path's records check
// allocates nothing.
func TestPrepareNoAllocs(t *testing.T) {
	bounded := NoProduceRules
	bounded.TimestampBefore, bounded.TimestampAfter = 3600_000, 3600_000
	keys := NoProduceRules
	keys.RequireKeys = true
	both := bounded
	both.RequireKeys = true
	for name, rules := range map[string]ProduceRules{"defaults": NoProduceRules, "timestamp bounds": bounded, "keys required": keys, "keys and bounds": both} {
		t.Run(name, func(t *testing.T) {
			p := openRulesPartition(t, rules, 0)
			c, err := partlog.CheckProduced(rt.Batch{Records: rt.Text(100, 100), FirstTS: ruleNow.UnixMilli()}.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.Prepare(c, 1<<20); err != nil { // warm the pool
				t.Fatal(err)
			}
			if n := testing.AllocsPerRun(100, func() { _, _ = p.Prepare(c, 1<<20) }); n > 0 {
				t.Fatalf("%v allocations per Prepare", n)
			}
		})
	}
}

// keyBatch is a batch of codec whose records have the given keys (nil:
// null) and the timestamps ts (one each, or none: ruleNow).
func keyBatch(codec rt.Codec, keys [][]byte, ts ...int64) []byte {
	recs := make([]rt.Record, len(keys))
	first := ruleNow.UnixMilli()
	if len(ts) > 0 {
		first = ts[0]
	}
	for i, k := range keys {
		at := ruleNow.UnixMilli()
		if len(ts) > 0 {
			at = ts[i]
		}
		recs[i] = rt.Record{OffsetDelta: int32(i), TimestampDelta: at - first, Key: k, Value: []byte("v")}
	}
	return rt.Batch{Codec: codec, Records: recs, FirstTS: first}.Bytes()
}

// TestPrepareKeys: on a compacted topic (RequireKeys) a batch with a
// record whose key is null is refused whole with INVALID_RECORD, one record
// error per keyless record worded as Kafka's LogValidator words it, and
// Kafka's partition message listing the first three; an empty key is a
// key. A record both keyless and out of its timestamp bounds is listed for
// its key, and any timestamp error makes the batch INVALID_TIMESTAMP.
func TestPrepareKeys(t *testing.T) {
	now := ruleNow.UnixMilli()
	k := []byte("k")
	const keyless = "Compacted topic cannot accept message without key in topic partition t-0"
	compacted := NoProduceRules
	compacted.RequireKeys = true
	bounded := compacted
	bounded.TimestampBefore, bounded.TimestampAfter = 1000, 1000
	tooOld := "Timestamp 1699999990000 of message with offset 1 is out of range. The timestamp should be within [1699999999000, 1700000001000]"
	for _, tc := range []struct {
		name    string
		rules   ProduceRules
		batch   []byte
		wantErr error // nil: accepted
		want    []RecordError
		msg     string
	}{
		{"delete topic, keyless", NoProduceRules, keyBatch(rt.None, [][]byte{nil, nil}), nil, nil, ""},
		{"keyed", compacted, keyBatch(rt.None, [][]byte{k, k, []byte("other")}), nil, nil, ""},
		{"empty key", compacted, keyBatch(rt.None, [][]byte{{}, k}), nil, nil, ""},
		{"one keyless", compacted, keyBatch(rt.None, [][]byte{k, nil, k}), ErrInvalidRecord, []RecordError{{1, keyless}},
			"One or more records have been rejected due to 1 record errors in total, and only showing the first three errors at most: [RecordError(batchIndex=1, message='" + keyless + "')]"},
		{"four keyless, three shown", compacted, keyBatch(rt.Zstd, [][]byte{nil, nil, k, nil, nil}), ErrInvalidRecord,
			[]RecordError{{0, keyless}, {1, keyless}, {3, keyless}, {4, keyless}},
			"One or more records have been rejected due to 4 record errors in total, and only showing the first three errors at most: [RecordError(batchIndex=0, message='" + keyless + "'), RecordError(batchIndex=1, message='" + keyless + "'), RecordError(batchIndex=3, message='" + keyless + "')]"},
		{"gzip, keyless", compacted, keyBatch(rt.Gzip, [][]byte{nil}), ErrInvalidRecord, []RecordError{{0, keyless}},
			"One or more records have been rejected due to 1 record errors in total, and only showing the first three errors at most: [RecordError(batchIndex=0, message='" + keyless + "')]"},
		{"keyless in bounds", bounded, keyBatch(rt.None, [][]byte{nil}, now), ErrInvalidRecord, []RecordError{{0, keyless}},
			"One or more records have been rejected due to 1 record errors in total, and only showing the first three errors at most: [RecordError(batchIndex=0, message='" + keyless + "')]"},
		{"keyless and too old", bounded, keyBatch(rt.None, [][]byte{nil, k}, now-10000, now-10000), ErrInvalidTimestamp,
			[]RecordError{{0, keyless}, {1, tooOld}}, "One or more records have been rejected due to invalid timestamp"},
	} {
		t.Run(tc.name, func(t *testing.T) { checkPrepare(t, tc.rules, tc.batch, tc.wantErr, tc.msg, tc.want) })
	}
}

// BenchmarkPrepareRules is the produce path's records walk alone
// (Partition.Prepare, no append, no I/O) for a batch of 100 keyed 1 KiB
// records, per codec, with Kafka's defaults (the records check alone) and
// with the rules that make the walk look at each record: keys required
// (a compacted topic) and timestamp bounds. Compare the rows of one codec:
// the ratios are the rules' cost.
func BenchmarkPrepareRules(b *testing.B) {
	keys := NoProduceRules
	keys.RequireKeys = true
	bounded := NoProduceRules
	bounded.TimestampBefore, bounded.TimestampAfter = math.MaxInt64/2, math.MaxInt64/2
	recs := rt.Text(100, 1024)
	raw := int64(len(rt.EncodeRecords(recs)))
	for _, codec := range []rt.Codec{rt.None, rt.LZ4, rt.Zstd} {
		c, err := partlog.CheckProduced(rt.Batch{Codec: codec, Records: recs}.Bytes())
		if err != nil {
			b.Fatal(err)
		}
		for _, rc := range []struct {
			name  string
			rules ProduceRules
		}{{"defaults", NoProduceRules}, {"keys", keys}, {"bounds", bounded}} {
			b.Run(codec.String()+"/"+rc.name, func(b *testing.B) {
				p := openRulesPartition(b, rc.rules, 0)
				b.SetBytes(raw)
				b.ReportAllocs()
				for b.Loop() {
					if _, err := p.Prepare(c, 100<<20); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

package groupstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/volume/partlog"
)

func TestVarintLen(t *testing.T) {
	for _, v := range []int64{0, 1, -1, 63, 64, -64, -65, 8191, 8192, 1 << 20, -(1 << 20), math.MaxInt32, math.MinInt32, math.MaxInt64, math.MinInt64} {
		if got, want := varintLen(v), len(binary.AppendVarint(nil, v)); got != want {
			t.Errorf("varintLen(%d) = %d, want %d", v, got, want)
		}
	}
}

// TestBatchRoundTrip: encodeBatch writes what Kafka's own decoder (kmsg)
// reads, what partlog accepts, and what decodeBatch reads back, including
// tombstones, empty values and a nil key.
func TestBatchRoundTrip(t *testing.T) {
	cases := []struct {
		name string
		recs []Record
	}{
		{"one", []Record{put("k", "v")}},
		{"tombstone", []Record{tomb("gone")}},
		{"empty value is not a tombstone", []Record{{Key: []byte("e"), Value: []byte{}}}},
		{"nil key", []Record{{Value: []byte("v")}}},
		{"many", []Record{put("a", "1"), tomb("b"), put("c", string(bytes.Repeat([]byte("x"), 300))), put("a", "2")}},
		{"big key", []Record{put(string(bytes.Repeat([]byte("k"), 70000)), "v")}},
	}
	var buf []byte // reused across cases, as the store does
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			buf = encodeBatch(buf, tc.recs, 1234)
			if len(buf) != batchSize(tc.recs) {
				t.Fatalf("encoded %d bytes, batchSize says %d", len(buf), batchSize(tc.recs))
			}
			if _, err := partlog.ValidateBatch(buf); err != nil {
				t.Fatalf("partlog rejects the batch: %v", err)
			}
			var kb kmsg.RecordBatch
			if err := kb.ReadFrom(buf); err != nil {
				t.Fatalf("kmsg: %v", err)
			}
			if kb.NumRecords != int32(len(tc.recs)) || kb.ProducerID != -1 || kb.FirstTimestamp != 1234 {
				t.Fatalf("kmsg header %+v", kb)
			}
			rest := kb.Records
			for i, want := range tc.recs {
				var r kmsg.Record
				if err := r.ReadFrom(rest); err != nil {
					t.Fatalf("kmsg record %d: %v", i, err)
				}
				rest = rest[len(r.AppendTo(nil)):]
				if !bytes.Equal(r.Key, want.Key) || (r.Key == nil) != (want.Key == nil) ||
					!bytes.Equal(r.Value, want.Value) || (r.Value == nil) != (want.Value == nil) || r.OffsetDelta != int32(i) {
					t.Fatalf("kmsg record %d = %+v, want %+v", i, r, want)
				}
			}
			var got []Record
			var offs []int64
			err := decodeBatch(buf, func(off int64, k, v []byte) {
				got = append(got, Record{Key: k, Value: v})
				offs = append(offs, off)
			})
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range tc.recs {
				if !bytes.Equal(got[i].Key, want.Key) || (got[i].Value == nil) != (want.Value == nil) || !bytes.Equal(got[i].Value, want.Value) || offs[i] != int64(i) {
					t.Fatalf("decoded record %d = %+v at %d, want %+v", i, got[i], offs[i], want)
				}
			}
		})
	}
}

func TestDecodeBatchRejects(t *testing.T) {
	good := encodeBatch(nil, []Record{put("a", "1"), put("b", "2")}, 1)
	flip := bytes.Clone(good)
	flip[len(flip)-1] ^= 1
	if err := decodeBatch(flip, func(int64, []byte, []byte) {}); !errors.Is(err, partlog.ErrCorruptBatch) {
		t.Fatalf("flipped byte: %v, want a CRC error", err)
	}
	if err := decodeBatch(good[:len(good)-1], func(int64, []byte, []byte) {}); err == nil {
		t.Fatal("short batch accepted")
	}
}

func BenchmarkEncodeBatch(b *testing.B) {
	recs := []Record{put("group-0042/topic-7/partition-3", string(bytes.Repeat([]byte("v"), 64)))}
	buf := encodeBatch(nil, recs, 1)
	b.ReportAllocs()
	for b.Loop() {
		buf = encodeBatch(buf, recs, 1)
	}
}

package partlog

import (
	"testing"

	rt "github.com/kaas-dev/kaas/volume/records/recordstest"
)

// TestOffsetForTimestampRecords: the answer is the first record at or
// after the target inside the batch the index finds, for compressed
// batches too; a batch whose max timestamp no record bears is passed
// over, as Kafka's searchForTimestamp does; a stored batch that cannot be
// decoded answers its base offset and max timestamp.
func TestOffsetForTimestampRecords(t *testing.T) {
	l := mustOpen(t, newMemFS(t), testConfig(t, 1, newFakeClock()))
	defer l.Close()
	recs := func(deltas ...int64) []rt.Record {
		out := make([]rt.Record, len(deltas))
		for i, d := range deltas {
			out[i] = rt.Record{OffsetDelta: int32(i), TimestampDelta: d, Value: []byte("v")}
		}
		return out
	}
	for _, b := range []rt.Batch{
		{Codec: rt.Gzip, Records: recs(0, 10, 20), FirstTS: 100},                             // 0-2 at 100, 110, 120
		{Codec: rt.Zstd, Records: recs(0, 1), FirstTS: 200, MaxTS: rt.Int64(500)},            // 3-4 at 200, 201, max says 500
		{Codec: rt.Gzip, Payload: []byte("not gzip"), NumRecords: rt.Int32(2), FirstTS: 600}, // 5-6, undecodable
		{Records: recs(0, 10), FirstTS: 700},                                                 // 7-8 at 700, 710
	} {
		mustAppend(t, l, b.Bytes())
	}
	mustSync(t, l, l.LogEndOffset()-1)
	checkOffsetsForTimestamp(t, l, []tsAnswer{
		{105, 1, 110},
		{120, 2, 120},
		{121, 3, 200},
		{202, 5, 600},
		{650, 7, 700},
		{705, 8, 710},
	})
	if _, _, ok := l.OffsetForTimestamp(711); ok {
		t.Error("OffsetForTimestamp(711) found a record")
	}
}

// tsAnswer is what ListOffsets by timestamp must answer for ts.
type tsAnswer struct{ ts, offset, at int64 }

// checkOffsetsForTimestamp checks l's OffsetForTimestamp answers.
func checkOffsetsForTimestamp(t testing.TB, l *Log, want []tsAnswer) {
	t.Helper()
	for _, tc := range want {
		if off, at, ok := l.OffsetForTimestamp(tc.ts); !ok || off != tc.offset || at != tc.at {
			t.Errorf("OffsetForTimestamp(%d) = %d, %d, %v; want %d, %d", tc.ts, off, at, ok, tc.offset, tc.at)
		}
	}
}

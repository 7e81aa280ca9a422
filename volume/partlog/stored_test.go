package partlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/kaas-dev/kaas/volume"
	rt "github.com/kaas-dev/kaas/volume/records/recordstest"
)

// storedBatch is a batch as the log cleaner leaves it: base offset base,
// last offset delta last, records only at the given offset deltas (none:
// a batch kept empty), record d stamped ts+d with value "v<offset>".
func storedBatch(base int64, last int32, ts int64, deltas ...int32) []byte {
	recs := make([]rt.Record, len(deltas))
	for i, d := range deltas {
		recs[i] = rt.Record{OffsetDelta: d, TimestampDelta: int64(d), Key: []byte("k"), Value: fmt.Appendf(nil, "v%d", base+int64(d))}
	}
	bt := rt.Batch{Records: recs, FirstTS: ts}
	if len(deltas) == 0 {
		bt.Payload, bt.MaxTS = []byte{}, &ts
	}
	b := bt.Bytes()
	binary.BigEndian.PutUint32(b[offLastOffsetDelta:], uint32(last))
	rt.FixCRC(b)
	stampBatch(b, base, 1)
	return b
}

// handSegment is a sealed segment written by hand: its batches, the
// offset its manifest entry ends at (the next segment's base), which in a
// cleaned segment may lie past its last batch, and its cleaned generation
// (0: a plain segment).
type handSegment struct {
	base, end int64
	gen       int64
	batches   [][]byte
}

// writeHandLog writes a partition in dir as a writer of epoch would have
// left it: the fence, every segment's files with the indexes the writer
// would have built (noteBatch), and its manifest naming them all sealed.
// Open at a later epoch takes it over. It returns the manifest.
func writeHandLog(t testing.TB, fsys volume.FS, dir string, epoch int32, logStart int64, segs []handSegment) manifest {
	t.Helper()
	if err := writeFence(fsys, dir, epoch, true); err != nil {
		t.Fatal(err)
	}
	m := manifest{Version: manifestVersion, WriterEpoch: epoch, LogStartOffset: logStart,
		Epochs: []EpochEntry{{Epoch: epoch, StartOffset: segs[0].base}}}
	for _, hs := range segs {
		s := &segment{base: hs.base, maxTS: noTS}
		var data []byte
		for _, b := range hs.batches {
			h, err := ParseStoredBatchHeader(b)
			if err != nil {
				t.Fatal(err)
			}
			s.noteBatch(int64(len(data)), h.BaseOffset, h.LastOffset(), h.MaxTimestamp, 512)
			data = append(data, b...)
		}
		s.addTimeEntry()
		logPath, indexPath, timePath := segID{base: hs.base, epoch: epoch, gen: hs.gen}.paths(dir)
		for _, f := range []struct {
			name string
			data []byte
		}{{logPath, data}, {indexPath, encodeOffsetEntries(nil, s.offsets)}, {timePath, encodeTimeEntries(nil, s.times)}} {
			if err := volume.WriteFileAtomic(fsys, f.name, f.data); err != nil {
				t.Fatal(err)
			}
		}
		m.Segments = append(m.Segments, manifestSegment{Base: hs.base, Epoch: epoch, Gen: hs.gen, Sealed: true, EndOffset: hs.end,
			Size: int64(len(data)), MaxTimestamp: s.maxTS.ts, MaxTimestampOffset: s.maxTS.last})
	}
	if err := writeManifest(fsys, dir, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// batchAt reads the batch Read returns first for offset and checks that it
// is a whole, valid batch.
func batchAt(t testing.TB, l *Log, offset int64) (BatchHeader, bool) {
	t.Helper()
	b, err := l.Read(offset, 1, nil)
	if err != nil {
		t.Fatalf("Read(%d): %v", offset, err)
	}
	if len(b) == 0 {
		return BatchHeader{}, false
	}
	h, err := ParseStoredBatchHeader(b)
	if err != nil || h.Size() != int64(len(b)) {
		t.Fatalf("Read(%d): %d bytes, header %+v, %v", offset, len(b), h, err)
	}
	return h, true
}

func TestParseStoredBatchHeader(t *testing.T) {
	tests := []struct {
		name           string
		batch          []byte
		produced, read bool // accepted by ParseBatchHeader, ParseStoredBatchHeader
	}{
		{"dense", storedBatch(0, 2, 100, 0, 1, 2), true, true},
		{"sparse", storedBatch(0, 9, 100, 1, 4), false, true},
		{"one record at the last offset", storedBatch(0, 3, 100, 3), false, true},
		{"empty", storedBatch(0, 3, 100), false, true},
		{"empty, last offset delta 0", storedBatch(0, 0, 100), false, true},
		{"more records than offsets", storedBatch(0, 1, 100, 0, 1, 2), false, false},
		{"negative count", func() []byte {
			b := storedBatch(0, 1, 100)
			binary.BigEndian.PutUint32(b[offNumRecords:], 0xffffffff)
			return b
		}(), false, false},
		{"negative last offset delta", storedBatch(0, -1, 100), false, false},
	}
	for _, tt := range tests {
		if _, err := ParseBatchHeader(tt.batch); (err == nil) != tt.produced || (err != nil && !errors.Is(err, ErrCorruptBatch)) {
			t.Errorf("%s: ParseBatchHeader: %v, want accepted %v", tt.name, err, tt.produced)
		}
		if _, err := ParseStoredBatchHeader(tt.batch); (err == nil) != tt.read || (err != nil && !errors.Is(err, ErrCorruptBatch)) {
			t.Errorf("%s: ParseStoredBatchHeader: %v, want accepted %v", tt.name, err, tt.read)
		}
	}
	// An append stays as strict as before: a cleaned batch is no produce.
	l := mustOpen(t, newMemFS(t), testConfig(t, 1, newFakeClock()))
	defer l.Close()
	for _, b := range [][]byte{storedBatch(0, 9, 100, 1, 4), storedBatch(0, 3, 100)} {
		if _, err := l.Append(b); !errors.Is(err, ErrCorruptBatch) {
			t.Errorf("Append of a cleaned batch: %v, want ErrCorruptBatch", err)
		}
	}
}

// TestReadStoredBatches: batches that hold fewer records than offsets, or
// none, are read, scanned, sent and searched by timestamp like any other;
// ListOffsets answers a record's real offset, never a dropped one's.
func TestReadStoredBatches(t *testing.T) {
	fsys := newMemFS(t)
	writeHandLog(t, fsys, testDir, 1, 0, []handSegment{
		{base: 0, end: 12, batches: [][]byte{
			storedBatch(0, 4, 1000, 1, 3), // 0-4: records at 1 (1001), 3 (1003)
			storedBatch(5, 2, 1005),       // 5-7: empty
			storedBatch(8, 1, 1008, 0, 1), // 8-9: dense
			storedBatch(10, 1, 1010, 1),   // 10-11: only 11 (1011)
		}},
		{base: 12, end: 14, batches: [][]byte{storedBatch(12, 1, 1012, 0, 1)}},
	})
	l := mustOpen(t, fsys, testConfig(t, 2, newFakeClock()))
	defer l.Close()
	if hw := l.HighWatermark(); hw != 14 {
		t.Fatalf("high watermark %d, want 14", hw)
	}
	wantBase := []int64{0, 0, 0, 0, 0, 5, 5, 5, 8, 8, 10, 10, 12, 12}
	for off, want := range wantBase {
		if h, ok := batchAt(t, l, int64(off)); !ok || h.BaseOffset != want {
			t.Errorf("Read(%d): batch at %d, want %d", off, h.BaseOffset, want)
		}
		ref, err := l.ReadRef(int64(off), 1)
		if err != nil || ref.Len == 0 {
			t.Fatalf("ReadRef(%d): %+v, %v", off, ref, err)
		}
		hdr := make([]byte, BatchHeaderSize)
		if err := readFullAt(ref.File, hdr, ref.Pos); err != nil {
			t.Fatal(err)
		}
		if h, _ := ParseStoredBatchHeader(hdr); h.BaseOffset != want || h.Size() != int64(ref.Len) {
			t.Errorf("ReadRef(%d): batch at %d of %d bytes, Ref of %d", off, h.BaseOffset, h.Size(), ref.Len)
		}
		ref.Release()
	}
	var scanned []int64
	if err := l.Scan(0, func(h BatchHeader) error { scanned = append(scanned, h.BaseOffset); return nil }); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(scanned) != "[0 5 8 10 12]" {
		t.Errorf("Scan: batches at %v", scanned)
	}
	checkOffsetsForTimestamp(t, l, []tsAnswer{
		{0, 1, 1001},    // not the batch's base offset 0: no record is there
		{1002, 3, 1003}, // the record at delta 3
		{1004, 8, 1008}, // past the empty batch
		{1010, 11, 1011},
		{1012, 12, 1012},
	})
	// Appends after the cleaned batches are as before.
	res := mustAppend(t, l, batch(2, 10, 2000))
	mustSync(t, l, res.LastOffset)
	if res.BaseOffset != 14 {
		t.Errorf("append at %d, want 14", res.BaseOffset)
	}
}

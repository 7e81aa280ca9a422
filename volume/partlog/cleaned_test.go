package partlog

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"strings"
	"testing"

	"github.com/kaas-dev/kaas/volume"
)

func TestCleanedSegmentNames(t *testing.T) {
	tests := []struct {
		name  string
		id    segID
		ok    bool // a cleaned segment's .log
		plain bool // parseSegmentName takes it
	}{
		{"00000000000000000000-e3.c1.log", segID{0, 3, 1}, true, false},
		{"00000000000000001234-e17.c42.log", segID{1234, 17, 42}, true, false},
		{segID{1 << 62, 1 << 30, 1 << 62}.stem() + segmentExt, segID{1 << 62, 1 << 30, 1 << 62}, true, false},
		{"00000000000000001234-e17.c0.log", segID{}, false, false},
		{"00000000000000001234-e17.c01.log", segID{}, false, false},
		{"00000000000000001234-e17.c-1.log", segID{}, false, false},
		{"00000000000000001234-e17.c1.index", segID{}, false, false},
		{"00000000000000001234-e17.c1.log.tmp", segID{}, false, false},
		{"00000000000000001234-e17.log", segID{}, false, true},
	}
	for _, tt := range tests {
		id, ok := parseCleanedSegmentName(tt.name)
		if ok != tt.ok || id != tt.id {
			t.Errorf("parseCleanedSegmentName(%q) = %+v, %v; want %+v, %v", tt.name, id, ok, tt.id, tt.ok)
		}
		if _, _, ok := parseSegmentName(tt.name); ok != tt.plain {
			t.Errorf("parseSegmentName(%q) = %v, want %v", tt.name, ok, tt.plain)
		}
	}
	for _, id := range []segID{{7, 2, 0}, {7, 2, 3}} {
		log, index, timeIndex := id.paths("d")
		for _, p := range []string{log, index, timeIndex} {
			if got, ok := parseAnySegmentFile(path.Base(p)); !ok || got != id {
				t.Errorf("parseAnySegmentFile(%q) = %+v, %v; want %+v", path.Base(p), got, ok, id)
			}
		}
	}
}

// cleanedLog is a log a cleaner of epoch 1 left, with gaps of every kind
// (timestamps are 1000 + offset):
//
//	[0, 20)  cleaned: a leading gap, 3-5 holding only 4, 6-9 empty, 10-14 holding 10 and 14, a trailing gap
//	[20, 30) cleaned, empty: all gap
//	[30, 33) plain: 30, 31, 32
//	[33, 40) cleaned: a leading gap, 35, a trailing gap
func cleanedLog() []handSegment {
	return []handSegment{
		{base: 0, end: 20, gen: 1, batches: [][]byte{
			storedBatch(3, 2, 1003, 1),
			storedBatch(6, 3, 1006),
			storedBatch(10, 4, 1010, 0, 4),
		}},
		{base: 20, end: 30, gen: 2},
		{base: 30, end: 33, batches: [][]byte{storedBatch(30, 2, 1030, 0, 1, 2)}},
		{base: 33, end: 40, gen: 3, batches: [][]byte{storedBatch(35, 0, 1035, 0)}},
	}
}

// openCleaned writes cleanedLog in dir, opens it at epoch 2 and appends
// one batch of two records (40, 41 at 2000).
func openCleaned(t testing.TB, fsys volume.FS, dir string) *Log {
	t.Helper()
	writeHandLog(t, fsys, dir, 1, 0, cleanedLog())
	l, err := Open(fsys, dir, testConfig(t, 2, newFakeClock()))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	res := mustAppend(t, l, batch(2, 10, 2000))
	mustSync(t, l, res.LastOffset)
	return l
}

// firstBatchAfter is the base of the batch a read at each offset of
// cleanedLog starts with.
func firstBatchAfter(offset int64) int64 {
	switch {
	case offset < 6:
		return 3
	case offset < 10:
		return 6
	case offset < 15:
		return 10
	case offset < 33:
		return 30
	case offset < 36:
		return 35
	}
	return 40
}

// TestReadAcrossGaps: a read at any offset, in a gap or not, starts with
// the first batch that holds it or follows it, across cleaned segments'
// trailing gaps and an empty cleaned segment; Scan visits every batch
// once; ListOffsets by timestamp answers real records.
func TestReadAcrossGaps(t *testing.T) {
	l := openCleaned(t, newMemFS(t), testDir)
	defer l.Close()
	if hw := l.HighWatermark(); hw != 42 {
		t.Fatalf("high watermark %d, want 42", hw)
	}
	var gens []int64
	for _, s := range l.Segments() {
		gens = append(gens, s.Gen)
	}
	if fmt.Sprint(gens) != "[1 2 0 3 0]" {
		t.Errorf("segment generations %v", gens)
	}
	for off := int64(0); off < 42; off++ {
		want := firstBatchAfter(off)
		if h, ok := batchAt(t, l, off); !ok || h.BaseOffset != want {
			t.Errorf("Read(%d): batch at %d (found %v), want %d", off, h.BaseOffset, ok, want)
		}
		ref, err := l.ReadRef(off, 1)
		if err != nil || ref.Len == 0 {
			t.Fatalf("ReadRef(%d): %+v, %v", off, ref, err)
		}
		b := make([]byte, ref.Len)
		if err := readFullAt(ref.File, b, ref.Pos); err != nil {
			t.Fatal(err)
		}
		ref.Release()
		if h, err := ParseStoredBatchHeader(b); err != nil || h.BaseOffset != want || h.Size() != int64(len(b)) {
			t.Errorf("ReadRef(%d): batch at %d of %d bytes in a Ref of %d (%v), want the batch at %d", off, h.BaseOffset, h.Size(), len(b), err, want)
		}
		// A read bounded below the next batch answers nothing.
		if ref, err := l.ReadRefBelow(off, 1, want); err != nil || ref.Len != 0 {
			t.Errorf("ReadRefBelow(%d, below %d): %d bytes, %v", off, want, ref.Len, err)
			ref.Release()
		}
	}
	if n := l.LiveRefs(); n != 0 {
		t.Errorf("%d Refs live", n)
	}
	for _, tc := range []struct {
		from int64
		want string
	}{{0, "[3 6 10 30 35 40]"}, {12, "[10 30 35 40]"}, {16, "[30 35 40]"}, {25, "[30 35 40]"}, {36, "[40]"}} {
		var got []int64
		if err := l.Scan(tc.from, func(h BatchHeader) error { got = append(got, h.BaseOffset); return nil }); err != nil {
			t.Fatalf("Scan(%d): %v", tc.from, err)
		}
		if fmt.Sprint(got) != tc.want {
			t.Errorf("Scan(%d): batches at %v, want %s", tc.from, got, tc.want)
		}
	}
	checkOffsetsForTimestamp(t, l, []tsAnswer{
		{0, 4, 1004},
		{1005, 10, 1010}, // the empty batch's max timestamp 1006 has no record
		{1011, 14, 1014},
		{1015, 30, 1030},
		{1033, 35, 1035},
		{1036, 40, 2000},
	})
	if off, ts, ok := l.MaxTimestamp(); !ok || off != 41 || ts != 2000 {
		t.Errorf("MaxTimestamp() = %d, %d, %v", off, ts, ok)
	}
}

// TestReadAcrossGapsAtTheEnd: a gap reaching the high watermark reads as
// the end of the log.
func TestReadAcrossGapsAtTheEnd(t *testing.T) {
	fsys := newMemFS(t)
	writeHandLog(t, fsys, testDir, 1, 0, cleanedLog())
	l := mustOpen(t, fsys, testConfig(t, 2, newFakeClock()))
	defer l.Close()
	if b, err := l.Read(37, 1<<20, nil); err != nil || len(b) != 0 {
		t.Errorf("Read(37) = %d bytes, %v; want nothing", len(b), err)
	}
	if ref, err := l.ReadRef(37, 1<<20); err != nil || ref.Len != 0 {
		t.Errorf("ReadRef(37) = %+v, %v; want nothing", ref, err)
	}
	var n int
	if err := l.Scan(36, func(BatchHeader) error { n++; return nil }); err != nil || n != 0 {
		t.Errorf("Scan(36): %d batches, %v", n, err)
	}
}

// TestCleanedManifestVersion: a manifest naming no cleaned segment is
// written exactly as before (version 1, no gen); one naming a cleaned
// segment is version 2; readers refuse what no kaas writes.
func TestCleanedManifestVersion(t *testing.T) {
	fsys := newMemFS(t)
	plain := manifest{WriterEpoch: 4, Epochs: []EpochEntry{{4, 0}},
		Segments: []manifestSegment{{Base: 0, Epoch: 4, Sealed: true, EndOffset: 5, Size: 100}, {Base: 5, Epoch: 4}}}
	if err := writeManifest(fsys, testDir, &plain); err != nil {
		t.Fatal(err)
	}
	data, err := volume.ReadFile(fsys, path.Join(testDir, manifestName(4)))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte(`"version": 1,`)) || bytes.Contains(data, []byte(`"gen"`)) {
		t.Errorf("a plain manifest:\n%s", data)
	}
	cleaned := plain.clone()
	cleaned.Segments[0].Gen = 3
	if err := writeManifest(fsys, testDir, &cleaned); err != nil {
		t.Fatal(err)
	}
	data, _ = volume.ReadFile(fsys, path.Join(testDir, manifestName(4)))
	if !bytes.Contains(data, []byte(`"version": 2,`)) || !bytes.Contains(data, []byte(`"gen": 3,`)) {
		t.Errorf("a manifest naming a cleaned segment:\n%s", data)
	}
	m, err := readManifestFile(fsys, path.Join(testDir, manifestName(4)), 4)
	if err != nil || m.Segments[0].Gen != 3 {
		t.Fatalf("read back: %+v, %v", m, err)
	}
	for name, edit := range map[string]func(s string) string{
		"version 1 naming a cleaned segment": func(s string) string { return strings.Replace(s, `"version": 2,`, `"version": 1,`, 1) },
		"version 3":                          func(s string) string { return strings.Replace(s, `"version": 2,`, `"version": 3,`, 1) },
		"a cleaned segment unsealed":         func(s string) string { return strings.Replace(s, `"sealed": true`, `"sealed": false`, 1) },
		"a negative generation":              func(s string) string { return strings.Replace(s, `"gen": 3,`, `"gen": -3,`, 1) },
	} {
		name, bad := name, edit(string(data))
		if err := volume.WriteFileAtomic(fsys, path.Join(testDir, "m.json"), []byte(bad)); err != nil {
			t.Fatal(err)
		}
		if _, err := readManifestFile(fsys, path.Join(testDir, "m.json"), 4); !errors.Is(err, ErrCorruptLog) {
			t.Errorf("%s: %v, want ErrCorruptLog", name, err)
		}
	}
}

// TestPlainLogUnchanged: a log kaas writes today, rolled, retained and
// reopened, keeps a version 1 manifest with no generation anywhere.
func TestPlainLogUnchanged(t *testing.T) {
	fsys := newMemFS(t)
	cfg := testConfig(t, 1, newFakeClock())
	cfg.SegmentBytes = 2048
	l := mustOpen(t, fsys, cfg)
	for i := range 20 {
		mustAppend(t, l, batch(2, 200, int64(i)))
	}
	mustSync(t, l, 39)
	if _, err := l.DeleteRecordsBefore(10); err != nil {
		t.Fatal(err)
	}
	mustClose(t, l)
	cfg.Epoch = 2
	l = mustOpen(t, fsys, cfg)
	defer l.Close()
	for _, s := range l.Segments() {
		if s.Gen != 0 {
			t.Errorf("segment %+v has a generation", s)
		}
	}
	data, err := volume.ReadFile(fsys, path.Join(testDir, manifestName(2)))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte(`"version": 1,`)) || bytes.Contains(data, []byte(`"gen"`)) {
		t.Errorf("manifest:\n%s", data)
	}
}

// TestRetentionOverCleaned: retention and DeleteRecords drop cleaned
// segments like plain ones: their files go (a Ref into one keeps them
// until it is released), an older epoch's cleaned file no manifest names
// is swept, and the manifest is version 1 again once it names no cleaned
// segment.
func TestRetentionOverCleaned(t *testing.T) {
	fsys := newMemFS(t)
	l := openCleaned(t, fsys, testDir)
	defer l.Close()
	// An orphan: a cleaned output of a pass that never swapped.
	orphan := segID{base: 0, epoch: 1, gen: 9}.stem() + segmentExt
	if err := volume.WriteFileAtomic(fsys, path.Join(testDir, orphan), nil); err != nil {
		t.Fatal(err)
	}
	ref, err := l.ReadRef(2, 1<<20) // pins [0, 20)
	if err != nil || ref.Len == 0 {
		t.Fatalf("ReadRef: %+v, %v", ref, err)
	}
	want := make([]byte, ref.Len)
	if err := readFullAt(ref.File, want, ref.Pos); err != nil {
		t.Fatal(err)
	}
	if start, err := l.DeleteRecordsBefore(34); err != nil || start != 34 {
		t.Fatalf("DeleteRecordsBefore(34) = %d, %v", start, err)
	}
	if segs := l.Segments(); len(segs) != 2 || segs[0].Base != 33 || segs[0].Gen != 3 {
		t.Fatalf("segments %+v", segs)
	}
	names := strings.Join(segmentNames(t, fsys), " ")
	if !strings.Contains(names, segID{0, 1, 1}.stem()+segmentExt) {
		t.Errorf("the pinned cleaned segment's file is gone: %s", names)
	}
	for _, gone := range []string{segID{20, 1, 2}.stem(), segID{30, 1, 0}.stem(), orphan} {
		if strings.Contains(names, gone) {
			t.Errorf("%s is still there: %s", gone, names)
		}
	}
	got := make([]byte, ref.Len)
	if err := readFullAt(ref.File, got, ref.Pos); err != nil || !bytes.Equal(got, want) {
		t.Errorf("a Ref into a dropped cleaned segment reads %v", err)
	}
	ref.Release()
	checkNoFilesBelow(t, fsys, 33)
	if h, ok := batchAt(t, l, 34); !ok || h.BaseOffset != 35 {
		t.Errorf("Read(34): batch at %d, want 35", h.BaseOffset)
	}
	data, _ := volume.ReadFile(fsys, path.Join(testDir, manifestName(2)))
	if !bytes.Contains(data, []byte(`"version": 2,`)) {
		t.Errorf("manifest naming a cleaned segment:\n%s", data)
	}

	res, err := l.EnforceRetention(newFakeClock().Now(), RetentionPolicy{Ms: -1, Bytes: 0})
	if err != nil || res.Segments != 2 || res.LogStartOffset != 42 { // the active segment rolled and went too
		t.Fatalf("EnforceRetention = %+v, %v", res, err)
	}
	checkNoFilesBelow(t, fsys, 42)
	data, _ = volume.ReadFile(fsys, path.Join(testDir, manifestName(2)))
	if !bytes.Contains(data, []byte(`"version": 1,`)) || bytes.Contains(data, []byte(`"gen"`)) {
		t.Errorf("manifest naming no cleaned segment:\n%s", data)
	}
}

// TestRecoveryNeverAdoptsCleaned: a cleaned file no manifest names is
// never taken for a newer epoch's segment (a later epoch's Open removes
// it), and without any manifest a cleaned file makes the log refuse to
// open rather than guess.
func TestRecoveryNeverAdoptsCleaned(t *testing.T) {
	fsys := newMemFS(t)
	writeHandLog(t, fsys, testDir, 1, 0, cleanedLog())
	// A newer writer's cleaned output at the log end, never swapped in.
	for _, p := range []string{segID{40, 2, 1}.stem() + segmentExt, segID{40, 2, 1}.stem() + indexExt} {
		if err := volume.WriteFileAtomic(fsys, path.Join(testDir, p), storedBatch(40, 0, 1040, 0)); err != nil {
			t.Fatal(err)
		}
	}
	l := mustOpen(t, fsys, testConfig(t, 3, newFakeClock()))
	segs := l.Segments()
	if last := segs[len(segs)-1]; len(segs) != 5 || last.Base != 40 || last.Epoch != 3 || last.Gen != 0 {
		t.Errorf("segments %+v", segs)
	}
	if hw := l.HighWatermark(); hw != 40 {
		t.Errorf("high watermark %d, want 40", hw)
	}
	if got := unnamed(t, fsys); len(got) != 0 {
		t.Errorf("unnamed files left after Open: %v", got)
	}
	mustClose(t, l)

	bare := newMemFS(t)
	for _, p := range []string{segID{0, 1, 0}.stem() + segmentExt, segID{5, 1, 2}.stem() + segmentExt} {
		if err := volume.WriteFileAtomic(bare, path.Join(testDir, p), nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Open(bare, testDir, testConfig(t, 2, newFakeClock())); !errors.Is(err, ErrCorruptLog) {
		t.Errorf("Open with a cleaned file and no manifest: %v, want ErrCorruptLog", err)
	}
}

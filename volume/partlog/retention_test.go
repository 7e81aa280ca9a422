package partlog

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/crashtest"
	"github.com/kaas-dev/kaas/volume/faultfs"
	"github.com/kaas-dev/kaas/volume/memfs"
	"github.com/kaas-dev/kaas/volume/nfsfs"
)

// Retention tests use one batch per segment: retValue-byte records make a
// batch bigger than half of retSegBytes, so every append after the first
// rolls.
const (
	retSegBytes = 1000
	retValue    = 700
)

// retConfig is the config of the retention tests.
func retConfig(epoch int32, clk *fakeClock) Config {
	return Config{Epoch: epoch, SegmentBytes: retSegBytes, IndexIntervalBytes: 128,
		SegmentAge: 1000 * time.Hour, CheckpointInterval: time.Second, Now: clk.Now, Logger: logr.Discard()}
}

// retBatch is a batch of records records of the retention tests at ts.
func retBatch(records int, ts int64) []byte { return batch(records, retValue, ts) }

// retBatchSize is the size of retBatch(1, ts), whatever ts.
var retBatchSize = int64(len(retBatch(1, 0)))

// fillSegments appends one batch of records records per timestamp (one
// segment each), syncing each but the last unsynced ones, and returns the
// log end offset.
func fillSegments(t testing.TB, l *Log, records int, tss []int64, unsynced int) int64 {
	t.Helper()
	var end int64
	for i, ts := range tss {
		res := mustAppend(t, l, retBatch(records, ts))
		end = res.LastOffset + 1
		if i < len(tss)-unsynced {
			mustSync(t, l, res.LastOffset)
		}
	}
	return end
}

// segmentNames lists the segment files (all three kinds) in dir.
func segmentNames(t testing.TB, fsys volume.FS) []string {
	t.Helper()
	ents, err := fsys.ReadDir(testDir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if _, ok := parseAnySegmentFile(e.Name()); ok {
			out = append(out, e.Name())
		}
	}
	return out
}

// checkNoFilesBelow fails if any segment file below first is in dir, or a
// silly-renamed (.nfs) file: a file removed while a handle held it open.
func checkNoFilesBelow(t testing.TB, fsys volume.FS, first int64) {
	t.Helper()
	ents, err := fsys.ReadDir(testDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".nfs") {
			t.Fatalf("%s in the partition directory: a segment file was removed while open", e.Name())
		}
		if id, ok := parseAnySegmentFile(e.Name()); ok && id.base < first {
			t.Fatalf("segment file %s is below the first segment %d", e.Name(), first)
		}
	}
}

// checkStart checks the log start and what reads around it answer.
func checkStart(t testing.TB, l *Log, want int64) {
	t.Helper()
	if got := l.LogStartOffset(); got != want {
		t.Fatalf("log start %d, want %d", got, want)
	}
	if want > 0 {
		if _, err := l.Read(want-1, 1<<20, nil); !errors.Is(err, ErrOffsetOutOfRange) {
			t.Fatalf("Read(%d) below the log start: %v, want ErrOffsetOutOfRange", want-1, err)
		}
		if _, err := l.ReadRef(want-1, 1<<20); !errors.Is(err, ErrOffsetOutOfRange) {
			t.Fatalf("ReadRef(%d) below the log start: %v, want ErrOffsetOutOfRange", want-1, err)
		}
	}
	hs := readAll(t, l, want)
	if len(hs) > 0 && (hs[0].BaseOffset > want || hs[0].NextOffset() <= want) {
		t.Fatalf("the first batch read at the log start %d is [%d,%d)", want, hs[0].BaseOffset, hs[0].NextOffset())
	}
	if len(hs) > 0 {
		checkContiguous(t, hs, hs[0].BaseOffset, l.HighWatermark())
	}
}

// newNFSView returns one host's view of a fresh nfsfs volume (with the
// partition directory), which leaves a .nfs file behind when a file is
// removed while open: the check that handles are closed before deletes.
func newNFSView(t testing.TB) volume.FS {
	t.Helper()
	v := nfsfs.New(memfs.New(), nfsfs.Options{}).View("a")
	if err := volume.MkdirAllSync(v, testDir); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestEnforceRetentionRules(t *testing.T) {
	B := retBatchSize
	h := time.Hour
	five := []time.Duration{5 * h, 4 * h, 3 * h, 2 * h, 1 * h}
	cases := []struct {
		name     string
		ages     []time.Duration // age of each segment's only batch; the last is the active segment's
		noTS     bool            // batches carry no timestamp (-1)
		unsynced int             // trailing batches appended but not synced
		ms       int64
		bytes    int64
		want     int // segments deleted
	}{
		{name: "unlimited", ages: five, ms: -1, bytes: -1, want: 0},
		{name: "time", ages: five, ms: (3*h + h/2).Milliseconds(), bytes: -1, want: 2},
		{name: "time is strict", ages: five, ms: (3 * h).Milliseconds(), bytes: -1, want: 2},
		{name: "time stops at the first young segment", ages: []time.Duration{5 * h, 1 * h, 5 * h, 5 * h, 1 * h}, ms: (2 * h).Milliseconds(), bytes: -1, want: 1},
		{name: "time expires the active segment too", ages: five, ms: (h / 2).Milliseconds(), bytes: -1, want: 5},
		{name: "time never rolls an active segment not yet durable", ages: five, unsynced: 1, ms: 0, bytes: -1, want: 4},
		{name: "time keeps segments above the high watermark", ages: append(five, h), unsynced: 2, ms: 0, bytes: -1, want: 4},
		{name: "time in the future", ages: []time.Duration{-h, -h, -h}, ms: 0, bytes: -1, want: 0},
		{name: "time unknown (no timestamps, no mtime)", ages: five, noTS: true, ms: 0, bytes: -1, want: 0},
		{name: "size", ages: five, ms: -1, bytes: 2 * B, want: 3},
		{name: "size one byte more", ages: five, ms: -1, bytes: 2*B + 1, want: 2},
		{name: "size equal to the log", ages: five, ms: -1, bytes: 5 * B, want: 0},
		{name: "size just below the log", ages: five, ms: -1, bytes: 4 * B, want: 1},
		{name: "size zero deletes everything durable", ages: five, ms: -1, bytes: 0, want: 5},
		{name: "size keeps segments above the high watermark", ages: append(five, h), unsynced: 2, ms: -1, bytes: 0, want: 4},
		{name: "time or size", ages: five, ms: (4*h + h/2).Milliseconds(), bytes: 3 * B, want: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := newFakeClock()
			fsys := newNFSView(t)
			l := mustOpen(t, fsys, retConfig(1, clk))
			tss := make([]int64, len(tc.ages))
			for i, a := range tc.ages {
				tss[i] = clk.Now().Add(-a).UnixMilli()
				if tc.noTS {
					tss[i] = -1
				}
			}
			end := fillSegments(t, l, 1, tss, tc.unsynced)
			before := l.Segments()
			if len(before) != len(tc.ages) {
				t.Fatalf("%d segments, want %d", len(before), len(tc.ages))
			}
			res, err := l.EnforceRetention(clk.Now(), RetentionPolicy{Ms: tc.ms, Bytes: tc.bytes})
			if err != nil {
				t.Fatalf("EnforceRetention: %v", err)
			}
			if res.Segments != tc.want {
				t.Fatalf("deleted %d segments, want %d", res.Segments, tc.want)
			}
			var wantBytes int64
			for _, s := range before[:tc.want] {
				wantBytes += s.Size
			}
			if res.Bytes != wantBytes {
				t.Fatalf("deleted %d bytes, want %d", res.Bytes, wantBytes)
			}
			wantStart := int64(tc.want) // one record per segment
			if res.LogStartOffset != wantStart {
				t.Fatalf("result log start %d, want %d", res.LogStartOffset, wantStart)
			}
			after := l.Segments()
			if after[0].Base != wantStart {
				t.Fatalf("first segment at %d, want %d", after[0].Base, wantStart)
			}
			if tc.want == len(tc.ages) && (len(after) != 1 || after[0].Size != 0 || after[0].Base != end) {
				t.Fatalf("after deleting everything: segments %+v, want one empty at %d", after, end)
			}
			checkNoFilesBelow(t, fsys, wantStart)
			mustSync(t, l, math.MaxInt64)
			checkStart(t, l, wantStart)

			// Idempotent: a second pass finds nothing more.
			if res, err := l.EnforceRetention(clk.Now(), RetentionPolicy{Ms: tc.ms, Bytes: tc.bytes}); err != nil || (res.Segments != 0 && tc.want != 0) {
				// (a pass after the sync may legitimately delete the
				// segments that were above the high watermark)
				if err != nil || tc.unsynced == 0 {
					t.Fatalf("second pass: %+v, %v", res, err)
				}
			}
			start := l.LogStartOffset()
			mustClose(t, l)

			// Durable: a new owner sees the same log start and no file below.
			l2 := mustOpen(t, fsys, retConfig(2, clk))
			defer l2.Close()
			checkStart(t, l2, start)
			checkNoFilesBelow(t, fsys, start)
		})
	}
}

// TestRetentionDeletesWhollyBelowLogStart: DeleteRecords moved the log
// start to the end of the active segment; the next pass rolls it and
// deletes it (Kafka's log-start-offset breach).
func TestRetentionDeletesWhollyBelowLogStart(t *testing.T) {
	clk := newFakeClock()
	fsys := newNFSView(t)
	l := mustOpen(t, fsys, retConfig(1, clk))
	defer l.Close()
	ts := clk.Now().UnixMilli()
	end := fillSegments(t, l, 1, []int64{ts, ts, ts}, 0)
	start, err := l.DeleteRecordsBefore(-1)
	if err != nil || start != end {
		t.Fatalf("DeleteRecordsBefore(-1) = %d, %v; want %d", start, err, end)
	}
	if n := len(l.Segments()); n != 1 {
		t.Fatalf("%d segments after deleting all records, want the active one", n)
	}
	res, err := l.EnforceRetention(clk.Now(), RetentionPolicy{Ms: -1, Bytes: -1})
	if err != nil || res.Segments != 1 || res.LogStartOffset != end {
		t.Fatalf("EnforceRetention = %+v, %v; want the old active segment deleted", res, err)
	}
	segs := l.Segments()
	if len(segs) != 1 || segs[0].Size != 0 || segs[0].Base != end {
		t.Fatalf("segments %+v, want one empty at %d", segs, end)
	}
	checkNoFilesBelow(t, fsys, end)
}

func TestDeleteRecordsBefore(t *testing.T) {
	// Five segments of three records each: [0,3) [3,6) ... [12,15), the
	// last active.
	setup := func(t *testing.T) (volume.FS, *fakeClock, *Log) {
		clk := newFakeClock()
		fsys := newNFSView(t)
		l := mustOpen(t, fsys, retConfig(1, clk))
		ts := clk.Now().UnixMilli()
		fillSegments(t, l, 3, []int64{ts, ts, ts, ts, ts}, 0)
		return fsys, clk, l
	}
	cases := []struct {
		name      string
		offset    int64
		wantStart int64
		wantSegs  int // segments left
		wantErr   error
	}{
		{name: "high watermark", offset: -1, wantStart: 15, wantSegs: 1},
		{name: "segment boundary", offset: 6, wantStart: 6, wantSegs: 3},
		{name: "inside a sealed segment", offset: 4, wantStart: 4, wantSegs: 4},
		{name: "inside the active segment", offset: 13, wantStart: 13, wantSegs: 1},
		{name: "at the active segment's base", offset: 12, wantStart: 12, wantSegs: 1},
		{name: "the log start", offset: 0, wantStart: 0, wantSegs: 5},
		{name: "beyond the high watermark", offset: 16, wantStart: 0, wantSegs: 5, wantErr: ErrOffsetOutOfRange},
		{name: "negative", offset: -2, wantStart: 0, wantSegs: 5, wantErr: ErrOffsetOutOfRange},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fsys, clk, l := setup(t)
			got, err := l.DeleteRecordsBefore(tc.offset)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr != nil && err == nil) {
				t.Fatalf("DeleteRecordsBefore(%d): %v, want %v", tc.offset, err, tc.wantErr)
			}
			if got != tc.wantStart {
				t.Fatalf("DeleteRecordsBefore(%d) = %d, want %d", tc.offset, got, tc.wantStart)
			}
			if n := len(l.Segments()); n != tc.wantSegs {
				t.Fatalf("%d segments left, want %d", n, tc.wantSegs)
			}
			if l.Err() != nil {
				t.Fatalf("log failed: %v", l.Err())
			}
			first := l.Segments()[0].Base
			checkNoFilesBelow(t, fsys, first)
			checkStart(t, l, tc.wantStart)
			// Never lowers the log start.
			if tc.wantStart > 0 {
				if got, err := l.DeleteRecordsBefore(tc.wantStart - 1); err != nil || got != tc.wantStart {
					t.Fatalf("DeleteRecordsBefore below the start = %d, %v", got, err)
				}
			}
			// Appends go on.
			res := mustAppend(t, l, retBatch(1, clk.Now().UnixMilli()))
			mustSync(t, l, res.LastOffset)
			mustClose(t, l)
			l2 := mustOpen(t, fsys, retConfig(2, clk))
			defer l2.Close()
			checkStart(t, l2, tc.wantStart)
			checkNoFilesBelow(t, fsys, first)
		})
	}
}

// TestDeleteRecordsFencedWriter: a writer whose fence was claimed by a newer
// epoch never moves the log start, and its log fails.
func TestDeleteRecordsFencedWriter(t *testing.T) {
	for _, how := range []string{"delete records", "retention"} {
		t.Run(how, func(t *testing.T) {
			clk := newFakeClock()
			fsys := newNFSView(t)
			l := mustOpen(t, fsys, retConfig(1, clk))
			ts := clk.Now().UnixMilli()
			fillSegments(t, l, 1, []int64{ts, ts, ts, ts}, 0)
			files := segmentNames(t, fsys)
			if _, err := ClaimFence(fsys, testDir, 2); err != nil {
				t.Fatal(err)
			}
			var err error
			if how == "retention" {
				_, err = l.EnforceRetention(clk.Now(), RetentionPolicy{Ms: -1, Bytes: 0})
			} else {
				_, err = l.DeleteRecordsBefore(3)
			}
			if !errors.Is(err, ErrFenced) {
				t.Fatalf("%s by a fenced writer: %v, want ErrFenced", how, err)
			}
			if !errors.Is(l.Err(), ErrFenced) {
				t.Fatalf("log error %v, want ErrFenced", l.Err())
			}
			have := map[string]bool{}
			for _, n := range segmentNames(t, fsys) {
				have[n] = true
			}
			for _, n := range files {
				if !have[n] {
					t.Fatalf("a fenced writer removed %s", n)
				}
			}
			_ = l.Close()
			l2 := mustOpen(t, fsys, retConfig(2, clk))
			defer l2.Close()
			checkStart(t, l2, 0)
		})
	}
}

// TestDeleteRecordsFencedAfterManifest: the fence is claimed by a new owner
// right after the manifest is replaced, before the files are removed. The
// new owner may have read the old manifest (naming the segments), so the
// old writer removes nothing; the new owner's Open, which reads the new
// manifest, removes the orphans.
func TestDeleteRecordsFencedAfterManifest(t *testing.T) {
	clk := newFakeClock()
	inner := newNFSView(t)
	var armed atomic.Bool
	fsys := faultfs.New(inner, func(op faultfs.Op) faultfs.Action {
		if armed.Load() && op.Kind == faultfs.OpRename && path.Base(op.NewPath) == manifestName(1) {
			armed.Store(false)
			return faultfs.ProceedThen(func() {
				if _, err := ClaimFence(inner, testDir, 2); err != nil {
					t.Errorf("claim: %v", err)
				}
			})
		}
		return faultfs.Proceed
	})
	l := mustOpen(t, fsys, retConfig(1, clk))
	ts := clk.Now().UnixMilli()
	fillSegments(t, l, 1, []int64{ts, ts, ts, ts}, 0)
	files := segmentNames(t, inner)
	armed.Store(true)
	if _, err := l.DeleteRecordsBefore(2); !errors.Is(err, ErrFenced) {
		t.Fatalf("DeleteRecordsBefore: %v, want ErrFenced", err)
	}
	if got := segmentNames(t, inner); len(got) != len(files) {
		t.Fatalf("files removed after the fence was lost: %v, had %v", got, files)
	}
	_ = l.Close()
	l2 := mustOpen(t, inner, retConfig(2, clk))
	defer l2.Close()
	checkStart(t, l2, 2)
	checkNoFilesBelow(t, inner, 2)
}

// TestRetentionWaitsForPinnedReaders: a Ref being sent pins its segment:
// the segment leaves the log at once (readers below the new start get
// ErrOffsetOutOfRange) but its handle stays open, and its files stay,
// until Release; then both go. Segments nobody pins go at once, even while
// other Refs are live.
func TestRetentionWaitsForPinnedReaders(t *testing.T) {
	clk := newFakeClock()
	fsys := newNFSView(t)
	l := mustOpen(t, fsys, retConfig(1, clk))
	defer l.Close()
	ts := clk.Now().UnixMilli()
	fillSegments(t, l, 1, []int64{ts, ts, ts, ts, ts}, 0)
	old, err := l.ReadRef(0, 1<<20)
	if err != nil || old.Len == 0 {
		t.Fatalf("ReadRef(0): %+v, %v", old, err)
	}
	tail, err := l.ReadRef(4, 1<<20) // the active segment's
	if err != nil || tail.Len == 0 {
		t.Fatalf("ReadRef(4): %+v, %v", tail, err)
	}
	want := materialize(t, old)
	res, err := l.EnforceRetention(clk.Now(), RetentionPolicy{Ms: -1, Bytes: 2 * retBatchSize})
	if err != nil || res.Segments != 3 || res.LogStartOffset != 3 {
		t.Fatalf("EnforceRetention = %+v, %v", res, err)
	}
	checkStart(t, l, 3)
	// Segments 1 and 2 are gone (no .nfs file: their handles were closed
	// first); segment 0's files stay while the Ref is live.
	stem0 := segmentStem(0, 1)
	var have0 bool
	for _, n := range segmentNames(t, fsys) {
		if id, _ := parseAnySegmentFile(n); id.base == 1 || id.base == 2 {
			t.Fatalf("%s still there", n)
		}
		have0 = have0 || strings.HasPrefix(n, stem0)
	}
	if !have0 {
		t.Fatal("the pinned segment's files were removed under a live Ref")
	}
	checkNoFilesBelow(t, fsys, 0) // no .nfs file
	if got := materialize(t, old); string(got) != string(want) {
		t.Fatal("the pinned segment's bytes changed")
	}
	old.Release()
	old.Release() // idempotent
	checkNoFilesBelow(t, fsys, 3)
	tail.Release()
	if n := l.LiveRefs(); n != 0 {
		t.Fatalf("%d live refs", n)
	}
}

// TestRetentionRacesReaders runs appends, retention passes and
// DeleteRecords against concurrent Read, ReadRef, Scan and
// OffsetForTimestamp callers: a reader gets its data or
// ErrOffsetOutOfRange, never a closed handle, and no file is removed while
// open (nfsfs would leave a .nfs file).
func TestRetentionRacesReaders(t *testing.T) {
	clk := newFakeClock()
	fsys := newNFSView(t)
	l := mustOpen(t, fsys, retConfig(1, clk))
	var stop atomic.Bool
	var wg sync.WaitGroup
	errc := make(chan error, 16)
	report := func(err error) {
		select {
		case errc <- err:
		default:
		}
	}
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				off := l.LogStartOffset() + int64(i%3)
				switch r {
				case 0:
					if _, err := l.Read(off, 1<<20, nil); err != nil && !errors.Is(err, ErrOffsetOutOfRange) {
						report(fmt.Errorf("Read(%d): %w", off, err))
					}
				case 1:
					ref, err := l.ReadRef(off, 1<<20)
					if err != nil && !errors.Is(err, ErrOffsetOutOfRange) {
						report(fmt.Errorf("ReadRef(%d): %w", off, err))
					}
					if ref.Len > 0 {
						b := make([]byte, ref.Len)
						if err := readFullAt(ref.File, b, ref.Pos); err != nil {
							report(fmt.Errorf("read a Ref: %w", err))
						} else if _, err := ValidateBatch(b[:headerSize(b)]); err != nil {
							report(fmt.Errorf("a Ref's bytes: %w", err))
						}
					}
					ref.Release()
				case 2:
					if err := l.Scan(0, func(BatchHeader) error { return nil }); err != nil && !errors.Is(err, ErrOffsetOutOfRange) {
						report(fmt.Errorf("Scan: %w", err))
					}
				case 3:
					l.OffsetForTimestamp(0)
				}
			}
		}()
	}
	for i := 0; i < 300; i++ {
		res := mustAppend(t, l, retBatch(1, clk.Now().UnixMilli()))
		mustSync(t, l, res.LastOffset)
		clk.Advance(time.Second)
		switch i % 10 {
		case 3:
			if _, err := l.EnforceRetention(clk.Now(), RetentionPolicy{Ms: -1, Bytes: 4 * retBatchSize}); err != nil {
				t.Fatal(err)
			}
		case 6:
			if _, err := l.EnforceRetention(clk.Now(), RetentionPolicy{Ms: 3000, Bytes: -1}); err != nil {
				t.Fatal(err)
			}
		case 9:
			if _, err := l.DeleteRecordsBefore(res.LastOffset - 2); err != nil {
				t.Fatal(err)
			}
		}
		checkNoFilesBelow(t, fsys, 0)
	}
	stop.Store(true)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	checkNoFilesBelow(t, fsys, l.Segments()[0].Base)
	mustClose(t, l)
	checkNoFilesBelow(t, fsys, 0)
}

// TestRetentionAfterClose: a closed log moves nothing.
func TestRetentionAfterClose(t *testing.T) {
	clk := newFakeClock()
	fsys := newMemFS(t)
	l := mustOpen(t, fsys, retConfig(1, clk))
	fillSegments(t, l, 1, []int64{1, 2, 3}, 0)
	mustClose(t, l)
	if _, err := l.EnforceRetention(clk.Now(), RetentionPolicy{Ms: -1, Bytes: 0}); !errors.Is(err, ErrClosed) {
		t.Fatalf("EnforceRetention after Close: %v", err)
	}
	if _, err := l.DeleteRecordsBefore(-1); !errors.Is(err, ErrClosed) {
		t.Fatalf("DeleteRecordsBefore after Close: %v", err)
	}
	if err := l.Reconfigure(Limits{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Reconfigure after Close: %v", err)
	}
}

// TestOpenRemovesOrphans: segment files of a drop that crashed before its
// unlinks (in any state: below the first segment, named by no manifest)
// are removed by Open; the named ones are not.
func TestOpenRemovesOrphans(t *testing.T) {
	clk := newFakeClock()
	fsys := newMemFS(t)
	l := mustOpen(t, fsys, retConfig(1, clk))
	fillSegments(t, l, 1, []int64{1, 2, 3, 4}, 0)
	mustClose(t, l)
	// Keep copies of segments 0 and 1, drop them, and put the copies back
	// (only the .log of 0, only the indexes of 1): orphans.
	keep := map[string][]byte{}
	for _, n := range segmentNames(t, fsys) {
		if id, _ := parseAnySegmentFile(n); id.base < 2 && !(id.base == 0 && !strings.HasSuffix(n, segmentExt)) && !(id.base == 1 && strings.HasSuffix(n, segmentExt)) {
			b, err := volume.ReadFile(fsys, path.Join(testDir, n))
			if err != nil {
				t.Fatal(err)
			}
			keep[n] = b
		}
	}
	// A segment without index entries has no index files (its first
	// flush creates them): then make segment 1's orphan index by hand.
	if len(keep) < 3 {
		keep[fmt.Sprintf("%020d-e1%s", 1, indexExt)] = nil
		keep[fmt.Sprintf("%020d-e1%s", 1, timeIndexExt)] = nil
	}
	l = mustOpen(t, fsys, retConfig(1, clk))
	if _, err := l.DeleteRecordsBefore(2); err != nil {
		t.Fatal(err)
	}
	mustClose(t, l)
	for n, b := range keep {
		if err := volume.WriteFileAtomic(fsys, path.Join(testDir, n), b); err != nil {
			t.Fatal(err)
		}
	}
	if len(keep) != 3 {
		t.Fatalf("kept %d files", len(keep))
	}
	l = mustOpen(t, fsys, retConfig(2, clk))
	defer l.Close()
	checkNoFilesBelow(t, fsys, 2)
	checkStart(t, l, 2)
	var logs []string
	for _, n := range segmentNames(t, fsys) {
		if strings.HasSuffix(n, segmentExt) {
			logs = append(logs, n)
		}
	}
	if len(logs) != 3 {
		t.Fatalf("segment logs %v, want 3 (segments 2, 3 and the new epoch's)", logs)
	}
}

func TestReconfigure(t *testing.T) {
	clk := newFakeClock()
	fsys := newMemFS(t)
	cfg := retConfig(1, clk)
	cfg.SegmentBytes = 1 << 20
	l := mustOpen(t, fsys, cfg)
	defer l.Close()
	for i := 0; i < 3; i++ {
		mustAppend(t, l, retBatch(1, 1))
	}
	if n := len(l.Segments()); n != 1 {
		t.Fatalf("%d segments", n)
	}
	for _, bad := range []Limits{
		{SegmentBytes: -1},
		{SegmentBytes: math.MaxUint32 + 1},
		{MaxBatchBytes: BatchHeaderSize - 1},
		{SegmentAge: -time.Second},
	} {
		if err := l.Reconfigure(bad); err == nil {
			t.Fatalf("Reconfigure(%+v) accepted", bad)
		}
	}
	if err := l.Reconfigure(Limits{SegmentBytes: retSegBytes, MaxBatchBytes: int32(retBatchSize)}); err != nil {
		t.Fatal(err)
	}
	if r := mustAppend(t, l, retBatch(1, 1)); !r.Rolled {
		t.Fatal("no roll after lowering segment.bytes")
	}
	if _, err := l.Append(retBatch(2, 1)); !errors.Is(err, ErrBatchTooLarge) {
		t.Fatalf("append above the new max.message.bytes: %v", err)
	}
	// Zero fields take the defaults again.
	if err := l.Reconfigure(Limits{}); err != nil {
		t.Fatal(err)
	}
	if r := mustAppend(t, l, retBatch(2, 1)); r.Rolled {
		t.Fatal("rolled with the default segment.bytes")
	}
	// Age.
	if err := l.Reconfigure(Limits{SegmentAge: time.Minute}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Minute)
	if r := mustAppend(t, l, retBatch(1, 1)); !r.Rolled {
		t.Fatal("no roll after lowering segment.ms")
	}
	// LogAppendTime.
	if err := l.Reconfigure(Limits{LogAppendTime: true}); err != nil {
		t.Fatal(err)
	}
	r := mustAppend(t, l, retBatch(1, 1))
	mustSync(t, l, r.LastOffset)
	b, err := l.Read(r.BaseOffset, 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := ParseBatchHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	if !h.LogAppendTime() || h.MaxTimestamp != clk.Now().UnixMilli() {
		t.Fatalf("LogAppendTime not applied: type %v, max timestamp %d, want %d", h.LogAppendTime(), h.MaxTimestamp, clk.Now().UnixMilli())
	}
}

// retentionWorkload appends, applies retention by size and by time and
// DeleteRecords, appends more and closes; it returns what was
// acknowledged.
func retentionWorkload(fsys volume.FS, clk *fakeClock) (map[int64][]byte, error) {
	acked := map[int64][]byte{}
	l, err := Open(fsys, testDir, retConfig(1, clk))
	if err != nil {
		return acked, err
	}
	defer l.Close()
	appendSync := func(n int) error {
		for i := 0; i < n; i++ {
			b := retBatch(1+i%2, clk.Now().UnixMilli())
			res, err := l.Append(b)
			if err != nil {
				return err
			}
			if err := l.Sync(context.Background(), res.LastOffset); err != nil {
				return err
			}
			acked[res.BaseOffset] = append([]byte(nil), b...)
			clk.Advance(time.Second)
		}
		return nil
	}
	if err := appendSync(6); err != nil {
		return acked, err
	}
	if _, err := l.EnforceRetention(clk.Now(), RetentionPolicy{Ms: -1, Bytes: 3 * retBatchSize}); err != nil {
		return acked, err
	}
	if _, err := l.DeleteRecordsBefore(l.HighWatermark() - 1); err != nil {
		return acked, err
	}
	if err := appendSync(3); err != nil {
		return acked, err
	}
	clk.Advance(time.Minute)
	if _, err := l.EnforceRetention(clk.Now(), RetentionPolicy{Ms: 30_000, Bytes: -1}); err != nil {
		return acked, err
	}
	return acked, l.Close()
}

// checkRetentionRecovery opens what a crash of retentionWorkload left and
// checks that it converges: the acknowledged batches at or above the log
// start are intact, no segment file lies below the first segment, and
// re-driving the pass leaves nothing more to delete.
// It reports whether the crash left orphan segment files (below the first
// segment of the manifest) for Open to remove.
func checkRetentionRecovery(t *testing.T, fsys volume.FS, clk *fakeClock, acked map[int64][]byte, what string) (orphans bool) {
	t.Helper()
	if m, err := readManifest(fsys, testDir); err == nil && m != nil && len(m.Segments) > 0 {
		for _, n := range segmentNames(t, fsys) {
			if id, _ := parseAnySegmentFile(n); id.base < m.Segments[0].Base {
				orphans = true
			}
		}
	}
	for _, epoch := range []int32{1, 2} {
		l, err := Open(fsys, testDir, retConfig(epoch, clk))
		if err != nil {
			t.Fatalf("%s: Open at epoch %d: %v", what, epoch, err)
		}
		start := l.LogStartOffset()
		checkNoFilesBelow(t, fsys, l.Segments()[0].Base)
		got := map[int64][]byte{}
		for off := start; off < l.HighWatermark(); {
			b, err := l.Read(off, 1<<20, nil)
			if err != nil {
				t.Fatalf("%s: Read(%d): %v", what, off, err)
			}
			for len(b) > 0 {
				h, err := ParseBatchHeader(b)
				if err != nil {
					t.Fatalf("%s: Read(%d): %v", what, off, err)
				}
				got[h.BaseOffset] = b[:h.Size()]
				b = b[h.Size():]
				off = h.NextOffset()
			}
		}
		for base, b := range acked {
			h, _ := ParseBatchHeader(b)
			if h.NextOffset() <= start {
				continue
			}
			if string(got[base]) != string(b) {
				t.Fatalf("%s, epoch %d: acknowledged batch at %d (log start %d) lost or changed", what, epoch, base, start)
			}
		}
		checkStart(t, l, start)
		// Re-drive: the same pass again converges and a second one is a no-op.
		p := RetentionPolicy{Ms: 30_000, Bytes: 3 * retBatchSize}
		if _, err := l.EnforceRetention(clk.Now(), p); err != nil {
			t.Fatalf("%s: re-driven retention: %v", what, err)
		}
		if res, err := l.EnforceRetention(clk.Now(), p); err != nil || res.Segments != 0 {
			t.Fatalf("%s: second re-driven retention: %+v, %v", what, res, err)
		}
		checkNoFilesBelow(t, fsys, l.Segments()[0].Base)
		if err := l.Close(); err != nil {
			t.Fatalf("%s: close: %v", what, err)
		}
	}
	return orphans
}

// TestRetentionCrashAtEveryMutation crashes retentionWorkload at every
// mutating operation, before and after it, on every crash substrate
// (memfs, memfs with durable namespace changes, NFS-like views) and checks
// that what survives converges.
func TestRetentionCrashAtEveryMutation(t *testing.T) {
	for _, sub := range crashSubstrates() {
		t.Run(sub.Name, func(t *testing.T) {
			count := faultfs.New(sub.host(t), nil)
			if _, err := retentionWorkload(count, newFakeClock()); err != nil {
				t.Fatalf("clean run: %v", err)
			}
			n := count.MutatingOps()
			if n < 50 {
				t.Fatalf("only %d mutating ops", n)
			}
			orphans := 0
			for i := 0; i < n; i++ {
				for _, after := range []bool{false, true} {
					w := sub.fresh(t)
					clk := newFakeClock()
					ffs := faultfs.New(w.Host("a"), faultfs.CrashAtMutating(i, after))
					acked, _ := retentionWorkload(ffs, clk)
					if !ffs.Crashed() {
						t.Fatalf("op %d: the workload did not reach it", i)
					}
					if checkRetentionRecovery(t, w.Crash().Host("b"), clk, acked, fmt.Sprintf("crash at mutating op %d (after=%v)", i, after)) {
						orphans++
					}
				}
			}
			// The sweep must have hit the window between the manifest
			// write and the unlinks.
			if orphans == 0 {
				t.Fatal("no crash point left orphan segment files")
			}
			t.Logf("%d mutating ops; %d crash points left orphans for Open to remove", n, orphans)
		})
	}
}

// TestRetentionCleanRunFreesEverything checks the clean workload's end
// state on every substrate: no file below the first segment and no .nfs
// file (no segment removed while open).
func TestRetentionCleanRunFreesEverything(t *testing.T) {
	for _, sub := range crashSubstrates() {
		t.Run(sub.Name, func(t *testing.T) {
			w := sub.fresh(t)
			fsys := w.Host("a")
			if _, err := retentionWorkload(fsys, newFakeClock()); err != nil {
				t.Fatal(err)
			}
			m, err := readManifest(fsys, testDir)
			if err != nil || m == nil {
				t.Fatalf("manifest: %v", err)
			}
			if m.LogStartOffset == 0 {
				t.Fatal("the workload deleted nothing")
			}
			checkNoFilesBelow(t, fsys, m.Segments[0].Base)
			var names []string
			ents, _ := fsys.ReadDir(testDir)
			for _, e := range ents {
				names = append(names, e.Name())
			}
			// Every segment has its log file; index files exist only for
			// segments that had index entries (their first flush creates
			// them), and none of a dropped segment.
			logs := 0
			for _, n := range segmentNames(t, fsys) {
				if strings.HasSuffix(n, segmentExt) {
					logs++
				}
			}
			if got := len(segmentNames(t, fsys)); logs != len(m.Segments) || got > 3*len(m.Segments) {
				t.Fatalf("%d segment files (%d logs) for %d segments: %v", got, logs, len(m.Segments), names)
			}
		})
	}
}

// retSubstrate is a crashtest substrate whose fresh worlds hold the
// partition directory.
type retSubstrate struct{ crashtest.Substrate }

func crashSubstrates() []retSubstrate {
	var out []retSubstrate
	for _, s := range crashtest.Substrates() {
		out = append(out, retSubstrate{s})
	}
	return out
}

// fresh returns a new world with the partition directory made durable.
func (s retSubstrate) fresh(t testing.TB) crashtest.World {
	t.Helper()
	w := s.Fresh()
	if err := volume.MkdirAllSync(w.Host("setup"), testDir); err != nil {
		t.Fatal(err)
	}
	return w
}

// host returns host a's view of a fresh world.
func (s retSubstrate) host(t testing.TB) volume.FS { return s.fresh(t).Host("a") }

// TestReconfigureRacesAppends: limits change under the append mutex (run
// with -race).
func TestReconfigureRacesAppends(t *testing.T) {
	clk := newFakeClock()
	l := mustOpen(t, newMemFS(t), retConfig(1, clk))
	defer l.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 200; i++ {
			if err := l.Reconfigure(Limits{SegmentBytes: int64(1000 + i%3*1000), MaxBatchBytes: int32(2000 + i%2), LogAppendTime: i%2 == 0}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for i := 0; i < 200; i++ {
		mustAppend(t, l, retBatch(1, 1))
	}
	<-done
	mustSync(t, l, math.MaxInt64)
	readAll(t, l, 0)
}

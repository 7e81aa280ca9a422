package partlog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/faultfs"
)

func TestRoundTrip(t *testing.T) {
	clk := newFakeClock()
	fsys := newMemFS(t)
	l := mustOpen(t, fsys, testConfig(t, 1, clk))
	defer l.Close()

	var want []byte
	var next int64
	for i := 0; i < 20; i++ {
		b := batch(1+i%5, 100+i*37, int64(1000+i))
		res := mustAppend(t, l, b)
		if res.BaseOffset != next || res.LastOffset != next+int64(i%5) {
			t.Fatalf("append %d: got [%d,%d], want base %d", i, res.BaseOffset, res.LastOffset, next)
		}
		next = res.LastOffset + 1
		want = append(want, b...) // Append stamped b in place
	}
	if got := l.LogEndOffset(); got != next {
		t.Fatalf("LogEndOffset = %d, want %d", got, next)
	}
	// Nothing is visible before a Sync covers it.
	if hw := l.HighWatermark(); hw != 0 {
		t.Fatalf("HighWatermark before sync = %d", hw)
	}
	if b, err := l.Read(0, 1<<20, nil); err != nil || len(b) != 0 {
		t.Fatalf("Read before sync = %d bytes, %v", len(b), err)
	}
	mustSync(t, l, next-1)
	if hw := l.HighWatermark(); hw != next {
		t.Fatalf("HighWatermark = %d, want %d", hw, next)
	}
	got, err := l.Read(0, 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Read returned %d bytes, want the %d appended", len(got), len(want))
	}
	hs := readAll(t, l, 0)
	checkContiguous(t, hs, 0, next)
	for _, h := range hs {
		if h.PartitionLeaderEpoch != 1 {
			t.Fatalf("batch %d stamped with epoch %d", h.BaseOffset, h.PartitionLeaderEpoch)
		}
	}
}

func TestReadReturnsBatchContainingOffset(t *testing.T) {
	clk := newFakeClock()
	l := mustOpen(t, newMemFS(t), testConfig(t, 1, clk))
	defer l.Close()
	for i := 0; i < 50; i++ {
		mustAppend(t, l, batch(10, 50, int64(i)))
	}
	mustSync(t, l, 499)
	for _, off := range []int64{0, 5, 9, 10, 15, 255, 499} {
		b, err := l.Read(off, 1, nil)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		h, err := ValidateBatch(b)
		if err != nil {
			t.Fatalf("Read(%d) with maxBytes 1 did not return exactly one batch: %v", off, err)
		}
		if want := off / 10 * 10; h.BaseOffset != want {
			t.Fatalf("Read(%d) returned batch %d, want %d", off, h.BaseOffset, want)
		}
	}
}

func TestReadMaxBytes(t *testing.T) {
	clk := newFakeClock()
	l := mustOpen(t, newMemFS(t), testConfig(t, 1, clk))
	defer l.Close()
	var size int
	for i := 0; i < 10; i++ {
		b := batch(1, 200, 1)
		size = len(b)
		mustAppend(t, l, b)
	}
	mustSync(t, l, 9)
	tests := []struct {
		maxBytes    int
		wantBatches int
	}{
		{-1, 1},
		{0, 1},
		{1, 1},
		{size - 1, 1},
		{size, 1},
		{2*size - 1, 1},
		{2 * size, 2},
		{5*size + 3, 5},
		{100 * size, 7}, // from offset 3: only 7 batches remain
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.maxBytes), func(t *testing.T) {
			prefix := []byte("keep")
			b, err := l.Read(3, tt.maxBytes, prefix)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(b, []byte("keep")) {
				t.Fatal("Read did not append to dst")
			}
			if got := (len(b) - 4) / size; got != tt.wantBatches || (len(b)-4)%size != 0 {
				t.Fatalf("Read returned %d bytes (%d batches of %d), want %d batches", len(b)-4, got, size, tt.wantBatches)
			}
		})
	}
}

func TestReadOutOfRange(t *testing.T) {
	clk := newFakeClock()
	l := mustOpen(t, newMemFS(t), testConfig(t, 1, clk))
	defer l.Close()
	mustAppend(t, l, batch(3, 10, 1))
	mustSync(t, l, 2)
	mustAppend(t, l, batch(3, 10, 1)) // not synced: offsets 3..5 are beyond HW
	tests := []struct {
		offset  int64
		wantErr error
		empty   bool
	}{
		{-1, ErrOffsetOutOfRange, false},
		{0, nil, false},
		{2, nil, false},
		{3, nil, true}, // == HW
		{4, ErrOffsetOutOfRange, false},
		{100, ErrOffsetOutOfRange, false},
	}
	for _, tt := range tests {
		b, err := l.Read(tt.offset, 1000, nil)
		if !errors.Is(err, tt.wantErr) || (err == nil && (len(b) == 0) != tt.empty) {
			t.Errorf("Read(%d) = %d bytes, %v; want err %v, empty %v", tt.offset, len(b), err, tt.wantErr, tt.empty)
		}
	}
}

func TestRollBySize(t *testing.T) {
	clk := newFakeClock()
	fsys := newMemFS(t)
	cfg := testConfig(t, 1, clk)
	cfg.SegmentBytes = 4096
	l := mustOpen(t, fsys, cfg)
	var rolls int
	var size int
	for i := 0; i < 40; i++ {
		b := batch(2, 450, int64(i))
		size = len(b)
		res := mustAppend(t, l, b)
		if res.Rolled {
			rolls++
		}
	}
	mustSync(t, l, l.LogEndOffset()-1)
	perSegment := 4096 / size
	segs := l.Segments()
	if want := (40 + perSegment - 1) / perSegment; len(segs) != want || rolls != want-1 {
		t.Fatalf("%d segments after %d rolls, want %d (%d batches of %d bytes per segment)", len(segs), rolls, want, perSegment, size)
	}
	for i, s := range segs {
		if s.Sealed != (i < len(segs)-1) || s.Size > cfg.SegmentBytes || s.Epoch != 1 {
			t.Fatalf("segment %d: %+v", i, s)
		}
		if i > 0 && s.Base != segs[i-1].EndOffset {
			t.Fatalf("segment %d starts at %d, previous ends at %d", i, s.Base, segs[i-1].EndOffset)
		}
	}
	checkContiguous(t, readAll(t, l, 0), 0, 80)
	mustClose(t, l)

	// Reopen: sealed segments are trusted, everything still reads.
	l = mustOpen(t, fsys, cfg)
	defer l.Close()
	if got := l.Segments(); len(got) != len(segs) {
		t.Fatalf("after reopen %d segments, want %d", len(got), len(segs))
	}
	checkContiguous(t, readAll(t, l, 0), 0, 80)
	for off := int64(0); off < 80; off += 7 {
		b, err := l.Read(off, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		if h, _ := ParseBatchHeader(b); off < h.BaseOffset || off > h.LastOffset() {
			t.Fatalf("Read(%d) returned [%d,%d]", off, h.BaseOffset, h.LastOffset())
		}
	}
}

func TestRollByAge(t *testing.T) {
	clk := newFakeClock()
	cfg := testConfig(t, 1, clk)
	cfg.SegmentAge = time.Hour
	l := mustOpen(t, newMemFS(t), cfg)
	defer l.Close()

	steps := []struct {
		advance    time.Duration
		append     bool
		wantRolled bool
	}{
		{advance: 2 * time.Hour, append: true, wantRolled: false}, // empty segment never rolls
		{advance: 59 * time.Minute, append: true, wantRolled: false},
		{advance: time.Minute, append: true, wantRolled: true}, // first append is 1h old
		{advance: 30 * time.Minute, append: true, wantRolled: false},
		{advance: 30 * time.Minute, append: true, wantRolled: true},
	}
	for i, st := range steps {
		clk.Advance(st.advance)
		res := mustAppend(t, l, batch(1, 10, 1))
		if res.Rolled != st.wantRolled {
			t.Fatalf("step %d: Rolled = %v, want %v", i, res.Rolled, st.wantRolled)
		}
	}
	if n := len(l.Segments()); n != 3 {
		t.Fatalf("%d segments, want 3", n)
	}
}

func TestReopenAfterClose(t *testing.T) {
	clk := newFakeClock()
	fsys := newMemFS(t)
	cfg := testConfig(t, 4, clk)
	l := mustOpen(t, fsys, cfg)
	for i := 0; i < 30; i++ {
		mustAppend(t, l, batch(3, 300, int64(i)))
	}
	mustClose(t, l) // Close syncs everything
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := l.Append(batch(1, 1, 1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close = %v", err)
	}
	if _, err := l.Read(0, 100, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Read after Close = %v", err)
	}
	if err := l.Sync(context.Background(), 0); err != nil {
		t.Fatalf("Sync of an acknowledged offset after Close = %v", err)
	}
	if err := l.Sync(context.Background(), 1000); !errors.Is(err, ErrClosed) {
		t.Fatalf("Sync after Close = %v", err)
	}

	l = mustOpen(t, fsys, cfg)
	defer l.Close()
	if l.HighWatermark() != 90 || l.LogEndOffset() != 90 {
		t.Fatalf("after reopen HW %d LEO %d, want 90", l.HighWatermark(), l.LogEndOffset())
	}
	if h := l.EpochHistory(); !slices.Equal(h, []EpochEntry{{Epoch: 4, StartOffset: 0}}) {
		t.Fatalf("epoch history %v", h)
	}
	res := mustAppend(t, l, batch(1, 10, 99))
	if res.BaseOffset != 90 {
		t.Fatalf("append after reopen at %d", res.BaseOffset)
	}
	mustSync(t, l, 90)
	checkContiguous(t, readAll(t, l, 0), 0, 91)
}

func TestTornTailRecovery(t *testing.T) {
	valid := batch(2, 100, 5)
	stampBatch(valid, 20, 1) // would be the next batch
	wrongBase := batch(2, 100, 5)
	stampBatch(wrongBase, 77, 1)
	badCRC := bytes.Clone(valid)
	badCRC[len(badCRC)-1] ^= 0xff
	tests := []struct {
		name    string
		garbage []byte
	}{
		{"partial header", valid[:10]},
		{"partial batch", valid[:len(valid)/2]},
		{"bad crc", badCRC},
		{"wrong base offset", wrongBase},
		{"zeros", make([]byte, 300)},
		{"bad crc then valid", append(bytes.Clone(badCRC), valid...)},
	}
	for _, tt := range tests {
		for _, closeFirst := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/closed=%v", tt.name, closeFirst), func(t *testing.T) {
				clk := newFakeClock()
				fsys := newMemFS(t)
				cfg := testConfig(t, 1, clk)
				l := mustOpen(t, fsys, cfg)
				for i := 0; i < 10; i++ {
					mustAppend(t, l, batch(2, 100, int64(i)))
				}
				mustSync(t, l, 19)
				var disk volume.FS = fsys
				if closeFirst {
					mustClose(t, l)
				} else {
					disk = fsys.CrashClone() // the log is abandoned, never closed
				}
				segs := l.Segments()
				last := segs[len(segs)-1]
				logPath, _, _ := segID{base: last.Base, epoch: last.Epoch}.paths(testDir)
				appendRaw(t, disk, logPath, tt.garbage)

				l2 := mustOpen(t, disk, cfg)
				defer l2.Close()
				if l2.LogEndOffset() != 20 || l2.HighWatermark() != 20 {
					t.Fatalf("recovered LEO %d HW %d, want 20", l2.LogEndOffset(), l2.HighWatermark())
				}
				checkContiguous(t, readAll(t, l2, 0), 0, 20)
				if got := l2.Segments()[0].Size; got != 10*int64(len(valid)) {
					t.Fatalf("segment size %d after truncation, want %d", got, 10*len(valid))
				}
				res := mustAppend(t, l2, batch(1, 10, 1))
				mustSync(t, l2, res.LastOffset)
				checkContiguous(t, readAll(t, l2, 0), 0, 21)
			})
		}
	}
}

func TestRecoveryReadsOnlyAfterCheckpoint(t *testing.T) {
	clk := newFakeClock()
	mem := newMemFS(t)
	cfg := testConfig(t, 1, clk)
	cfg.SegmentBytes = 8 << 20
	l := mustOpen(t, mem, cfg)
	for i := 0; i < 400; i++ {
		mustAppend(t, l, batch(4, 256, int64(i)))
	}
	mustClose(t, l) // final checkpoint at the end

	l = mustOpen(t, mem, cfg)
	var tail int64
	for i := 0; i < 5; i++ {
		b := batch(4, 256, int64(i))
		tail += int64(len(b))
		mustAppend(t, l, b)
	}
	mustSync(t, l, l.LogEndOffset()-1) // clock not advanced: no checkpoint
	crashed := mem.CrashClone()

	cfs := &countingFS{FS: crashed}
	l2 := mustOpen(t, cfs, cfg)
	defer l2.Close()
	if l2.LogEndOffset() != 1620 {
		t.Fatalf("LEO %d, want 1620", l2.LogEndOffset())
	}
	segSize := l2.Size()
	if read := cfs.logBytes.Load(); read > tail+recoverChunk/16 || read < tail {
		t.Fatalf("Open read %d bytes of segment data; the tail after the checkpoint is %d (segment %d)", read, tail, segSize)
	}
	checkContiguous(t, readAll(t, l2, 0), 0, 1620)
}

func TestCheckpointAdvancesByClock(t *testing.T) {
	clk := newFakeClock()
	mem := newMemFS(t)
	cfg := testConfig(t, 1, clk)
	cfg.CheckpointInterval = time.Second
	cfg.SegmentBytes = 8 << 20
	l := mustOpen(t, mem, cfg)
	defer l.Close()
	checkpointAt := func() int64 {
		m, err := readManifest(mem, testDir)
		if err != nil {
			t.Fatal(err)
		}
		if m == nil {
			return 0 // a new partition's first checkpoint writes its manifest
		}
		return m.Checkpoint.NextOffset
	}
	mustAppend(t, l, batch(1, 10, 1))
	mustSync(t, l, 0)
	if got := checkpointAt(); got != 0 {
		t.Fatalf("checkpoint moved to %d without the clock advancing", got)
	}
	clk.Advance(time.Second)
	mustAppend(t, l, batch(1, 10, 1))
	mustSync(t, l, 1)
	if got := checkpointAt(); got != 2 {
		t.Fatalf("checkpoint at %d after the interval, want 2", got)
	}
}

// syncFailFS fails every file Sync of a segment once armed, and counts them.
func syncFailFS(inner volume.FS, armed *bool, mu *sync.Mutex, count *int) *faultfs.FS {
	return faultfs.New(inner, func(op faultfs.Op) faultfs.Action {
		if op.Kind != faultfs.OpSync || path.Ext(op.Path) != segmentExt {
			return faultfs.Proceed
		}
		mu.Lock()
		defer mu.Unlock()
		if !*armed {
			return faultfs.Proceed
		}
		*count++
		return faultfs.FailBefore(syscall.EIO)
	})
}

func TestFsyncErrorIsStickyAndNeverAcked(t *testing.T) {
	clk := newFakeClock()
	var mu sync.Mutex
	var armed bool
	var syncs int
	fsys := syncFailFS(newMemFS(t), &armed, &mu, &syncs)
	l := mustOpen(t, fsys, testConfig(t, 1, clk))
	mustAppend(t, l, batch(1, 10, 1))
	mustSync(t, l, 0)

	mustAppend(t, l, batch(1, 10, 1))
	mu.Lock()
	armed = true
	mu.Unlock()
	err := l.Sync(context.Background(), 1)
	if !errors.Is(err, ErrLogFailed) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("Sync = %v, want ErrLogFailed wrapping EIO", err)
	}
	if hw := l.HighWatermark(); hw != 1 {
		t.Fatalf("HW = %d after failed fsync, want 1", hw)
	}
	checks := []struct {
		name string
		err  error
	}{
		{"Err", l.Err()},
		{"Sync", l.Sync(context.Background(), 1)},
		{"Append", func() error { _, err := l.Append(batch(1, 10, 1)); return err }()},
		{"Read", func() error { _, err := l.Read(0, 100, nil); return err }()},
	}
	for _, c := range checks {
		if !errors.Is(c.err, ErrLogFailed) || !errors.Is(c.err, syscall.EIO) {
			t.Errorf("%s after fsync failure = %v, want sticky ErrLogFailed", c.name, c.err)
		}
	}
	if err := l.Close(); !errors.Is(err, ErrLogFailed) {
		t.Errorf("Close = %v, want the sticky error", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if syncs != 1 {
		t.Fatalf("segment fsync attempted %d times after the failure, want exactly 1 (never retried)", syncs)
	}
}

func TestFencing(t *testing.T) {
	clk := newFakeClock()
	mem := newMemFS(t)
	old := mustOpen(t, mem, testConfig(t, 1, clk))
	mustAppend(t, old, batch(2, 10, 1))
	mustSync(t, old, 1)

	// A new leader claims the partition.
	if err := writeFence(mem, testDir, 2, true); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, old, batch(2, 10, 1)) // the zombie may still write...
	if err := old.Sync(context.Background(), 3); !errors.Is(err, ErrFenced) {
		t.Fatalf("Sync after a higher fence = %v, want ErrFenced", err) // ...but never ack
	}
	if old.HighWatermark() != 2 {
		t.Fatalf("fenced HW advanced to %d", old.HighWatermark())
	}
	if _, err := old.Append(batch(1, 10, 1)); !errors.Is(err, ErrFenced) {
		t.Fatalf("Append after fencing = %v, want sticky ErrFenced", err)
	}
	_ = old.Close()

	if _, err := Open(mem, testDir, testConfig(t, 1, clk)); !errors.Is(err, ErrFenced) {
		t.Fatalf("Open with a lower epoch = %v, want ErrFenced", err)
	}
}

func TestOpenHigherEpochStartsNewSegment(t *testing.T) {
	clk := newFakeClock()
	mem := newMemFS(t)
	l := mustOpen(t, mem, testConfig(t, 1, clk))
	for i := 0; i < 5; i++ {
		mustAppend(t, l, batch(2, 50, 1))
	}
	mustSync(t, l, 9)
	crashed := mem.CrashClone() // epoch 1 dies without closing

	l3 := mustOpen(t, crashed, testConfig(t, 3, clk))
	wantSegs := []SegmentInfo{
		{Base: 0, EndOffset: 10, Epoch: 1, Size: l3.Segments()[0].Size, Sealed: true},
		{Base: 10, EndOffset: 10, Epoch: 3},
	}
	if got := l3.Segments(); !slices.Equal(got, wantSegs) {
		t.Fatalf("segments %+v, want %+v", got, wantSegs)
	}
	wantHist := []EpochEntry{{1, 0}, {3, 10}}
	if got := l3.EpochHistory(); !slices.Equal(got, wantHist) {
		t.Fatalf("epoch history %v, want %v", got, wantHist)
	}
	if fence, err := readFence(crashed, testDir); err != nil || fence != 3 {
		t.Fatalf("fence = %d, %v", fence, err)
	}
	res := mustAppend(t, l3, batch(1, 50, 1))
	mustSync(t, l3, res.LastOffset)
	hs := readAll(t, l3, 0)
	checkContiguous(t, hs, 0, 11)
	if hs[len(hs)-1].PartitionLeaderEpoch != 3 || hs[0].PartitionLeaderEpoch != 1 {
		t.Fatalf("leader epochs %d..%d", hs[0].PartitionLeaderEpoch, hs[len(hs)-1].PartitionLeaderEpoch)
	}
	mustClose(t, l3)

	// Same epoch again: no new segment. Then a higher epoch over an empty
	// active segment replaces it rather than sealing an empty one.
	l3 = mustOpen(t, crashed, testConfig(t, 3, clk))
	if n := len(l3.Segments()); n != 2 {
		t.Fatalf("reopen with the same epoch: %d segments", n)
	}
	mustClose(t, l3)
	l4 := mustOpen(t, crashed, testConfig(t, 4, clk))
	mustClose(t, l4)
	l5 := mustOpen(t, crashed, testConfig(t, 5, clk))
	defer l5.Close()
	segs := l5.Segments()
	if len(segs) != 3 || segs[2] != (SegmentInfo{Base: 11, EndOffset: 11, Epoch: 5}) {
		t.Fatalf("segments %+v", segs)
	}
	wantHist = []EpochEntry{{1, 0}, {3, 10}, {5, 11}}
	if got := l5.EpochHistory(); !slices.Equal(got, wantHist) {
		t.Fatalf("epoch history %v, want %v", got, wantHist)
	}
	checkContiguous(t, readAll(t, l5, 0), 0, 11)
}

func TestAdoptSegmentsWithoutManifest(t *testing.T) {
	clk := newFakeClock()
	mem := newMemFS(t)
	cfg := testConfig(t, 1, clk)
	cfg.SegmentBytes = 2048
	l := mustOpen(t, mem, cfg)
	for i := 0; i < 20; i++ {
		mustAppend(t, l, batch(1, 300, int64(100+i)))
	}
	mustClose(t, l)
	if err := mem.Remove(path.Join(testDir, manifestName(1))); err != nil {
		t.Fatal(err)
	}
	cfg.Epoch = 2
	l2 := mustOpen(t, mem, cfg)
	defer l2.Close()
	checkContiguous(t, readAll(t, l2, 0), 0, 20)
	if got := l2.EpochHistory(); !slices.Equal(got, []EpochEntry{{1, 0}, {2, 20}}) {
		t.Fatalf("epoch history %v", got)
	}
	if off, ts, ok := l2.OffsetForTimestamp(105); !ok || off != 5 || ts != 105 {
		t.Fatalf("OffsetForTimestamp(105) = %d, %d, %v", off, ts, ok)
	}
}

func TestOffsetForTimestampAndMaxTimestamp(t *testing.T) {
	clk := newFakeClock()
	mem := newMemFS(t)
	cfg := testConfig(t, 1, clk)
	cfg.SegmentBytes = 1500
	cfg.IndexIntervalBytes = 1
	l := mustOpen(t, mem, cfg)
	defer l.Close()
	if _, _, ok := l.MaxTimestamp(); ok {
		t.Fatal("MaxTimestamp on an empty log")
	}
	// Two-record batches (offsets 2i, 2i+1), timestamps not monotonic.
	stamps := []int64{100, 200, 150, 300, 250, 300, 120, 400}
	for _, ts := range stamps {
		mustAppend(t, l, batch(2, 300, ts))
	}
	mustSync(t, l, l.LogEndOffset()-1)
	mustAppend(t, l, batch(1, 10, 1000)) // unsynced: invisible
	if len(l.Segments()) < 3 {
		t.Fatalf("want several segments, got %d", len(l.Segments()))
	}
	tests := []struct {
		ts     int64
		offset int64
		max    int64
		ok     bool
	}{
		{0, 0, 100, true},
		{100, 0, 100, true},
		{101, 2, 200, true},
		{160, 2, 200, true},
		{201, 6, 300, true},
		{300, 6, 300, true},
		{301, 14, 400, true},
		{400, 14, 400, true},
		{401, 0, 0, false},
	}
	for _, tt := range tests {
		off, max, ok := l.OffsetForTimestamp(tt.ts)
		if off != tt.offset || max != tt.max || ok != tt.ok {
			t.Errorf("OffsetForTimestamp(%d) = %d, %d, %v; want %d, %d, %v", tt.ts, off, max, ok, tt.offset, tt.max, tt.ok)
		}
	}
	if off, ts, ok := l.MaxTimestamp(); !ok || off != 15 || ts != 400 {
		t.Fatalf("MaxTimestamp = %d, %d, %v; want 15, 400", off, ts, ok)
	}
	mustClose(t, l)
	l = mustOpen(t, mem, cfg)
	if off, ts, ok := l.MaxTimestamp(); !ok || off != 16 || ts != 1000 {
		t.Fatalf("after reopen MaxTimestamp = %d, %d, %v; want 16, 1000", off, ts, ok)
	}
	for _, tt := range tests[:len(tests)-1] {
		if off, max, ok := l.OffsetForTimestamp(tt.ts); off != tt.offset || max != tt.max || !ok {
			t.Errorf("after reopen OffsetForTimestamp(%d) = %d, %d, %v", tt.ts, off, max, ok)
		}
	}
}

func TestScan(t *testing.T) {
	clk := newFakeClock()
	cfg := testConfig(t, 1, clk)
	cfg.SegmentBytes = 1024
	l := mustOpen(t, newMemFS(t), cfg)
	defer l.Close()
	for i := 0; i < 12; i++ {
		mustAppend(t, l, batch(3, 100, int64(i)))
	}
	mustSync(t, l, l.LogEndOffset()-1)
	mustAppend(t, l, batch(3, 100, 99)) // beyond HW
	var got []int64
	if err := l.Scan(7, func(h BatchHeader) error { got = append(got, h.BaseOffset); return nil }); err != nil {
		t.Fatal(err)
	}
	if want := []int64{6, 9, 12, 15, 18, 21, 24, 27, 30, 33}; !slices.Equal(got, want) {
		t.Fatalf("Scan(7) visited %v, want %v", got, want)
	}
	stop := errors.New("stop")
	n := 0
	err := l.Scan(0, func(BatchHeader) error { n++; return stop })
	if !errors.Is(err, stop) || n != 1 {
		t.Fatalf("Scan with a failing callback = %v after %d calls", err, n)
	}
}

func TestAppendValidation(t *testing.T) {
	clk := newFakeClock()
	cfg := testConfig(t, 1, clk)
	cfg.MaxBatchBytes = 1000
	l := mustOpen(t, newMemFS(t), cfg)
	defer l.Close()
	corrupt := batch(1, 10, 1)
	corrupt[30] ^= 1
	tests := []struct {
		name  string
		batch []byte
		want  error
	}{
		{"corrupt", corrupt, ErrCorruptBatch},
		{"short", []byte{1, 2, 3}, ErrCorruptBatch},
		{"too large", batch(1, 1000, 1), ErrBatchTooLarge},
	}
	for _, tt := range tests {
		if _, err := l.Append(tt.batch); !errors.Is(err, tt.want) {
			t.Errorf("%s: Append = %v, want %v", tt.name, err, tt.want)
		}
	}
	if l.Err() != nil || l.LogEndOffset() != 0 {
		t.Fatalf("rejected batches changed the log: err %v, LEO %d", l.Err(), l.LogEndOffset())
	}
	mustAppend(t, l, batch(1, 10, 1))
}

func TestConcurrentAppendSync(t *testing.T) {
	clk := newFakeClock()
	cfg := testConfig(t, 1, clk)
	cfg.SegmentBytes = 16 << 10
	l := mustOpen(t, newMemFS(t), cfg)
	defer l.Close()
	const producers, perProducer = 8, 50
	var wg sync.WaitGroup
	acked := make(chan int64, producers*perProducer)
	errs := make(chan error, producers)
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perProducer; i++ {
				res, err := l.Append(batch(2, 100, int64(i)))
				if err == nil {
					err = l.Sync(context.Background(), res.LastOffset)
				}
				if err != nil {
					errs <- err
					return
				}
				if l.HighWatermark() <= res.LastOffset {
					errs <- fmt.Errorf("Sync(%d) returned with HW %d", res.LastOffset, l.HighWatermark())
					return
				}
				acked <- res.BaseOffset
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	close(acked)
	var bases []int64
	for b := range acked {
		bases = append(bases, b)
	}
	slices.Sort(bases)
	hs := readAll(t, l, 0)
	checkContiguous(t, hs, 0, producers*perProducer*2)
	for i, h := range hs {
		if bases[i] != h.BaseOffset {
			t.Fatalf("acked base %d, read %d", bases[i], h.BaseOffset)
		}
	}
}

func TestFsyncErrorAtRoll(t *testing.T) {
	clk := newFakeClock()
	var mu sync.Mutex
	var armed bool
	var syncs int
	fsys := syncFailFS(newMemFS(t), &armed, &mu, &syncs)
	cfg := testConfig(t, 1, clk)
	cfg.SegmentBytes = 1000
	l := mustOpen(t, fsys, cfg)
	defer l.Close()
	mustAppend(t, l, batch(1, 600, 1))
	mustSync(t, l, 0)
	mustAppend(t, l, batch(1, 600, 1)) // fills the segment: next append rolls
	mu.Lock()
	armed = true
	mu.Unlock()
	if _, err := l.Append(batch(1, 600, 1)); !errors.Is(err, ErrLogFailed) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("Append whose roll fsync fails = %v, want ErrLogFailed wrapping EIO", err)
	}
	if err := l.Sync(context.Background(), 1); !errors.Is(err, ErrLogFailed) {
		t.Fatalf("Sync after a failed roll = %v", err)
	}
	if l.HighWatermark() != 1 {
		t.Fatalf("HW %d", l.HighWatermark())
	}
	mu.Lock()
	defer mu.Unlock()
	if syncs != 1 {
		t.Fatalf("%d segment fsyncs after the failure, want 1", syncs)
	}
}

func TestOpenErrors(t *testing.T) {
	clk := newFakeClock()
	tests := []struct {
		name  string
		setup func(volume.FS)
		cfg   func(Config) Config
		want  error
	}{
		{"negative epoch", nil, func(c Config) Config { c.Epoch = -1; return c }, nil},
		{"segment bytes too large", nil, func(c Config) Config { c.SegmentBytes = 1 << 33; return c }, nil},
		{"higher fence", func(f volume.FS) { _ = writeFence(f, testDir, 9, true) }, nil, ErrFenced},
		{"corrupt fence", func(f volume.FS) {
			_ = volume.WriteFileAtomic(f, path.Join(testDir, fenceName), []byte("x"))
		}, nil, ErrCorruptLog},
		{"corrupt manifest", func(f volume.FS) {
			_ = volume.WriteFileAtomic(f, path.Join(testDir, manifestName(1)), []byte("{"))
		}, nil, ErrCorruptLog},
		{"corrupt legacy manifest", func(f volume.FS) {
			_ = volume.WriteFileAtomic(f, path.Join(testDir, legacyManifestName), []byte("{"))
		}, nil, ErrCorruptLog},
		{"manifest of another epoch under this epoch's name", func(f volume.FS) {
			_ = writeManifest(f, testDir, &manifest{Version: manifestVersion, WriterEpoch: 0})
			_ = f.Rename(path.Join(testDir, manifestName(0)), path.Join(testDir, manifestName(1)))
		}, nil, ErrCorruptLog},
		{"manifest of a higher epoch", func(f volume.FS) {
			_ = writeManifest(f, testDir, &manifest{Version: manifestVersion, WriterEpoch: 5})
		}, nil, ErrFenced},
		{"corrupt manifest of a higher epoch", func(f volume.FS) {
			_ = volume.WriteFileAtomic(f, path.Join(testDir, manifestName(5)), []byte("{"))
		}, nil, ErrFenced},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := newMemFS(t)
			if tt.setup != nil {
				tt.setup(fsys)
			}
			cfg := testConfig(t, 1, clk)
			if tt.cfg != nil {
				cfg = tt.cfg(cfg)
			}
			l, err := Open(fsys, testDir, cfg)
			if err == nil {
				l.Close()
				t.Fatal("Open succeeded")
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("Open = %v, want %v", err, tt.want)
			}
		})
	}
	if _, err := Open(newMemFS(t), "missing", testConfig(t, 1, clk)); err == nil {
		t.Fatal("Open created a missing directory")
	}
}

// TestOSFilesystem runs append, roll, torn-tail recovery and a takeover on
// the real filesystem.
func TestOSFilesystem(t *testing.T) {
	clk := newFakeClock()
	fsys := volume.OS()
	dir := t.TempDir()
	cfg := testConfig(t, 1, clk)
	cfg.SegmentBytes = 2048
	l, err := Open(fsys, dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		mustAppend(t, l, batch(2, 200, int64(i)))
	}
	mustSync(t, l, 39)
	segs := l.Segments()
	mustClose(t, l)
	last := segs[len(segs)-1]
	logPath, _, _ := segID{base: last.Base, epoch: last.Epoch}.paths(dir)
	appendRaw(t, fsys, logPath, batch(1, 100, 1)[:30])

	cfg.Epoch = 2
	l, err = Open(fsys, dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	checkContiguous(t, readAll(t, l, 0), 0, 40)
	if got := l.EpochHistory(); !slices.Equal(got, []EpochEntry{{1, 0}, {2, 40}}) {
		t.Fatalf("epoch history %v", got)
	}
	res := mustAppend(t, l, batch(1, 10, 1))
	mustSync(t, l, res.LastOffset)
	checkContiguous(t, readAll(t, l, 0), 0, 41)
}

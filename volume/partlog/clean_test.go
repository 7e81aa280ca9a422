package partlog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/faultfs"
	"github.com/kaas-dev/kaas/volume/records"
	rt "github.com/kaas-dev/kaas/volume/records/recordstest"
)

// keyedRec is one record as the clean tests write and read it.
type keyedRec struct {
	off      int64
	key, val string
	ts       int64
}

func (r keyedRec) String() string { return fmt.Sprintf("%d:%s=%s", r.off, r.key, r.val) }

// keyedBatch is a batch of one record per key, values "<key>@<ts>",
// timestamps ts, ts+1..., compressed with codec.
func keyedBatch(codec rt.Codec, ts int64, keys ...string) []byte {
	recs := make([]rt.Record, len(keys))
	for i, k := range keys {
		recs[i] = rt.Record{OffsetDelta: int32(i), TimestampDelta: int64(i), Key: []byte(k), Value: fmt.Appendf(nil, "%s@%d", k, ts+int64(i))}
	}
	return rt.Batch{Codec: codec, Records: recs, FirstTS: ts}.Bytes()
}

// cleanConfig is the config of the clean tests: small segments, indexes
// every few batches.
func cleanConfig(epoch int32, clk *fakeClock) Config {
	return Config{Epoch: epoch, SegmentBytes: 600, IndexIntervalBytes: 150,
		SegmentAge: 1000 * time.Hour, CheckpointInterval: time.Second, Now: clk.Now, Logger: logr.Discard()}
}

// fillKeyed appends n batches of 3 records over keys k0..k4 (timestamps
// 1000 + offset), alternating uncompressed and gzip, syncing each.
func fillKeyed(t testing.TB, l *Log, n int) {
	t.Helper()
	for i := range n {
		off := l.LogEndOffset()
		keys := []string{fmt.Sprintf("k%d", i%5), fmt.Sprintf("k%d", (i*3+1)%5), fmt.Sprintf("k%d", i%2)}
		codec := []rt.Codec{rt.None, rt.Gzip}[i%2]
		res := mustAppend(t, l, keyedBatch(codec, 1000+off, keys...))
		mustSync(t, l, res.LastOffset)
	}
}

// recordsOf appends the records of one stored batch to out.
func recordsOf(batch []byte, out []keyedRec) ([]keyedRec, error) {
	it := records.AcquireIter()
	defer it.Release()
	if err := it.Reset(batch, 1<<20); err != nil {
		return out, err
	}
	base := it.Header().BaseOffset
	for it.Next() {
		r := it.Record()
		out = append(out, keyedRec{off: base + int64(r.OffsetDelta), key: string(r.Key), val: string(r.Value), ts: r.Timestamp})
	}
	return out, it.Err()
}

// logRecords reads every record from the log start to the high watermark
// with Read, across gaps, and checks that every batch ReadRef returns at
// each batch's base is the same bytes and that Scan visits the same
// batches.
func logRecords(t testing.TB, l *Log) []keyedRec {
	t.Helper()
	var out []keyedRec
	var bases []int64
	for off := l.LogStartOffset(); off < l.HighWatermark(); {
		b, err := l.Read(off, 1, nil)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		if len(b) == 0 {
			break
		}
		h, err := ParseStoredBatchHeader(b)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		ref, err := l.ReadRef(off, 1)
		if err != nil {
			t.Fatalf("ReadRef(%d): %v", off, err)
		}
		got := make([]byte, ref.Len)
		if err := readFullAt(ref.File, got, ref.Pos); err != nil {
			t.Fatal(err)
		}
		ref.Release()
		if !bytes.Equal(got, b) {
			t.Fatalf("ReadRef(%d) and Read(%d) differ", off, off)
		}
		if out, err = recordsOf(b, out); err != nil {
			t.Fatalf("batch at %d: %v", h.BaseOffset, err)
		}
		bases = append(bases, h.BaseOffset)
		off = h.NextOffset()
	}
	var scanned []int64
	if err := l.Scan(0, func(h BatchHeader) error { scanned = append(scanned, h.BaseOffset); return nil }); err != nil {
		t.Fatalf("Scan: %v", err)
	}
	if !slices.Equal(scanned, bases) {
		t.Fatalf("Scan visits %v, Read %v", scanned, bases)
	}
	return out
}

// latestPerKey is the keep-latest filter over recs below end: the records
// kept, and every record at or above end.
func latestPerKey(recs []keyedRec, end int64) []keyedRec {
	latest := map[string]int64{}
	for _, r := range recs {
		if r.off < end {
			latest[r.key] = r.off
		}
	}
	return slices.DeleteFunc(slices.Clone(recs), func(r keyedRec) bool { return r.off < end && latest[r.key] != r.off })
}

// testCleaner is a cleaning pass over the whole cleanable range that keeps
// the latest record per key (the in-test policy). beforeSwap, if set, runs
// before each group's swap.
type testCleaner struct {
	groupBytes int64
	beforeSwap func(group int)
	// groups are the ranges of the groups swapped, or tried.
	groups [][2]int64
	// end is the plan's first uncleanable offset.
	end int64
}

// run is one pass; it returns the first error.
func (c *testCleaner) run(ctx context.Context, l *Log, now time.Time) error {
	if err := l.BeginClean(); err != nil {
		return err
	}
	defer l.EndClean()
	plan := l.CleanablePlan(now, 0, math.MaxInt64)
	c.end = plan.FirstUncleanable
	if plan.FirstUncleanable <= plan.LogStart {
		return nil
	}
	latest := map[string]int64{}
	set, err := l.PinSealed(plan.LogStart, plan.FirstUncleanable)
	if err != nil {
		return err
	}
	var recs []keyedRec
	err = set.Walk(ctx, nil, func(b []byte) error {
		recs, err = recordsOf(b, recs[:0])
		for _, r := range recs {
			latest[r.key] = r.off
		}
		return err
	})
	set.Release()
	if err != nil {
		return err
	}
	groups := plan.Groups(c.groupBytes, plan.FirstUncleanable)
	for i, g := range groups {
		c.groups = append(c.groups, [2]int64{g[0].Base, g[len(g)-1].EndOffset})
		cleanerOffset := int64(-1)
		if i == len(groups)-1 {
			cleanerOffset = plan.FirstUncleanable
		}
		if err := c.cleanGroup(ctx, l, g, latest, cleanerOffset, i); err != nil {
			return err
		}
	}
	return nil
}

func (c *testCleaner) cleanGroup(ctx context.Context, l *Log, g []SegmentInfo, latest map[string]int64, cleanerOffset int64, i int) error {
	set, err := l.PinSealed(g[0].Base, g[len(g)-1].EndOffset)
	if err != nil {
		return err
	}
	defer set.Release()
	w, err := l.NewCleanedWriter(g[0].Base)
	if err != nil {
		return err
	}
	it := records.AcquireIter()
	defer it.Release()
	enc := records.AcquireEncoder()
	defer enc.Release()
	var buf []byte
	keep := func(r *records.Record) bool {
		return latest[string(r.Key)] == it.Header().BaseOffset+int64(r.OffsetDelta)
	}
	err = set.Walk(ctx, nil, func(b []byte) error {
		if err := it.Reset(b, 1<<20); err != nil {
			return err
		}
		n := 0
		for it.Next() {
			if keep(it.Record()) {
				n++
			}
		}
		switch {
		case n == 0:
			return nil
		case n == int(it.Header().NumRecords):
			return w.Append(b)
		}
		buf, err = BuildBatch(buf[:0], enc, it, keep, records.NoHorizon)
		if err != nil {
			return err
		}
		return w.Append(buf)
	})
	if err == nil {
		err = w.Finish()
	}
	if err != nil {
		w.Abort()
		return err
	}
	if c.beforeSwap != nil {
		c.beforeSwap(i)
	}
	return l.SwapCleaned(set, w, cleanerOffset)
}

// checkTimestamps checks OffsetForTimestamp against recs (in offset order,
// timestamps increasing with the offset), at every record's timestamp and
// just after it.
func checkTimestamps(t testing.TB, l *Log, recs []keyedRec) {
	t.Helper()
	for _, r := range recs {
		for _, ts := range []int64{r.ts, r.ts + 1} {
			i := slices.IndexFunc(recs, func(x keyedRec) bool { return x.ts >= ts })
			off, at, ok := l.OffsetForTimestamp(ts)
			if i < 0 {
				if ok {
					t.Errorf("OffsetForTimestamp(%d) = %d, want none", ts, off)
				}
				continue
			}
			if !ok || off != recs[i].off || at != recs[i].ts {
				t.Errorf("OffsetForTimestamp(%d) = %d, %d, %v; want %d, %d", ts, off, at, ok, recs[i].off, recs[i].ts)
			}
		}
	}
}

// TestCleanPassKeepLatest: a full pass, in groups of several sizes, leaves
// exactly the latest record per key below the first uncleanable offset
// and everything above it, at their offsets, through Read, ReadRef, Scan
// and OffsetForTimestamp, before and after a reopen at a new epoch; the
// manifest names only cleaned segments for the range, records the cleaner
// offset, and no input file is left.
func TestCleanPassKeepLatest(t *testing.T) {
	for _, groupBytes := range []int64{1, 1200, 1 << 20} {
		t.Run(fmt.Sprintf("group=%d", groupBytes), func(t *testing.T) {
			clk := newFakeClock()
			fsys := newMemFS(t)
			l := mustOpen(t, fsys, cleanConfig(1, clk))
			fillKeyed(t, l, 24)
			before := logRecords(t, l)
			c := &testCleaner{groupBytes: groupBytes}
			if err := c.run(context.Background(), l, clk.Now()); err != nil {
				t.Fatalf("clean: %v", err)
			}
			want := latestPerKey(before, c.end)
			if len(want) >= len(before) || c.end <= 0 {
				t.Fatalf("nothing to clean: %d of %d records kept below %d", len(want), len(before), c.end)
			}
			check := func(l *Log, when string) {
				got := logRecords(t, l)
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("%s: records\n%v\nwant\n%v", when, got, want)
				}
				checkTimestamps(t, l, want)
				if co := l.CleanerOffset(); co != c.end {
					t.Errorf("%s: cleaner offset %d, want %d", when, co, c.end)
				}
				var cleaned int
				for _, s := range l.Segments() {
					if s.Base < c.end && (s.Gen == 0 || s.Epoch != 1) {
						t.Errorf("%s: segment %+v in the cleaned range", when, s)
					}
					if s.Gen != 0 {
						cleaned++
					}
				}
				if cleaned != len(c.groups) {
					t.Errorf("%s: %d cleaned segments for %d groups", when, cleaned, len(c.groups))
				}
				if got := unnamed(t, fsys); len(got) != 0 {
					t.Errorf("%s: unnamed segment files %v", when, got)
				}
			}
			check(l, "after the pass")
			// More appends, then a reopen at the next epoch.
			fillKeyed(t, l, 2)
			want = logRecords(t, l)
			mustClose(t, l)
			l = mustOpen(t, fsys, cleanConfig(2, clk))
			defer l.Close()
			check(l, "reopened")
			data, _ := volume.ReadFile(fsys, path.Join(testDir, manifestName(2)))
			if !bytes.Contains(data, []byte(`"version": 2,`)) || !bytes.Contains(data, fmt.Appendf(nil, `"cleanerOffset": %d`, c.end)) {
				t.Errorf("manifest:\n%s", data)
			}
			// A second pass at the new epoch cleans what the first left
			// and the sealed tail.
			fillKeyed(t, l, 6)
			before = logRecords(t, l)
			c2 := &testCleaner{groupBytes: groupBytes}
			if err := c2.run(context.Background(), l, clk.Now()); err != nil {
				t.Fatalf("second clean: %v", err)
			}
			if got, want := logRecords(t, l), latestPerKey(before, c2.end); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("second pass: records\n%v\nwant\n%v", got, want)
			}
			if got := unnamed(t, fsys); len(got) != 0 {
				t.Errorf("second pass: unnamed segment files %v", got)
			}
		})
	}
}

// TestCleanablePlan: the cleanable range stops at the active segment, the
// last stable offset, a segment not yet durable or sealed after the
// durable one, and a dirty segment younger than the compaction lag; the
// cleaner offset is clamped into it.
func TestCleanablePlan(t *testing.T) {
	clk := newFakeClock()
	l := mustOpen(t, newMemFS(t), retConfig(1, clk))
	defer l.Close()
	now := clk.Now()
	tss := []int64{now.Add(-5 * time.Hour).UnixMilli(), now.Add(-4 * time.Hour).UnixMilli(), now.Add(-3 * time.Hour).UnixMilli(), now.Add(-time.Hour).UnixMilli()}
	fillSegments(t, l, 2, tss, 0) // segments [0,2) [2,4) [4,6) [6,8), the last active
	tests := []struct {
		name       string
		minLag     time.Duration
		lastStable int64
		wantEnd    int64
		wantSegs   int
	}{
		{"everything sealed", 0, math.MaxInt64, 6, 3},
		{"a last stable offset inside a segment", 0, 5, 4, 2},
		{"a last stable offset at a boundary", 0, 4, 4, 2},
		{"a last stable offset at the log start", 0, 0, 0, 0},
		{"a compaction lag", 210 * time.Minute, math.MaxInt64, 4, 2},
		{"a compaction lag over everything", 10 * time.Hour, math.MaxInt64, 0, 0},
	}
	for _, tt := range tests {
		p := l.CleanablePlan(now, tt.minLag, tt.lastStable)
		if p.FirstUncleanable != tt.wantEnd || len(p.Segments) != tt.wantSegs || p.FirstDirty != 0 || p.LogStart != 0 {
			t.Errorf("%s: %+v, want end %d over %d segments", tt.name, p, tt.wantEnd, tt.wantSegs)
		}
		if p.DirtyBytes != int64(tt.wantSegs)*int64(len(retBatch(2, 0))) || p.CleanBytes != 0 {
			t.Errorf("%s: dirty %d, clean %d bytes", tt.name, p.DirtyBytes, p.CleanBytes)
		}
	}
	// Appended but not synced: the segment it rolled stays the durable
	// one, so it is not cleanable yet.
	mustAppend(t, l, retBatch(2, now.UnixMilli()))
	if p := l.CleanablePlan(now, 0, math.MaxInt64); p.FirstUncleanable != 6 {
		t.Errorf("with a roll not yet synced: end %d, want 6", p.FirstUncleanable)
	}
	mustSync(t, l, 9)
	if p := l.CleanablePlan(now, 0, math.MaxInt64); p.FirstUncleanable != 8 {
		t.Errorf("after the sync: end %d, want 8", p.FirstUncleanable)
	}
	if _, err := l.DeleteRecordsBefore(3); err != nil {
		t.Fatal(err)
	}
	if p := l.CleanablePlan(now, 0, math.MaxInt64); p.LogStart != 3 || p.FirstDirty != 3 || p.Segments[0].Base != 2 {
		t.Errorf("after DeleteRecords: %+v", p)
	}
}

// TestCleanGroups: groups are runs of consecutive segments within the
// byte budget (a bigger segment alone) and a uint32 offset span, below the
// map's end.
func TestCleanGroups(t *testing.T) {
	seg := func(base, end, size int64) SegmentInfo {
		return SegmentInfo{Base: base, EndOffset: end, Size: size, Sealed: true}
	}
	p := CleanablePlan{Segments: []SegmentInfo{
		seg(0, 10, 100), seg(10, 20, 100), seg(20, 30, 300), seg(30, 40, 50),
		seg(40, 50, 50), seg(50, 1<<32, 10), seg(1<<32, 1<<32+40, 10), seg(1<<32+40, 1<<33, 10),
	}}
	tests := []struct {
		maxBytes, upTo int64
		want           string
	}{
		{200, math.MaxInt64, "[[0 10] [20] [30 40 50] [4294967296 4294967336]]"},
		{1 << 20, math.MaxInt64, "[[0 10 20 30 40 50] [4294967296 4294967336]]"},
		{1, math.MaxInt64, "[[0] [10] [20] [30] [40] [50] [4294967296] [4294967336]]"},
		{1 << 20, 35, "[[0 10 20 30]]"},
		{1 << 20, 30, "[[0 10 20]]"},
		{1 << 20, 0, "[]"},
	}
	for _, tt := range tests {
		var got [][]int64
		for _, g := range p.Groups(tt.maxBytes, tt.upTo) {
			var bases []int64
			for _, s := range g {
				bases = append(bases, s.Base)
			}
			got = append(got, bases)
		}
		if fmt.Sprint(got) != tt.want {
			t.Errorf("Groups(%d, %d) = %v, want %s", tt.maxBytes, tt.upTo, got, tt.want)
		}
	}
}

// TestCleanRefIntoInput: a Ref into an input of a swap stays valid and
// byte-identical until Release, and the input's files go with the release.
func TestCleanRefIntoInput(t *testing.T) {
	clk := newFakeClock()
	fsys := newMemFS(t)
	l := mustOpen(t, fsys, cleanConfig(1, clk))
	defer l.Close()
	fillKeyed(t, l, 12)
	first := l.Segments()[0]
	ref, err := l.ReadRef(0, 1<<20)
	if err != nil || ref.Len == 0 {
		t.Fatalf("ReadRef: %+v, %v", ref, err)
	}
	want := make([]byte, ref.Len)
	if err := readFullAt(ref.File, want, ref.Pos); err != nil {
		t.Fatal(err)
	}
	c := &testCleaner{groupBytes: 1 << 20}
	if err := c.run(context.Background(), l, clk.Now()); err != nil {
		t.Fatal(err)
	}
	input := segID{first.Base, first.Epoch, first.Gen}.stem() + segmentExt
	if len(present(t, fsys, []string{input})) != 1 {
		t.Fatalf("the input %s is gone while a Ref holds it", input)
	}
	got := make([]byte, ref.Len)
	if err := readFullAt(ref.File, got, ref.Pos); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("a Ref into a swapped-out input reads %v, equal %v", err, bytes.Equal(got, want))
	}
	ref.Release()
	if got := present(t, fsys, []string{input}); len(got) != 0 {
		t.Errorf("the input's file stays after the release")
	}
	if got := unnamed(t, fsys); len(got) != 0 {
		t.Errorf("unnamed segment files %v", got)
	}
}

// TestSwapCleanedRetentionRace: when retention or DeleteRecords drops a
// group's inputs between its pins and its swap, the swap aborts, removes
// its output and leaves the log healthy, with retention's result.
func TestSwapCleanedRetentionRace(t *testing.T) {
	for _, all := range []bool{false, true} { // the first input, or all of them
		t.Run(fmt.Sprintf("all=%v", all), func(t *testing.T) {
			clk := newFakeClock()
			fsys := newMemFS(t)
			l := mustOpen(t, fsys, cleanConfig(1, clk))
			defer l.Close()
			fillKeyed(t, l, 16)
			var output string
			c := &testCleaner{groupBytes: 1 << 20, beforeSwap: func(int) {
				output = slices.DeleteFunc(unnamed(t, fsys), func(n string) bool { return !strings.HasSuffix(n, segmentExt) })[0]
				drop := l.Segments()[0].EndOffset
				if all {
					drop = l.HighWatermark()
				}
				if _, err := l.DeleteRecordsBefore(drop); err != nil {
					t.Fatal(err)
				}
			}}
			err := c.run(context.Background(), l, clk.Now())
			if !errors.Is(err, ErrCleanStale) || l.Err() != nil {
				t.Fatalf("clean: %v (log %v), want ErrCleanStale", err, l.Err())
			}
			if got := present(t, fsys, []string{output}); len(got) != 0 {
				t.Errorf("the aborted output %s stays", output)
			}
			if got := unnamed(t, fsys); len(got) != 0 {
				t.Errorf("unnamed segment files %v", got)
			}
			for _, s := range l.Segments() {
				if s.Gen != 0 {
					t.Errorf("a cleaned segment %+v", s)
				}
			}
			checkStart(t, l, l.LogStartOffset())
		})
	}
}

// TestSwapCleanedFenced: a cleaner whose fence a newer writer claims,
// before its swap's first fence read or after its manifest write, removes
// nothing (neither its output nor the inputs) and fails its log with
// ErrFenced; the newer writer's log reads what it read at its Open, and its
// next Open leaves no unnamed file.
func TestSwapCleanedFenced(t *testing.T) {
	for _, when := range []string{"before the swap", "after the manifest write"} {
		t.Run(when, func(t *testing.T) {
			clk := newFakeClock()
			inner := newMemFS(t)
			var b *Log
			claim := func() {
				var err error
				if b, err = Open(inner, testDir, cleanConfig(2, clk)); err != nil {
					t.Errorf("open the newer writer: %v", err)
				}
			}
			armed := false
			fsys := faultfs.New(inner, func(op faultfs.Op) faultfs.Action {
				if armed && when == "after the manifest write" && op.Kind == faultfs.OpRename && path.Base(op.NewPath) == manifestName(1) {
					armed = false
					return faultfs.ProceedThen(claim)
				}
				return faultfs.Proceed
			})
			a := mustOpen(t, fsys, cleanConfig(1, clk))
			fillKeyed(t, a, 12)
			before := logRecords(t, a)
			c := &testCleaner{groupBytes: 1 << 20, beforeSwap: func(int) {
				if when == "before the swap" {
					claim()
				}
				armed = true
			}}
			err := c.run(context.Background(), a, clk.Now())
			if !errors.Is(err, ErrFenced) || !errors.Is(a.Err(), ErrFenced) {
				t.Fatalf("clean: %v, log %v; want ErrFenced", err, a.Err())
			}
			if b == nil {
				t.Fatal("the newer writer did not open")
			}
			inputs := segmentNamesOf(a.Segments(), 1)
			if when == "after the manifest write" {
				// b opened the new manifest: it names the output.
				inputs = nil
			}
			if got := present(t, inner, inputs); len(got) != len(inputs) {
				t.Errorf("inputs removed by a fenced cleaner: left %v of %v", got, inputs)
			}
			want := before
			if when == "after the manifest write" {
				want = latestPerKey(before, c.end)
			}
			if got := logRecords(t, b); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("the newer writer reads\n%v\nwant\n%v", got, want)
			}
			_ = a.Close()
			mustClose(t, b)
			l := mustOpen(t, inner, cleanConfig(3, clk))
			defer l.Close()
			if got := logRecords(t, l); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("reopened: reads\n%v\nwant\n%v", got, want)
			}
			if got := unnamed(t, inner); len(got) != 0 {
				t.Errorf("unnamed segment files after the next Open: %v", got)
			}
		})
	}
}

// segmentNamesOf is the .log names of segs sealed below the active one.
func segmentNamesOf(segs []SegmentInfo, epoch int32) []string {
	var out []string
	for _, s := range segs[:len(segs)-1] {
		if s.Epoch == epoch {
			out = append(out, segID{s.Base, s.Epoch, s.Gen}.stem()+segmentExt)
		}
	}
	return out
}

// inRange returns the records of recs in [lo, hi).
func inRange(recs []keyedRec, lo, hi int64) []keyedRec {
	return slices.DeleteFunc(slices.Clone(recs), func(r keyedRec) bool { return r.off < lo || r.off >= hi })
}

// checkOldOrNew fails unless got holds, in each group's range, either
// what old holds there or what cleaned does, and old's records elsewhere.
func checkOldOrNew(t testing.TB, what string, got, old, cleaned []keyedRec, groups [][2]int64) {
	t.Helper()
	covered := func(r keyedRec) bool {
		return slices.ContainsFunc(groups, func(g [2]int64) bool { return r.off >= g[0] && r.off < g[1] })
	}
	outside := func(recs []keyedRec) string {
		return fmt.Sprint(slices.DeleteFunc(slices.Clone(recs), covered))
	}
	if outside(got) != outside(old) {
		t.Fatalf("%s: outside the cleaned groups\n%v\nwant\n%v", what, outside(got), outside(old))
	}
	for _, g := range groups {
		have := fmt.Sprint(inRange(got, g[0], g[1]))
		if have != fmt.Sprint(inRange(old, g[0], g[1])) && have != fmt.Sprint(inRange(cleaned, g[0], g[1])) {
			t.Fatalf("%s: group [%d, %d) holds %s, neither the old nor the cleaned records", what, g[0], g[1], have)
		}
	}
}

// TestCleanCrashConverges crashes a cleaning pass (a takeover at epoch 2
// that cleans epoch 1's segments in several groups, then closes) at every
// mutating operation, before and after it, on every crash substrate: the
// next owner's Open reads, in every group's range, the old records or the
// cleaned ones (so never loses a record the filter kept), the old ones
// elsewhere, and leaves no segment file its manifest does not name.
func TestCleanCrashConverges(t *testing.T) {
	setup := func(fsys volume.FS, clk *fakeClock) []keyedRec {
		l := mustOpen(t, fsys, cleanConfig(1, clk))
		fillKeyed(t, l, 14)
		recs := logRecords(t, l)
		mustClose(t, l)
		return recs
	}
	workload := func(fsys volume.FS, clk *fakeClock, c *testCleaner) error {
		l, err := Open(fsys, testDir, cleanConfig(2, clk))
		if err != nil {
			return err
		}
		defer l.Close()
		if err := c.run(context.Background(), l, clk.Now()); err != nil {
			return err
		}
		return l.Close()
	}
	for _, sub := range crashSubstrates() {
		t.Run(sub.Name, func(t *testing.T) {
			var old []keyedRec
			var c *testCleaner
			run := func(inj faultfs.Injector) (*faultfs.FS, crashWorld) {
				w := sub.fresh(t)
				clk := newFakeClock()
				recs := setup(w.Host("setup"), clk)
				ffs := faultfs.New(w.Host("a"), inj)
				pass := &testCleaner{groupBytes: 1300}
				_ = workload(ffs, clk, pass)
				if inj == nil {
					old, c = recs, pass
				}
				return ffs, crashWorld{w: w, clk: clk}
			}
			swapped := 0
			n := crashEachOp(t, 40, run, func(what string, cw crashWorld) {
				if len(c.groups) < 2 {
					t.Fatalf("the pass cleaned %d groups, want several", len(c.groups))
				}
				disk := cw.w.Crash().Host("b")
				l, err := Open(disk, testDir, cleanConfig(3, cw.clk))
				if err != nil {
					t.Fatalf("%s: Open: %v", what, err)
				}
				got := logRecords(t, l)
				checkOldOrNew(t, what, got, old, latestPerKey(old, c.end), c.groups)
				if fmt.Sprint(got) != fmt.Sprint(old) {
					swapped++
				}
				if got := unnamed(t, disk); len(got) != 0 {
					t.Fatalf("%s: Open left unnamed segment files %v", what, got)
				}
				if err := l.Close(); err != nil {
					t.Fatalf("%s: close: %v", what, err)
				}
			})
			if swapped == 0 {
				t.Fatal("no crash point left a swap durable")
			}
			t.Logf("%d mutating ops; %d crash points kept a swap", n, swapped)
		})
	}
}

// TestCleanZombie: a newer writer B claims the partition (opens at epoch
// 2) at every filesystem operation of a pass of the older writer A. If
// B's Open comes before A's manifest rename, B never sees A's output: it
// reads the old records, names no cleaned segment, and A fails fenced
// without making its output visible to B; either way B reads one
// consistent log, and the next owner's Open leaves no unnamed file.
func TestCleanZombie(t *testing.T) {
	type outcome struct {
		ops     int
		renamed bool // A's swap manifest was renamed before B's Open
	}
	run := func(t *testing.T, claimAt int) outcome {
		clk := newFakeClock()
		inner := newMemFS(t)
		var b *Log
		var res outcome
		inPass := false
		fsys := faultfs.New(inner, func(op faultfs.Op) faultfs.Action {
			if !inPass {
				return faultfs.Proceed
			}
			res.ops++
			if op.Kind == faultfs.OpRename && path.Base(op.NewPath) == manifestName(1) && b == nil {
				res.renamed = true // before the claim, which ProceedThen runs after it
			}
			if res.ops-1 == claimAt {
				return faultfs.ProceedThen(func() {
					var err error
					if b, err = Open(inner, testDir, cleanConfig(2, clk)); err != nil {
						t.Errorf("open the newer writer: %v", err)
					}
				})
			}
			return faultfs.Proceed
		})
		a := mustOpen(t, fsys, cleanConfig(1, clk))
		fillKeyed(t, a, 12)
		old := logRecords(t, a)
		c := &testCleaner{groupBytes: 1 << 20}
		inPass = true
		err := c.run(context.Background(), a, clk.Now())
		inPass = false
		if claimAt < 0 || b == nil {
			_ = a.Close()
			return res
		}
		what := fmt.Sprintf("claimed at op %d", claimAt)
		cleaned := latestPerKey(old, c.end)
		got := logRecords(t, b)
		if !res.renamed {
			if fmt.Sprint(got) != fmt.Sprint(old) {
				t.Fatalf("%s, before A's swap: B reads\n%v\nwant\n%v", what, got, old)
			}
			for _, s := range b.Segments() {
				if s.Gen != 0 {
					t.Fatalf("%s: B names A's cleaned segment %+v", what, s)
				}
			}
			if err == nil && a.Err() == nil {
				t.Fatalf("%s: A's pass went on unfenced", what)
			}
		} else if fmt.Sprint(got) != fmt.Sprint(cleaned) {
			t.Fatalf("%s, after A's swap: B reads\n%v\nwant\n%v", what, got, cleaned)
		}
		_ = a.Close()
		mustClose(t, b)
		l := mustOpen(t, inner, cleanConfig(3, clk))
		defer l.Close()
		if again := logRecords(t, l); fmt.Sprint(again) != fmt.Sprint(got) {
			t.Fatalf("%s: the next owner reads\n%v\nwant B's\n%v", what, again, got)
		}
		if left := unnamed(t, inner); len(left) != 0 {
			t.Fatalf("%s: unnamed segment files after the next Open: %v", what, left)
		}
		return res
	}
	n := run(t, -1).ops
	if n < 20 {
		t.Fatalf("only %d operations in the pass", n)
	}
	before, after := 0, 0
	for i := 0; i < n; i++ {
		if run(t, i).renamed {
			after++
		} else {
			before++
		}
	}
	if before == 0 || after == 0 {
		t.Fatalf("claims before A's swap: %d, after: %d; want both", before, after)
	}
}

// TestSwapCleanedErrors: a failure writing the output (ENOSPC, a failed
// fsync) or the manifest before its rename (ENOSPC) aborts the group and
// removes the output, leaving the log healthy and unchanged, and the next
// pass succeeds; a manifest rename that fails leaves it unknown which
// manifest is durable, so the log fails and keeps the output, and the
// next Open reads one consistent log with no unnamed file.
func TestSwapCleanedErrors(t *testing.T) {
	tests := []struct {
		name  string
		kind  faultfs.OpKind
		glob  string
		err   error
		fails bool // the log fails
	}{
		{"output write ENOSPC", faultfs.OpWrite, "*.c*.log", syscall.ENOSPC, false},
		{"output index write ENOSPC", faultfs.OpWriteAt, "*.c*.index", syscall.ENOSPC, false},
		{"output fsync EIO", faultfs.OpSync, "*.c*.timeindex", syscall.EIO, false},
		{"output dir fsync EIO", faultfs.OpSyncDir, "", syscall.EIO, false},
		{"manifest temp write ENOSPC", faultfs.OpWrite, ".manifest*", syscall.ENOSPC, false},
		{"manifest rename EIO", faultfs.OpRename, "manifest-e1.json", syscall.EIO, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newFakeClock()
			inner := newMemFS(t)
			armed := false
			fsys := faultfs.New(inner, func(op faultfs.Op) faultfs.Action {
				if armed && op.Matches(tt.kind, tt.glob) {
					armed = false
					return faultfs.FailBefore(tt.err)
				}
				return faultfs.Proceed
			})
			l := mustOpen(t, fsys, cleanConfig(1, clk))
			defer l.Close()
			fillKeyed(t, l, 12)
			old := logRecords(t, l)
			armed = true
			c := &testCleaner{groupBytes: 1 << 20}
			err := c.run(context.Background(), l, clk.Now())
			if !errors.Is(err, tt.err) || armed {
				t.Fatalf("clean: %v, want %v (injected: %v)", err, tt.err, !armed)
			}
			if errors.Is(err, syscall.ENOSPC) && strings.Contains(tt.name, "manifest") && !errors.Is(err, ErrNoSpace) {
				t.Errorf("a full volume at the manifest: %v, want ErrNoSpace", err)
			}
			outputs := cleanedFiles(t, inner)
			if tt.fails {
				if !errors.Is(l.Err(), ErrLogFailed) {
					t.Fatalf("log %v, want failed", l.Err())
				}
				if len(outputs) == 0 {
					t.Errorf("the output of a swap of unknown outcome was removed")
				}
				_ = l.Close()
				l = mustOpen(t, inner, cleanConfig(2, clk))
				if got := logRecords(t, l); fmt.Sprint(got) != fmt.Sprint(old) {
					t.Errorf("reopened: reads\n%v\nwant\n%v", got, old)
				}
				if left := unnamed(t, inner); len(left) != 0 {
					t.Errorf("unnamed segment files after the next Open: %v", left)
				}
				return
			}
			if l.Err() != nil {
				t.Fatalf("log failed: %v", l.Err())
			}
			if len(outputs) != 0 {
				t.Errorf("outputs left: %v", outputs)
			}
			if got := logRecords(t, l); fmt.Sprint(got) != fmt.Sprint(old) {
				t.Errorf("after the failed pass: reads\n%v\nwant\n%v", got, old)
			}
			if err := c.run(context.Background(), l, clk.Now()); err != nil {
				t.Fatalf("the next pass: %v", err)
			}
			if got, want := logRecords(t, l), latestPerKey(old, c.end); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("after the next pass: reads\n%v\nwant\n%v", got, want)
			}
		})
	}
}

// TestRollIfQuiet: only a non-empty, wholly durable active segment whose
// first append is older than the age rolls, and once rolled it is
// cleanable at once; the log reads and appends on as before.
func TestRollIfQuiet(t *testing.T) {
	clk := newFakeClock()
	l := mustOpen(t, newMemFS(t), cleanConfig(1, clk))
	defer l.Close()
	steps := []struct {
		name   string
		do     func()
		age    time.Duration
		rolled bool
	}{
		{"empty", func() {}, 0, false},
		{"too young", func() { fillKeyed(t, l, 1); clk.Advance(time.Minute) }, time.Hour, false},
		{"not durable", func() { mustAppend(t, l, keyedBatch(rt.None, 2000, "x")); clk.Advance(time.Hour) }, time.Hour, false},
		{"quiet", func() { mustSync(t, l, math.MaxInt64) }, time.Hour, true},
		{"rolled: empty again", func() { clk.Advance(2 * time.Hour) }, time.Hour, false},
	}
	for _, st := range steps {
		st.do()
		hw := l.HighWatermark()
		rolled, err := l.RollIfQuiet(st.age)
		if err != nil || rolled != st.rolled {
			t.Fatalf("%s: RollIfQuiet = %v, %v; want %v", st.name, rolled, err, st.rolled)
		}
		if l.HighWatermark() != hw {
			t.Fatalf("%s: high watermark moved from %d to %d", st.name, hw, l.HighWatermark())
		}
		if p := l.CleanablePlan(clk.Now(), 0, math.MaxInt64); st.rolled && p.FirstUncleanable != hw {
			t.Errorf("%s: cleanable up to %d, want the rolled segment's end %d", st.name, p.FirstUncleanable, hw)
		}
	}
	if segs := l.Segments(); len(segs) != 2 || !segs[0].Sealed || segs[1].Size != 0 {
		t.Fatalf("segments %+v", segs)
	}
	want := logRecords(t, l)
	fillKeyed(t, l, 2)
	if got := logRecords(t, l); len(got) != len(want)+6 || fmt.Sprint(got[:len(want)]) != fmt.Sprint(want) {
		t.Errorf("after appending on: %v", got)
	}
}

// TestSegmentSetWalk: a pinned set walks every batch of its segments in
// order, charging the throttle with each batch's bytes; the throttle's
// error and a cancelled context stop it; a range that is not sealed and
// durable is refused.
func TestSegmentSetWalk(t *testing.T) {
	clk := newFakeClock()
	l := mustOpen(t, newMemFS(t), cleanConfig(1, clk))
	defer l.Close()
	fillKeyed(t, l, 10)
	p := l.CleanablePlan(clk.Now(), 0, math.MaxInt64)
	set, err := l.PinSealed(p.LogStart, p.FirstUncleanable)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Release()
	var size int64
	for _, s := range set.Segments() {
		size += s.Size
	}
	var charged, walked int64
	var next int64
	throttle := func(_ context.Context, n int) error { charged += int64(n); return nil }
	if err := set.Walk(context.Background(), throttle, func(b []byte) error {
		h, err := ParseStoredBatchHeader(b)
		if err != nil || h.BaseOffset != next || h.Size() != int64(len(b)) {
			return fmt.Errorf("batch %+v (%v), want one at %d", h, err, next)
		}
		next, walked = h.NextOffset(), walked+int64(len(b))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if next != p.FirstUncleanable || walked != size || charged != size {
		t.Errorf("walked to %d, %d bytes, charged %d; want %d, %d", next, walked, charged, p.FirstUncleanable, size)
	}
	stop := errors.New("stop")
	if err := set.Walk(context.Background(), func(context.Context, int) error { return stop }, func([]byte) error { return nil }); !errors.Is(err, stop) {
		t.Errorf("a throttle error: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := set.Walk(ctx, nil, func([]byte) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled walk: %v", err)
	}
	if _, err := l.PinSealed(p.LogStart, l.HighWatermark()); err == nil {
		t.Error("the active segment was pinned for cleaning")
	}
}

// TestCleanedWriter: outputs exist only inside a pass, take the next free
// generation of the writer's epoch (a taken name moves on, a reopen at
// the same epoch starts above what it finds), refuse batches out of order
// or damaged, and Abort removes every file.
func TestCleanedWriter(t *testing.T) {
	clk := newFakeClock()
	fsys := newMemFS(t)
	l := mustOpen(t, fsys, cleanConfig(1, clk))
	fillKeyed(t, l, 4)
	if _, err := l.NewCleanedWriter(0); err == nil {
		t.Fatal("a cleaned segment written outside a pass")
	}
	if err := l.BeginClean(); err != nil {
		t.Fatal(err)
	}
	if err := l.BeginClean(); err == nil {
		t.Fatal("two passes at once")
	}
	plant(t, fsys, segID{0, 1, 1}.stem()+indexExt) // gen 1 taken
	w, err := l.NewCleanedWriter(0)
	if err != nil {
		t.Fatal(err)
	}
	if want := path.Join(testDir, segID{0, 1, 2}.stem()+segmentExt); w.Name() != want {
		t.Errorf("output %s, want %s", w.Name(), want)
	}
	b := keyedBatch(rt.None, 1000, "a", "b")
	stampBatch(b, 5, 1)
	if err := w.Append(b); err != nil {
		t.Fatal(err)
	}
	bad := slices.Clone(b)
	bad[len(bad)-1] ^= 1
	stampBatch(bad, 7, 1)
	for name, batch := range map[string][]byte{"not after the last": b, "a bad crc": bad, "truncated": b[:len(b)-1]} {
		if err := w.Append(batch); err == nil {
			t.Errorf("%s: appended", name)
		}
	}
	w.Abort()
	if got := cleanedFiles(t, fsys); fmt.Sprint(got) != fmt.Sprint([]string{segID{0, 1, 1}.stem() + indexExt}) {
		t.Errorf("after Abort: cleaned files %v", got)
	}
	l.EndClean()
	if got := cleanedFiles(t, fsys); len(got) != 0 {
		t.Errorf("after the pass: cleaned files %v", got)
	}
	mustClose(t, l)
	plant(t, fsys, segID{0, 1, 7}.stem()+segmentExt) // left by a pass, listed at the next Open
	l = mustOpen(t, fsys, cleanConfig(1, clk))
	defer l.Close()
	if err := l.BeginClean(); err != nil {
		t.Fatal(err)
	}
	defer l.EndClean()
	if w, err := l.NewCleanedWriter(0); err != nil || !strings.HasSuffix(w.Name(), ".c8.log") {
		t.Errorf("after a reopen: %v, %v; want generation 8", w, err)
	} else {
		w.Abort()
	}
}

// cleanedFiles lists the cleaned segment files in the partition directory.
func cleanedFiles(t testing.TB, fsys volume.FS) []string {
	t.Helper()
	return slices.DeleteFunc(segmentNames(t, fsys), func(n string) bool { id, _ := parseAnySegmentFile(n); return id.gen == 0 })
}

// TestCleanConcurrentReaders: readers walking the log (Read, Scan) and
// looking up timestamps while passes swap groups in never see a record
// that was not written, never miss a latest value, and find every latest
// value by its timestamp (run with -race).
func TestCleanConcurrentReaders(t *testing.T) {
	clk := newFakeClock()
	l := mustOpen(t, newMemFS(t), cleanConfig(1, clk))
	defer l.Close()
	fillKeyed(t, l, 30)
	old := logRecords(t, l)
	end := l.CleanablePlan(clk.Now(), 0, math.MaxInt64).FirstUncleanable
	cleaned := latestPerKey(old, end)
	oldSet := map[string]bool{}
	for _, r := range old {
		oldSet[r.String()] = true
	}
	done := make(chan struct{})
	errs := make(chan error, 3)
	reader := func(read func() error) {
		for {
			select {
			case <-done:
				errs <- nil
				return
			default:
			}
			if err := read(); err != nil {
				errs <- err
				return
			}
		}
	}
	go reader(func() error {
		var got []keyedRec
		for off := int64(0); off < l.HighWatermark(); {
			b, err := l.Read(off, 1<<20, nil)
			if err != nil || len(b) == 0 {
				return err
			}
			for len(b) > 0 {
				h, err := ParseStoredBatchHeader(b)
				if err != nil {
					return err
				}
				if got, err = recordsOf(b[:h.Size()], got); err != nil {
					return err
				}
				b, off = b[h.Size():], h.NextOffset()
			}
		}
		have := map[string]bool{}
		for _, r := range got {
			if !oldSet[r.String()] {
				return fmt.Errorf("read %v, never written", r)
			}
			have[r.String()] = true
		}
		for _, r := range cleaned {
			if !have[r.String()] {
				return fmt.Errorf("a full read missed the latest value %v", r)
			}
		}
		return nil
	})
	go reader(func() error {
		var next int64
		return l.Scan(0, func(h BatchHeader) error {
			if h.BaseOffset < next {
				return fmt.Errorf("scan went back to %d after %d", h.BaseOffset, next)
			}
			next = h.NextOffset()
			return nil
		})
	})
	go reader(func() error {
		for _, r := range cleaned {
			off, _, ok := l.OffsetForTimestamp(r.ts)
			if !ok || off != r.off { // timestamps grow with offsets: r is the first at r.ts, cleaned or not
				return fmt.Errorf("OffsetForTimestamp(%d) = %d, %v; the cleaned log holds %d", r.ts, off, ok, r.off)
			}
		}
		return nil
	})
	for _, groupBytes := range []int64{1, 1 << 20} {
		c := &testCleaner{groupBytes: groupBytes}
		if err := c.run(context.Background(), l, clk.Now()); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	for range 3 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if got := logRecords(t, l); fmt.Sprint(got) != fmt.Sprint(cleaned) {
		t.Errorf("after the passes: reads\n%v\nwant\n%v", got, cleaned)
	}
}

// TestCleanMaxTimestamp: when cleaning removes the record holding the
// log's largest timestamp, MaxTimestamp answers the largest one left, at
// once and after a reopen, and never one of a segment cleaning emptied
// (which keeps its inputs' max timestamp for retention).
func TestCleanMaxTimestamp(t *testing.T) {
	for _, groupBytes := range []int64{1, 1 << 20} { // empty outputs, or one
		t.Run(fmt.Sprint(groupBytes), func(t *testing.T) {
			clk := newFakeClock()
			fsys := newMemFS(t)
			l := mustOpen(t, fsys, retConfig(1, clk))
			for _, b := range []struct {
				ts  int64
				key string
			}{{5000, "a"}, {3000, "b"}, {4000, "d"}, {2000, "a"}, {1000, "c"}, {1500, "d"}} {
				res := mustAppend(t, l, keyedBatch(rt.None, b.ts, b.key))
				mustSync(t, l, res.LastOffset)
				if rolled, err := l.RollIfQuiet(0); !rolled || err != nil { // one segment each
					t.Fatalf("RollIfQuiet: %v, %v", rolled, err)
				}
			}
			if off, ts, ok := l.MaxTimestamp(); !ok || off != 0 || ts != 5000 {
				t.Fatalf("before: MaxTimestamp() = %d, %d, %v", off, ts, ok)
			}
			c := &testCleaner{groupBytes: groupBytes}
			if err := c.run(context.Background(), l, clk.Now()); err != nil {
				t.Fatal(err)
			}
			if off, ts, ok := l.MaxTimestamp(); !ok || off != 1 || ts != 3000 {
				t.Errorf("after the pass: MaxTimestamp() = %d, %d, %v; want 1, 3000", off, ts, ok)
			}
			mustClose(t, l)
			l = mustOpen(t, fsys, retConfig(2, clk))
			defer l.Close()
			if off, ts, ok := l.MaxTimestamp(); !ok || off != 1 || ts != 3000 {
				t.Errorf("reopened: MaxTimestamp() = %d, %d, %v; want 1, 3000", off, ts, ok)
			}
		})
	}
}

// TestCleanRandomInterleavings runs random sequences of appends, syncs,
// cleaning passes (random group sizes), DeleteRecords, clean reopens and
// power losses, and checks after every reopen that every record read was
// written, that for every key the latest acknowledged record (or a later
// one of the key) is still there, and that no cleaned file is left
// unnamed.
func TestCleanRandomInterleavings(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 21))
			clk := newFakeClock()
			mem := newMemFS(t)
			epoch := int32(1)
			l := mustOpen(t, mem, cleanConfig(epoch, clk))
			written := map[string]bool{}
			acked := map[string]keyedRec{} // latest acknowledged record per key
			var pending []keyedRec
			ack := func() {
				hw := l.HighWatermark()
				keep := pending[:0]
				for _, r := range pending {
					if r.off >= hw {
						keep = append(keep, r)
					} else if r.off > acked[r.key].off || acked[r.key].key == "" {
						acked[r.key] = r
					}
				}
				pending = keep
			}
			check := func(when string) {
				got := logRecords(t, l)
				last := map[string]int64{}
				for _, r := range got {
					if !written[r.String()] {
						t.Fatalf("%s: read %v, never written", when, r)
					}
					last[r.key] = r.off
				}
				for k, r := range acked {
					if r.off >= l.LogStartOffset() {
						if off, ok := last[k]; !ok || off < r.off {
							t.Fatalf("%s: the latest acknowledged %v is gone (last of its key at %d, %v)", when, r, off, ok)
						}
					}
				}
				if got := cleanedFiles(t, mem); len(got) > 0 {
					for _, n := range got {
						if id, _ := parseAnySegmentFile(n); !slices.ContainsFunc(l.Segments(), func(s SegmentInfo) bool { return s.Gen == id.gen && s.Base == id.base && s.Epoch == id.epoch }) {
							t.Fatalf("%s: unnamed cleaned file %s", when, n)
						}
					}
				}
			}
			swaps := 0
			for step := 0; step < 200; step++ {
				switch r := rng.IntN(20); {
				case r < 9:
					var keys []string
					for range 1 + rng.IntN(3) {
						keys = append(keys, fmt.Sprintf("k%d", rng.IntN(6)))
					}
					off := l.LogEndOffset()
					b := keyedBatch([]rt.Codec{rt.None, rt.Gzip}[rng.IntN(2)], 1000+off, keys...)
					recs, err := recordsOf(b, nil)
					if err != nil {
						t.Fatal(err)
					}
					res := mustAppend(t, l, b)
					for _, rec := range recs {
						rec.off += res.BaseOffset
						written[rec.String()] = true
						pending = append(pending, rec)
					}
				case r < 13:
					mustSync(t, l, math.MaxInt64)
					ack()
				case r < 16:
					c := &testCleaner{groupBytes: []int64{1, 700, 1 << 20}[rng.IntN(3)]}
					if err := c.run(context.Background(), l, clk.Now()); err != nil {
						t.Fatalf("step %d: clean: %v", step, err)
					}
					swaps += len(c.groups)
					check(fmt.Sprintf("step %d, after a pass", step))
				case r < 17:
					if hw := l.HighWatermark(); hw > 0 {
						if _, err := l.DeleteRecordsBefore(rng.Int64N(hw)); err != nil {
							t.Fatal(err)
						}
					}
				default:
					power := r < 19
					if power {
						mem = mem.CrashClone()
						_ = l.Close()
					} else {
						mustClose(t, l)
						ack()
					}
					if rng.IntN(2) == 0 {
						epoch++
					}
					l = mustOpen(t, mem, cleanConfig(epoch, clk))
					check(fmt.Sprintf("step %d, reopened at epoch %d (power loss %v)", step, epoch, power))
					// What the reopened log holds is what later checks hold
					// it to.
					clear(acked)
					for _, r := range logRecords(t, l) {
						acked[r.key] = r
					}
					pending = nil
				}
			}
			mustClose(t, l)
			if swaps == 0 {
				t.Fatal("no group was swapped")
			}
		})
	}
}

package engine

import (
	"errors"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/kaas-dev/kaas/engine/dataplane"
	"github.com/kaas-dev/kaas/engine/desired"
	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/memfs"
	"github.com/kaas-dev/kaas/volume/partlog"
	"github.com/kaas-dev/kaas/volume/partlog/partlogtest"
)

// startRetentionEngine runs an engine whose retention loop never fires on
// its own during a test (the tests run passes themselves).
func startRetentionEngine(t *testing.T, fsys volume.FS) *running {
	t.Helper()
	return startWith(t, Config{FS: fsys, DataDir: testData, ClusterDir: testCluster, BrokerID: 1,
		RetentionCheckInterval: time.Hour})
}

// dirUsage sums the sizes of the segment files in dir and counts them.
func dirUsage(t *testing.T, fsys volume.FS, dir string) (files int, bytes int64) {
	t.Helper()
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".log") {
			continue
		}
		fi, err := fsys.Stat(path.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files++
		bytes += fi.Size()
	}
	return files, bytes
}

func TestRetentionPolicyOf(t *testing.T) {
	cases := []struct {
		configs map[string]string
		want    partlog.RetentionPolicy
		ok      bool
	}{
		{configs: nil, want: partlog.RetentionPolicy{Ms: 604800000, Bytes: -1}, ok: true},
		{configs: map[string]string{"retention.ms": "-1", "retention.bytes": "1000"}, want: partlog.RetentionPolicy{Ms: -1, Bytes: 1000}, ok: true},
		{configs: map[string]string{"retention.ms": "2000"}, want: partlog.RetentionPolicy{Ms: 2000, Bytes: -1}, ok: true},
		{configs: map[string]string{"cleanup.policy": "compact"}, want: partlog.RetentionPolicy{Ms: 604800000, Bytes: -1}, ok: false},
		{configs: map[string]string{"cleanup.policy": "compact, delete"}, want: partlog.RetentionPolicy{Ms: 604800000, Bytes: -1}, ok: true},
	}
	for _, tc := range cases {
		got, ok := retentionPolicyOf(desired.TopicSpec{Configs: tc.configs})
		if got != tc.want || ok != tc.ok {
			t.Errorf("retentionPolicyOf(%v) = %+v, %v; want %+v, %v", tc.configs, got, ok, tc.want, tc.ok)
		}
	}
}

func TestLimitsOf(t *testing.T) {
	got := logLimits(desired.TopicSpec{Configs: map[string]string{"segment.bytes": "4096", "segment.ms": "1500",
		"max.message.bytes": "2000", "message.timestamp.type": "LogAppendTime"}})
	want := partlog.Limits{SegmentBytes: 4096, SegmentAge: 1500 * time.Millisecond, MaxBatchBytes: 2000, LogAppendTime: true}
	if got != want {
		t.Fatalf("logLimits = %+v, want %+v", got, want)
	}
	if got := logLimits(desired.TopicSpec{}); got.LogAppendTime || got.SegmentBytes != 1073741824 {
		t.Fatalf("defaults: %+v", got)
	}
}

// TestRetentionPassBySize: a pass deletes the oldest segments beyond
// retention.bytes, frees their files, and prunes the producer snapshots
// below the new log start but the newest.
func TestRetentionPassBySize(t *testing.T) {
	ctx := safety(t)
	mem := memfs.New()
	e := startRetentionEngine(t, mem)
	if _, err := e.CreateTopic(CreateTopicRequest{Name: "sized", Partitions: 1,
		Configs: map[string]string{"segment.bytes": "2048", "retention.bytes": "8192"}}); err != nil {
		t.Fatal(err)
	}
	mustServing(t, ctx, e.Engine, "sized")
	p := mustPartition(t, e.Engine, "sized", 0)
	ts := time.Now().UnixMilli()
	for i := 0; i < 60; i++ {
		if _, err := p.Produce(ctx, partlogtest.MakeBatch(2, 300, ts, -1, -1, -1)); err != nil {
			t.Fatal(err)
		}
	}
	p.WaitSnapshot()
	before := len(p.Log().Segments())
	st := e.retentionPass(ctx)
	if st.Segments == 0 || st.Failed != 0 || st.Partitions != 1 {
		t.Fatalf("pass: %+v", st)
	}
	if got := len(p.Log().Segments()); got != before-st.Segments {
		t.Fatalf("%d segments after deleting %d of %d", got, st.Segments, before)
	}
	if size := p.Log().Size(); size < 8192 || size-p.Log().Segments()[0].Size >= 8192 {
		t.Fatalf("log size %d after the pass: the first segment should have gone", size)
	}
	files, bytes := dirUsage(t, mem, p.Dir())
	if files != len(p.Log().Segments()) || bytes != p.Log().Size() {
		t.Fatalf("%d segment files with %d bytes on the volume, the log has %d segments with %d", files, bytes, len(p.Log().Segments()), p.Log().Size())
	}
	start := p.Log().LogStartOffset()
	if start == 0 || start != p.Log().Segments()[0].Base {
		t.Fatalf("log start %d, first segment %d", start, p.Log().Segments()[0].Base)
	}
	if _, err := p.Log().Read(start-1, 1<<20, nil); !errors.Is(err, partlog.ErrOffsetOutOfRange) {
		t.Fatalf("read below the log start: %v", err)
	}
	p.WaitSnapshot()
	offs, err := dataplane.SnapshotOffsets(mem, p.Dir())
	if err != nil {
		t.Fatal(err)
	}
	below := 0
	for _, o := range offs {
		if o < start {
			below++
		}
	}
	if below > 1 || len(offs) == 0 || offs[len(offs)-1] < start {
		t.Fatalf("snapshots %v with log start %d: want at most one below it and one at or above it", offs, start)
	}
	// A second pass finds nothing.
	if st := e.retentionPass(ctx); st.Segments != 0 {
		t.Fatalf("second pass deleted %d segments", st.Segments)
	}
}

// TestRetentionPassByTimeKeepsProducerState: retention.ms expires every
// segment, the active one too; the idempotent producer's state survives
// both the deletion and a restart (its retry is still a duplicate).
func TestRetentionPassByTimeKeepsProducerState(t *testing.T) {
	ctx := safety(t)
	mem := memfs.New()
	e := startRetentionEngine(t, mem)
	if _, err := e.CreateTopic(CreateTopicRequest{Name: "timed", Partitions: 1,
		Configs: map[string]string{"segment.bytes": "2048", "retention.ms": "60000"}}); err != nil {
		t.Fatal(err)
	}
	mustServing(t, ctx, e.Engine, "timed")
	p := mustPartition(t, e.Engine, "timed", 0)
	pid, err := e.NextProducerID()
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour).UnixMilli()
	mk := func(seq int32) []byte { return partlogtest.MakeBatch(2, 300, old, pid, 0, seq) }
	var last dataplane.ProduceResult
	for i := int32(0); i < 20; i++ {
		if last, err = p.Produce(ctx, mk(i*2)); err != nil {
			t.Fatal(err)
		}
	}
	end := p.Log().LogEndOffset()
	st := e.retentionPass(ctx)
	if st.Failed != 0 || p.Log().LogStartOffset() != end {
		t.Fatalf("pass %+v: log start %d, want the log end %d", st, p.Log().LogStartOffset(), end)
	}
	if segs := p.Log().Segments(); len(segs) != 1 || segs[0].Size != 0 {
		t.Fatalf("segments after expiring everything: %+v", segs)
	}
	if files, bytes := dirUsage(t, mem, p.Dir()); files != 1 || bytes != 0 {
		t.Fatalf("%d segment files, %d bytes left", files, bytes)
	}
	// The retry of the last batch is still a duplicate, before and after
	// a restart.
	if res, err := p.Produce(ctx, mk(19*2)); err != nil || res.BaseOffset != last.BaseOffset {
		t.Fatalf("retry after retention: %+v, %v; want offset %d", res, err, last.BaseOffset)
	}
	p.WaitSnapshot()
	e.stop(t)
	e2 := startRetentionEngine(t, mem)
	mustServing(t, ctx, e2.Engine, "timed")
	p2 := mustPartition(t, e2.Engine, "timed", 0)
	if got := p2.Log().LogStartOffset(); got != end {
		t.Fatalf("log start %d after restart, want %d", got, end)
	}
	if res, err := p2.Produce(ctx, mk(19*2)); err != nil || res.BaseOffset != last.BaseOffset {
		t.Fatalf("retry after restart: %+v, %v; want offset %d", res, err, last.BaseOffset)
	}
	if res, err := p2.Produce(ctx, mk(20*2)); err != nil || res.BaseOffset != end {
		t.Fatalf("next batch after restart: %+v, %v; want offset %d", res, err, end)
	}
}

func TestPartitionDeleteRecordsBefore(t *testing.T) {
	ctx := safety(t)
	mem := memfs.New()
	e := startRetentionEngine(t, mem)
	if _, err := e.CreateTopic(CreateTopicRequest{Name: "dr", Partitions: 1,
		Configs: map[string]string{"segment.bytes": "2048"}}); err != nil {
		t.Fatal(err)
	}
	mustServing(t, ctx, e.Engine, "dr")
	p := mustPartition(t, e.Engine, "dr", 0)
	ts := time.Now().UnixMilli()
	for i := 0; i < 20; i++ {
		if _, err := p.Produce(ctx, partlogtest.MakeBatch(2, 300, ts, -1, -1, -1)); err != nil {
			t.Fatal(err)
		}
	}
	hw := p.Log().HighWatermark()
	if _, err := p.DeleteRecordsBefore(hw + 1); !errors.Is(err, partlog.ErrOffsetOutOfRange) {
		t.Fatalf("beyond the high watermark: %v", err)
	}
	start, err := p.DeleteRecordsBefore(21)
	if err != nil || start != 21 {
		t.Fatalf("DeleteRecordsBefore(21) = %d, %v", start, err)
	}
	if got, err := p.DeleteRecordsBefore(5); err != nil || got != 21 {
		t.Fatalf("DeleteRecordsBefore below the start = %d, %v", got, err)
	}
	if first := p.Log().Segments()[0]; first.Base > 21 || first.EndOffset <= 21 {
		t.Fatalf("first segment [%d,%d) should hold offset 21", first.Base, first.EndOffset)
	}
	if start, err := p.DeleteRecordsBefore(-1); err != nil || start != hw {
		t.Fatalf("DeleteRecordsBefore(-1) = %d, %v; want %d", start, err, hw)
	}
	p.WaitSnapshot()
	e.stop(t)
	e2 := startRetentionEngine(t, mem)
	mustServing(t, ctx, e2.Engine, "dr")
	if got := mustPartition(t, e2.Engine, "dr", 0).Log().LogStartOffset(); got != hw {
		t.Fatalf("log start %d after restart, want %d", got, hw)
	}
}

package engine

import (
	"context"
	"fmt"
	"math"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/kaas-dev/kaas/engine/dataplane"
	"github.com/kaas-dev/kaas/engine/desired"
	"github.com/kaas-dev/kaas/states"
	"github.com/kaas-dev/kaas/volume/memfs"
	"github.com/kaas-dev/kaas/volume/partlog"
	"github.com/kaas-dev/kaas/volume/partlog/partlogtest"
)

// startCleanerEngine runs an engine whose cleaner threads do not run (the
// tests run its passes themselves) on a clock the test moves.
func startCleanerEngine(t *testing.T, clock *testClock, cleaner CleanerConfig) *running {
	t.Helper()
	cleaner.Disable = true
	return startWith(t, Config{FS: memfs.New(), DataDir: testData, ClusterDir: testCluster, BrokerID: 1,
		RetentionCheckInterval: time.Hour, Now: clock.Now, Cleaner: cleaner})
}

// cleanAll runs passes until no partition needs one, and returns how many.
func cleanAll(t *testing.T, ctx context.Context, c *cleaner) int {
	t.Helper()
	var m *dataplane.OffsetMap
	for n := 0; ; n++ {
		sp, ok := c.pick()
		if !ok {
			return n
		}
		var err error
		m, err = c.clean(ctx, sp, m)
		c.done(sp, err)
		if err != nil {
			t.Fatalf("pass %d over %s/%d: %v", n+1, sp.spec.Name, sp.p.Index, err)
		}
		if n > 50 {
			t.Fatal("the cleaner keeps finding work")
		}
	}
}

// readAll returns every record of the log in offset order: key, value
// (nil for a tombstone) and offset.
type keptRecord struct {
	key, value string
	tombstone  bool
	offset     int64
}

func readAll(t *testing.T, lg *partlog.Log) []keptRecord {
	t.Helper()
	var out []keptRecord
	for next := lg.LogStartOffset(); next < lg.HighWatermark(); {
		buf, err := lg.Read(next, math.MaxInt32, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(buf) == 0 {
			break
		}
		out, next = appendKept(t, out, buf)
	}
	return out
}

// appendKept appends the records of the batches in buf and returns the
// offset after the last batch.
func appendKept(t *testing.T, out []keptRecord, buf []byte) ([]keptRecord, int64) {
	t.Helper()
	var next int64
	for len(buf) > 0 {
		h, err := partlog.ParseStoredBatchHeader(buf)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := partlogtest.Records(buf[:h.Size()])
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			out = append(out, keptRecord{key: string(r.Key), value: string(r.Value), tombstone: r.Value == nil,
				offset: h.BaseOffset + int64(r.OffsetDelta)})
		}
		next = h.LastOffset() + 1
		buf = buf[h.Size():]
	}
	return out, next
}

// TestCleanerKeepsLatestPerKey is the first acceptance point at
// engine level: 10 keys x 20 versions, then 3 tombstones; after the
// passes, and once delete.retention.ms has passed, exactly the 7 latest
// values at their original offsets.
func TestCleanerKeepsLatestPerKey(t *testing.T) {
	ctx := safety(t)
	clock := newTestClock()
	e := startCleanerEngine(t, clock, CleanerConfig{})
	if _, err := e.CreateTopic(CreateTopicRequest{Name: "latest", Partitions: 1,
		Configs: map[string]string{"cleanup.policy": "compact", "segment.bytes": "1024", "segment.ms": "100",
			"min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "1000"}}); err != nil {
		t.Fatal(err)
	}
	mustServing(t, ctx, e.Engine, "latest")
	p := mustPartition(t, e.Engine, "latest", 0)
	produce := func(key, value []byte) int64 {
		t.Helper()
		res, err := p.Produce(ctx, partlogtest.Make(partlogtest.Options{NumRecords: 1, Timestamp: clock.Now().UnixMilli(),
			ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Keys: [][]byte{key}, Values: [][]byte{value}}))
		if err != nil {
			t.Fatal(err)
		}
		return res.BaseOffset
	}
	latest := map[string]int64{}
	for v := range 20 {
		for k := range 10 {
			key := fmt.Sprintf("k%d", k)
			latest[key] = produce([]byte(key), fmt.Appendf(nil, "%s-v%d", key, v))
		}
	}
	for k := range 3 {
		produce(fmt.Appendf(nil, "k%d", k), nil)
	}
	end := p.Log().LogEndOffset()
	clock.Advance(time.Second) // the active segment is quiet: it rolls
	if n := cleanAll(t, ctx, e.cleaner); n == 0 {
		t.Fatal("no pass ran over a dirty compacted partition")
	}
	got := readAll(t, p.Log())
	if len(got) != 10 {
		t.Fatalf("after the first passes: %d records, want the 7 latest values and 3 tombstones: %+v", len(got), got)
	}
	clock.Advance(2 * time.Second) // past the tombstones' horizon
	if n := cleanAll(t, ctx, e.cleaner); n == 0 {
		t.Fatal("no pass ran once the tombstones' horizon passed")
	}
	got = readAll(t, p.Log())
	if len(got) != 7 {
		t.Fatalf("%d records, want the 7 latest values: %+v", len(got), got)
	}
	for i, r := range got {
		if r.tombstone || r.offset != latest[r.key] || r.value != r.key+"-v19" {
			t.Errorf("record %+v: want %s-v19 at offset %d", r, r.key, latest[r.key])
		}
		if i > 0 && r.offset <= got[i-1].offset {
			t.Errorf("offsets not increasing: %d after %d", r.offset, got[i-1].offset)
		}
	}
	if p.Log().LogEndOffset() != end {
		t.Fatalf("log end %d, was %d: offsets must not change", p.Log().LogEndOffset(), end)
	}
	rec := statusOf(t, e.fsys, states.SegmentCompact.Kind, states.PartitionObject("latest", 0))
	if rec == nil || rec.State != states.SegmentCompact.End || rec.Compact == nil {
		t.Fatalf("segment-compact record: %+v", rec)
	}
	// Nothing changes: no pass, no volume I/O.
	if n := cleanAll(t, ctx, e.cleaner); n != 0 {
		t.Fatalf("%d passes with nothing to clean", n)
	}
	// The cleaner's counters saw it.
	if e.cleaner.stats.superseded.Load() < 190 || e.cleaner.stats.tombstones.Load() != 3 {
		t.Fatalf("superseded %d, tombstones %d", e.cleaner.stats.superseded.Load(), e.cleaner.stats.tombstones.Load())
	}
}

// TestCleanerNegativeControlDropsLatest: with compact-drop-latest on, a
// key's latest value goes; the checks above would catch it.
func TestCleanerNegativeControlDropsLatest(t *testing.T) {
	ctx := safety(t)
	clock := newTestClock()
	e := startCleanerEngine(t, clock, CleanerConfig{})
	e.cleaner.dropLatest = true
	if _, err := e.CreateTopic(CreateTopicRequest{Name: "lossy", Partitions: 1,
		Configs: map[string]string{"cleanup.policy": "compact", "segment.bytes": "1024", "segment.ms": "100",
			"min.cleanable.dirty.ratio": "0.01"}}); err != nil {
		t.Fatal(err)
	}
	mustServing(t, ctx, e.Engine, "lossy")
	p := mustPartition(t, e.Engine, "lossy", 0)
	for v := range 3 {
		for k := range 256 {
			if _, err := p.Produce(ctx, partlogtest.Make(partlogtest.Options{NumRecords: 1, Timestamp: clock.Now().UnixMilli(),
				ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Keys: [][]byte{fmt.Appendf(nil, "k%d", k)},
				Values: [][]byte{fmt.Appendf(nil, "v%d", v)}})); err != nil {
				t.Fatal(err)
			}
		}
	}
	clock.Advance(time.Second)
	cleanAll(t, ctx, e.cleaner)
	if got := len(readAll(t, p.Log())); got >= 256 {
		t.Fatalf("%d records survive: the negative control removed no latest value", got)
	}
}

func TestCompactPolicyOf(t *testing.T) {
	cases := []struct {
		configs map[string]string
		ok      bool
		age     time.Duration
	}{
		{configs: nil, ok: false},
		{configs: map[string]string{"cleanup.policy": "delete"}, ok: false},
		{configs: map[string]string{"cleanup.policy": "compact"}, ok: true, age: 7 * 24 * time.Hour},
		{configs: map[string]string{"cleanup.policy": "compact,delete", "max.compaction.lag.ms": "60000"}, ok: true, age: time.Minute},
		{configs: map[string]string{"cleanup.policy": "delete, compact", "segment.ms": "1000"}, ok: true, age: time.Second},
	}
	for _, tc := range cases {
		pol, ok := compactPolicyOf(desired.TopicSpec{Configs: tc.configs})
		if ok != tc.ok || (ok && pol.segmentAge != tc.age) {
			t.Errorf("compactPolicyOf(%v) = %+v, %v; want ok %v, segment age %v", tc.configs, pol, ok, tc.ok, tc.age)
		}
		if lim := logLimits(desired.TopicSpec{Configs: tc.configs}); ok && lim.SegmentAge != tc.age {
			t.Errorf("logLimits(%v).SegmentAge = %v, want %v", tc.configs, lim.SegmentAge, tc.age)
		}
	}
}

// TestCleanerForgetsRemovedAbortsAfterACrash: a pass removes an aborted
// transaction's data, a later one its abort marker; if the process dies
// before the producer snapshot that forgets the aborted entry, the next
// load starts from an older snapshot that still lists it, and must drop
// it (read_committed consumers would otherwise skip the producer's later
// transactions).
func TestCleanerForgetsRemovedAbortsAfterACrash(t *testing.T) {
	ctx := safety(t)
	clock := newTestClock()
	mem := memfs.New()
	cfg := Config{FS: mem, DataDir: testData, ClusterDir: testCluster, BrokerID: 1,
		RetentionCheckInterval: time.Hour, Now: clock.Now, Cleaner: CleanerConfig{Disable: true}}
	e := startWith(t, cfg)
	if _, err := e.CreateTopic(CreateTopicRequest{Name: "txns", Partitions: 1,
		Configs: map[string]string{"cleanup.policy": "compact", "segment.bytes": "1024", "segment.ms": "100",
			"min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "1000"}}); err != nil {
		t.Fatal(err)
	}
	mustServing(t, ctx, e.Engine, "txns")
	p := mustPartition(t, e.Engine, "txns", 0)
	pid, err := e.NextProducerID()
	if err != nil {
		t.Fatal(err)
	}
	keyed := func(pid int64, seq int32, attrs int16, key string) []byte {
		return partlogtest.Make(partlogtest.Options{NumRecords: 1, Timestamp: clock.Now().UnixMilli(), ProducerID: pid,
			ProducerEpoch: 0, BaseSequence: seq, Attributes: attrs, Keys: [][]byte{[]byte(key)}, Values: [][]byte{[]byte("v")}})
	}
	p.Verified(pid, 0)
	if _, err := p.Produce(ctx, keyed(pid, 0, 0x10, "aborted")); err != nil {
		t.Fatal(err)
	}
	if err := p.WriteMarker(ctx, pid, 0, false, 0); err != nil {
		t.Fatal(err)
	}
	// The producer writes on: the aborted batch is not its last, which the
	// cleaner would keep (emptied), and with it the marker.
	if _, err := p.Produce(ctx, keyed(pid, 1, 0, "k0")); err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		if _, err := p.Produce(ctx, keyed(-1, -1, 0, fmt.Sprintf("k%d", i%5))); err != nil {
			t.Fatal(err)
		}
	}
	end := p.Log().LogEndOffset()
	if got := p.AbortedTransactions(0, end, nil); len(got) != 1 {
		t.Fatalf("aborted list %+v, want the one transaction", got)
	}
	p.SnapshotAtEnd()
	p.WaitSnapshot()
	before, err := dataplane.SnapshotOffsets(mem, p.Dir())
	if err != nil || len(before) == 0 {
		t.Fatalf("snapshots %v, %v", before, err)
	}
	for i := range 3 { // the passes' snapshot comes after this one
		if _, err := p.Produce(ctx, keyed(-1, -1, 0, fmt.Sprintf("k%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(time.Second)
	cleanAll(t, ctx, e.cleaner) // the aborted data goes, then the marker gets its horizon
	clock.Advance(2 * time.Second)
	cleanAll(t, ctx, e.cleaner) // the marker goes
	if got := p.AbortedTransactions(0, end, nil); len(got) != 0 {
		t.Fatalf("aborted list %+v after its marker was removed", got)
	}
	p.WaitSnapshot()
	dir := p.Dir()
	e.stop(t)
	// The crash came before the snapshot that forgot the entry.
	ents, err := mem.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range ents {
		var off int64
		if _, err := fmt.Sscanf(de.Name(), "%020d", &off); err == nil && strings.HasSuffix(de.Name(), ".producers") && off > before[len(before)-1] {
			if err := mem.Remove(path.Join(dir, de.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	e = startWith(t, cfg)
	mustServing(t, ctx, e.Engine, "txns")
	p = mustPartition(t, e.Engine, "txns", 0)
	if got := p.AbortedTransactions(0, end, nil); len(got) != 0 {
		t.Fatalf("after a reload from the older snapshot the aborted list is %+v: the removed marker's entry came back", got)
	}
}

package dataplane

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/kaas-dev/kaas/volume/partlog"
	"github.com/kaas-dev/kaas/volume/records"
	"github.com/kaas-dev/kaas/volume/records/recordstest"
)

const (
	testNow       = 1_000_000
	testRetention = 1000
)

// withHorizon is b as an earlier pass left it: every record kept, under
// the delete horizon h.
func withHorizon(t testing.TB, b []byte, h int64) []byte {
	t.Helper()
	it := records.AcquireIter()
	defer it.Release()
	if err := it.Reset(b, 1<<26); err != nil {
		t.Fatal(err)
	}
	e := records.AcquireEncoder()
	defer e.Release()
	out, err := partlog.BuildBatch(nil, e, it, func(*records.Record) bool { return true }, h)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// emptied is b as an earlier pass kept it for its producer: no records.
func emptied(b []byte) []byte {
	var h partlog.BatchHeader
	h.Decode(b)
	return appendEmptyBatch(nil, h)
}

// TestFilterRules checks the filter's rules one by one: the outcome of
// every batch, the offsets that survive, and what each rule counts.
func TestFilterRules(t *testing.T) {
	marker := func(base, pid int64, commit bool) []byte { return markerAt(base, pid, 0, commit, testNow-5000) }
	tests := []struct {
		name    string
		batches [][]byte
		aborted []AbortedTxn
		live    map[int64]LastRecord
		budget  int   // map bytes; 0: plenty
		end     int64 // first uncleanable offset; 0: beyond every batch
		want    []Outcome
		offsets []int64 // surviving record offsets
		removed []AbortedTxn
		stats   CleanStats // only the removal counters are compared
		check   func(t *testing.T, outs [][]byte)
	}{
		{
			name: "unchanged batches are copied",
			batches: [][]byte{
				spec{base: 0, recs: []kv{rec("a", "1"), rec("b", "1")}}.bytes(),
				spec{base: 2, recs: []kv{rec("c", "1")}}.bytes(),
			},
			want:    []Outcome{BatchCopied, BatchCopied},
			offsets: []int64{0, 1, 2},
		},
		{
			name: "only the latest record of a key stays, at its offset",
			batches: [][]byte{
				spec{base: 0, recs: []kv{rec("a", "1"), rec("b", "1")}}.bytes(),
				spec{base: 2, recs: []kv{rec("a", "2")}}.bytes(),
				spec{base: 3, recs: []kv{rec("b", "2"), rec("b", "3")}}.bytes(),
			},
			want:    []Outcome{BatchDropped, BatchCopied, BatchRewritten},
			offsets: []int64{2, 4},
			stats:   CleanStats{Superseded: 3},
		},
		{
			name:    "keyless records go",
			batches: [][]byte{spec{base: 0, recs: []kv{keyless("x"), rec("a", "1"), keyless("y")}}.bytes()},
			want:    []Outcome{BatchRewritten},
			offsets: []int64{1},
			stats:   CleanStats{Keyless: 2},
		},
		{
			// One key fills a 2-slot map: it ends after offset 0.
			name: "records at or above the map's end stay, keyless too",
			batches: [][]byte{
				spec{base: 0, recs: []kv{rec("a", "1")}}.bytes(),
				spec{base: 1, recs: []kv{rec("b", "1"), keyless("x"), rec("a", "2")}}.bytes(),
			},
			budget:  48,
			want:    []Outcome{BatchCopied, BatchCopied},
			offsets: []int64{0, 1, 2, 3},
		},
		{
			name: "a kept tombstone gets a delete horizon, timestamps unchanged",
			batches: [][]byte{
				spec{base: 0, recs: []kv{rec("a", "1")}, ts: 100}.bytes(),
				spec{base: 1, recs: []kv{rec("b", "1"), tomb("a")}, ts: 200}.bytes(),
			},
			want:    []Outcome{BatchDropped, BatchRewritten},
			offsets: []int64{1, 2},
			stats:   CleanStats{Superseded: 1},
			check: func(t *testing.T, outs [][]byte) {
				h, rs := decode(t, outs[0])
				if !h.HasDeleteHorizon() || h.FirstTimestamp != testNow+testRetention {
					t.Errorf("horizon %v %d, want %d", h.HasDeleteHorizon(), h.FirstTimestamp, testNow+testRetention)
				}
				if rs[0].ts != 200 || rs[1].ts != 201 || h.MaxTimestamp != 201 {
					t.Errorf("timestamps %d %d max %d, want 200 201 201", rs[0].ts, rs[1].ts, h.MaxTimestamp)
				}
			},
		},
		{
			name:    "a tombstone stays until its horizon",
			batches: [][]byte{withHorizon(t, spec{base: 0, recs: []kv{tomb("a")}}.bytes(), testNow+1)},
			want:    []Outcome{BatchCopied},
			offsets: []int64{0},
		},
		{
			name:    "a tombstone goes at its horizon",
			batches: [][]byte{withHorizon(t, spec{base: 0, recs: []kv{tomb("a"), rec("b", "1")}}.bytes(), testNow)},
			want:    []Outcome{BatchRewritten},
			offsets: []int64{1},
			stats:   CleanStats{Tombstones: 1},
			check: func(t *testing.T, outs [][]byte) {
				if h, _ := decode(t, outs[0]); !h.HasDeleteHorizon() || h.FirstTimestamp != testNow {
					t.Errorf("the batch lost its horizon: %v %d", h.HasDeleteHorizon(), h.FirstTimestamp)
				}
			},
		},
		{
			name: "an aborted batch goes, and its newer value does not hide the committed one",
			batches: [][]byte{
				spec{base: 0, recs: []kv{rec("a", "1")}}.bytes(),
				spec{base: 1, pid: 5, txn: true, recs: []kv{rec("a", "2")}}.bytes(),
				marker(2, 5, false),
			},
			aborted: []AbortedTxn{{ProducerID: 5, FirstOffset: 1, LastOffset: 2}},
			want:    []Outcome{BatchCopied, BatchDropped, BatchCopied},
			offsets: []int64{0, 2},
			stats:   CleanStats{Aborted: 1},
		},
		{
			name: "an aborted batch a live producer ends with is kept empty",
			batches: [][]byte{
				spec{base: 1, pid: 5, epoch: 3, seq: 7, txn: true, codec: recordstest.Zstd, recs: []kv{rec("a", "2"), rec("b", "2")}}.bytes(),
				marker(3, 5, false),
			},
			aborted: []AbortedTxn{{ProducerID: 5, FirstOffset: 1, LastOffset: 3}},
			live:    map[int64]LastRecord{5: {LastDataOffset: 2, Epoch: 3}},
			want:    []Outcome{BatchEmptied, BatchCopied},
			offsets: []int64{3},
			stats:   CleanStats{Aborted: 2},
			check: func(t *testing.T, outs [][]byte) {
				h, _ := decode(t, outs[0])
				if h.BaseOffset != 1 || h.LastOffsetDelta != 1 || h.NumRecords != 0 || h.ProducerID != 5 ||
					h.ProducerEpoch != 3 || h.BaseSequence != 7 || !h.IsTransactional() || h.Compression() != 0 {
					t.Errorf("empty batch header %+v", h)
				}
			},
		},
		{
			name:    "an abort marker whose data is gone gets a horizon",
			batches: [][]byte{marker(3, 5, false)},
			aborted: []AbortedTxn{{ProducerID: 5, FirstOffset: 1, LastOffset: 3}},
			want:    []Outcome{BatchRewritten},
			offsets: []int64{3},
			check: func(t *testing.T, outs [][]byte) {
				h, rs := decode(t, outs[0])
				if !h.HasDeleteHorizon() || h.FirstTimestamp != testNow+testRetention || !h.IsControl() || len(rs) != 1 {
					t.Errorf("marker %+v", h)
				}
			},
		},
		{
			name:    "an abort marker past its horizon goes, and its entry is reported",
			batches: [][]byte{withHorizon(t, marker(3, 5, false), testNow)},
			aborted: []AbortedTxn{{ProducerID: 5, FirstOffset: 1, LastOffset: 3}},
			want:    []Outcome{BatchDropped},
			removed: []AbortedTxn{{ProducerID: 5, FirstOffset: 1, LastOffset: 3}},
			stats:   CleanStats{Markers: 1},
		},
		{
			name:    "a removed marker a live producer ends with is kept empty",
			batches: [][]byte{withHorizon(t, marker(3, 5, false), testNow)},
			aborted: []AbortedTxn{{ProducerID: 5, FirstOffset: 1, LastOffset: 3}},
			live:    map[int64]LastRecord{5: {LastDataOffset: -1, Epoch: 0}},
			want:    []Outcome{BatchEmptied},
			removed: []AbortedTxn{{ProducerID: 5, FirstOffset: 1, LastOffset: 3}},
			stats:   CleanStats{Markers: 1},
		},
		{
			name: "a marker stays while its transaction has a batch",
			batches: [][]byte{
				spec{base: 0, pid: 6, txn: true, recs: []kv{rec("a", "1"), rec("b", "1")}}.bytes(),
				withHorizon(t, marker(2, 6, true), testNow),
				spec{base: 3, recs: []kv{rec("a", "2")}}.bytes(),
			},
			want:    []Outcome{BatchRewritten, BatchCopied, BatchCopied},
			offsets: []int64{1, 2, 3},
			stats:   CleanStats{Superseded: 1},
		},
		{
			name: "a commit marker goes at its horizon once its data is gone",
			batches: [][]byte{
				withHorizon(t, marker(2, 6, true), testNow),
				marker(3, 7, true),
			},
			want:    []Outcome{BatchDropped, BatchRewritten},
			offsets: []int64{3},
			stats:   CleanStats{Markers: 1},
		},
		{
			name:    "an empty control batch goes",
			batches: [][]byte{emptied(marker(2, 6, true))},
			want:    []Outcome{BatchDropped},
		},
		{
			name:    "an empty control batch of a live producer's epoch stays",
			batches: [][]byte{emptied(marker(2, 6, true))},
			live:    map[int64]LastRecord{6: {LastDataOffset: -1}},
			want:    []Outcome{BatchCopied},
		},
		{
			name: "a superseded batch a live producer ends with is kept empty, others go",
			batches: [][]byte{
				spec{base: 0, pid: 7, seq: 0, recs: []kv{rec("a", "1")}}.bytes(),
				spec{base: 1, pid: 7, seq: 1, recs: []kv{rec("a", "2")}}.bytes(),
				spec{base: 2, pid: 8, seq: 0, recs: []kv{rec("b", "1")}}.bytes(),
				spec{base: 3, recs: []kv{rec("a", "3"), rec("b", "2")}}.bytes(),
			},
			live:    map[int64]LastRecord{7: {LastDataOffset: 1}, 9: {LastDataOffset: 2}},
			want:    []Outcome{BatchDropped, BatchEmptied, BatchDropped, BatchCopied},
			offsets: []int64{3, 4},
			stats:   CleanStats{Superseded: 3},
		},
		{
			name:    "an already empty data batch goes once its producer moved on",
			batches: [][]byte{emptied(spec{base: 0, pid: 7, recs: []kv{rec("a", "1")}}.bytes())},
			live:    map[int64]LastRecord{7: {LastDataOffset: 5}},
			want:    []Outcome{BatchDropped},
		},
		{
			name: "a batch reaching the first uncleanable offset is copied untouched",
			batches: [][]byte{
				spec{base: 0, recs: []kv{rec("a", "1")}}.bytes(),
				spec{base: 1, pid: 5, txn: true, recs: []kv{rec("a", "2")}}.bytes(),
			},
			aborted: []AbortedTxn{{ProducerID: 5, FirstOffset: 1, LastOffset: 9}},
			end:     1,
			want:    []Outcome{BatchCopied, BatchCopied},
			offsets: []int64{0, 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			budget, end := tt.budget, tt.end
			if budget == 0 {
				budget = 1 << 12
			}
			if end == 0 {
				end = 1 << 40
			}
			m, res := mapOf(t, budget, 0, end, tt.aborted, tt.batches...)
			f := NewFilter(FilterConfig{MapEnd: res.End, End: end, Now: testNow, DeleteRetentionMs: testRetention, DecodeLimit: 1 << 26},
				m, tt.aborted, tt.live)
			defer f.Close()
			outs, outcomes := filterAll(t, f, tt.batches...)
			if !slices.Equal(outcomes, tt.want) {
				t.Errorf("outcomes %v, want %v", outcomes, tt.want)
			}
			var offsets []int64
			for _, out := range outs {
				_, rs := decode(t, out)
				for _, r := range rs {
					offsets = append(offsets, r.offset)
				}
			}
			if !slices.Equal(offsets, tt.offsets) {
				t.Errorf("offsets %v, want %v", offsets, tt.offsets)
			}
			// A copied batch is the input byte for byte.
			i := 0
			for j, o := range outcomes {
				if o == BatchDropped {
					continue
				}
				if o == BatchCopied && !bytes.Equal(outs[i], tt.batches[j]) {
					t.Errorf("batch %d copied with changes", j)
				}
				var in, out partlog.BatchHeader
				in.Decode(tt.batches[j])
				out.Decode(outs[i])
				if in.BaseOffset != out.BaseOffset || in.LastOffsetDelta != out.LastOffsetDelta || in.BaseSequence != out.BaseSequence {
					t.Errorf("batch %d: offsets or sequence changed: %+v -> %+v", j, in, out)
				}
				i++
			}
			if !slices.Equal(f.RemovedAborts(), tt.removed) {
				t.Errorf("removed aborts %v, want %v", f.RemovedAborts(), tt.removed)
			}
			s := f.Stats()
			got := CleanStats{Superseded: s.Superseded, Tombstones: s.Tombstones, Keyless: s.Keyless, Aborted: s.Aborted, Markers: s.Markers}
			if got != tt.stats {
				t.Errorf("stats %+v, want %+v", got, tt.stats)
			}
			if s.BatchesRead != int64(len(tt.batches)) || s.Copied+s.Rewritten+s.Emptied+s.Dropped != s.BatchesRead {
				t.Errorf("batch counts %+v", s)
			}
			if tt.check != nil {
				tt.check(t, outs)
			}
		})
	}
}

// TestFilterCodecs: a rewritten batch keeps its codec and its kept
// records byte for byte, whatever the codec.
func TestFilterCodecs(t *testing.T) {
	for _, c := range recordstest.Codecs {
		t.Run(c.String(), func(t *testing.T) {
			recs := []kv{rec("a", "old"), rec("b", strings.Repeat("b", 100)), tomb("c"), rec("d", "1")}
			batches := [][]byte{
				spec{base: 10, codec: c, recs: recs, ts: 50}.bytes(),
				spec{base: 14, recs: []kv{rec("a", "new")}}.bytes(),
			}
			m, res := mapOf(t, 1<<12, 0, 100, nil, batches...)
			f := NewFilter(FilterConfig{MapEnd: res.End, End: 100, Now: testNow, DeleteRetentionMs: testRetention, DecodeLimit: 1 << 26}, m, nil, nil)
			defer f.Close()
			outs, _ := filterAll(t, f, batches...)
			h, rs := decode(t, outs[0])
			if h.Compression() != int8(c.ID()) {
				t.Errorf("codec %d, want %d", h.Compression(), c.ID())
			}
			_, in := decode(t, batches[0])
			if len(rs) != 3 || !slices.EqualFunc(rs, in[1:], func(a, b outRec) bool {
				return a.offset == b.offset && a.ts == b.ts && bytes.Equal(a.key, b.key) && bytes.Equal(a.value, b.value) && (a.value == nil) == (b.value == nil)
			}) {
				t.Errorf("kept %+v, want %+v", rs, in[1:])
			}
		})
	}
}

// TestFilterUndecodable: a batch beyond the decode limit is kept as it is,
// and a later tombstone, which may be all that hides one of its values,
// stays past its horizon.
func TestFilterUndecodable(t *testing.T) {
	big := spec{base: 0, codec: recordstest.Zstd, recs: []kv{rec("a", strings.Repeat("x", 10000))}}.bytes()
	batches := [][]byte{
		big,
		withHorizon(t, spec{base: 1, recs: []kv{tomb("a"), tomb("b")}}.bytes(), testNow-1),
	}
	m, err := NewOffsetMap(1 << 12)
	if err != nil {
		t.Fatal(err)
	}
	res, err := BuildOffsetMap(m, iterOf(batches...), 0, 100, nil, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if res.Undecodable != 1 || res.End != 3 {
		t.Errorf("map %+v, want 1 undecodable, end 3", res)
	}
	f := NewFilter(FilterConfig{MapEnd: res.End, End: 100, Now: testNow, DeleteRetentionMs: testRetention, DecodeLimit: 1000}, m, nil, nil)
	defer f.Close()
	outs, outcomes := filterAll(t, f, batches...)
	if !slices.Equal(outcomes, []Outcome{BatchCopied, BatchCopied}) || !bytes.Equal(outs[0], big) {
		t.Errorf("outcomes %v", outcomes)
	}
	if s := f.Stats(); s.KeptUndecodable != 1 || s.Tombstones != 0 {
		t.Errorf("stats %+v", s)
	}
}

// TestFilterRefusesCorruptBatches: the cleaner neither copies nor rewrites
// a batch whose CRC or place is wrong (a rewrite would bless it).
func TestFilterRefusesCorruptBatches(t *testing.T) {
	good := spec{base: 4, recs: []kv{rec("a", "1")}}.bytes()
	flipped := slices.Clone(good)
	flipped[len(flipped)-2] ^= 1
	short := good[:len(good)-1]
	m, _ := NewOffsetMap(1 << 10)
	for _, c := range []struct {
		name   string
		offset int64
		b      []byte
	}{{"crc", 4, flipped}, {"offset", 5, good}, {"length", 4, short}, {"header", 4, good[:20]}} {
		f := NewFilter(FilterConfig{MapEnd: 10, End: 10, Now: testNow, DecodeLimit: 1 << 20}, m, nil, nil)
		if _, _, err := f.Batch(nil, c.offset, c.b); !errors.Is(err, partlog.ErrCorruptBatch) {
			t.Errorf("%s: %v, want ErrCorruptBatch", c.name, err)
		}
		f.Close()
		if _, err := BuildOffsetMap(m, &sliceIter{batches: [][]byte{c.b}}, 0, 10, nil, 1<<20); err == nil && c.offset == 4 {
			t.Errorf("%s: the map build took it", c.name)
		}
	}
}

func TestBuildOffsetMap(t *testing.T) {
	batches := [][]byte{
		spec{base: 0, recs: []kv{rec("a", "0"), rec("b", "0")}}.bytes(),                 // 0-1
		spec{base: 2, recs: []kv{rec("a", "2"), keyless("x")}}.bytes(),                  // 2-3
		spec{base: 4, pid: 5, txn: true, recs: []kv{rec("a", "4")}}.bytes(),             // 4, aborted
		markerAt(5, 5, 0, false, 0),                                                     // 5
		spec{base: 6, pid: 6, txn: true, recs: []kv{rec("c", "6")}}.bytes(),             // 6, committed
		markerAt(7, 6, 0, true, 0),                                                      // 7
		spec{base: 8, recs: []kv{rec("d", "8"), rec("e", "9"), rec("f", "10")}}.bytes(), // 8-10
	}
	aborted := []AbortedTxn{{ProducerID: 5, FirstOffset: 4, LastOffset: 5}}
	type want struct {
		end  int64
		full bool
		keys map[string]int64
	}
	tests := []struct {
		name       string
		budget     int
		firstDirty int64
		end        int64
		want       want
	}{
		{"whole range", 1 << 10, 0, 100, want{11, false, map[string]int64{"a": 2, "b": 1, "c": 6, "d": 8, "e": 9, "f": 10}}},
		{"from the first dirty offset", 1 << 10, 1, 100, want{11, false, map[string]int64{"a": 2, "b": 1, "c": 6, "d": 8}}},
		{"first dirty mid-batch", 1 << 10, 9, 100, want{11, false, map[string]int64{"a": -1, "d": -1, "e": 9, "f": 10}}},
		{"stops before the batch reaching end", 1 << 10, 0, 8, want{8, false, map[string]int64{"a": 2, "c": 6, "d": -1}}},
		// 5 slots hold 4 keys: a, b, c, d; e does not fit.
		{"full mid-batch", 24 * 5, 0, 100, want{9, true, map[string]int64{"a": 2, "d": 8, "e": -1}}},
		{"empty range", 1 << 10, 11, 100, want{11, false, map[string]int64{"a": -1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, res := mapOf(t, tt.budget, tt.firstDirty, tt.end, aborted, batches...)
			if res.End != tt.want.end || res.Full != tt.want.full {
				t.Errorf("end %d full %v, want %d %v", res.End, res.Full, tt.want.end, tt.want.full)
			}
			for k, off := range tt.want.keys {
				if got := m.Get([]byte(k)); got != off {
					t.Errorf("%s -> %d, want %d", k, got, off)
				}
			}
		})
	}
}

func TestLastRecords(t *testing.T) {
	ps := newProducerState()
	hdr := func(pid int64, epoch int16, base int64, n int32, txn bool) partlog.BatchHeader {
		h := partlog.BatchHeader{BaseOffset: base, LastOffsetDelta: n - 1, ProducerID: pid, ProducerEpoch: epoch, NumRecords: n}
		if txn {
			h.Attributes = records.AttrTransactional
		}
		return h
	}
	ps.record(hdr(1, 0, 0, 3, false), 0, 2)
	ps.record(hdr(1, 0, 3, 2, false), 3, 4)
	ps.record(hdr(2, 4, 5, 1, true), 5, 5)
	ps.applyMarker(marker{pid: 2, epoch: 5, commit: false, coordinatorEpoch: 1, offset: 6}) // an epoch bump
	ps.record(hdr(3, 0, 7, 1, true), 7, 7)
	ps.applyMarker(marker{pid: 3, epoch: 0, commit: true, coordinatorEpoch: 1, offset: 8})
	ps.m[4] = newProducerEntry(0) // a verification only: nothing in the log
	got := ps.lastRecords()
	want := map[int64]LastRecord{1: {4, 0}, 2: {-1, 5}, 3: {7, 0}}
	if len(got) != len(want) {
		t.Fatalf("lastRecords %v, want %v", got, want)
	}
	for pid, w := range want {
		if got[pid] != w {
			t.Errorf("producer %d: %+v, want %+v", pid, got[pid], w)
		}
	}
	ctl := partlog.BatchHeader{BaseOffset: 6, ProducerID: 2, ProducerEpoch: 5, Attributes: records.AttrControl}
	if !got[2].keeps(ctl) || got[2].keeps(hdr(2, 5, 6, 1, false)) || !got[1].keeps(hdr(1, 0, 3, 2, false)) || got[1].keeps(hdr(1, 0, 0, 3, false)) {
		t.Error("keeps picks the wrong batches")
	}
}

func TestDropAborted(t *testing.T) {
	p := &Partition{producers: newProducerState()}
	ps := p.producers
	for _, a := range []AbortedTxn{{1, 0, 10}, {1, 20, 30}, {3, 31, 40}, {2, 5, 100}} {
		ps.addAborted(a)
	}
	before := p.AbortedTransactions(0, 1000, nil)
	if n := p.DropAborted([]AbortedTxn{{ProducerID: 2, LastOffset: 100}, {ProducerID: 1, LastOffset: 30}, {ProducerID: 9, LastOffset: 10}}); n != 2 {
		t.Errorf("dropped %d, want 2", n)
	}
	if got := p.AbortedTransactions(0, 1000, nil); !slices.Equal(got, []AbortedTxn{{1, 0, 10}, {3, 31, 40}}) {
		t.Errorf("after: %v", got)
	}
	if ps.abortMaxSpan != 10 {
		t.Errorf("max span %d, want 10", ps.abortMaxSpan)
	}
	if len(before) != 4 || before[1] != (AbortedTxn{2, 5, 100}) {
		t.Errorf("a published view changed: %v", before)
	}
	if n := p.DropAborted([]AbortedTxn{{ProducerID: 2, LastOffset: 100}}); n != 0 {
		t.Errorf("dropped %d again", n)
	}
	p.DropAborted([]AbortedTxn{{1, 0, 10}, {3, 31, 40}})
	if got := p.AbortedTransactions(0, 1000, nil); len(got) != 0 || ps.abortedPub.Load() != nil {
		t.Errorf("left %v", got)
	}
}

// TestReplayEmptyControl: a control batch the cleaner emptied replays as
// its producer's epoch only, without reading it; a marker it rewrote with
// a horizon replays as the marker.
func TestReplayEmptyControl(t *testing.T) {
	ps := newProducerState()
	var buf []byte
	replay := func(b []byte) {
		t.Helper()
		h, err := storedBatch(base(b), b)
		if err != nil {
			t.Fatal(err)
		}
		if err := ps.replayBatch(h, memLog{b}, &buf); err != nil {
			t.Fatal(err)
		}
	}
	replay(emptied(markerAt(3, 5, 2, false, 100)))
	e := ps.m[5]
	if e == nil || e.Epoch != 2 || !e.persisted() || e.TxnFirst != -1 || len(ps.aborted) != 0 {
		t.Fatalf("new producer: %+v", e)
	}
	if _, _, err := checkEntry(e, partlog.BatchHeader{ProducerID: 5, ProducerEpoch: 1}); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Errorf("an older epoch is not fenced: %v", err)
	}
	replay(spec{base: 4, pid: 5, epoch: 2, txn: true, recs: []kv{rec("a", "1")}}.bytes())
	replay(emptied(markerAt(5, 5, 3, true, 100)))
	if e.Epoch != 3 || len(e.Batches) != 0 || e.TxnFirst != 4 {
		t.Errorf("an empty marker ended a transaction or kept the old epoch: %+v", e)
	}
	replay(withHorizon(t, markerAt(6, 5, 3, false, 100), testNow))
	if e.TxnFirst != -1 || len(ps.aborted) != 1 || ps.aborted[0] != (AbortedTxn{5, 4, 6}) {
		t.Errorf("a marker with a horizon did not end the transaction: %+v %v", e, ps.aborted)
	}
}

// TestFilterNoAllocs: in steady state, the filter allocates nothing per
// batch it copies, rewrites uncompressed or empties.
func TestFilterNoAllocs(t *testing.T) {
	batches := [][]byte{
		spec{base: 0, recs: []kv{rec("a", "1"), rec("b", "1")}}.bytes(),
		spec{base: 2, pid: 7, recs: []kv{rec("c", "1")}}.bytes(),
		spec{base: 3, recs: []kv{rec("c", "2"), rec("d", "1")}}.bytes(),
		spec{base: 5, recs: []kv{rec("a", "2")}}.bytes(),
	}
	m, res := mapOf(t, 1<<12, 0, 100, nil, batches...)
	f := NewFilter(FilterConfig{MapEnd: res.End, End: 100, Now: testNow, DecodeLimit: 1 << 20}, m, nil, map[int64]LastRecord{7: {LastDataOffset: 2}})
	defer f.Close()
	dst := make([]byte, 0, 4096)
	allocs := testing.AllocsPerRun(100, func() {
		for _, b := range batches {
			if _, _, err := f.Batch(dst[:0], base(b), b); err != nil {
				t.Fatal(err)
			}
		}
	})
	if allocs != 0 {
		t.Errorf("%.1f allocations per pass over %d batches", allocs, len(batches))
	}
	if s := f.Stats(); s.Rewritten == 0 || s.Emptied == 0 || s.Copied == 0 {
		t.Errorf("not every path ran: %+v", s)
	}
}

package dataplane

import (
	"context"
	"errors"
	"path"
	"reflect"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/faultfs"
	"github.com/kaas-dev/kaas/volume/memfs"
	"github.com/kaas-dev/kaas/volume/partlog"
	"github.com/kaas-dev/kaas/volume/partlog/partlogtest"
)

const txnDir = "p/0"

// openTestPartition opens the partition in txnDir at epoch through Open,
// as the engine does, closing it when the test ends.
func openTestPartition(t testing.TB, fsys volume.FS, epoch int32, segmentBytes int64) (*Partition, int64) {
	t.Helper()
	if err := volume.MkdirAllSync(fsys, txnDir); err != nil {
		t.Fatal(err)
	}
	p, rc, err := Open(fsys, txnDir, OpenOptions{Topic: "t",
		Log:          partlog.Config{Epoch: epoch, SegmentBytes: segmentBytes, Logger: logr.Discard()},
		MaxProducers: DefaultMaxProducersPerPartition, Logger: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p, rc.ReplayedBatches
}

// txnBatch is a transactional batch of n records.
func txnBatch(pid int64, epoch int16, seq int32, n int) []byte {
	return partlogtest.Make(partlogtest.Options{NumRecords: n, ValueSize: 20, Timestamp: 1000 + int64(seq),
		ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, Attributes: attrTransactional})
}

func plainBatch(pid int64, epoch int16, seq int32, n int) []byte {
	return partlogtest.Make(partlogtest.Options{NumRecords: n, ValueSize: 20, Timestamp: 1000 + int64(seq),
		ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq})
}

func mustProduce(t testing.TB, p *Partition, b []byte) ProduceResult {
	t.Helper()
	res, err := p.Produce(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func mustMarker(t testing.TB, p *Partition, pid int64, epoch int16, commit bool, coordEpoch int32) {
	t.Helper()
	if err := p.WriteMarker(context.Background(), pid, epoch, commit, coordEpoch); err != nil {
		t.Fatal(err)
	}
}

// txnStep is one operation on a partition: "verify", "txn" or "plain" (a
// batch of n records at seq), "commit" or "abort" (a marker at epoch from
// coordinator epoch coord). want is nil or the error it must wrap; dup is
// the base offset a duplicate answers with (-1 for a new append).
type txnStep struct {
	op    string
	pid   int64
	epoch int16
	seq   int32
	n     int
	coord int32
	want  error
	dup   int64
}

func TestTxnAppendAndMarkers(t *testing.T) {
	v := func(pid int64, epoch int16) txnStep { return txnStep{op: "verify", pid: pid, epoch: epoch} }
	txn := func(pid int64, epoch int16, seq int32, n int, want error) txnStep {
		return txnStep{op: "txn", pid: pid, epoch: epoch, seq: seq, n: n, want: want, dup: -1}
	}
	plain := func(pid int64, epoch int16, seq int32, n int, want error) txnStep {
		return txnStep{op: "plain", pid: pid, epoch: epoch, seq: seq, n: n, want: want, dup: -1}
	}
	mark := func(commit bool, pid int64, epoch int16, coord int32, want error) txnStep {
		op := "abort"
		if commit {
			op = "commit"
		}
		return txnStep{op: op, pid: pid, epoch: epoch, coord: coord, want: want}
	}
	dup := func(s txnStep, base int64) txnStep { s.dup = base; return s }
	cases := []struct {
		name  string
		steps []txnStep
		// What the partition holds at the end: log end, last stable
		// offset, the aborted transactions and producer 1's transaction
		// start (-1 none).
		end, lso int64
		aborted  []AbortedTxn
		txnStart int64
	}{
		{"unverified first batch is refused and nothing is written",
			[]txnStep{txn(1, 0, 0, 2, ErrTxnUnverified)}, 0, 0, nil, -1},
		{"verify then append",
			[]txnStep{txn(1, 0, 0, 2, ErrTxnUnverified), v(1, 0), txn(1, 0, 0, 2, nil), txn(1, 0, 2, 1, nil)}, 3, 0, nil, 0},
		{"a verification of another epoch does not count",
			[]txnStep{v(1, 1), txn(1, 0, 0, 1, ErrTxnUnverified), txn(1, 2, 0, 1, ErrTxnUnverified)}, 0, 0, nil, -1},
		{"an old epoch is fenced before verification matters",
			[]txnStep{v(1, 3), txn(1, 3, 0, 1, nil), v(1, 2), txn(1, 2, 0, 1, ErrInvalidProducerEpoch)}, 1, 0, nil, 0},
		{"sequence rules hold inside a transaction",
			[]txnStep{v(1, 0), txn(1, 0, 0, 2, nil), txn(1, 0, 3, 1, ErrOutOfOrderSequence), dup(txn(1, 0, 0, 2, nil), 0)}, 2, 0, nil, 0},
		{"non-transactional batch during a transaction",
			[]txnStep{plain(1, 0, 0, 1, nil), v(1, 0), txn(1, 0, 1, 1, nil), plain(1, 0, 2, 1, ErrInvalidTxnState)}, 2, 1, nil, 1},
		{"commit ends it and the next transaction needs verifying again",
			[]txnStep{v(1, 0), txn(1, 0, 0, 2, nil), mark(true, 1, 0, 5, nil), txn(1, 0, 2, 1, ErrTxnUnverified),
				plain(1, 0, 2, 1, nil), v(1, 0), txn(1, 0, 3, 1, nil)}, 5, 4, nil, 4},
		{"abort joins the aborted list",
			[]txnStep{plain(2, 0, 0, 1, nil), v(1, 0), txn(1, 0, 0, 2, nil), mark(false, 1, 0, 5, nil)}, 4, 4,
			[]AbortedTxn{{1, 1, 3}}, -1},
		{"a re-sent marker is a no-op",
			[]txnStep{v(1, 0), txn(1, 0, 0, 1, nil), mark(true, 1, 0, 5, nil), mark(true, 1, 0, 5, nil), mark(false, 1, 0, 6, nil)}, 2, 2, nil, -1},
		{"a marker for a producer unknown here is a no-op",
			[]txnStep{mark(true, 7, 0, 1, nil), mark(false, 7, 0, 1, nil)}, 0, 0, nil, -1},
		{"a marker clears a verification not yet used",
			[]txnStep{v(1, 0), mark(false, 1, 0, 1, nil), txn(1, 0, 0, 1, ErrTxnUnverified)}, 0, 0, nil, -1},
		{"old-epoch marker is refused",
			[]txnStep{v(1, 2), txn(1, 2, 0, 1, nil), mark(false, 1, 1, 5, ErrInvalidProducerEpoch), mark(false, 1, 2, 5, nil)}, 2, 2,
			[]AbortedTxn{{1, 0, 1}}, -1},
		{"a marker at a newer epoch fences the old one",
			[]txnStep{v(1, 0), txn(1, 0, 0, 1, nil), mark(false, 1, 1, 5, nil), plain(1, 0, 1, 1, ErrInvalidProducerEpoch),
				plain(1, 1, 7, 1, nil)}, 3, 3, []AbortedTxn{{1, 0, 1}}, -1},
		{"a transaction goes on across an epoch bump once verified",
			[]txnStep{v(1, 0), txn(1, 0, 0, 1, nil), txn(1, 1, 0, 1, ErrTxnUnverified), v(1, 1), txn(1, 1, 0, 1, nil),
				mark(true, 1, 1, 5, nil)}, 3, 3, nil, -1},
		{"an older coordinator's marker is refused",
			[]txnStep{v(1, 0), txn(1, 0, 0, 1, nil), mark(true, 1, 0, 5, nil), v(1, 0), txn(1, 0, 1, 1, nil),
				mark(false, 1, 0, 4, ErrTxnCoordinatorFenced), mark(false, 1, 0, 5, nil)}, 4, 4, []AbortedTxn{{1, 2, 3}}, -1},
		{"the oldest open transaction bounds the last stable offset",
			[]txnStep{v(2, 0), txn(2, 0, 0, 1, nil), v(1, 0), txn(1, 0, 0, 1, nil), plain(3, 0, 0, 1, nil),
				mark(true, 2, 0, 1, nil)}, 4, 1, nil, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, _ := openTestPartition(t, memfs.New(), 1, 0)
			ctx := context.Background()
			for i, s := range c.steps {
				var err error
				endBefore := p.log.LogEndOffset()
				switch s.op {
				case "verify":
					p.Verified(s.pid, s.epoch)
					continue
				case "txn", "plain":
					b := plainBatch(s.pid, s.epoch, s.seq, s.n)
					if s.op == "txn" {
						b = txnBatch(s.pid, s.epoch, s.seq, s.n)
					}
					var res ProduceResult
					res, err = p.Produce(ctx, b)
					if err == nil && s.dup >= 0 && (res.BaseOffset != s.dup || p.log.LogEndOffset() != endBefore) {
						t.Fatalf("step %d: %+v, want a duplicate of offset %d", i, res, s.dup)
					}
					if err == nil && s.dup < 0 && res.BaseOffset != endBefore {
						t.Fatalf("step %d: appended at %d, want %d", i, res.BaseOffset, endBefore)
					}
				case "commit", "abort":
					err = p.WriteMarker(ctx, s.pid, s.epoch, s.op == "commit", s.coord)
				}
				if s.want == nil && err != nil {
					t.Fatalf("step %d (%+v): %v", i, s, err)
				}
				if s.want != nil {
					if !errors.Is(err, s.want) {
						t.Fatalf("step %d (%+v): %v, want %v", i, s, err, s.want)
					}
					if got := p.log.LogEndOffset(); got != endBefore {
						t.Fatalf("step %d: refused, yet the log end moved from %d to %d", i, endBefore, got)
					}
					var u *TxnUnverifiedError
					if errors.Is(err, ErrTxnUnverified) && (!errors.As(err, &u) || u.ProducerID != s.pid || u.ProducerEpoch != s.epoch) {
						t.Fatalf("step %d: %v does not name producer %d epoch %d", i, err, s.pid, s.epoch)
					}
				}
			}
			if got := p.log.LogEndOffset(); got != c.end {
				t.Errorf("log end %d, want %d", got, c.end)
			}
			if got := p.LastStableOffset(); got != c.lso {
				t.Errorf("last stable offset %d, want %d", got, c.lso)
			}
			if got := p.AbortedTransactions(0, c.end+1, nil); !reflect.DeepEqual(got, c.aborted) {
				t.Errorf("aborted %v, want %v", got, c.aborted)
			}
			start := int64(-1)
			for _, pi := range p.Producers() {
				if pi.ProducerID == 1 {
					start = pi.CurrentTxnStartOffset
				}
			}
			if start != c.txnStart {
				t.Errorf("producer 1's transaction starts at %d, want %d", start, c.txnStart)
			}
		})
	}
}

// TestProducersDescribe: one entry per producer with its epoch, last
// sequence, last timestamp, coordinator epoch and open transaction.
func TestProducersDescribe(t *testing.T) {
	p, _ := openTestPartition(t, memfs.New(), 1, 0)
	mustProduce(t, p, plainBatch(5, 2, 0, 3))
	p.Verified(6, 0)
	mustProduce(t, p, txnBatch(6, 0, 0, 2))
	mustMarker(t, p, 6, 0, true, 4)
	p.Verified(6, 0)
	mustProduce(t, p, txnBatch(6, 0, 2, 1))
	p.Verified(9, 0) // a guard alone is no producer
	got := p.Producers()
	want := []ProducerInfo{
		{ProducerID: 5, ProducerEpoch: 2, LastSequence: 2, LastTimestamp: 1000, CoordinatorEpoch: -1, CurrentTxnStartOffset: -1},
		{ProducerID: 6, ProducerEpoch: 0, LastSequence: 2, LastTimestamp: 1002, CoordinatorEpoch: 4, CurrentTxnStartOffset: 6},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("producers\n got %+v\nwant %+v", got, want)
	}
}

// TestMarkerBatch decodes the marker batch with franz-go: a valid
// RecordBatch v2 (CRC-32C included) with one control record whose key and
// value are Kafka's end-transaction marker.
func TestMarkerBatch(t *testing.T) {
	for _, commit := range []bool{false, true} {
		b := appendMarkerBatch([]byte("prefix"), 12345, 7, commit, 99, 1700000000123)
		if string(b[:6]) != "prefix" {
			t.Fatal("prefix overwritten")
		}
		b = b[6:]
		if len(b) != markerBatchSize {
			t.Fatalf("%d bytes, want %d", len(b), markerBatchSize)
		}
		h, err := partlog.ValidateBatch(b)
		if err != nil {
			t.Fatal(err)
		}
		if !h.IsControl() || !h.IsTransactional() || h.ProducerID != 12345 || h.ProducerEpoch != 7 || h.BaseSequence != -1 ||
			h.NumRecords != 1 || h.FirstTimestamp != 1700000000123 || h.MaxTimestamp != 1700000000123 || h.PartitionLeaderEpoch != -1 {
			t.Fatalf("header %+v", h)
		}
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b); err != nil {
			t.Fatal(err)
		}
		if rb.Attributes != 0x30 || rb.FirstSequence != -1 || rb.ProducerID != 12345 {
			t.Fatalf("franz-go batch %+v", rb)
		}
		recs, err := partlogtest.Records(b)
		if err != nil || len(recs) != 1 {
			t.Fatalf("records %v, %v", recs, err)
		}
		var key kmsg.ControlRecordKey
		if err := key.ReadFrom(recs[0].Key); err != nil {
			t.Fatal(err)
		}
		wantType := kmsg.ControlRecordKeyTypeAbort
		if commit {
			wantType = kmsg.ControlRecordKeyTypeCommit
		}
		if key.Version != 0 || key.Type != wantType {
			t.Fatalf("key %+v", key)
		}
		var val kmsg.EndTxnMarker
		if err := val.ReadFrom(recs[0].Value); err != nil {
			t.Fatal(err)
		}
		if val.Version != 0 || val.CoordinatorEpoch != 99 || len(recs[0].Headers) != 0 || recs[0].OffsetDelta != 0 || recs[0].TimestampDelta64 != 0 {
			t.Fatalf("value %+v, record %+v", val, recs[0])
		}
		typ, coord, ok := parseControlRecord(b)
		if !ok || typ != int16(wantType) || coord != 99 {
			t.Fatalf("parseControlRecord: %d %d %v", typ, coord, ok)
		}
	}
	buf := make([]byte, 0, markerBatchSize)
	if n := testing.AllocsPerRun(100, func() { buf = appendMarkerBatch(buf[:0], 1, 1, true, 1, 1) }); n != 0 {
		t.Fatalf("%v allocations per marker into a buffer with room", n)
	}
	// Malformed records are refused, not misread.
	b := appendMarkerBatch(nil, 1, 1, true, 1, 1)
	for _, cut := range []int{partlog.BatchHeaderSize, partlog.BatchHeaderSize + 3, markerBatchSize - 2} {
		if _, _, ok := parseControlRecord(b[:cut]); ok {
			t.Fatalf("a record cut at %d parsed", cut)
		}
	}
}

// stallSyncs is a fault injector that, while armed, applies action to the
// fsyncs of segment files and reports each one it touched.
type stallSyncs struct {
	mu     sync.Mutex
	armed  bool
	action faultfs.Action
	skip   string // a segment glob left alone
	hits   chan faultfs.Op
}

func (s *stallSyncs) inject(op faultfs.Op) faultfs.Action {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.armed || !op.Matches(faultfs.OpSync, path.Join(txnDir, "*.log")) || (s.skip != "" && op.Matches(faultfs.OpSync, s.skip)) {
		return faultfs.Proceed
	}
	select {
	case s.hits <- op:
	default:
	}
	return s.action
}

// stall holds back the fsyncs until the returned release is called (also
// at cleanup, before the partition closes, so a failing test does not hang).
func (s *stallSyncs) stall(t *testing.T) (release func()) {
	ch := make(chan struct{})
	var once sync.Once
	release = func() {
		once.Do(func() {
			s.mu.Lock()
			s.armed = false
			s.mu.Unlock()
			close(ch)
		})
	}
	t.Cleanup(release)
	s.arm(faultfs.Stall(ch))
	return release
}

func (s *stallSyncs) arm(a faultfs.Action) {
	s.mu.Lock()
	s.armed, s.action = true, a
	s.mu.Unlock()
}

// TestLastStableOffsetWaitsForDurableMarker: while a marker's fsync is held
// back, the transaction still bounds the last stable offset; once the
// marker is durable, WriteMarker returns and the offset moves past it.
func TestLastStableOffsetWaitsForDurableMarker(t *testing.T) {
	inj := &stallSyncs{hits: make(chan faultfs.Op, 100)}
	fsys := faultfs.New(memfs.New(), inj.inject)
	p, _ := openTestPartition(t, fsys, 1, 0)
	mustProduce(t, p, plainBatch(2, 0, 0, 2))
	p.Verified(1, 0)
	mustProduce(t, p, txnBatch(1, 0, 0, 3))
	if lso, hw := p.LastStableOffset(), p.log.HighWatermark(); lso != 2 || hw != 5 {
		t.Fatalf("lso %d, hw %d; want 2, 5", lso, hw)
	}
	release := inj.stall(t)
	done := make(chan error, 1)
	go func() { done <- p.WriteMarker(context.Background(), 1, 0, false, 3) }()
	select {
	case <-inj.hits:
	case <-time.After(10 * time.Second):
		t.Fatal("the marker's fsync never came")
	}
	if end := p.log.LogEndOffset(); end != 6 {
		t.Fatalf("log end %d, want the marker appended at 5", end)
	}
	if lso := p.LastStableOffset(); lso != 2 {
		t.Fatalf("last stable offset %d while the marker is not durable, want 2", lso)
	}
	if got := p.AbortedTransactions(0, 6, nil); len(got) != 1 {
		t.Fatalf("aborted %v", got)
	}
	select {
	case err := <-done:
		t.Fatalf("WriteMarker returned %v before its marker was durable", err)
	default:
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if lso, hw := p.LastStableOffset(), p.log.HighWatermark(); lso != 6 || hw != 6 {
		t.Fatalf("after the marker: lso %d, hw %d; want 6, 6", lso, hw)
	}
}

// TestMarkerSyncFailure: a marker whose fsync fails is an error, and the
// transaction keeps bounding the last stable offset (the partition is
// reopened elsewhere).
func TestMarkerSyncFailure(t *testing.T) {
	inj := &stallSyncs{hits: make(chan faultfs.Op, 100)}
	fsys := faultfs.New(memfs.New(), inj.inject)
	p, _ := openTestPartition(t, fsys, 1, 0)
	failed := make(chan struct{}, 1)
	p.onFailure = func(*Partition) { failed <- struct{}{} }
	p.Verified(1, 0)
	mustProduce(t, p, txnBatch(1, 0, 0, 3))
	inj.arm(faultfs.FailBefore(syscall.EIO))
	err := p.WriteMarker(context.Background(), 1, 0, true, 3)
	if !errors.Is(err, partlog.ErrLogFailed) {
		t.Fatalf("WriteMarker: %v, want the log's failure", err)
	}
	<-failed
	if lso := p.LastStableOffset(); lso != 0 {
		t.Fatalf("last stable offset %d after a failed marker, want 0", lso)
	}
}

// TestMarkerWaitCancelled: a marker whose wait is cut short stays in the
// log; a re-sent marker waits for it, and the transaction leaves the
// ongoing queue once it is durable.
func TestMarkerWaitCancelled(t *testing.T) {
	inj := &stallSyncs{hits: make(chan faultfs.Op, 100)}
	fsys := faultfs.New(memfs.New(), inj.inject)
	p, _ := openTestPartition(t, fsys, 1, 0)
	p.Verified(1, 0)
	mustProduce(t, p, txnBatch(1, 0, 0, 3))
	release := inj.stall(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.WriteMarker(ctx, 1, 0, true, 3) }()
	select {
	case <-inj.hits:
	case <-time.After(10 * time.Second):
		t.Fatal("the marker's fsync never came")
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("WriteMarker: %v, want cancelled", err)
	}
	if lso := p.LastStableOffset(); lso != 0 {
		t.Fatalf("last stable offset %d, want 0 until the marker is durable", lso)
	}
	resent := make(chan error, 1)
	go func() { resent <- p.WriteMarker(context.Background(), 1, 0, true, 3) }()
	select {
	case err := <-resent:
		t.Fatalf("re-sent marker returned %v before the first was durable", err)
	case <-time.After(20 * time.Millisecond):
	}
	release()
	if err := <-resent; err != nil {
		t.Fatal(err)
	}
	if lso, end := p.LastStableOffset(), p.log.LogEndOffset(); lso != 4 || end != 4 {
		t.Fatalf("lso %d, end %d; want one marker and lso 4", lso, end)
	}
}

// TestAbortedTransactions: the ranges a fetch asks for, over interleaved
// transactions (a long one spanning shorter ones).
func TestAbortedTransactions(t *testing.T) {
	p, _ := openTestPartition(t, memfs.New(), 1, 0)
	if n := testing.AllocsPerRun(100, func() { _ = p.AbortedTransactions(0, 100, nil) }); n != 0 {
		t.Fatalf("%v allocations with no aborted transaction", n)
	}
	seq := map[int64]int32{}
	begin := func(pid int64) {
		p.Verified(pid, 0)
		mustProduce(t, p, txnBatch(pid, 0, seq[pid], 1))
		seq[pid]++
	}
	// Offsets: 0 A, 1 B, 2 B-abort, 3 C, 4 C-commit, 5 D, 6 A-abort, 7 D-abort, 8 E, 9 E-abort.
	begin(1)
	begin(2)
	mustMarker(t, p, 2, 0, false, 1)
	begin(3)
	mustMarker(t, p, 3, 0, true, 1)
	begin(4)
	mustMarker(t, p, 1, 0, false, 1)
	mustMarker(t, p, 4, 0, false, 1)
	begin(5)
	mustMarker(t, p, 5, 0, false, 1)
	a := AbortedTxn{1, 0, 6}
	b := AbortedTxn{2, 1, 2}
	d := AbortedTxn{4, 5, 7}
	e := AbortedTxn{5, 8, 9}
	for _, c := range []struct {
		from, to int64
		want     []AbortedTxn
	}{
		{0, 10, []AbortedTxn{a, b, d, e}},
		{0, 1, []AbortedTxn{a}},
		{1, 2, []AbortedTxn{a, b}},
		{3, 5, []AbortedTxn{a}},
		{3, 6, []AbortedTxn{a, d}},
		{7, 8, []AbortedTxn{d}},
		{8, 9, []AbortedTxn{e}},
		{10, 20, nil},
		{5, 5, nil},
	} {
		if got := p.AbortedTransactions(c.from, c.to, nil); !reflect.DeepEqual(got, c.want) {
			t.Errorf("[%d, %d): %v, want %v", c.from, c.to, got, c.want)
		}
	}
	// Appends to dst; no allocation when it has room.
	dst := make([]AbortedTxn, 1, 8)
	if got := p.AbortedTransactions(0, 10, dst); len(got) != 5 || got[0] != (AbortedTxn{}) || &got[0] != &dst[0] {
		t.Fatalf("dst not appended to: %v", got)
	}
	if n := testing.AllocsPerRun(100, func() { _ = p.AbortedTransactions(0, 10, dst[:0]) }); n != 0 {
		t.Fatalf("%v allocations into a dst with room", n)
	}
}

// txnView is what a partition's transaction state looks like from outside.
type txnView struct {
	Producers []ProducerInfo
	LSO       int64
	Aborted   []AbortedTxn
}

func viewOf(p *Partition) txnView {
	return txnView{Producers: p.Producers(), LSO: p.LastStableOffset(), Aborted: p.AbortedTransactions(0, p.log.LogEndOffset(), nil)}
}

// runTxnWorkload writes a mix of idempotent and transactional producers,
// commits and aborts, ending with producer 12's transaction open. Small
// segments make it roll (and snapshot) along the way.
func runTxnWorkload(t *testing.T, p *Partition) {
	seq := map[int64]int32{}
	send := func(pid int64, txn bool) {
		b := plainBatch(pid, 0, seq[pid], 2)
		if txn {
			p.Verified(pid, 0)
			b = txnBatch(pid, 0, seq[pid], 2)
		}
		mustProduce(t, p, b)
		seq[pid] += 2
	}
	for round := 0; round < 6; round++ {
		send(13, false)
		send(10, true)
		send(11, true)
		send(10, true)
		mustMarker(t, p, 10, 0, round%2 == 0, 1)
		send(13, false)
		mustMarker(t, p, 11, 0, round%3 == 0, 1)
	}
	send(12, true)
	send(13, false)
	send(12, true)
}

// TestTxnStateSurvivesReopen: ongoing and aborted transactions, and every
// producer's state, are the same after a clean close, after a crash (only
// what was durable; an older snapshot plus the log after it), after a
// takeover with no close, and from the log alone.
func TestTxnStateSurvivesReopen(t *testing.T) {
	for _, mode := range []string{"clean", "crash", "takeover", "log only"} {
		t.Run(mode, func(t *testing.T) {
			mem := memfs.New()
			p, _ := openTestPartition(t, mem, 1, 1024)
			runTxnWorkload(t, p)
			p.WaitSnapshot()
			want := viewOf(p)
			if want.LSO == p.log.HighWatermark() || len(want.Aborted) == 0 {
				t.Fatalf("the workload should leave an open transaction and aborted ones: %+v", want)
			}
			end := p.log.LogEndOffset()
			fsys := volume.FS(mem)
			switch mode {
			case "clean":
				if err := p.Close(); err != nil {
					t.Fatal(err)
				}
			case "crash":
				offs, err := SnapshotOffsets(mem, txnDir)
				if err != nil || len(offs) == 0 || offs[len(offs)-1] >= end {
					t.Fatalf("want a roll snapshot below the log end %d, have %v (%v)", end, offs, err)
				}
				fsys = mem.CrashClone()
			case "takeover":
				// Reopened at a new epoch with the old owner still open:
				// no close, no snapshot of the log end.
			case "log only":
				fsys = mem.CrashClone()
				for _, n := range dirNames(t, fsys, txnDir, snapshotSuffix) {
					if err := fsys.Remove(path.Join(txnDir, n)); err != nil {
						t.Fatal(err)
					}
				}
			}
			p2, replayed := openTestPartition(t, fsys, 2, 1024)
			if got := p2.log.LogEndOffset(); got != end {
				t.Fatalf("log end %d after reopen, want %d", got, end)
			}
			switch {
			case mode == "clean" && replayed != 0:
				t.Fatalf("replayed %d batches after a clean close", replayed)
			case mode != "clean" && replayed == 0:
				t.Fatal("replayed nothing after a crash: the test wants a tail to replay")
			}
			if got := viewOf(p2); !reflect.DeepEqual(got, want) {
				t.Fatalf("after reopen\n got %+v\nwant %+v", got, want)
			}
			// The open transaction goes on without a new verification,
			// and its marker moves the last stable offset to the end.
			seq := p2.Producers()[2].LastSequence + 1
			mustProduce(t, p2, txnBatch(12, 0, seq, 1))
			mustMarker(t, p2, 12, 0, false, 2)
			if lso, hw := p2.LastStableOffset(), p2.log.HighWatermark(); lso != hw {
				t.Fatalf("lso %d, hw %d after the last transaction ended", lso, hw)
			}
		})
	}
}

// TestZombieSnapshotIgnored: an owner fenced by a takeover keeps appending
// (unacknowledged) and then writes a snapshot as of its own log end. The
// new owner appends past that offset, so "the snapshot is at or below the
// log end" would accept it; the version-conditional rule sees it is beyond
// where the zombie's epoch ends in the recovered log, and never uses it.
func TestZombieSnapshotIgnored(t *testing.T) {
	mem := memfs.New()
	const zombiePID, otherPID = 50, 51
	zombie, _ := openTestPartition(t, mem, 1, 0)
	for i := int32(0); i < 4; i++ {
		mustProduce(t, zombie, plainBatch(zombiePID, 0, i*2, 2))
		mustProduce(t, zombie, plainBatch(otherPID, 0, i*2, 2))
	}
	epochEnd := zombie.log.LogEndOffset()

	owner, _ := openTestPartition(t, mem, 2, 0) // takes over at epoch 2
	// The zombie appends on (nothing of it is acknowledged or recovered),
	// then writes its snapshot late, as of its own log end.
	for i := int32(4); i < 8; i++ {
		if _, _, err := zombie.Append(plainBatch(zombiePID, 0, i*2, 2)); err != nil {
			t.Fatal(err)
		}
	}
	zEnd := zombie.log.LogEndOffset()
	zombie.mu.Lock()
	data := zombie.producers.encodeSnapshot(zEnd, 1)
	zombie.mu.Unlock()
	if err := writeSnapshot(mem, txnDir, data, zEnd, 1); err != nil {
		t.Fatal(err)
	}
	// The new owner's log grows past the zombie's snapshot offset.
	for i := int32(4); i < 12; i++ {
		mustProduce(t, owner, plainBatch(otherPID, 0, i*2, 2))
	}
	if end := owner.log.LogEndOffset(); end <= zEnd {
		t.Fatalf("owner's log end %d, want it past the zombie's snapshot at %d", end, zEnd)
	}
	want := viewOf(owner)

	// A crash of the owner (no close, no snapshot of its own) and a new
	// owner at epoch 3.
	p, replayed := openTestPartition(t, mem, 3, 0)
	if got := viewOf(p); !reflect.DeepEqual(got, want) {
		t.Fatalf("state after reopen\n got %+v\nwant %+v", got, want)
	}
	if replayed != 16 {
		t.Fatalf("replayed %d batches, want the whole log (16)", replayed)
	}
	if names := dirNames(t, mem, txnDir, snapshotSuffix); slices.Contains(names, snapshotName(zEnd, 1)) {
		t.Fatalf("the zombie's snapshot is still there: %v", names)
	}
	if _, end := p.log.EndOffsetForEpoch(1); end != epochEnd {
		t.Fatalf("epoch 1 ends at %d, want %d", end, epochEnd)
	}
	// The zombie's unacknowledged batch is no duplicate: it is appended.
	res := mustProduce(t, p, plainBatch(zombiePID, 0, 8, 2))
	if res.BaseOffset != p.log.LogEndOffset()-2 {
		t.Fatalf("zombie producer's next batch answered as a duplicate: %+v", res)
	}
}

// TestSnapshotWaitsForDurability: a snapshot due at a roll is written by
// the first Sync that makes the log below it durable; when the fsync
// fails, never.
func TestSnapshotWaitsForDurability(t *testing.T) {
	for _, fail := range []bool{false, true} {
		name := "durable"
		if fail {
			name = "fsync fails"
		}
		t.Run(name, func(t *testing.T) {
			// Every fsync of a segment but the first fails: the roll's
			// fsync of the sealed first segment succeeds, the snapshot's
			// wait for the new one does not.
			inj := &stallSyncs{hits: make(chan faultfs.Op, 100), skip: path.Join(txnDir, "00000000000000000000-e1.log")}
			inj.arm(faultfs.FailBefore(syscall.EIO))
			inj.armed = fail
			fsys := faultfs.New(memfs.New(), inj.inject)
			p, _ := openTestPartition(t, fsys, 1, 512)
			p.onFailure = func(*Partition) {}
			var seq int32
			for len(p.log.Segments()) < 2 {
				if _, _, err := p.Append(plainBatch(1, 0, seq, 4)); err != nil {
					t.Fatal(err)
				}
				seq += 4
			}
			rolledAt := p.log.LogEndOffset()
			offs, err := SnapshotOffsets(fsys, txnDir)
			if err != nil || len(offs) != 0 {
				t.Fatalf("snapshots %v (%v) before the log below them is durable", offs, err)
			}
			if err := p.Sync(context.Background(), rolledAt-1); (err != nil) != fail {
				t.Fatalf("sync: %v", err)
			}
			offs, err = SnapshotOffsets(fsys, txnDir)
			if err != nil {
				t.Fatal(err)
			}
			if fail {
				if len(offs) != 0 || p.log.Err() == nil {
					t.Fatalf("snapshots %v written over a log that failed (%v)", offs, p.log.Err())
				}
				return
			}
			if !reflect.DeepEqual(offs, []int64{rolledAt}) {
				t.Fatalf("snapshots %v, want one at the roll, %d", offs, rolledAt)
			}
		})
	}
}

// TestDropAbortedBelow: aborted transactions whose marker is below the log
// start leave the list, and readers see the new list.
func TestDropAbortedBelow(t *testing.T) {
	p := &Partition{producers: newProducerState()}
	ps := p.producers
	for _, a := range []AbortedTxn{{1, 0, 5}, {2, 3, 8}, {3, 9, 12}} {
		ps.addAborted(a)
	}
	old := p.AbortedTransactions(0, 100, nil)
	ps.dropAbortedBelow(6)
	if got := p.AbortedTransactions(0, 100, nil); !reflect.DeepEqual(got, []AbortedTxn{{2, 3, 8}, {3, 9, 12}}) {
		t.Fatalf("after dropping below 6: %v", got)
	}
	if len(old) != 3 {
		t.Fatalf("a view taken before changed: %v", old)
	}
	ps.dropAbortedBelow(13)
	if got := p.AbortedTransactions(0, 100, nil); got != nil || ps.abortedPub.Load() != nil {
		t.Fatalf("after dropping all: %v", got)
	}
}

package dataplane

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/kaas-dev/kaas/volume/partlog"
	"github.com/kaas-dev/kaas/volume/records/recordstest"
)

// The model-based test of the cleaner's policy: random produce histories
// (keys, tombstones, keyless records, idempotent producers with epoch
// bumps, committed and aborted transactions, markers that bump epochs),
// built as real stored batches with every codec, cleaned by
// BuildOffsetMap and Filter in memory with a small map (so it fills
// mid-range) and a moving clock, and checked after every pass against
// what was produced: Kafka's guarantees for a compacted log.

const (
	modelSegment   = 25 // offsets per segment: a batch is in the segment of its base
	modelKeys      = 10
	modelRetention = 1000
)

// modelRec is what was produced at one offset.
type modelRec struct {
	key, value []byte
	ts         int64
	txn        int // transaction id, 0: none
	control    bool
}

type modelTxn struct {
	pid     int64
	decided bool
	aborted bool
	marker  int64
}

type modelProducer struct {
	pid           int64 // 0: no producer
	epoch         int16
	seq           int32
	transactional bool
	txn           int // open transaction, 0: none
}

type compactModel struct {
	t   *testing.T
	rng *rand.Rand
	now int64

	next  int64      // log end
	log   [][]byte   // the log as the passes left it
	dec   []logBatch // log, read back
	orig  map[int64]partlog.BatchHeader
	recs  map[int64]modelRec
	txnOf map[int64]int // data batch or marker base -> transaction
	txns  []*modelTxn
	prods []*modelProducer

	p             *Partition // holds the producer state only
	cleanerOffset int64
	// removedTombs are the tombstones a pass removed past their horizon.
	removedTombs map[int64]bool
	passes       int
	bigMap       bool  // the map holds every key
	filtered     int64 // the last batch base the last pass's filter took
}

func TestCompactModel(t *testing.T) {
	seeds := 80
	if testing.Short() {
		seeds = 15
	}
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			c := newCompactModel(t, seed)
			for range 500 {
				c.step()
			}
			// Passes with a map for every key, each past the horizons the
			// one before set: the cleanable range settles.
			c.bigMap = true
			for range 4 {
				c.now += 2 * modelRetention
				c.pass()
			}
			if c.passes == 0 {
				t.Fatal("no pass ran")
			}
			c.checkSettled()
		})
	}
}

func newCompactModel(t *testing.T, seed uint64) *compactModel {
	c := &compactModel{
		t: t, rng: rand.New(rand.NewPCG(seed, 21)), now: 1_000_000,
		orig: map[int64]partlog.BatchHeader{}, recs: map[int64]modelRec{}, txnOf: map[int64]int{},
		p: &Partition{producers: newProducerState()}, removedTombs: map[int64]bool{},
	}
	c.prods = []*modelProducer{{pid: 0}, {pid: 11}, {pid: 12}, {pid: 21, transactional: true}, {pid: 22, transactional: true}, {pid: 23, transactional: true}}
	return c
}

func (c *compactModel) step() {
	switch r := c.rng.IntN(100); {
	case r < 62:
		c.produce(c.prods[c.rng.IntN(len(c.prods))])
	case r < 76:
		c.endTxn()
	case r < 87:
		c.now += c.rng.Int64N(700)
	case r < 90:
		pr := c.prods[1+c.rng.IntN(2)] // an idempotent producer restarts at a new epoch
		pr.epoch, pr.seq = pr.epoch+1, 0
	default:
		c.pass()
	}
}

var modelCodecs = []recordstest.Codec{recordstest.None, recordstest.None, recordstest.None, recordstest.Gzip,
	recordstest.Snappy, recordstest.SnappyXerial, recordstest.LZ4, recordstest.Zstd}

func (c *compactModel) produce(pr *modelProducer) {
	n := 1 + c.rng.IntN(4)
	recs := make([]kv, n)
	for i := range recs {
		key := fmt.Appendf(nil, "k%d", c.rng.IntN(modelKeys))
		value := fmt.Appendf(nil, "v%d", c.next+int64(i))
		switch x := c.rng.IntN(100); {
		case x < 12:
			value = nil
		case x < 15 && pr.pid == 0:
			key = nil // written before the topic was compacted
		}
		recs[i] = kv{key: key, value: value}
	}
	if pr.transactional && pr.txn == 0 {
		c.txns = append(c.txns, &modelTxn{pid: pr.pid})
		pr.txn = len(c.txns)
	}
	b := spec{base: c.next, pid: pr.pid, epoch: pr.epoch, seq: pr.seq, txn: pr.transactional,
		codec: modelCodecs[c.rng.IntN(len(modelCodecs))], ts: c.now, recs: recs}.bytes()
	h := c.append(b, pr.txn)
	c.p.producers.record(h, h.BaseOffset, h.LastOffset())
	for i, r := range recs {
		c.recs[h.BaseOffset+int64(i)] = modelRec{key: r.key, value: r.value, ts: c.now + int64(i), txn: pr.txn}
	}
	pr.seq += int32(n)
}

// endTxn ends a random open transaction; a coordinator's timeout abort
// bumps the producer's epoch.
func (c *compactModel) endTxn() {
	pr := c.prods[3+c.rng.IntN(3)]
	if pr.txn == 0 {
		return
	}
	commit := c.rng.IntN(100) < 60
	epoch := pr.epoch
	if !commit && c.rng.IntN(100) < 20 {
		epoch++
	}
	h := c.append(markerAt(c.next, pr.pid, epoch, commit, c.now), pr.txn)
	ps := c.p.producers
	if first := ps.applyMarker(marker{pid: pr.pid, epoch: epoch, commit: commit, timestamp: c.now, offset: h.BaseOffset}); first >= 0 {
		ps.completeTxn(pr.pid, first) // durable at once
	}
	txn := c.txns[pr.txn-1]
	txn.decided, txn.aborted, txn.marker = true, !commit, h.BaseOffset
	c.recs[h.BaseOffset] = modelRec{control: true, txn: pr.txn, ts: c.now}
	if epoch != pr.epoch {
		pr.epoch, pr.seq = epoch, 0
	}
	pr.txn = 0
}

func (c *compactModel) append(b []byte, txn int) partlog.BatchHeader {
	h, err := storedBatch(c.next, b)
	if err != nil {
		c.t.Fatal(err)
	}
	c.orig[h.BaseOffset] = h
	if txn > 0 {
		c.txnOf[h.BaseOffset] = txn
	}
	c.log = append(c.log, b)
	c.dec = append(c.dec, decodeLog(c.t, [][]byte{b})...)
	c.next = h.NextOffset()
	return h
}

func (c *compactModel) aborted(offset int64) bool {
	r := c.recs[offset]
	return r.txn > 0 && c.txns[r.txn-1].aborted
}

func seg(offset int64) int64 { return offset / modelSegment }

func base(b []byte) int64 { return int64(binary.BigEndian.Uint64(b)) }

// pass is one cleaning pass as the clean step runs it: plan the range,
// build the map, filter the segments up to the map's end, prune the
// aborted list, swap.
func (c *compactModel) pass() {
	t := c.t
	if len(c.log) == 0 {
		return
	}
	ps := c.p.producers
	lso := min(ps.firstUnstable.Load(), c.next)
	// Cleanable: whole segments below the active one and below the LSO.
	unclean := seg(base(c.log[len(c.log)-1]))
	for _, b := range c.log {
		var h partlog.BatchHeader
		h.Decode(b)
		if h.LastOffset() >= lso {
			unclean = min(unclean, seg(h.BaseOffset))
			break
		}
	}
	var cleanable [][]byte
	end := c.next
	for _, b := range c.log {
		if seg(base(b)) >= unclean {
			end = base(b)
			break
		}
		cleanable = append(cleanable, b)
	}
	if len(cleanable) == 0 {
		return
	}
	c.passes++
	prev := c.dec
	firstDirty := min(c.cleanerOffset, end)
	live := c.p.LastRecords()
	slots := 3 + c.rng.IntN(14)
	if c.bigMap {
		slots = 2 * modelKeys
	}
	m, err := NewOffsetMap(24 * slots)
	if err != nil {
		t.Fatal(err)
	}
	res, err := BuildOffsetMap(m, iterOf(cleanable...), firstDirty, end, c.p.AbortedTransactions(firstDirty, end, nil), 1<<26)
	if err != nil {
		t.Fatal(err)
	}
	if res.End < firstDirty || res.End > end {
		t.Fatalf("pass %d: map end %d outside [%d, %d]", c.passes, res.End, firstDirty, end)
	}
	// The filter takes the segments holding [0, map end), whole.
	lastSeg := int64(-1)
	for _, b := range cleanable {
		if base(b) < res.End {
			lastSeg = seg(base(b))
		}
	}
	f := NewFilter(FilterConfig{MapEnd: res.End, End: end, Now: c.now, DeleteRetentionMs: modelRetention, DecodeLimit: 1 << 26},
		m, c.p.AbortedTransactions(0, end, nil), live)
	defer f.Close()
	var out [][]byte
	filtered := int64(-1) // the last base the filter took
	i := 0
	for ; i < len(c.log) && seg(base(c.log[i])) <= lastSeg; i++ {
		b, _, err := f.Batch(nil, base(c.log[i]), c.log[i])
		if err != nil {
			t.Fatalf("pass %d: %v", c.passes, err)
		}
		filtered = base(c.log[i])
		if len(b) > 0 {
			out = append(out, b)
		}
	}
	c.p.DropAborted(f.RemovedAborts())
	c.log = append(out, c.log[i:]...)
	c.dec = append(decodeLog(t, out), c.dec[i:]...)
	c.cleanerOffset, c.filtered = res.End, filtered
	c.check(prev, res.End, filtered, lso, live)
}

// logBatch is a batch of the log, read back.
type logBatch struct {
	h    partlog.BatchHeader
	recs []outRec
}

func decodeLog(t testing.TB, log [][]byte) []logBatch {
	out := make([]logBatch, len(log))
	for i, b := range log {
		out[i].h, out[i].recs = decode(t, b)
	}
	return out
}

func controlTypeOf(r outRec) int16 { return int16(binary.BigEndian.Uint16(r.key[2:])) }

// check holds the cleaned log to Kafka's guarantees. mapEnd is the pass's
// map end, filtered the last batch base the filter took, live the
// producers' last batches it was given.
func (c *compactModel) check(prev []logBatch, mapEnd, filtered, lso int64, live map[int64]LastRecord) {
	t := c.t
	t.Helper()
	cur := c.dec
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("pass %d (map end %d, now %d): %s", c.passes, mapEnd, c.now, fmt.Sprintf(format, args...))
	}

	// Offsets never change: every batch keeps its place and producer
	// fields, every record its offset, bytes and timestamp.
	present := map[int64]bool{}
	byBase := map[int64]logBatch{}
	last := int64(-1)
	for _, b := range cur {
		h, o := b.h, c.orig[b.h.BaseOffset]
		if h.BaseOffset <= last || h.LastOffsetDelta != o.LastOffsetDelta || h.ProducerID != o.ProducerID ||
			h.ProducerEpoch != o.ProducerEpoch || h.BaseSequence != o.BaseSequence || h.IsControl() != o.IsControl() ||
			h.IsTransactional() != o.IsTransactional() || h.PartitionLeaderEpoch != o.PartitionLeaderEpoch {
			fail("batch at %d: header %+v, produced %+v", h.BaseOffset, h, o)
		}
		last = h.LastOffset()
		byBase[h.BaseOffset] = b
		for _, r := range b.recs {
			m, ok := c.recs[r.offset]
			if !ok || r.control != m.control || r.ts != m.ts || (!r.control && (!bytes.Equal(r.key, m.key) || !bytes.Equal(r.value, m.value) ||
				(r.key == nil) != (m.key == nil) || (r.value == nil) != (m.value == nil))) {
				fail("record %d: %+v, produced %+v", r.offset, r, m)
			}
			present[r.offset] = true
		}
	}

	// The latest record of each key below the map end, aborted ones aside.
	latest := map[string]int64{}
	for o, r := range c.recs {
		if o < mapEnd && !r.control && r.key != nil && !c.aborted(o) && o > latestOr(latest, r.key) {
			latest[string(r.key)] = o
		}
	}

	// A record goes only if aborted, keyless or superseded below the map
	// end, or a latest tombstone whose horizon had passed.
	for _, b := range prev {
		for _, r := range b.recs {
			if r.control || present[r.offset] {
				continue
			}
			o := r.offset
			switch {
			case c.aborted(o):
			case o < mapEnd && (r.key == nil || latest[string(r.key)] > o):
			case o < mapEnd && r.value == nil && latest[string(r.key)] == o && b.h.HasDeleteHorizon() && c.now >= b.h.FirstTimestamp:
				c.removedTombs[o] = true
			default:
				fail("record %d (key %q) removed; latest below the map end %d, horizon %v %d", o, r.key, latestOr(latest, r.key), b.h.HasDeleteHorizon(), b.h.FirstTimestamp)
			}
		}
	}
	// Below the map end, each key keeps exactly its latest record (or its
	// tombstone went past its horizon); nothing aborted survives what the
	// filter read; a kept tombstone there carries a horizon.
	for _, b := range cur {
		for _, r := range b.recs {
			if r.control {
				continue
			}
			if b.h.BaseOffset <= filtered && c.aborted(r.offset) {
				fail("aborted record %d survives", r.offset)
			}
			if b.h.BaseOffset <= filtered && r.value == nil && !b.h.HasDeleteHorizon() {
				fail("tombstone %d kept without a delete horizon", r.offset)
			}
			if r.offset < mapEnd && (r.key == nil || latest[string(r.key)] != r.offset) {
				fail("record %d (key %q) survives below the map end; latest %d", r.offset, r.key, latestOr(latest, r.key))
			}
		}
	}
	for k, o := range latest {
		if !present[o] && !c.removedTombs[o] {
			fail("latest record %d of key %q is gone", o, k)
		}
	}

	// Each live producer's last batch survives.
	for pid, lr := range live {
		if lr.LastDataOffset >= 0 {
			var h partlog.BatchHeader
			for _, b := range cur {
				if b.h.ProducerID == pid && b.h.LastOffset() == lr.LastDataOffset {
					h = b.h
				}
			}
			if h.ProducerID != pid {
				fail("producer %d: its last batch, ending at %d, is gone", pid, lr.LastDataOffset)
			}
			continue
		}
		for _, b := range prev {
			if b.h.IsControl() && b.h.ProducerID == pid && b.h.ProducerEpoch == lr.Epoch {
				if _, ok := byBase[b.h.BaseOffset]; !ok {
					fail("producer %d: its marker at %d (epoch %d) is gone", pid, b.h.BaseOffset, lr.Epoch)
				}
			}
		}
	}

	// A marker stays while any batch of its transaction does.
	for _, b := range cur {
		if b.h.IsControl() || !b.h.IsTransactional() {
			continue
		}
		txn := c.txns[c.txnOf[b.h.BaseOffset]-1]
		if mk, ok := byBase[txn.marker]; txn.decided && (!ok || len(mk.recs) != 1) {
			fail("batch at %d of a decided transaction lost its marker at %d", b.h.BaseOffset, txn.marker)
		}
	}

	// A marker goes only past the horizon an earlier pass gave it.
	for _, b := range prev {
		if !b.h.IsControl() || len(b.recs) == 0 || present[b.h.BaseOffset] {
			continue
		}
		if !b.h.HasDeleteHorizon() || c.now < b.h.FirstTimestamp {
			fail("marker at %d removed before its horizon (%v %d)", b.h.BaseOffset, b.h.HasDeleteHorizon(), b.h.FirstTimestamp)
		}
	}

	c.checkReadCommitted(cur, present, lso, fail)
	c.checkReplay(cur, fail)
}

// checkSettled checks, after passes that left no horizon pending, that
// the filtered range holds nothing the cleaner could still remove: no
// tombstone, no marker without its transaction's data, no empty batch but
// a live producer's last.
func (c *compactModel) checkSettled() {
	t := c.t
	live := c.p.LastRecords()
	data := map[int]bool{} // transactions with a data batch left
	for _, b := range c.dec {
		if !b.h.IsControl() && b.h.IsTransactional() {
			data[c.txnOf[b.h.BaseOffset]] = true
		}
	}
	for _, b := range c.dec {
		h := b.h
		if h.BaseOffset > c.filtered {
			break
		}
		lr, ok := live[h.ProducerID]
		switch {
		case len(b.recs) == 0 && !(ok && h.ProducerID >= 0 && lr.keeps(h)):
			t.Errorf("empty batch at %d of producer %d stays", h.BaseOffset, h.ProducerID)
		case h.IsControl() && len(b.recs) > 0 && !data[c.txnOf[h.BaseOffset]]:
			t.Errorf("marker at %d stays without data", h.BaseOffset)
		}
		for _, r := range b.recs {
			if !r.control && r.value == nil {
				t.Errorf("tombstone %d stays", r.offset)
			}
		}
	}
}

func latestOr(latest map[string]int64, key []byte) int64 {
	if o, ok := latest[string(key)]; ok {
		return o
	}
	return -1
}

// checkReadCommitted reads the log up to the LSO as a Java read_committed
// consumer does, with the aborted list a fetch gets: it sees exactly the
// surviving records of committed and non-transactional writes, and for
// each key the latest such record (none if its tombstone went).
func (c *compactModel) checkReadCommitted(cur []logBatch, present map[int64]bool, lso int64, fail func(string, ...any)) {
	aborted := c.p.AbortedTransactions(0, lso, nil)
	skipping := map[int64]bool{}
	seen := map[int64]bool{}
	lastOf := map[string]int64{}
	for _, b := range cur {
		h := b.h
		if h.BaseOffset >= lso {
			break
		}
		for len(aborted) > 0 && aborted[0].FirstOffset <= h.LastOffset() {
			skipping[aborted[0].ProducerID] = true
			aborted = aborted[1:]
		}
		if h.IsControl() {
			if len(b.recs) > 0 && controlTypeOf(b.recs[0]) == controlAbort {
				delete(skipping, h.ProducerID)
			}
			continue
		}
		if h.IsTransactional() && skipping[h.ProducerID] {
			continue
		}
		for _, r := range b.recs {
			seen[r.offset] = true
			lastOf[string(r.key)] = r.offset
		}
	}
	want := map[string]int64{}
	for o, r := range c.recs {
		if o >= lso || r.control {
			continue
		}
		if present[o] && seen[o] == c.aborted(o) {
			fail("read_committed: record %d seen %v, aborted %v", o, seen[o], c.aborted(o))
		}
		if r.key != nil && !c.aborted(o) && o > latestOr(want, r.key) {
			want[string(r.key)] = o
		}
	}
	for k, o := range want {
		got, ok := lastOf[k]
		switch {
		case c.removedTombs[o] && ok:
			fail("read_committed: key %q reads %d after its tombstone %d went", k, got, o)
		case !c.removedTombs[o] && got != o:
			fail("read_committed: key %q reads %d, latest committed %d", k, got, o)
		}
	}
}

// checkReplay rebuilds producer state from the cleaned log as a reopen
// does (replayBatch, on the batches in memory) and compares it with the
// live state: same epochs and last batches, and no transaction left open
// that the live state has closed.
func (c *compactModel) checkReplay(cur []logBatch, fail func(string, ...any)) {
	rp := newProducerState()
	r := memLog(c.log)
	var buf []byte
	for _, b := range cur {
		if err := rp.replayBatch(b.h, r, &buf); err != nil {
			fail("replay: %v", err)
		}
	}
	for pid, e := range c.p.producers.m {
		r := rp.m[pid]
		if r == nil {
			fail("replay: producer %d is gone", pid)
			return
		}
		if r.Epoch != e.Epoch || r.TxnFirst != e.TxnFirst {
			fail("replay: producer %d epoch %d txn %d, live %d %d", pid, r.Epoch, r.TxnFirst, e.Epoch, e.TxnFirst)
		}
		if n := len(e.Batches); n > 0 && (len(r.Batches) == 0 || r.Batches[len(r.Batches)-1] != e.Batches[n-1]) {
			fail("replay: producer %d last batches %v, live %v", pid, r.Batches, e.Batches)
		}
		// After a reopen: a retry of the last batch is a duplicate at its
		// offsets, the next sequence is taken, an older epoch is fenced.
		if n := len(e.Batches); n > 0 {
			lb := e.Batches[n-1]
			h := partlog.BatchHeader{ProducerID: pid, ProducerEpoch: e.Epoch, BaseSequence: lb.FirstSeq, LastOffsetDelta: int32(lb.LastOffset - lb.BaseOffset)}
			if dup, isDup, err := checkEntry(r, h); !isDup || dup != lb || err != nil {
				fail("replay: producer %d: retry of its last batch %+v: dup %v %+v, %v", pid, lb, isDup, dup, err)
			}
			h.BaseSequence, h.LastOffsetDelta = nextSeq(lb.LastSeq), 0
			if _, isDup, err := checkEntry(r, h); isDup || err != nil {
				fail("replay: producer %d: next sequence %d refused: %v", pid, h.BaseSequence, err)
			}
		}
		if e.Epoch > 0 {
			h := partlog.BatchHeader{ProducerID: pid, ProducerEpoch: e.Epoch - 1}
			if _, _, err := checkEntry(r, h); !errors.Is(err, ErrInvalidProducerEpoch) {
				fail("replay: producer %d: epoch %d not fenced: %v", pid, e.Epoch-1, err)
			}
		}
	}
}

// memLog reads batches of a log in memory by base offset, as
// partlog.Log.Read reads a whole batch.
type memLog [][]byte

func (l memLog) Read(offset int64, maxBytes int, dst []byte) ([]byte, error) {
	for _, b := range l {
		if base(b) == offset {
			return append(dst, b[:min(len(b), maxBytes)]...), nil
		}
	}
	return dst, fmt.Errorf("no batch at offset %d", offset)
}

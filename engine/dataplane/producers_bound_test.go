package dataplane

import (
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/memfs"
	"github.com/kaas-dev/kaas/volume/partlog"
)

// TestProducerStateBoundedUnderPIDFlood is finding 9b of issue 15: batches
// of 100,000 made-up producer IDs must not make 100,000 entries. The table
// stays at its cap, the most recent producers keep their deduplication,
// and the snapshot stays bounded.
func TestProducerStateBoundedUnderPIDFlood(t *testing.T) {
	const flood = 100000
	limit := DefaultMaxProducersPerPartition
	fsys := memfs.New()
	p, _ := openTestPartition(t, fsys, 1, 0)
	for pid := int64(1); pid <= flood; pid++ {
		if _, _, err := p.Append(plainBatch(pid, 0, 0, 1)); err != nil {
			t.Fatalf("producer %d: %v", pid, err)
		}
		if n := len(p.producers.m); n > limit {
			t.Fatalf("after %d producers the table holds %d entries, the cap is %d", pid, n, limit)
		}
	}
	// The most recent producers are remembered: a retry of their batch is
	// answered as a duplicate, not appended again.
	end := p.log.LogEndOffset()
	for pid := int64(flood - limit + 1); pid <= flood; pid++ {
		last, res, err := p.Append(plainBatch(pid, 0, 0, 1))
		if err != nil || res.BaseOffset != pid-1 || last != pid-1 {
			t.Fatalf("retry of producer %d: offset %d (%v), want the original %d", pid, res.BaseOffset, err, pid-1)
		}
	}
	if got := p.log.LogEndOffset(); got != end {
		t.Fatalf("retries of remembered producers appended: log end %d, want %d", got, end)
	}
	// An evicted producer is treated as an expired one: as new.
	if _, res, err := p.Append(plainBatch(1, 0, 5, 1)); err != nil || res.BaseOffset != end {
		t.Fatalf("batch of an evicted producer: offset %d (%v), want a new append at %d", res.BaseOffset, err, end)
	}
	// The snapshot written at close holds at most the cap.
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	files, _, err := listSnapshots(fsys, txnDir)
	if err != nil || len(files) == 0 {
		t.Fatalf("no snapshot after close: %v", err)
	}
	b, err := volume.ReadFile(fsys, txnDir+"/"+files[0].name)
	if err != nil {
		t.Fatal(err)
	}
	max := snapHeaderSize + limit*(snapEntryFixed+keepBatches*snapBatchSize) + 4
	if len(b) > max {
		t.Fatalf("snapshot of %d bytes, more than %d producers take (%d)", len(b), limit, max)
	}
	ps, _, _, err := decodeSnapshot(b)
	if err != nil || len(ps.m) > limit {
		t.Fatalf("snapshot holds %d producers (%v), cap %d", len(ps.m), err, limit)
	}
}

func batchHeader(t *testing.T, b []byte) partlog.BatchHeader {
	t.Helper()
	h, err := partlog.ParseBatchHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestProducerBoundEviction: at the cap a new producer evicts the least
// recently used entry without a transaction in progress; entries with one
// are never evicted, and when only they are left a new producer is
// refused (retriable) while markers and verifications still get in.
func TestProducerBoundEviction(t *testing.T) {
	type step struct {
		op   string // "plain", "txn" (a transactional batch), "marker", "verify", "admit"
		pid  int64
		want string // the producer IDs in the table afterwards, most recent first; or "full"
	}
	cases := []struct {
		name  string
		limit int
		steps []step
	}{
		{"least recently used goes first", 3, []step{
			{"plain", 1, "1"}, {"plain", 2, "2 1"}, {"plain", 3, "3 2 1"},
			{"plain", 1, "1 3 2"}, // 1 is used again
			{"admit", 4, "1 3"}, {"plain", 4, "4 1 3"},
		}},
		{"open transactions stay", 3, []step{
			{"txn", 1, "1"}, {"plain", 2, "2 1"}, {"txn", 3, "3 2 1"},
			{"admit", 4, "3 1"}, {"plain", 4, "4 3 1"},
			{"admit", 5, "3 1"}, {"plain", 5, "5 3 1"},
		}},
		{"full of transactions refuses new producers", 2, []step{
			{"txn", 1, "1"}, {"txn", 2, "2 1"}, {"admit", 3, "full"},
			// the coordinator's markers and verifications are not refused
			{"verify", 3, "3 2 1"}, {"marker", 1, "1 3 2"},
		}},
		{"a marker not yet durable keeps its producer", 2, []step{
			{"txn", 1, "1"}, {"marker", 1, "1"}, {"plain", 2, "2 1"},
			{"admit", 3, "1"}, // 2 goes although 1 is older
		}},
		{"no cap", 0, []step{{"plain", 1, "1"}, {"plain", 2, "2 1"}, {"admit", 3, "2 1"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ps := newProducerState()
			ps.setLimit(c.limit)
			var off int64
			for i, s := range c.steps {
				var err error
				switch s.op {
				case "plain", "txn":
					b := plainBatch(s.pid, 0, 0, 1)
					if s.op == "txn" {
						b = txnBatch(s.pid, 0, 0, 1)
					}
					ps.record(batchHeader(t, b), off, off)
					off++
				case "marker":
					ps.applyMarker(marker{pid: s.pid, commit: true, offset: off})
					off++
				case "verify":
					_ = ps.makeRoom()
					e := newProducerEntry(0)
					e.Verified = 0
					ps.put(s.pid, e)
				case "admit":
					err = ps.makeRoom()
				}
				got := lruOrder(ps)
				if errors.Is(err, ErrProducerStateFull) {
					got = "full"
				} else if err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				if got != s.want {
					t.Fatalf("step %d (%s %d): table %q, want %q", i, s.op, s.pid, got, s.want)
				}
			}
		})
	}
}

// lruOrder lists the table's producer IDs, most recently used first, and
// checks that the recency list and the map agree.
func lruOrder(ps *producerState) string {
	var ids []string
	n := 0
	for e := ps.lru.head; e != nil; e = e.next {
		ids = append(ids, strconv.FormatInt(e.pid, 10))
		if ps.m[e.pid] != e {
			return "list names " + strconv.FormatInt(e.pid, 10) + ", absent from the map"
		}
		n++
	}
	if n != len(ps.m) {
		return fmt.Sprintf("list of %d, map of %d", n, len(ps.m))
	}
	return strings.Join(ids, " ")
}

// TestProducerEntryMemory measures what one producer entry costs (the
// figure producerbound.go quotes): a full table of entries with five
// batches each.
func TestProducerEntryMemory(t *testing.T) {
	const n = DefaultMaxProducersPerPartition
	hs := make([]partlog.BatchHeader, n)
	for i := range hs {
		hs[i] = batchHeader(t, plainBatch(int64(i+1), 0, 0, 1))
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	ps := newProducerState()
	for i := range hs {
		for j := int32(0); j < keepBatches; j++ {
			h := hs[i]
			h.BaseSequence = j
			ps.record(h, int64(i), int64(i))
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := float64(after.HeapAlloc-before.HeapAlloc) / n
	t.Logf("%d producers, 5 batches each: %.0f bytes per entry, %.2f MB per full partition; snapshot %d bytes",
		n, per, per*n/1e6, len(ps.encodeSnapshot(int64(n), 1)))
	runtime.KeepAlive(ps)
	if per > 400 {
		t.Fatalf("%.0f bytes per producer entry, more than the 400 budgeted", per)
	}
}

// TestProducerBoundAtLoad: a snapshot written with more producers than the
// cap (by an older kaas, or under a larger cap) loads as the most recent
// ones, by their last timestamp.
func TestProducerBoundAtLoad(t *testing.T) {
	ps := newProducerState()
	ps.setLimit(0)
	for pid := int64(1); pid <= 10; pid++ {
		h := batchHeader(t, plainBatch(pid, 0, 0, 1))
		h.MaxTimestamp = 1000 - pid // the lowest ID is the most recent
		ps.record(h, pid, pid)
	}
	got, _, _, err := decodeSnapshot(ps.encodeSnapshot(11, 1))
	if err != nil {
		t.Fatal(err)
	}
	got.setLimit(3)
	if order := lruOrder(got); order != "1 2 3" {
		t.Fatalf("loaded under a cap of 3: %q, want the three most recent %q", order, "1 2 3")
	}
}

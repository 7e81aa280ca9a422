package engine

import (
	"fmt"
	"testing"

	"github.com/kaas-dev/kaas/volume/faultfs"
	"github.com/kaas-dev/kaas/volume/memfs"
)

const pidCluster = "data/__cluster"

func TestProducerIDsNeverRepeatAcrossRestarts(t *testing.T) {
	fsys := memfs.New()
	seen := map[int64]string{}
	take := func(p *ProducerIDs, who string, n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			id, err := p.Next()
			if err != nil {
				t.Fatalf("%s: Next: %v", who, err)
			}
			if id <= 0 {
				t.Fatalf("%s: id %d", who, id)
			}
			if prev, dup := seen[id]; dup {
				t.Fatalf("id %d issued twice (%s, then %s)", id, prev, who)
			}
			seen[id] = who
		}
	}
	for restart := 0; restart < 5; restart++ {
		p := NewProducerIDs(fsys, pidCluster, 1)
		take(p, fmt.Sprintf("restart %d", restart), producerIDBlockSize*2+restart*37)
	}
	// Two brokers on one volume, interleaved.
	a, b := NewProducerIDs(fsys, pidCluster, 1), NewProducerIDs(fsys, pidCluster, 2)
	for i := 0; i < 5; i++ {
		take(a, "broker 1", 700)
		take(b, "broker 2", 900)
	}
}

// TestProducerIDsCrashSweep crashes the allocator's volume at every mutating
// operation of a workload that reserves several blocks; a new allocator on
// what survived must never issue an ID the crashed one issued.
func TestProducerIDsCrashSweep(t *testing.T) {
	const want = producerIDBlockSize*2 + 10 // three reservations
	workload := func(p *ProducerIDs, seen map[int64]bool, who string) (int, error) {
		for i := 0; i < want; i++ {
			id, err := p.Next()
			if err != nil {
				return i, err
			}
			if seen[id] {
				return i, fmt.Errorf("%s: id %d issued twice", who, id)
			}
			seen[id] = true
		}
		return want, nil
	}
	clean := faultfs.New(memfs.New(), nil)
	if _, err := workload(NewProducerIDs(clean, pidCluster, 1), map[int64]bool{}, "clean"); err != nil {
		t.Fatal(err)
	}
	n := clean.MutatingOps()
	covered := 0
	for i := 0; i < n; i++ {
		for _, after := range []bool{false, true} {
			mem := memfs.New()
			ffs := faultfs.New(mem, faultfs.CrashAtMutating(i, after))
			seen := map[int64]bool{}
			issued, err := workload(NewProducerIDs(ffs, pidCluster, 1), seen, "before crash")
			if err == nil || !ffs.Crashed() {
				t.Fatalf("op %d after=%v: crash not reached (%v)", i, after, err)
			}
			clone := mem.CrashClone()
			// Two lives after the crash: the second one checks that the
			// first one's reservations were durable too.
			for life := 0; life < 2; life++ {
				if _, err := workload(NewProducerIDs(clone, pidCluster, 1), seen, fmt.Sprintf("life %d after crash at op %d (after=%v, %d issued before)", life, i, after, issued)); err != nil {
					t.Fatal(err)
				}
			}
			covered++
		}
	}
	t.Logf("producer-id crash sweep: %d mutating ops, %d crash points covered", n, covered)
	fmt.Printf("producer-id crash sweep: %d crash points covered\n", covered)
}

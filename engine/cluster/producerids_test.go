package cluster

import (
	"fmt"
	"testing"

	"github.com/kaas-dev/kaas/volume"
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

// producerIDProcedure is the allocator's crash sweep (TestClusterCrashSweep):
// a broker reserves three blocks; after a crash at any mutating op, two
// lives of a new allocator on what survived must never issue an ID the
// crashed one issued (the second life checks the first one's reservations
// were durable too).
func producerIDProcedure() clusterProcedure {
	const want = producerIDBlockSize*2 + 10 // three reservations
	issue := func(p *ProducerIDs, seen map[int64]bool, who string) error {
		for i := 0; i < want; i++ {
			id, err := p.Next()
			if err != nil {
				return err
			}
			if seen[id] {
				return fmt.Errorf("%s: id %d issued twice", who, id)
			}
			seen[id] = true
		}
		return nil
	}
	return clusterProcedure{
		name:   "producer-id-blocks",
		covers: []string{"NewProducerIDs", "ProducerIDs.Next"},
		setup: func(t *testing.T, fsys volume.FS, ct *clusterTrial) {
			ct.issuedIDs = map[int64]bool{}
		},
		work: func(fsys volume.FS, ct *clusterTrial) error {
			return issue(NewProducerIDs(fsys, clusterDir, 1), ct.issuedIDs, "before the crash")
		},
		checkCrashed: func(t *testing.T, fsys volume.FS, ct *clusterTrial) {},
		restart: func(t *testing.T, fsys volume.FS, ct *clusterTrial) {
			t.Helper()
			for life := 0; life < 2; life++ {
				if err := issue(NewProducerIDs(fsys, clusterDir, 1), ct.issuedIDs, fmt.Sprintf("life %d after the crash (%d issued before)", life, len(ct.issuedIDs))); err != nil {
					t.Fatal(err)
				}
			}
		},
	}
}

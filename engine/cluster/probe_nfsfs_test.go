package cluster

import (
	"testing"
	"time"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/memfs"
	"github.com/kaas-dev/kaas/volume/nfsfs"
)

// On NFS-like per-host views (stale listings, attributes and failed
// lookups for a second, but close-to-open kept), the handshake still
// completes and passes: the caches it may meet only delay it.
func TestCrossHostOverNFSViews(t *testing.T) {
	clock := &fakeClock{}
	epoch := time.Unix(0, 0)
	srv := nfsfs.New(memfs.New(), nfsfs.Options{AttrTTL: time.Second, DirTTL: time.Second, NegTTL: time.Second,
		Now: func() time.Time { return epoch.Add(clock.Now()) }})
	a, b := srv.View("hostA"), srv.View("hostB")
	if err := volume.MkdirAllSync(a, clusterDir); err != nil {
		t.Fatal(err)
	}
	hb := NewHeartbeater(a, clusterDir, Heartbeat{BrokerID: 1, Incarnation: "one"})
	resp := NewProbeResponder(a, clusterDir, 1, time.Second, clock.Now)
	check := NewCrossHostCheck(CrossHostConfig{FS: b, ClusterDir: clusterDir, BrokerID: 2,
		Timeout: 5 * time.Second, Lease: 2 * time.Second, Clock: clock.Now})
	for i := 0; i < 200; i++ {
		if err := hb.Beat(); err != nil {
			t.Fatal(err)
		}
		resp.Round()
		done, err := check.Step()
		if err != nil {
			t.Fatal(err)
		}
		if done {
			check.Cleanup()
			res := check.Result()
			if res.Skipped || res.Err != nil || len(res.Peers) != 1 {
				t.Fatalf("result after %v: %+v", clock.Now(), res)
			}
			return
		}
		clock.Advance(50 * time.Millisecond)
	}
	t.Fatal("never finished")
}

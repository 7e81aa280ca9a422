package engine

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kaas-dev/kaas/engine/cluster"
	"github.com/kaas-dev/kaas/volume/memfs"
	"github.com/kaas-dev/kaas/volume/probe/probetest"
)

// A running engine answers a starting broker's cross-host check from its
// heartbeat loop: honestly on an honest volume, stale through a stale view.
func TestEngineAnswersCrossHostCheck(t *testing.T) {
	for _, stale := range []bool{false, true} {
		m := memfs.New()
		view := probetest.NewStaleView(m)
		view.SetStale(stale)
		startMember(t, view, 1)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		poll(t, ctx, "broker 1's first heartbeat", func() error {
			_, err := m.Stat(cluster.HeartbeatPath(testCluster, 1))
			return err
		})
		res, err := cluster.CheckCrossHost(ctx, cluster.CrossHostConfig{FS: m, ClusterDir: testCluster, BrokerID: 2,
			Lease: 200 * time.Millisecond}, 5*time.Millisecond)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case res.Skipped:
			t.Fatalf("stale=%v: skipped: %s", stale, res.Reason)
		case stale && (res.Err == nil || !strings.Contains(res.Err.Error(), "close-to-open")):
			t.Fatalf("stale view passed: %+v", res)
		case !stale && (res.Err != nil || len(res.Peers) != 1):
			t.Fatalf("honest view: %+v", res)
		}
	}
}

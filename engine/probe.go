package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kaas-dev/kaas/engine/cluster"
)

// probeResponder answers the cross-host volume checks of brokers that are
// starting (engine/cluster/probe.go) from the heartbeat loop. While a
// check waits on this broker's second read, it polls faster than the
// heartbeat for a short while, so the second read follows the first by
// little: that is what a stale client cache would be caught by.
type probeResponder struct {
	r        *cluster.ProbeResponder
	interval time.Duration
	fast     atomic.Bool
	wg       sync.WaitGroup
}

func (e *Engine) newProbeResponder() *probeResponder {
	return &probeResponder{
		r:        cluster.NewProbeResponder(e.fsys, e.cfg.ClusterDir, e.cfg.BrokerID, e.cfg.Lease, nil),
		interval: max(e.cfg.HeartbeatInterval/10, 5*time.Millisecond),
	}
}

// round runs once per heartbeat round.
func (p *probeResponder) round(ctx context.Context) {
	if !p.r.Round() || !p.fast.CompareAndSwap(false, true) {
		return
	}
	p.wg.Go(func() {
		defer p.fast.Store(false)
		t := time.NewTicker(p.interval)
		defer t.Stop()
		deadline := time.Now().Add(cluster.DefaultCrossHostTimeout)
		for time.Now().Before(deadline) {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if !p.r.Round() {
				return
			}
		}
	})
}

// wait returns when no fast poll runs.
func (p *probeResponder) wait() { p.wg.Wait() }

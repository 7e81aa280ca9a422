package engine

import (
	"context"
	"errors"
	"sync"

	"github.com/kaas-dev/kaas/engine/cluster"
)

// startGuard keeps one process per broker ID: the start check, and the
// stop of a broker that finds its heartbeat written by another process.
type startGuard struct {
	mu      sync.Mutex
	checked bool
	// stop ends Run with the cause, once Run has started.
	stop func(cause error)
}

// StartCheck refuses to start this broker while another process runs
// with its ID (cluster.StartCheck): it returns a
// *cluster.AlreadyRunningError when the broker's heartbeat advances
// within a lease. It returns at once when there is no heartbeat or the
// last one says leaving (a clean stop), and after at most a lease after a
// crash. Call it before serving; Run calls it if it was not called.
func (e *Engine) StartCheck(ctx context.Context) error {
	e.guard.mu.Lock()
	defer e.guard.mu.Unlock()
	if e.guard.checked {
		return nil
	}
	found, err := cluster.StartCheck{FS: e.fsys, ClusterDir: e.cfg.ClusterDir, BrokerID: e.cfg.BrokerID,
		Lease: e.cfg.Lease, Now: e.obs.Now,
		Waiting: func(hb cluster.Heartbeat) {
			e.log.Info("this broker's heartbeat file is there and not marked leaving: waiting up to a lease to see whether another process runs as this broker",
				"incarnation", hb.Incarnation, "counter", hb.Counter, "lease", e.cfg.Lease)
		}}.Run(ctx)
	if err != nil {
		return err
	}
	e.hb.Replaces(found)
	e.guard.checked = true
	return nil
}

// guardRun derives Run's context: canceled with a *cluster.SupplantedError
// cause when a heartbeat finds another process wrote this broker's file.
func (e *Engine) guardRun(ctx context.Context) (context.Context, context.CancelCauseFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	e.guard.mu.Lock()
	e.guard.stop = cancel
	e.guard.mu.Unlock()
	return ctx, cancel
}

// supplanted stops Run: another process runs as this broker. Serving on
// would make the two take each other's partitions in turn forever.
func (e *Engine) supplanted(err error) {
	e.log.Error(err, "ANOTHER PROCESS RUNS AS THIS BROKER: stopping; give every broker process its own --id")
	e.guard.mu.Lock()
	stop := e.guard.stop
	e.guard.mu.Unlock()
	if stop != nil {
		stop(err)
	}
}

// supplantedCause returns the *cluster.SupplantedError that ended ctx, or nil.
func supplantedCause(ctx context.Context) error {
	var se *cluster.SupplantedError
	if errors.As(context.Cause(ctx), &se) {
		return se
	}
	return nil
}

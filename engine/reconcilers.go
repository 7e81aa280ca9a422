package engine

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	"github.com/kaas-dev/kaas/engine/reconcile"
)

// ReconcileFunc reconciles one key of its kind. Its logger is in ctx
// (logr.FromContextOrDiscard), with the pass's reconcileID, kind and name.
type ReconcileFunc func(ctx context.Context, key Key) (reconcile.Result, error)

// reconcilers is the dispatch table: one reconciler per kind of key.
func (e *Engine) reconcilers() map[Kind]ReconcileFunc {
	return map[Kind]ReconcileFunc{
		KindTopic: func(ctx context.Context, key Key) (reconcile.Result, error) {
			return reconcile.Result{}, e.reconcileTopic(ctx, key.Name)
		},
		KindGroups: func(ctx context.Context, _ Key) (reconcile.Result, error) {
			return reconcile.Result{}, e.reconcileGroups(ctx)
		},
		KindTrash: func(ctx context.Context, _ Key) (reconcile.Result, error) {
			return reconcile.Result{}, e.sweepTrash(ctx)
		},
	}
}

// reconcile runs one pass of key through the dispatch table.
func (e *Engine) reconcile(ctx context.Context, key Key) (reconcile.Result, error) {
	r, ok := e.dispatch[key.Kind]
	if !ok {
		return reconcile.Result{}, reconcile.Terminal(fmt.Errorf("unknown reconcile key %v", key))
	}
	return r(ctx, key)
}

// work takes keys off the queue until ctx ends, one pass at a time, each
// pass with its own logger.
func (e *Engine) work(ctx context.Context) {
	for {
		key, ok := e.queue.Get(ctx)
		if !ok {
			return
		}
		log := e.log.WithValues("reconcileID", e.reconcileIDs.Add(1), "kind", key.Kind, "name", key.Name)
		res, err := e.reconcile(logr.NewContext(ctx, log), key)
		ended := e.queue.Done(key, res, err)
		if ctx.Err() != nil {
			continue // stopping: errors of cut-short passes are not news
		}
		e.reconciles.notePass(key.Kind, ended.Outcome)
		switch ended.Outcome {
		case reconcile.OutcomeWaiting:
			log.V(1).Info("reconcile waiting", "reason", reconcile.WaitReason(err))
		case reconcile.OutcomeFailed:
			log.Error(err, "reconcile failed; retrying with backoff", "key", key.String(), "failures", ended.Attempts)
		case reconcile.OutcomeTerminal:
			if ended.NewTerminal {
				log.Error(err, "reconcile failed for good; not retried until the key is enqueued again", "key", key.String())
			}
		}
	}
}

// passLog is the logger of the pass ctx belongs to, or the engine's when
// ctx is not a pass's (a direct call, a test).
func (e *Engine) passLog(ctx context.Context) logr.Logger {
	if log, err := logr.FromContext(ctx); err == nil {
		return log
	}
	return e.log
}

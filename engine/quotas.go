package engine

import (
	"context"
	"sync/atomic"

	"github.com/kaas-dev/kaas/engine/quota"
	"github.com/kaas-dev/kaas/engine/versioned"
)

// quotaState is the client quotas as this broker last loaded them; kept
// whether or not the authorizer is on.
type quotaState struct {
	store *syncedStore
	table atomic.Pointer[quota.Table]
}

func (e *Engine) initQuotas() {
	e.quotas.table.Store(quota.NewTable(nil))
	e.quotas.store = e.newSyncedStore(quota.Dir, func(entries []versioned.Entry) {
		quotas, bad := quota.DecodeAll(entries)
		for _, err := range bad {
			e.log.Error(err, "a client quota file is left out")
		}
		e.quotas.table.Store(quota.NewTable(quotas))
	})
	// Loaded before the broker serves anything; a failed read leaves no
	// quota in force until the next round.
	e.pollStore(e.quotas.store)
}

// ClientQuota is the quota k of a client: the limit, and the sensor, the
// name of the entity the limit was found on (every client that entity
// matches shares one measured rate, as in Kafka); ok is false when no
// quota k applies to the client. user is the principal's name without
// its type ("alice" for User:alice). See quota.Table.Resolve.
func (e *Engine) ClientQuota(k quota.Key, user, clientID string) (limit float64, sensor string, ok bool) {
	return e.quotas.table.Load().Resolve(k, user, clientID)
}

// ClientQuotas is the quota table this broker enforces.
func (e *Engine) ClientQuotas() *quota.Table { return e.quotas.table.Load() }

// QuotaChange sets (Remove false) or removes one quota.
type QuotaChange struct {
	Entity quota.Entity
	Key    quota.Key
	Value  float64
	Remove bool
}

// AlterClientQuotas applies changes (each already valid) in one change of
// the store and returns once every live broker enforces them, or after a
// bounded wait (syncedStore).
func (e *Engine) AlterClientQuotas(ctx context.Context, changes []QuotaChange) error {
	if len(changes) == 0 {
		return nil
	}
	out := make([]versioned.Change, 0, len(changes))
	for _, c := range changes {
		vc := versioned.Change{Name: quota.FileName(c.Entity, c.Key)}
		if !c.Remove {
			vc.Data = quota.Encode(quota.Quota{Entity: c.Entity, Key: c.Key, Value: c.Value})
		}
		out = append(out, vc)
	}
	return e.changeStore(ctx, e.quotas.store, out)
}

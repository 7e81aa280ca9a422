package engine

import (
	"context"
	"fmt"
	"path"
	"sync"
	"time"

	"github.com/kaas-dev/kaas/engine/versioned"
)

// syncedStore is a versioned directory on the control-plane volume that
// every broker keeps loaded (the ACLs, the client quotas): the cluster
// round polls its token and reloads on a change, the heartbeat publishes
// the token loaded, and a change waits until every live broker publishes
// the token that is current after it (docs/volume.md, "ACLs and client
// quotas").
type syncedStore struct {
	name string // the heartbeat's Versions key
	dir  versioned.Dir
	load func([]versioned.Entry) // installs what a reload read

	mu     sync.Mutex // one poll or change at a time
	reader versioned.Reader
}

// fullReloadRounds is how many cluster rounds pass between full reloads
// of a store (about a minute at the default interval): the bound on a
// change whose token write a crash lost.
const fullReloadRounds = 240

func (e *Engine) newSyncedStore(name string, load func([]versioned.Entry)) *syncedStore {
	d := versioned.Dir{FS: e.fsys, Path: path.Join(e.cfg.ClusterDir, name)}
	return &syncedStore{name: name, dir: d, load: load, reader: versioned.Reader{Dir: d, FullEvery: fullReloadRounds}}
}

// poll reloads s if its token changed and publishes the loaded token in
// the next heartbeat.
func (e *Engine) pollStore(s *syncedStore) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e.pollStoreLocked(s)
}

func (e *Engine) pollStoreLocked(s *syncedStore) {
	entries, reload, err := s.reader.Poll()
	if err != nil {
		e.log.Error(err, "store not reloaded this round", "store", s.name)
		return
	}
	if reload {
		s.load(entries)
	}
	e.hb.SetVersion(s.name, s.reader.Token())
}

// change applies changes to s, reloads it here at once, and waits until
// every live broker has loaded a token at least as new, or for at most
// storeSyncWait (then it answers anyway: the others load it within a
// round or two).
func (e *Engine) changeStore(ctx context.Context, s *syncedStore, changes []versioned.Change) error {
	s.mu.Lock()
	_, err := s.dir.Apply(changes)
	if err == nil {
		// Force a reload: a concurrent writer may have replaced the token.
		s.reader = versioned.Reader{Dir: s.dir, FullEvery: fullReloadRounds}
		e.pollStoreLocked(s)
	}
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("change %s: %w", s.name, err)
	}
	e.waitStoreSynced(ctx, s)
	return nil
}

// storeSyncRounds bounds how many heartbeat intervals a change waits for
// every live broker to load it.
const storeSyncRounds = 12

func (e *Engine) waitStoreSynced(ctx context.Context, s *syncedStore) {
	step := e.cfg.HeartbeatInterval / 5
	deadline := e.cfg.Now().Add(storeSyncRounds * e.cfg.HeartbeatInterval)
	for {
		tok, err := s.dir.Token()
		if err == nil && e.everyBrokerLoaded(s.name, tok) {
			return
		}
		if e.cfg.Now().After(deadline) {
			e.log.Info("a change is not yet loaded by every live broker; answering anyway", "store", s.name)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(step):
		}
	}
}

// everyBrokerLoaded reports whether every live broker's latest heartbeat
// (this broker's own loaded token, for itself) names tok for store.
func (e *Engine) everyBrokerLoaded(store, tok string) bool {
	v := e.clusterView()
	for _, b := range v.live {
		got := v.heartbeats[b.ID].Versions[store]
		if b.ID == e.cfg.BrokerID {
			got = e.hb.Last().Versions[store]
		}
		if got != tok {
			return false
		}
	}
	return true
}

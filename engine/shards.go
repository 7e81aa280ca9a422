package engine

import (
	"errors"
	"sync"

	"github.com/kaas-dev/kaas/engine/groups"
)

// shardTable is the coordinator shards this broker serves, by index. It
// guards itself and takes no other lock: callers get copies.
type shardTable struct {
	mu     sync.RWMutex
	shards [groups.Shards]*shard
	// resigned: ResignCoordinators ran, and no shard is served again.
	resigned bool
}

var errResigned = errors.New("this broker is shutting down: it coordinates no more groups")

func (t *shardTable) get(i int32) *shard {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.shards[i]
}

// all returns a copy of the table.
func (t *shardTable) all() [groups.Shards]*shard {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.shards
}

// serve routes shard s's requests to s, unless the broker resigned.
func (t *shardTable) serve(s *shard) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.resigned {
		return errResigned
	}
	t.shards[s.index] = s
	return nil
}

// unserve stops routing to s, if it is still the one routed to.
func (t *shardTable) unserve(s *shard) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.shards[s.index] == s {
		t.shards[s.index] = nil
	}
}

// takeAll empties the table and returns what it held, to be closed; with
// resign, no shard is served again.
func (t *shardTable) takeAll(resign bool) [groups.Shards]*shard {
	t.mu.Lock()
	defer t.mu.Unlock()
	all := t.shards
	t.shards = [groups.Shards]*shard{}
	t.resigned = t.resigned || resign
	return all
}

func (t *shardTable) hasResigned() bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.resigned
}

// serving counts the shards this broker serves.
func (t *shardTable) serving() int {
	n := 0
	for _, s := range t.all() {
		if s != nil {
			n++
		}
	}
	return n
}

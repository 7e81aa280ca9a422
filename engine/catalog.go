package engine

import (
	"slices"
	"sync/atomic"

	"github.com/kaas-dev/kaas/engine/desired"
)

// The desired state as this broker last listed it. The cluster loop reads
// the desired state's version token each round (one small file) and lists
// the specs only when it moved, every fullListRounds rounds (a writer of
// an older kaas does not bump the token), or every round while a broker
// of an older kaas is live. So neither the controller's plan nor the
// resync reads every spec at idle.

// fullListRounds bounds the rounds between two listings when the token
// did not move.
const fullListRounds = 240

// catalog is one listing of the desired state; never changed once
// published.
type catalog struct {
	token  string
	specs  []desired.TopicSpec
	byName map[string]int // index in specs
}

// catalogState is the cluster loop's bookkeeping of the listing. stale is
// set by anyone who read a spec that differs from the listing (a writer
// that crashed between its spec and the token: the next round lists).
type catalogState struct {
	current atomic.Pointer[catalog]
	rounds  int
	stale   atomic.Bool
}

// desiredSpecs returns the desired state, listed again if the token moved
// (or always is set, or it is time); changed says it was listed again and
// differs in token. Only the cluster loop calls it.
func (e *Engine) desiredSpecs(always bool) (specs []desired.TopicSpec, changed bool, err error) {
	c := &e.catalog
	cur := c.current.Load()
	tok, err := desired.ReadVersion(e.fsys, e.cfg.ClusterDir)
	if err != nil {
		if cur != nil {
			return cur.specs, false, err
		}
		return nil, false, err
	}
	c.rounds++
	if cur != nil && cur.token == tok && !always && c.rounds < fullListRounds && !c.stale.Swap(false) {
		return cur.specs, false, nil
	}
	specs, err = desired.ListTopicSpecs(e.fsys, e.cfg.ClusterDir)
	if err != nil {
		if cur != nil {
			return cur.specs, false, err
		}
		return nil, false, err
	}
	c.rounds = 0
	next := &catalog{token: tok, specs: specs, byName: make(map[string]int, len(specs))}
	for i, s := range specs {
		next.byName[s.Name] = i
	}
	c.current.Store(next)
	return specs, cur == nil || cur.token != tok || !sameSpecs(cur.specs, specs), nil
}

// sameSpecs reports whether two listings hold the same incarnations and
// generations.
func sameSpecs(a, b []desired.TopicSpec) bool {
	return slices.EqualFunc(a, b, func(x, y desired.TopicSpec) bool {
		return x.Name == y.Name && x.ID == y.ID && x.Generation == y.Generation && x.Deleted == y.Deleted
	})
}

// noteSpec compares a spec just read (nil: there is none) with the
// listing: one the listing does not hold as read marks it stale, so the
// next round lists again.
func (e *Engine) noteSpec(name string, s *desired.TopicSpec) {
	c := e.catalog.current.Load()
	if c == nil {
		return
	}
	i, listed := c.byName[name]
	switch {
	case s == nil && !listed:
	case s == nil || !listed || c.specs[i].ID != s.ID || c.specs[i].Generation != s.Generation || c.specs[i].Deleted != s.Deleted:
		e.catalog.stale.Store(true)
	}
}

// listedSpecs is the last listing (nil before the first), for readers off
// the cluster loop.
func (e *Engine) listedSpecs() []desired.TopicSpec {
	if c := e.catalog.current.Load(); c != nil {
		return c.specs
	}
	return nil
}

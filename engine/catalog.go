package engine

import (
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
	token string
	specs []desired.TopicSpec
}

// catalogState is the cluster loop's bookkeeping of the listing.
type catalogState struct {
	current atomic.Pointer[catalog]
	rounds  int
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
	if cur != nil && cur.token == tok && !always && c.rounds < fullListRounds {
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
	c.current.Store(&catalog{token: tok, specs: specs})
	return specs, cur == nil || cur.token != tok, nil
}

// listedSpecs is the last listing (nil before the first), for readers off
// the cluster loop.
func (e *Engine) listedSpecs() []desired.TopicSpec {
	if c := e.catalog.current.Load(); c != nil {
		return c.specs
	}
	return nil
}

package engine

import (
	"context"
	"errors"
	"io/fs"
	"time"

	"github.com/kaas-dev/kaas/engine/desired"
)

// A topic just created through another broker reaches this one's routing a
// little later: its spec at the next resync, its assignment at the next read
// of the assignment, and the fact that its owners serve it at the next read
// of their heartbeats (up to a heartbeat interval each). CreateTopics
// answers once the broker it was sent to sees every partition served, so
// Metadata here must not answer "no leader" (or "unknown topic") for that
// window: it learns a topic it does not know from the volume, and waits
// briefly (LeaderWait) for leaders that are on their way. A leader is named
// only once its owner serves the partition, so a client told "leader X"
// finds X serving it.

// LeaderWait bounds how long Metadata waits for leaders on their way: two
// heartbeat intervals, the time this broker takes to read a new assignment
// and its owners' heartbeats.
func (e *Engine) LeaderWait() time.Duration { return 2 * e.cfg.HeartbeatInterval }

// KnownTopic returns a live topic, learning it from the desired state on
// the volume when this broker's routing does not have it yet (created
// through another broker since this one's last resync).
func (e *Engine) KnownTopic(name string) (TopicView, bool) {
	if v, ok := e.Topic(name); ok {
		return v, true
	}
	if desired.ValidTopicName(name) != nil {
		return TopicView{}, false
	}
	spec, err := desired.ReadTopicSpec(e.fsys, e.cfg.ClusterDir, name)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			e.log.V(1).Info("read topic spec for metadata", "topic", name, "err", err.Error())
		}
		return TopicView{}, false
	}
	e.learnTopic(spec)
	return e.Topic(name)
}

// LeadersComing reports whether some partition of v has no leader yet
// although one is on its way: the assignment has no entry for it yet (a
// new topic or partition), or names a live owner that does not serve it yet
// as far as this broker has seen. A partition whose owner is not live waits
// for the controller to move it, which takes a lease: not worth waiting.
func (e *Engine) LeadersComing(v TopicView) bool {
	cv := e.clusterView()
	if cv.assign == nil {
		return false
	}
	for i, l := range v.Leaders {
		if l >= 0 {
			continue
		}
		o, _, ok := cv.owner(v.Spec.ID, int32(i))
		if !ok {
			return true
		}
		for _, b := range cv.live {
			if b.ID == o.Broker && (o.Incarnation == "" || o.Incarnation == b.Incarnation) {
				return true
			}
		}
	}
	return false
}

// WaitLeaders waits until no partition of the named topics has a leader on
// its way (LeadersComing), or ctx ends. It reports whether they all came.
func (e *Engine) WaitLeaders(ctx context.Context, names []string) bool {
	for {
		ch := e.Changed()
		coming := false
		for _, name := range names {
			if v, ok := e.Topic(name); ok && e.LeadersComing(v) {
				coming = true
				break
			}
		}
		if !coming {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-ch:
		}
	}
}

package engine

import (
	"fmt"
	"sort"
	"sync"

	"github.com/kaas-dev/kaas/engine/dataplane"
	"github.com/kaas-dev/kaas/engine/desired"
)

// routingTable is what produce, fetch and metadata look up: the topics this
// broker knows, by name and by topic ID, and the partitions of each it
// serves. It guards itself, and nothing else is locked while its lock is
// held: callers get copies and consult the cluster view afterwards.
type routingTable struct {
	mu     sync.RWMutex
	topics map[string]*topic
	// ids indexes topics by topic ID (TopicByID, fetches by ID).
	ids map[string]string
}

type topic struct {
	spec  desired.TopicSpec
	parts []*dataplane.Partition // nil where not serving
}

func newRoutingTable() *routingTable {
	return &routingTable{topics: map[string]*topic{}, ids: map[string]string{}}
}

// routedTopic is one topic's entry as one read saw it: its spec and the
// partitions served then (the slice is a copy).
type routedTopic struct {
	spec  desired.TopicSpec
	parts []*dataplane.Partition
}

func (t *topic) copy() routedTopic {
	return routedTopic{spec: t.spec, parts: append([]*dataplane.Partition(nil), t.parts...)}
}

// putLocked installs t under its name, replacing (and unindexing) another
// incarnation's entry. mu is held for writing.
func (r *routingTable) putLocked(t *topic) {
	if old := r.topics[t.spec.Name]; old != nil {
		delete(r.ids, old.spec.ID)
	}
	r.topics[t.spec.Name] = t
	r.ids[t.spec.ID] = t.spec.Name
}

// upsert installs spec. A different ID under the same name is a new
// incarnation: the old one's partitions are returned as stale, for the
// caller to close. Otherwise the partitions served are returned, for the
// caller to give the spec: level-triggered, every served partition is
// given it, not only when it changed, so that a partition opened from an
// older spec while the change was installed converges too. A spec older
// than the installed one (a reconcile that raced an admin change) is
// ignored.
func (r *routingTable) upsert(spec desired.TopicSpec) (stale, served []*dataplane.Partition) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.topics[spec.Name]
	switch {
	case t == nil:
		r.putLocked(&topic{spec: spec, parts: make([]*dataplane.Partition, spec.Partitions)})
	case t.spec.ID != spec.ID:
		stale = t.parts
		r.putLocked(&topic{spec: spec, parts: make([]*dataplane.Partition, spec.Partitions)})
	case spec.Generation < t.spec.Generation:
	default:
		t.spec = spec
		for int32(len(t.parts)) < spec.Partitions {
			t.parts = append(t.parts, nil)
		}
		for _, p := range t.parts {
			if p != nil {
				served = append(served, p)
			}
		}
	}
	return stale, served
}

// markDeleted stops routing to the incarnation id of name at once; the
// delete machine closes the handles.
func (r *routingTable) markDeleted(name, id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t := r.topics[name]; t != nil && t.spec.ID == id {
		t.spec.Deleted = true
	}
}

// drop removes a topic (the incarnation id, or any when id is empty) and
// returns what it held.
func (r *routingTable) drop(name, id string) (routedTopic, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.topics[name]
	if t == nil || (id != "" && t.spec.ID != id) {
		return routedTopic{}, false
	}
	delete(r.topics, name)
	delete(r.ids, t.spec.ID)
	return routedTopic{spec: t.spec, parts: t.parts}, true
}

// publish routes requests for p's partition to p.
func (r *routingTable) publish(p *dataplane.Partition) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.topics[p.Topic]
	if t == nil || t.spec.ID != p.TopicID || p.Index >= int32(len(t.parts)) {
		return fmt.Errorf("topic %s incarnation %s is gone", p.Topic, p.TopicID)
	}
	t.parts[p.Index] = p
	return nil
}

// unpublish stops routing to p, if it is still the one routed to.
func (r *routingTable) unpublish(p *dataplane.Partition) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t := r.topics[p.Topic]; t != nil && p.Index < int32(len(t.parts)) && t.parts[p.Index] == p {
		t.parts[p.Index] = nil
	}
}

// takeAll unroutes every served partition and returns them, to be closed.
func (r *routingTable) takeAll() []*dataplane.Partition {
	r.mu.Lock()
	defer r.mu.Unlock()
	var parts []*dataplane.Partition
	for _, t := range r.topics {
		for i, p := range t.parts {
			if p != nil {
				parts = append(parts, p)
				t.parts[i] = nil
			}
		}
	}
	return parts
}

// serving returns the partition served for incarnation id of name, or nil.
func (r *routingTable) serving(name, id string, index int32) *dataplane.Partition {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t := r.topics[name]
	if t == nil || t.spec.ID != id || index >= int32(len(t.parts)) {
		return nil
	}
	return t.parts[index]
}

// route is a request's lookup of one partition: the topic's ID, the
// partition served (nil when none), and whether the topic is live and has
// the partition at all.
func (r *routingTable) route(name string, index int32) (id string, p *dataplane.Partition, known bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t := r.topics[name]
	if t == nil || t.spec.Deleted || index < 0 || index >= int32(len(t.parts)) {
		return "", nil, false
	}
	return t.spec.ID, t.parts[index], true
}

// has reports whether the table holds name at all (live or deleted).
func (r *routingTable) has(name string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.topics[name] != nil
}

// topic returns a copy of the live topic name.
func (r *routingTable) topic(name string) (routedTopic, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t := r.topics[name]
	if t == nil || t.spec.Deleted {
		return routedTopic{}, false
	}
	return t.copy(), true
}

// spec returns the spec installed under name, deleted or not.
func (r *routingTable) spec(name string) (desired.TopicSpec, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t := r.topics[name]
	if t == nil {
		return desired.TopicSpec{}, false
	}
	return t.spec, true
}

// byID returns a copy of the live topic whose incarnation has topic ID id.
func (r *routingTable) byID(id string) (routedTopic, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if t := r.byIDLocked(id); t != nil {
		return t.copy(), true
	}
	return routedTopic{}, false
}

// nameOf returns the name of the live topic with topic ID id, without
// copying its entry (the fetch path's lookup by ID).
func (r *routingTable) nameOf(id string) (string, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if t := r.byIDLocked(id); t != nil {
		return t.spec.Name, true
	}
	return "", false
}

// anyNameOf returns the name installed for topic ID id, deleted or not.
func (r *routingTable) anyNameOf(id string) (string, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	name, ok := r.ids[id]
	return name, ok
}

func (r *routingTable) byIDLocked(id string) *topic {
	t := r.topics[r.ids[id]]
	if t == nil || t.spec.ID != id || t.spec.Deleted {
		return nil
	}
	return t
}

// partitions returns a live topic's partition count without copying its
// entry (the offset-commit path checks every topic it names).
func (r *routingTable) partitions(name string) (int32, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t := r.topics[name]
	if t == nil || t.spec.Deleted {
		return 0, false
	}
	return t.spec.Partitions, true
}

// all returns a copy of every entry, deleted ones included, sorted by name.
func (r *routingTable) all() []routedTopic {
	r.mu.RLock()
	out := make([]routedTopic, 0, len(r.topics))
	for _, t := range r.topics {
		out = append(out, t.copy())
	}
	r.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].spec.Name < out[j].spec.Name })
	return out
}

// names lists every topic name the table holds.
func (r *routingTable) names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.topics))
	for name := range r.topics {
		out = append(out, name)
	}
	return out
}

// servedPartition is a served partition with the spec it is served under.
type servedPartition struct {
	spec desired.TopicSpec
	p    *dataplane.Partition
}

// served lists the partitions served now.
func (r *routingTable) served() []servedPartition {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []servedPartition
	for _, t := range r.topics {
		for _, p := range t.parts {
			if p != nil {
				out = append(out, servedPartition{spec: t.spec, p: p})
			}
		}
	}
	return out
}

// servedWhere lists the partitions served now of the topics whose spec
// keep accepts, asking keep once per topic.
func (r *routingTable) servedWhere(keep func(desired.TopicSpec) bool) []servedPartition {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []servedPartition
	for _, t := range r.topics {
		if !keep(t.spec) {
			continue
		}
		for _, p := range t.parts {
			if p != nil {
				out = append(out, servedPartition{spec: t.spec, p: p})
			}
		}
	}
	return out
}

// livePartitions counts the partitions of every live topic.
func (r *routingTable) livePartitions() int64 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var n int64
	for _, t := range r.topics {
		if !t.spec.Deleted {
			n += int64(t.spec.Partitions)
		}
	}
	return n
}

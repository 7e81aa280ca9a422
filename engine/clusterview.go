package engine

import (
	"maps"
	"sort"

	"github.com/kaas-dev/kaas/engine/cluster"
)

// clusterView is the cluster as this broker last read it: the assignment,
// the live brokers, the controller and each broker's latest heartbeat. A
// view is never changed once published: the cluster loop publishes a new
// one (updateClusterView), and readers load the current one with a single
// atomic read and take no lock, so the produce path's ownership check and
// every metadata answer see one consistent round.
type clusterView struct {
	self        int32
	incarnation string
	assign      *cluster.Assignment // nil until one is read
	live        []cluster.LiveBroker
	controller  int32
	heartbeats  map[int32]cluster.Heartbeat
	// reports holds the partition reports of the brokers of this kaas
	// (report.go), by broker.
	reports map[int32]*peerReport
}

// clusterView returns the current view.
func (e *Engine) clusterView() *clusterView { return e.cview.Load() }

// updateClusterView publishes change applied to a copy of the current view
// (change must only replace fields, never write into the old ones' maps or
// slices) and returns the view it replaced.
func (e *Engine) updateClusterView(change func(v *clusterView)) (prev *clusterView) {
	for {
		old := e.cview.Load()
		next := *old
		change(&next)
		if e.cview.CompareAndSwap(old, &next) {
			return old
		}
	}
}

// withHeartbeats returns a copy of the view's heartbeats with hbs merged in.
func (v *clusterView) withHeartbeats(hbs map[int32]cluster.Heartbeat) map[int32]cluster.Heartbeat {
	out := maps.Clone(v.heartbeats)
	if out == nil {
		out = map[int32]cluster.Heartbeat{}
	}
	maps.Copy(out, hbs)
	return out
}

// owner returns the assigned owner of a partition and whether it is this
// broker (in this incarnation). ok is false until an assignment is read
// or when it does not name the partition.
func (v *clusterView) owner(topicID string, index int32) (o cluster.PartitionOwner, mine, ok bool) {
	if v.assign == nil {
		return o, false, false
	}
	o, ok = v.assign.Owner(topicID, index)
	mine = ok && o.Broker == v.self && (o.Incarnation == "" || o.Incarnation == v.incarnation)
	return o, mine, ok
}

// assigned reports whether the assignment names the topic ID.
func (v *clusterView) assigned(topicID string) bool {
	if v.assign == nil {
		return false
	}
	_, ok := v.assign.Topics[topicID]
	return ok
}

// liveOpen reports whether live broker b's current heartbeat lists key
// open (a broker of an older kaas, which publishes its open partitions).
func (v *clusterView) liveOpen(b cluster.LiveBroker, key string) bool {
	hb, ok := v.heartbeats[b.ID]
	if !ok || hb.Incarnation != b.Incarnation {
		return false
	}
	i := sort.SearchStrings(hb.Open, key)
	return i < len(hb.Open) && hb.Open[i] == key
}

// leader returns the broker serving a partition (topicID's index) whose
// assigned owner is o: o's broker while it is live in o's incarnation and
// serves it, by its partition report (or, of an older kaas, its Open
// list, where the partition is legacyKey()), else -1.
func (v *clusterView) leader(o cluster.PartitionOwner, topicID string, index int32, legacyKey func() string) int32 {
	for _, b := range v.live {
		if b.ID != o.Broker || (o.Incarnation != "" && o.Incarnation != b.Incarnation) {
			continue
		}
		if hb, ok := v.heartbeats[b.ID]; ok && hb.Incarnation == b.Incarnation && hb.Format < cluster.HeartbeatFormat {
			if v.liveOpen(b, legacyKey()) {
				return b.ID
			}
			return -1
		}
		if r := v.reports[b.ID]; r != nil && r.incarnation == b.Incarnation && r.serves(o, topicID, index) {
			return b.ID
		}
		return -1
	}
	return -1
}

// zoneOf returns the zone of live broker id.
func (v *clusterView) zoneOf(id int32) string {
	for _, b := range v.live {
		if b.ID == id {
			return b.Zone
		}
	}
	return ""
}

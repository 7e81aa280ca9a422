package engine

import (
	"context"
	"errors"
	"io/fs"
	"maps"
	"net"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/kaas-dev/kaas/engine/cluster"
)

// BrokerInfo is a live broker as Metadata and DescribeCluster advertise it.
type BrokerInfo struct {
	ID   int32
	Host string
	Port int32
	Zone string
	Self bool
}

// openKey names an open partition in a heartbeat's Open list.
func openKey(name string, index int32, topicID string) string {
	return name + "/" + strconv.Itoa(int(index)) + "@" + topicID
}

// clusterLoop runs one membership round at once and then every heartbeat
// interval until ctx ends (engine/cluster doc.go: heartbeat, observe,
// elect, assign, obey).
//
// After a round that saw the members change (a broker died, left or
// joined), a reassignment is on its way: until the next round the loop also
// re-reads the assignment every fifth of an interval, so a partition's new
// owner starts its takeover as soon as the controller has written it rather
// than up to an interval later. That is where failover time goes besides
// the lease.
//
// While the cluster is busy (a topic just created, a change of the
// desired state, a request waiting for partitions to serve: hurry), every
// round runs every fifth of an interval, and a kick runs one at once (an
// open batch finished): the answer to a CreateTopics then waits for the
// volume, not for the interval.
func (e *Engine) clusterLoop(ctx context.Context) {
	t := time.NewTicker(e.cfg.HeartbeatInterval)
	defer t.Stop()
	fast := time.NewTicker(e.cfg.HeartbeatInterval / 5)
	defer fast.Stop()
	probes := e.newProbeResponder() // answers starting brokers' volume checks (probe.go)
	defer probes.wait()
	for {
		stopBeats := e.beatThroughRound(ctx)
		changed := e.clusterRound(ctx)
		stopBeats()
		probes.round(ctx)
	wait:
		for watching := changed; ; {
			var fastC <-chan time.Time
			if watching || e.hurrying() {
				fastC = fast.C
			}
			select {
			case <-ctx.Done():
				return
			case <-e.kick:
				break wait
			case <-fastC:
				if e.hurrying() {
					break wait
				}
				if changed, _ := e.readAssignment(); changed {
					watching = false
				}
			case <-t.C:
				break wait
			}
		}
	}
}

// maxRoundBeats bounds how long beatThroughRound keeps beating for one
// round: a round stuck longer than that (not on the volume: the beats
// would stall with it) is a broker that no longer does its work, and its
// lease should lapse.
const maxRoundBeats = 2 * time.Minute

// beatThroughRound beats every heartbeat interval while a cluster round
// runs past it, until the returned stop is called: a round may take
// seconds (the controller planning and writing a large change, a report
// of many partitions, a slow volume), and a broker busy with its work is
// not dead. Without it, one CreateTopics of 100,000 partitions made the
// controller miss its lease, and every broker in turn became controller
// and moved partitions. A beat also renews this broker's own serving lease
// (leaseHeld) when the assignment's head, read after it, still names the
// version the broker has read: it then knows it lost nothing since the
// beat, as a round does by reading the assignment after its beat. A
// changed head leaves the renewal to the round, which applies it; a round
// stuck on reading a peer's heartbeat on a busy shared volume then no
// longer stops this broker serving.
func (e *Engine) beatThroughRound(ctx context.Context) (stop func()) {
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(e.cfg.HeartbeatInterval)
		defer t.Stop()
		until := e.obs.Now() + maxRoundBeats
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if e.obs.Now() > until {
				e.log.Info("a cluster round has run for too long; no longer beating for it", "limit", maxRoundBeats)
				return
			}
			beatAt := e.obs.Now()
			if err := e.hb.Beat(); err != nil {
				// The round's own beat reports (and acts on) what failed.
				e.log.V(1).Info("heartbeat during a long round failed", "err", err.Error())
				var supplanted *cluster.SupplantedError
				if errors.As(err, &supplanted) {
					return
				}
				continue
			}
			if e.areader.HeadUnchanged() {
				e.renewLease(beatAt)
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

// renewLease holds the serving lease from a beat at beatAt (observer
// clock), unless a later beat renewed it already.
func (e *Engine) renewLease(beatAt time.Duration) {
	for {
		cur := e.leaseFrom.Load()
		if cur > int64(beatAt) || e.leaseFrom.CompareAndSwap(cur, int64(beatAt)+1) {
			return
		}
	}
}

// hurryFor keeps the cluster loop in fast rounds for d.
func (e *Engine) hurryFor(d time.Duration) {
	until := int64(e.obs.Now() + d)
	for {
		cur := e.hurryUntil.Load()
		if cur >= until || e.hurryUntil.CompareAndSwap(cur, until) {
			return
		}
	}
}

func (e *Engine) hurrying() bool { return int64(e.obs.Now()) < e.hurryUntil.Load() }

// kickCluster runs a cluster round at once (or right after the one
// running).
func (e *Engine) kickCluster() {
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

// readAssignment reads the assignment and applies it, reporting whether it
// differed from the one applied before.
// read is false when the file could not be read: what is applied may then
// be stale.
func (e *Engine) readAssignment() (changed, read bool) {
	return e.readAssignmentThen(nil)
}

// readAssignmentThen is readAssignment calling read (if not nil) after a
// successful read, before the assignment is applied.
func (e *Engine) readAssignmentThen(read func()) (changed, ok bool) {
	up, err := e.areader.Read()
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if read != nil {
			read()
		}
		return false, true
	case err != nil:
		e.log.V(1).Info("assignment not read this round", "err", err.Error())
		return false, false
	}
	if read != nil {
		read()
	}
	if up.Unchanged {
		return false, true
	}
	return e.applyAssignment(up), true
}

// clusterRound runs one membership round and reports whether the live
// brokers or the controller changed.
func (e *Engine) clusterRound(ctx context.Context) bool {
	cv := e.clusterView()
	e.updateReport()
	e.hb.SetReleased(e.releasedUpTo(cv))
	if e.legacyPeers(cv.live) {
		// A broker of an older kaas reads only these.
		e.hb.SetOpen(e.openList())
		e.hb.SetReopen(e.opens.legacyReopenList())
	} else {
		e.hb.SetOpen(nil)
		e.hb.SetReopen(nil)
	}
	e.pollStores()
	beatAt := e.obs.Now()
	beatErr := e.hb.Beat()
	var supplanted *cluster.SupplantedError
	switch {
	case errors.As(beatErr, &supplanted):
		e.supplanted(beatErr)
		return false
	case beatErr != nil:
		e.log.Error(beatErr, "heartbeat failed")
	}
	hbs, err := cluster.ReadHeartbeats(e.fsys, e.cfg.ClusterDir)
	if err != nil {
		e.log.Error(err, "read heartbeats")
	}
	e.obs.Observe(hbs)
	live := e.obs.Live()
	st, err := e.elector.Campaign()
	if err != nil {
		e.log.V(1).Info("controller campaign undecided this round", "err", err.Error())
	}
	e.areader.ObserveControllerEpoch(st.Epoch)

	byID := make(map[int32]cluster.Heartbeat, len(hbs))
	for _, hb := range hbs {
		byID[hb.BrokerID] = hb
	}
	// Keep the latest heartbeat of each broker (a stale listing may omit
	// one this round; its last one still describes it). A change in what
	// another broker serves changes topic views too (a partition now
	// served there): waiters such as CreateTopics look again.
	heartbeats := cv.withHeartbeats(byID)
	reports, reportsChanged := e.readReports(cv.reports, heartbeats)
	prev := e.updateClusterView(func(v *clusterView) {
		v.live, v.controller = live, st.Controller
		v.heartbeats, v.reports = heartbeats, reports
	})
	changedMembers := !reflect.DeepEqual(prev.live, live) || prev.controller != st.Controller
	openChanged := reportsChanged
	for id, hb := range byID {
		openChanged = openChanged || !slices.Equal(prev.heartbeats[id].Open, hb.Open)
	}
	if changedMembers || openChanged {
		e.broadcast()
	}

	specs, specsChanged, specsErr := e.desiredSpecs(e.legacyPeers(live))
	if specsErr != nil {
		e.log.Error(specsErr, "list desired topics")
	}
	if specsChanged {
		// Topics created, changed or deleted elsewhere (by another
		// broker, or by the operator writing the desired state).
		for _, name := range topicsToReconcile(specs, e.routes.spec) {
			e.queue.Add(topicKey(name))
		}
		e.hurryFor(hurryAfterChange)
	}
	if st.IsController && specsErr == nil {
		if err := e.controllerRound(live, st.Epoch, specs); err != nil && ctx.Err() == nil {
			e.log.Error(err, "controller round failed; retrying next round")
		}
	}
	e.readAssignmentThen(func() {
		// Renewed only once the assignment current at the beat has been
		// read: a broker that resumes after a stall serves nothing it may
		// have lost until it knows whether it lost it. (Before it is
		// applied, so that the partitions it opens find the lease held.)
		if beatErr == nil {
			e.renewLease(beatAt)
		}
	})
	return changedMembers
}

// reopenAsks collects the new leader epochs that live brokers ask for:
// in their partition reports, or an older kaas's in its heartbeat.
func (e *Engine) reopenAsks(live []cluster.LiveBroker) []reopenAsk {
	var asks []reopenAsk
	cv := e.clusterView()
	for _, b := range live {
		hb, ok := cv.heartbeats[b.ID]
		if !ok || hb.Incarnation != b.Incarnation {
			continue
		}
		var from []cluster.EpochAsk
		if hb.Format < cluster.HeartbeatFormat {
			for _, r := range hb.Reopen {
				if a, ok := parseLegacyReopen(r); ok {
					from = append(from, a)
				}
			}
		} else if r := cv.reports[b.ID]; r != nil && r.incarnation == b.Incarnation {
			from = r.asks
		}
		for _, a := range from {
			asks = append(asks, reopenAsk{Broker: b.ID, Incarnation: b.Incarnation,
				Partition: partitionRef{a.TopicID, a.Partition}, Epoch: a.Epoch})
		}
	}
	return asks
}

func controllerEpochOf(a *cluster.Assignment) int32 {
	if a == nil {
		return -1
	}
	return a.ControllerEpoch
}

// applyAssignment installs a newly read assignment and enqueues the topics
// whose owners changed: those the update names, or, for an assignment read
// whole, those whose entries differ from the view's. It reports whether
// any owner or epoch changed.
func (e *Engine) applyAssignment(up cluster.AssignmentUpdate) bool {
	a := up.Assignment
	prev := e.updateClusterView(func(v *clusterView) { v.assign = a }).assign
	e.dropped.note(prev, a)
	changedIDs, shards := up.Changed, up.Coordinators
	if up.Full || prev == nil {
		changedIDs, shards = changedTopics(prev, a)
	}
	if len(changedIDs) == 0 && !shards {
		return false
	}
	if shards {
		e.queue.Add(groupsKey)
	}
	unknown := prev == nil
	changed := map[string]bool{}
	for _, id := range changedIDs {
		if name, ok := e.routes.anyNameOf(id); ok {
			changed[name] = true
		} else if _, assigned := a.Topics[id]; assigned {
			unknown = true
		}
	}
	if unknown {
		// Topics this broker does not know yet: a change to every key.
		e.enqueueAll(e.queue.Add)
	}
	for name := range changed {
		e.queue.Add(topicKey(name))
	}
	e.broadcast()
	return true
}

// changedTopics compares two assignments read whole: the topic IDs whose
// entries differ (set, grown or gone), and whether the shards' do.
func changedTopics(prev, next *cluster.Assignment) (ids []string, shards bool) {
	if prev == nil {
		return slices.Collect(maps.Keys(next.Topics)), true
	}
	for id, ps := range next.Topics {
		if !slices.EqualFunc(prev.Topics[id], ps, sameOwner) {
			ids = append(ids, id)
		}
	}
	for id := range prev.Topics {
		if _, ok := next.Topics[id]; !ok {
			ids = append(ids, id)
		}
	}
	return ids, !slices.EqualFunc(prev.Coordinators, next.Coordinators, sameOwner)
}

// sameOwner compares what routing acts on of two entries.
func sameOwner(a, b cluster.PartitionOwner) bool {
	return a.Broker == b.Broker && a.LeaderEpoch == b.LeaderEpoch && a.Incarnation == b.Incarnation
}

// ownerOf returns the assigned owner of a partition and whether it is this
// broker (in this incarnation), by the current cluster view.
func (e *Engine) ownerOf(topicID string, index int32) (o cluster.PartitionOwner, mine, ok bool) {
	return e.clusterView().owner(topicID, index)
}

// assigned reports whether the assignment last read names the topic ID.
func (e *Engine) assigned(topicID string) bool { return e.clusterView().assigned(topicID) }

// openList lists the partitions this broker holds open or is opening,
// sorted, as an older kaas's heartbeat lists them (published only while
// one is live: report.go replaces it).
func (e *Engine) openList() []string {
	out := e.opens.openingKeys()
	for _, sp := range e.routes.served() {
		out = append(out, openKey(sp.spec.Name, sp.p.Index, sp.spec.ID))
	}
	out = append(out, e.shardOpenList()...)
	sort.Strings(out)
	return slices.Compact(out)
}

// Brokers returns the live brokers, sorted by ID, at their inter-broker
// addresses. Before the first round it returns this broker alone.
func (e *Engine) Brokers() []BrokerInfo { return e.BrokersOn("") }

// BrokersOn is Brokers at the addresses of the listener called name (""
// for the inter-broker one). A broker whose heartbeat lists listeners but
// not this one is left out, as Kafka leaves out a broker without the
// listener a client came through; one whose heartbeat lists none has only
// its inter-broker address.
func (e *Engine) BrokersOn(name string) []BrokerInfo {
	var out []BrokerInfo
	self := false
	cv := e.clusterView()
	for _, b := range cv.live {
		addr := b.KafkaAddr
		if hb, ok := cv.heartbeats[b.ID]; ok && name != "" && len(hb.Listeners) > 0 && hb.Incarnation == b.Incarnation {
			if addr, ok = hb.Listeners[name]; !ok {
				continue
			}
		}
		bi := BrokerInfo{ID: b.ID, Zone: b.Zone, Self: b.ID == e.cfg.BrokerID}
		self = self || bi.Self
		if host, port, err := net.SplitHostPort(addr); err == nil {
			n, _ := strconv.Atoi(port)
			bi.Host, bi.Port = host, int32(n)
		}
		out = append(out, bi)
	}
	if !self {
		out = append(out, BrokerInfo{ID: e.cfg.BrokerID, Zone: e.cfg.Zone, Self: true})
		sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	}
	return out
}

// ControllerID returns the current controller's broker ID, or -1.
func (e *Engine) ControllerID() int32 {
	return e.clusterView().controller
}

// ControllerFor returns the broker a client in zone should send controller
// requests to (CreateTopics, DeleteTopics and the like), or -1 if none is
// known. Any kaas broker serves those: they only write desired state to the
// shared volume, which the elected controller then drives. So a client that
// names its zone gets a live broker in that zone, chosen by rendezvous
// hashing of the cluster ID over the zone's brokers (stable while they do
// not change, and the same answer from every broker); with no zone, or no
// live broker in it, it gets the elected controller.
func (e *Engine) ControllerFor(zone string) int32 {
	cv := e.clusterView()
	if zone != "" {
		if id := cluster.Assign(e.clusterID, 0, cv.live, zone); id >= 0 && cv.zoneOf(id) == zone {
			return id
		}
	}
	return cv.controller
}

// isController reports whether this broker is the controller now.
func (e *Engine) isController() bool { return e.elector.Status().IsController }

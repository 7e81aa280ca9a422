package engine

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/kaas-dev/kaas/engine/cluster"
)

// What a broker tells the others of the partitions it holds: a partition
// report of the ones it is assigned and does not serve (routing), the
// released assignment version (lifecycle fencing), and its reopen asks
// (docs/volume.md "Cluster files"). The report is rebuilt only when the
// routing table, the open book or the assignment changed, and rewritten
// only when its content did; at idle it costs nothing.

// reportState is the report this broker last built; only the cluster loop
// touches it.
type reportState struct {
	// built is what the last build read: the routing generation, the open
	// book's and the assignment.
	routeGen, openGen uint64
	assign            *cluster.Assignment
	// report is the last report written (Seq 0: none yet), summary the
	// heartbeat's.
	report  cluster.PartitionReport
	summary cluster.ReportSummary
}

// updateReport rebuilds this broker's report if what it reflects changed,
// writes it if its content changed, and gives the heartbeat its summary.
func (e *Engine) updateReport() {
	r := &e.report
	cv := e.clusterView()
	routeGen, openGen := e.routeGen.Load(), e.opens.generation()
	if r.report.Seq > 0 && routeGen == r.routeGen && openGen == r.openGen && cv.assign == r.assign {
		return
	}
	next, serving := e.buildReport(cv)
	r.routeGen, r.openGen, r.assign = routeGen, openGen, cv.assign
	if r.report.Seq > 0 && next.At == r.report.At && slices.EqualFunc(next.Unserved, r.report.Unserved, sameUnserved) &&
		slices.Equal(next.Asks, r.report.Asks) {
		if r.summary.Serving != serving {
			r.summary.Serving = serving
			e.hb.SetReport(r.summary)
		}
		return
	}
	next.Seq = r.report.Seq + 1
	if err := cluster.WritePartitionReport(e.fsys, e.cfg.ClusterDir, next); err != nil {
		// The heartbeat keeps naming the last report written; the next
		// round builds and writes again.
		e.log.Error(err, "partition report not written")
		r.assign = nil
		return
	}
	r.report, r.summary = next, next.Summary(serving)
	e.hb.SetReport(r.summary)
}

func sameUnserved(a, b cluster.UnservedSet) bool {
	return a.TopicID == b.TopicID && a.Reason == b.Reason && slices.Equal(a.Partitions, b.Partitions)
}

// buildReport lists the partitions and shards the view's assignment gives
// this broker that it does not serve at their assigned epoch, by topic and
// reason, and its reopen asks; serving counts the partitions it serves.
func (e *Engine) buildReport(cv *clusterView) (cluster.PartitionReport, int32) {
	rep := cluster.PartitionReport{BrokerID: e.cfg.BrokerID, Incarnation: e.incarnation}
	a := cv.assign
	var serving int32
	if a != nil {
		rep.At = a.ID()
		byReason := map[string][]int32{}
		for id, ps := range a.Topics {
			t, known := e.routes.byID(id)
			clear(byReason)
			for i, o := range ps {
				if o.Broker != cv.self || (o.Incarnation != "" && o.Incarnation != cv.incarnation) {
					continue
				}
				reason := "unknown-topic"
				if known && i < len(t.parts) {
					if p := t.parts[i]; p != nil && p.Epoch() == o.LeaderEpoch && p.Log().Err() == nil {
						serving++
						continue
					}
					reason = e.unservedReason(openKey(t.spec.Name, int32(i), id))
				}
				byReason[reason] = append(byReason[reason], int32(i))
			}
			for reason, parts := range byReason {
				rep.Unserved = append(rep.Unserved, cluster.UnservedSet{TopicID: id, Reason: reason, Partitions: parts})
			}
		}
		shards := e.shards.all()
		var down []int32
		for i, o := range a.Coordinators {
			if o.Broker != cv.self || (o.Incarnation != "" && o.Incarnation != cv.incarnation) {
				continue
			}
			if i >= len(shards) || shards[i] == nil || shards[i].epoch != o.LeaderEpoch || shards[i].store.Err() != nil {
				down = append(down, int32(i))
			}
		}
		if down != nil {
			rep.Unserved = append(rep.Unserved, cluster.UnservedSet{TopicID: GroupsTopicID, Reason: "opening", Partitions: down})
		}
	}
	slices.SortFunc(rep.Unserved, func(x, y cluster.UnservedSet) int {
		return cmp.Or(strings.Compare(x.TopicID, y.TopicID), strings.Compare(x.Reason, y.Reason))
	})
	rep.Asks = e.reopenAsksOwn(cv)
	return rep, serving
}

// unservedReason says why a partition assigned here is not served.
func (e *Engine) unservedReason(key string) string {
	f, failed := e.opens.failure(key)
	switch {
	case !failed:
		return "opening"
	case f.overBudget:
		return "over-budget"
	case f.noFDs:
		return "no-fds"
	}
	return "failed"
}

// reopenAsksOwn lists this broker's reopen requests that the assignment has
// not answered yet, sorted, and forgets the answered ones.
func (e *Engine) reopenAsksOwn(cv *clusterView) []cluster.EpochAsk {
	var out []cluster.EpochAsk
	for _, r := range e.opens.pendingReopens(func(r reopenRequest) bool {
		o, mine, ok := cv.owner(r.topicID, r.index)
		return ok && (!mine || o.LeaderEpoch != r.epoch)
	}) {
		out = append(out, cluster.EpochAsk{TopicID: r.topicID, Partition: r.index, Epoch: r.epoch})
	}
	slices.SortFunc(out, func(x, y cluster.EpochAsk) int {
		return cmp.Or(strings.Compare(x.TopicID, y.TopicID), cmp.Compare(x.Partition, y.Partition))
	})
	return out
}

// releasedUpTo is the assignment version whose releases this broker has
// completed: the view's, when no partition it serves and no open in
// flight is of a partition the view does not assign to it; else what it
// released before. An open registers before it checks that it is
// assigned (driveOpen), so one decided on an older assignment is either
// seen here or sees the view published before this ran and stops.
func (e *Engine) releasedUpTo(cv *clusterView) cluster.AssignmentVersion {
	a := cv.assign
	if a == nil {
		return cluster.AssignmentVersion{}
	}
	if e.released == a.ID() {
		return e.released
	}
	for _, sp := range e.routes.served() {
		if _, mine, _ := cv.owner(sp.spec.ID, sp.p.Index); !mine {
			return e.released
		}
	}
	for _, ref := range e.opens.openingRefs() {
		if _, mine, _ := cv.owner(ref.topicID, ref.index); !mine {
			return e.released
		}
	}
	e.released = a.ID()
	return e.released
}

// peerReport is a broker's partition report as this broker read it.
type peerReport struct {
	incarnation string
	summary     cluster.ReportSummary
	// unserved holds, by topic ID, the partitions not served.
	unserved map[string]map[int32]bool
	asks     []cluster.EpochAsk
}

// serves reports whether the broker serves the partition whose entry is
// o: it has read the version that gave it the entry and does not list it.
func (r *peerReport) serves(o cluster.PartitionOwner, topicID string, index int32) bool {
	return r != nil && r.summary.At.Version >= o.Since && !r.unserved[topicID][index]
}

// readReports returns the partition reports of the format-2 brokers in
// hbs: the one held when its incarnation and Seq are unchanged, an empty
// one when the summary says so, else the file, read. A report that cannot
// be read, or reads older than its heartbeat says, keeps the one held for
// the same incarnation (nil otherwise) until the next round. changed says
// whether any differs from what prev held.
func (e *Engine) readReports(prev map[int32]*peerReport, hbs map[int32]cluster.Heartbeat) (map[int32]*peerReport, bool) {
	out := make(map[int32]*peerReport, len(hbs))
	changed := false
	for id, hb := range hbs {
		if hb.Format < cluster.HeartbeatFormat {
			continue
		}
		old := prev[id]
		if old != nil && old.incarnation == hb.Incarnation && old.summary == hb.Report {
			out[id] = old
			continue
		}
		if hb.Report.Seq == 0 {
			continue // none written yet: nothing served
		}
		r := &peerReport{incarnation: hb.Incarnation, summary: hb.Report}
		if !hb.Report.Empty() {
			file, err := cluster.ReadPartitionReport(e.fsys, e.cfg.ClusterDir, id)
			if err != nil || file.Incarnation != hb.Incarnation || file.Seq < hb.Report.Seq {
				if err != nil {
					e.log.V(1).Info("partition report not read this round", "broker", id, "err", err.Error())
				}
				if old != nil && old.incarnation == hb.Incarnation {
					out[id] = old
				}
				continue
			}
			r.summary.At = file.At
			r.asks = file.Asks
			r.unserved = make(map[string]map[int32]bool, len(file.Unserved))
			for _, u := range file.Unserved {
				set := r.unserved[u.TopicID]
				if set == nil {
					set = make(map[int32]bool, len(u.Partitions))
					r.unserved[u.TopicID] = set
				}
				for _, p := range u.Partitions {
					set[p] = true
				}
			}
		}
		out[id] = r
		changed = true
	}
	for id := range prev {
		if _, ok := out[id]; !ok {
			changed = true
		}
	}
	return out, changed
}

// heldElsewhere returns a live broker other than this process that may
// still hold a partition of incarnation topicID open, or -1: one that has
// not released the version that dropped the topic (gone, the view's
// version, when this broker never saw it dropped), or, of an older kaas,
// whose Open list names one.
func (e *Engine) heldElsewhere(name, topicID string) int32 {
	cv := e.clusterView()
	gone := e.droppedAt(topicID)
	if cv.assign != nil && (gone == (cluster.AssignmentVersion{}) || cv.assign.ID().Before(gone)) {
		gone = cv.assign.ID()
	}
	prefix, suffix := name+"/", "@"+topicID
	for _, b := range cv.live {
		if b.ID == cv.self && b.Incarnation == cv.incarnation {
			continue
		}
		hb, ok := cv.heartbeats[b.ID]
		if !ok || hb.Incarnation != b.Incarnation {
			continue
		}
		if hb.Format < cluster.HeartbeatFormat {
			for _, k := range hb.Open {
				if strings.HasPrefix(k, prefix) && strings.HasSuffix(k, suffix) {
					return b.ID
				}
			}
			continue
		}
		if hb.Released.Before(gone) {
			return b.ID
		}
	}
	return -1
}

// parseLegacyReopen parses an older kaas's reopen entry,
// "<topic>/<partition>@<topicID>#<leaderEpoch>".
func parseLegacyReopen(entry string) (cluster.EpochAsk, bool) {
	key, es, ok := strings.Cut(entry, "#")
	at := strings.LastIndexByte(key, '@')
	slash := strings.LastIndexByte(key, '/')
	if !ok || at < 0 || slash < 0 || slash > at {
		return cluster.EpochAsk{}, false
	}
	epoch, err1 := strconv.ParseInt(es, 10, 32)
	index, err2 := strconv.ParseInt(key[slash+1:at], 10, 32)
	if err1 != nil || err2 != nil {
		return cluster.EpochAsk{}, false
	}
	return cluster.EpochAsk{TopicID: key[at+1:], Partition: int32(index), Epoch: int32(epoch)}, true
}

// droppedTopics records, by topic ID, the first assignment version this
// broker read without the topic. Safe for concurrent use.
type droppedTopics struct {
	mu sync.Mutex
	at map[string]cluster.AssignmentVersion
}

// note records the topics prev named and a does not.
func (d *droppedTopics) note(prev, a *cluster.Assignment) {
	if prev == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for id := range prev.Topics {
		if _, ok := a.Topics[id]; ok {
			continue
		}
		if d.at == nil {
			d.at = map[string]cluster.AssignmentVersion{}
		}
		if _, ok := d.at[id]; !ok {
			d.at[id] = a.ID()
		}
	}
}

// droppedAt is when the assignment stopped naming topicID, zero if this
// broker did not see it.
func (e *Engine) droppedAt(topicID string) cluster.AssignmentVersion {
	e.dropped.mu.Lock()
	defer e.dropped.mu.Unlock()
	return e.dropped.at[topicID]
}

// forgetDropped forgets a topic ID whose removal completed.
func (e *Engine) forgetDropped(topicID string) {
	e.dropped.mu.Lock()
	defer e.dropped.mu.Unlock()
	delete(e.dropped.at, topicID)
}

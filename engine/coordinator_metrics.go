package engine

import (
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics of the group and transaction coordinators this broker serves,
// read at scrape time from the coordinators' memory.

// OtherGroup is the group label the groups beyond the series cap fold into.
const OtherGroup = "other"

var (
	groupsDesc = prometheus.NewDesc("kaas_groups",
		"Consumer groups whose coordinator is this broker, by state.", []string{"state"}, nil)
	groupMembersDesc = prometheus.NewDesc("kaas_group_members",
		"Members of a group whose coordinator is this broker (groups beyond the series cap summed under group=\"other\").", []string{"group"}, nil)
	groupCommittedDesc = prometheus.NewDesc("kaas_consumer_group_committed_offset",
		"A group's committed offset of a partition, from its coordinator (capped groups and topics); subtract it from kaas_log_end_offset for the lag of partitions served elsewhere.",
		[]string{"group", "topic", "partition"}, nil)
	groupLagDesc = prometheus.NewDesc("kaas_consumer_group_lag",
		"Records between a group's committed offset and the log end, where this broker is both the group's coordinator and the partition's leader (capped groups and topics).",
		[]string{"group", "topic", "partition"}, nil)
	txnStatesDesc = prometheus.NewDesc("kaas_transactions",
		"Transactional IDs whose coordinator is this broker, by Kafka's transaction state.", []string{"state"}, nil)
	txnEndsDesc = prometheus.NewDesc("kaas_transactions_total",
		"Transactions this broker's coordinators completed, by result: committed, aborted, and timed_out (aborts of transactions past their timeout, counted in aborted too).",
		[]string{"result"}, nil)
)

// groupStates and txnStates are the states always reported, so that a
// state with no group or ID reads 0 rather than missing.
var (
	groupStates = []string{"Empty", "PreparingRebalance", "CompletingRebalance", "Stable"}
	txnStates   = []string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort"}
)

type coordinatorMetrics struct {
	e                    *Engine
	maxGroups, maxTopics int
}

// CoordinatorMetrics collects the groups (kaas_groups,
// kaas_group_members, kaas_consumer_group_committed_offset,
// kaas_consumer_group_lag) and transactions (kaas_transactions,
// kaas_transactions_total) of the coordinator shards this broker serves.
// The first maxGroupSeries groups by name get series of their own, the
// rest fold into group="other" (their members summed, their offsets left
// out); offsets and lag are reported for the topics that have series of
// their own under maxTopicSeries, as PartitionMetrics picks them.
func (e *Engine) CoordinatorMetrics(maxGroupSeries, maxTopicSeries int) prometheus.Collector {
	return &coordinatorMetrics{e: e, maxGroups: maxGroupSeries, maxTopics: maxTopicSeries}
}

func (m *coordinatorMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{groupsDesc, groupMembersDesc, groupCommittedDesc, groupLagDesc, txnStatesDesc, txnEndsDesc} {
		ch <- d
	}
}

func (m *coordinatorMetrics) Collect(ch chan<- prometheus.Metric) {
	m.collectGroups(ch)
	m.collectTxns(ch)
}

func (m *coordinatorMetrics) collectGroups(ch chan<- prometheus.Metric) {
	coords := m.e.GroupCoordinators()
	// First the names, to pick the groups with series of their own; then
	// the offsets of just those.
	var names []string
	for _, c := range coords {
		for _, s := range c.Stats(nil) {
			names = append(names, s.Group)
		}
	}
	slices.Sort(names)
	own := make(map[string]bool, min(len(names), max(m.maxGroups, 0)))
	for _, n := range names[:min(len(names), max(m.maxGroups, 0))] {
		own[n] = true
	}
	delete(own, OtherGroup) // a real group named "other" folds too

	ends, named := m.e.localLogEnds(m.maxTopics)
	byState := make(map[string]int, len(groupStates))
	otherMembers, folded := 0, false
	for _, c := range coords {
		for _, s := range c.Stats(func(g string) bool { return own[g] }) {
			byState[s.State]++
			if !own[s.Group] {
				otherMembers += s.Members
				folded = true
				continue
			}
			ch <- prometheus.MustNewConstMetric(groupMembersDesc, prometheus.GaugeValue, float64(s.Members), s.Group)
			for _, o := range s.Offsets {
				if !named[o.Topic] {
					continue
				}
				end, served := ends[topicPartition{o.Topic, o.Partition}]
				part := strconv.Itoa(int(o.Partition))
				ch <- prometheus.MustNewConstMetric(groupCommittedDesc, prometheus.GaugeValue, float64(o.Offset), s.Group, o.Topic, part)
				if served {
					ch <- prometheus.MustNewConstMetric(groupLagDesc, prometheus.GaugeValue, float64(max(end-o.Offset, 0)), s.Group, o.Topic, part)
				}
			}
		}
	}
	if folded {
		ch <- prometheus.MustNewConstMetric(groupMembersDesc, prometheus.GaugeValue, float64(otherMembers), OtherGroup)
	}
	for _, st := range groupStates {
		ch <- prometheus.MustNewConstMetric(groupsDesc, prometheus.GaugeValue, float64(byState[st]), st)
	}
}

func (m *coordinatorMetrics) collectTxns(ch chan<- prometheus.Metric) {
	byState := make(map[string]int, len(txnStates))
	for _, c := range m.e.TxnCoordinators() {
		for st, n := range c.StateCounts() {
			byState[st] += n
		}
	}
	for _, st := range txnStates {
		ch <- prometheus.MustNewConstMetric(txnStatesDesc, prometheus.GaugeValue, float64(byState[st]), st)
	}
	n := m.e.txnEnds
	for _, r := range []struct {
		result string
		n      int64
	}{{"committed", n.Committed.Load()}, {"aborted", n.Aborted.Load()}, {"timed_out", n.TimedOut.Load()}} {
		ch <- prometheus.MustNewConstMetric(txnEndsDesc, prometheus.CounterValue, float64(r.n), r.result)
	}
}

type topicPartition struct {
	topic     string
	partition int32
}

// localLogEnds returns the log end offsets of the served partitions of
// the topics with series of their own (the first maxTopics by name), and
// the names of those topics.
func (e *Engine) localLogEnds(maxTopics int) (map[topicPartition]int64, map[string]bool) {
	topics := e.liveTopicsByName()
	topics = topics[:min(len(topics), max(maxTopics, 0))]
	ends := map[topicPartition]int64{}
	named := make(map[string]bool, len(topics))
	for _, t := range topics {
		named[t.spec.Name] = true
		for i, p := range t.parts {
			if p != nil && p.Log().Err() == nil {
				ends[topicPartition{t.spec.Name, int32(i)}] = p.Log().LogEndOffset()
			}
		}
	}
	return ends, named
}

package engine

import (
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kaas-dev/kaas/engine/datametrics"
	"github.com/kaas-dev/kaas/volume/partlog"
)

// SyncRoundMetrics collects the group-commit rounds of every partition log
// this engine opens (kaas_produce_fsync_duration_seconds,
// kaas_produce_fsync_batch_bytes, kaas_fence_check_duration_seconds); nil
// with Config.DisableMetrics.
func (e *Engine) SyncRoundMetrics() *datametrics.SyncRounds { return e.rounds }

// roundObserver is what partition logs report their rounds to: nil (no
// clock read per round) with Config.DisableMetrics.
func (e *Engine) roundObserver() partlog.RoundObserver {
	if e.rounds == nil {
		return nil
	}
	return e.rounds
}

// OtherTopic is the topic label the partitions beyond the series cap fold
// into; their partition label is "all".
const OtherTopic = "other"

var (
	partitionsDesc = prometheus.NewDesc("kaas_partitions",
		"Partitions this broker holds, by state: owned (assigned here), serving, opening, failed.", []string{"state"}, nil)
	logSizeDesc = prometheus.NewDesc("kaas_log_size_bytes",
		"Bytes of a served partition's log segments (topics beyond the series cap summed under topic=\"other\").", []string{"topic", "partition"}, nil)
	logEndDesc = prometheus.NewDesc("kaas_log_end_offset",
		"Offset the next batch appended to a served partition gets.", []string{"topic", "partition"}, nil)
	logStartDesc = prometheus.NewDesc("kaas_log_start_offset",
		"First offset of a served partition's log.", []string{"topic", "partition"}, nil)
)

// partitionMetrics reads the routing table, the open book and the cluster
// view at scrape time: nothing is counted on the data path.
type partitionMetrics struct {
	e         *Engine
	maxTopics int
}

// PartitionMetrics collects kaas_partitions{state} and, per served
// partition, kaas_log_size_bytes, kaas_log_end_offset and
// kaas_log_start_offset. The first maxTopicSeries topics by name get their
// own series; the rest fold into topic="other", partition="all" (sizes
// summed, offsets left out). maxTopicSeries <= 0 folds every topic.
func (e *Engine) PartitionMetrics(maxTopicSeries int) prometheus.Collector {
	return &partitionMetrics{e: e, maxTopics: maxTopicSeries}
}

func (m *partitionMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{partitionsDesc, logSizeDesc, logEndDesc, logStartDesc} {
		ch <- d
	}
}

func (m *partitionMetrics) Collect(ch chan<- prometheus.Metric) {
	e := m.e
	cv := e.clusterView()
	var owned, serving, failed int
	var otherSize int64
	folded := false
	for n, t := range e.liveTopicsByName() {
		own := n < m.maxTopics
		for i, p := range t.parts {
			if _, mine, _ := cv.owner(t.spec.ID, int32(i)); mine {
				owned++
				if p == nil {
					if _, ok := e.opens.failure(openKey(t.spec.Name, int32(i), t.spec.ID)); ok {
						failed++
					}
				}
			}
			if p == nil {
				continue
			}
			lg := p.Log()
			if lg.Err() != nil {
				failed++
			} else {
				serving++
			}
			size := lg.Size()
			if !own {
				otherSize += size
				folded = true
				continue
			}
			part := strconv.Itoa(i)
			ch <- prometheus.MustNewConstMetric(logSizeDesc, prometheus.GaugeValue, float64(size), t.spec.Name, part)
			ch <- prometheus.MustNewConstMetric(logEndDesc, prometheus.GaugeValue, float64(lg.LogEndOffset()), t.spec.Name, part)
			ch <- prometheus.MustNewConstMetric(logStartDesc, prometheus.GaugeValue, float64(lg.LogStartOffset()), t.spec.Name, part)
		}
	}
	if folded {
		ch <- prometheus.MustNewConstMetric(logSizeDesc, prometheus.GaugeValue, float64(otherSize), OtherTopic, "all")
	}
	// An open in flight counts until its partition serves (the open ends
	// a moment after it publishes the partition).
	opening := 0
	for _, r := range e.opens.openingRefs() {
		if t, ok := e.routes.byID(r.topicID); !ok || int(r.index) >= len(t.parts) || t.parts[r.index] == nil {
			opening++
		}
	}
	for _, s := range []struct {
		state string
		n     int
	}{{"owned", owned}, {"serving", serving}, {"opening", opening}, {"failed", failed}} {
		ch <- prometheus.MustNewConstMetric(partitionsDesc, prometheus.GaugeValue, float64(s.n), s.state)
	}
}

// liveTopicsByName returns the routed topics not deleted, by name: the
// first --metrics-max-topic-series of them have series of their own.
func (e *Engine) liveTopicsByName() []routedTopic {
	topics := slices.DeleteFunc(e.routes.all(), func(t routedTopic) bool { return t.spec.Deleted })
	slices.SortFunc(topics, func(a, b routedTopic) int { return strings.Compare(a.spec.Name, b.spec.Name) })
	return topics
}

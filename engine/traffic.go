package engine

import "github.com/kaas-dev/kaas/engine/dataplane"

// TopicTraffic is the client traffic of one topic's partitions served here.
type TopicTraffic struct {
	Topic string
	dataplane.TrafficCounts
}

// Traffic sums the traffic counters of the partitions served now, per
// topic, sorted by topic name (a metrics scrape). A partition that stops
// being served here takes its counts with it.
func (e *Engine) Traffic() []TopicTraffic {
	var out []TopicTraffic
	for _, t := range e.routes.all() {
		tt := TopicTraffic{Topic: t.spec.Name}
		served := false
		for _, p := range t.parts {
			if p != nil {
				tt.Add(p.Traffic.Counts())
				served = true
			}
		}
		if served {
			out = append(out, tt)
		}
	}
	return out
}

package wire

import (
	"sync"

	"github.com/kaas-dev/kaas/engine"
)

// otherTopic is the series the topics beyond the cap are summed into.
const otherTopic = "other"

// topicCap bounds the per-topic series: the first max topics seen (in name
// order within a scrape) keep a series of their own for as long as this
// broker serves them; every other topic is summed into topic="other", so
// 100k topics are max+1 series. Slots are sticky, so a topic's series
// does not move between its own and "other" from scrape to scrape; a slot
// is freed only when its topic is no longer served here. A real topic
// named "other" is always summed into "other".
type topicCap struct {
	max   int
	mu    sync.Mutex
	named map[string]bool
}

func newTopicCap(max int) *topicCap { return &topicCap{max: max, named: map[string]bool{}} }

// fold returns traffic with the topics beyond the cap summed into one
// "other" entry, last.
func (c *topicCap) fold(traffic []engine.TopicTraffic) []engine.TopicTraffic {
	c.mu.Lock()
	defer c.mu.Unlock()
	served := make(map[string]bool, len(traffic))
	for _, t := range traffic {
		served[t.Topic] = true
	}
	for name := range c.named {
		if !served[name] {
			delete(c.named, name)
		}
	}
	out := make([]engine.TopicTraffic, 0, min(len(traffic), c.max)+1)
	other := engine.TopicTraffic{Topic: otherTopic}
	folded := false
	for _, t := range traffic {
		if t.Topic != otherTopic && (c.named[t.Topic] || len(c.named) < c.max) {
			c.named[t.Topic] = true
			out = append(out, t)
			continue
		}
		other.Add(t.TrafficCounts)
		folded = true
	}
	if folded {
		out = append(out, other)
	}
	return out
}

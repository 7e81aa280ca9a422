package states_test

import (
	"strings"
	"testing"

	"github.com/kaas-dev/kaas/states"
)

// maxTopicName is a legal topic name of Kafka's maximum length (249
// characters), using every character class Kafka allows.
func maxTopicName() string {
	const alphabet = "aZ09._-"
	var b strings.Builder
	b.WriteString("t")
	for i := 1; i < 249; i++ {
		b.WriteByte(alphabet[i%len(alphabet)])
	}
	return b.String()
}

// TestCrashSweepLongTopicName runs the crash sweep of every machine whose
// names derive from a topic name (its records, its trash entry, their temp
// files) with a 249-character topic, on every substrate: each one refuses
// a name longer than NAME_MAX, so a derived name that does not fit fails
// the clean run, and every crash point must still converge.
func TestCrashSweepLongTopicName(t *testing.T) {
	old := sweepTopic
	sweepTopic = maxTopicName()
	t.Cleanup(func() { sweepTopic = old })
	scenarios := []struct {
		def states.Definition
		sc  sweepScenario
	}{
		{states.PartitionOpen, partitionOpenScenario()},
		{states.PartitionOpen, takeoverScenario()},
		{states.TopicDelete, topicDeleteScenario()},
		{states.DirectoryReclaim, directoryReclaimScenario()},
	}
	for _, sub := range substrates() {
		for _, s := range scenarios {
			t.Run(sub.Name+"/"+s.sc.name(s.def), func(t *testing.T) {
				sweepOne(t, s.def, s.sc, sub)
			})
		}
	}
}

package desiredtest

import (
	"maps"
	"testing"

	"github.com/kaas-dev/kaas/engine/desired"
)

// TestFrameworkTopicsValid: every framework topic's configs are accepted
// by kaas, and its framework's check passes on them as DescribeConfigs
// describes them, and fails on the configs another broker might have
// given the topic.
func TestFrameworkTopicsValid(t *testing.T) {
	broken := map[string]map[string]string{
		"key-value changelog":               {"cleanup.policy": "compact,delete"},
		"versioned store changelog":         {"min.compaction.lag.ms": "0"},
		"window or session store changelog": {"retention.ms": "3600000"},
		"repartition topic":                 {"retention.ms": "604800000"},
		"config storage":                    {"cleanup.policy": "compact,delete"},
		"offset storage":                    {"cleanup.policy": "delete"},
		"status storage":                    {"cleanup.policy": "delete,compact"},
		"schemas":                           {"cleanup.policy": "delete"},
		"group table":                       {"cleanup.policy": "delete"},
		"stream":                            {"retention.ms": "604800000"},
	}
	for _, ft := range FrameworkTopics {
		t.Run(ft.Framework+"/"+ft.Kind, func(t *testing.T) {
			if err := desired.ValidateTopicConfigs(ft.Configs); err != nil {
				t.Fatalf("refused: %v", err)
			}
			d := describe(ft.Configs)
			if ft.Verify == nil {
				return
			}
			if err := ft.Verify(d); err != nil {
				t.Fatalf("%s's check of its own topic: %v", ft.Framework, err)
			}
			bad := maps.Clone(ft.Configs)
			maps.Copy(bad, broken[ft.Kind])
			if err := ft.Verify(describe(bad)); err == nil {
				t.Fatalf("%s's check passes on %v", ft.Framework, bad)
			}
		})
	}
}

// describe is what DescribeConfigs answers for a topic with configs.
func describe(configs map[string]string) map[string]string {
	out := map[string]string{}
	for _, e := range desired.TopicConfigEntries(desired.TopicSpec{Configs: configs}) {
		out[e.Name] = e.Value
	}
	return out
}

package engine

import (
	"fmt"
	"sort"
	"strconv"
)

// TopicConfig describes one topic configuration key kaas understands.
type TopicConfig struct {
	Name    string
	Default string
	// Check validates a value; nil accepts anything of the right type.
	Check func(string) error
	Doc   string
}

func longAtLeast(min int64) func(string) error {
	return func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("%q is not a whole number", v)
		}
		if n < min {
			return fmt.Errorf("%d is below the minimum %d", n, min)
		}
		return nil
	}
}

func intAtLeast(min int64) func(string) error {
	return func(v string) error {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return fmt.Errorf("%q is not a 32-bit whole number", v)
		}
		if n < min {
			return fmt.Errorf("%d is below the minimum %d", n, min)
		}
		return nil
	}
}

func oneOf(allowed ...string) func(string) error {
	return func(v string) error {
		for _, a := range allowed {
			if v == a {
				return nil
			}
		}
		return fmt.Errorf("%q is not supported (supported: %v)", v, allowed)
	}
}

// topicConfigs are the keys a topic may set. Values kaas cannot honour yet
// (compaction, broker-side recompression, LogAppendTime) are refused with a
// clear message instead of being accepted and ignored.
var topicConfigs = map[string]TopicConfig{
	"cleanup.policy":                 {Default: "delete", Check: oneOf("delete"), Doc: "only delete is supported"},
	"retention.ms":                   {Default: "604800000", Check: longAtLeast(-1)},
	"retention.bytes":                {Default: "-1", Check: longAtLeast(-1)},
	"segment.bytes":                  {Default: "1073741824", Check: intAtLeast(1024)},
	"segment.ms":                     {Default: "604800000", Check: longAtLeast(1)},
	"max.message.bytes":              {Default: "1048588", Check: intAtLeast(0)},
	"message.timestamp.type":         {Default: "CreateTime", Check: oneOf("CreateTime")},
	"compression.type":               {Default: "producer", Check: oneOf("producer")},
	"min.insync.replicas":            {Default: "1", Check: intAtLeast(1)},
	"unclean.leader.election.enable": {Default: "false", Check: oneOf("true", "false")},
}

// ValidateTopicConfigs checks every key and value.
func ValidateTopicConfigs(configs map[string]string) error {
	keys := make([]string, 0, len(configs))
	for k := range configs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		c, ok := topicConfigs[k]
		if !ok {
			return fmt.Errorf("unknown topic config %q", k)
		}
		if c.Check != nil {
			if err := c.Check(configs[k]); err != nil {
				return fmt.Errorf("topic config %s: %w", k, err)
			}
		}
	}
	return nil
}

// ConfigValue returns a topic's value for key, or the default.
func (s TopicSpec) ConfigValue(key string) string {
	if v, ok := s.Configs[key]; ok {
		return v
	}
	return topicConfigs[key].Default
}

func (s TopicSpec) configInt(key string) int64 {
	n, _ := strconv.ParseInt(s.ConfigValue(key), 10, 64)
	return n
}

// TopicConfigNames lists every topic config key, sorted.
func TopicConfigNames() []string {
	out := make([]string, 0, len(topicConfigs))
	for k := range topicConfigs {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

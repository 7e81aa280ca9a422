package desired

import (
	"math"
	"strings"
	"testing"
)

// TestValidateTopicConfigs: the keys frameworks and IaC tools send are
// accepted at the values kaas honours or whose guarantee it exceeds, and
// refused with the reason at the values that would be a lie.
func TestValidateTopicConfigs(t *testing.T) {
	for _, tc := range []struct {
		key, value string
		msg        string // empty: accepted
	}{
		{"message.timestamp.before.max.ms", "3600000", ""},
		{"message.timestamp.before.max.ms", "0", ""},
		{"message.timestamp.before.max.ms", "-1", "below the minimum 0"},
		{"message.timestamp.after.max.ms", maxLong, ""},
		{"message.timestamp.difference.max.ms", "60000", ""},
		{"message.timestamp.difference.max.ms", "x", "not a whole number"},
		{"compression.type", "zstd", ""},
		{"compression.type", "uncompressed", ""},
		{"compression.type", "none", "not supported"},
		{"compression.gzip.level", "-1", ""},
		{"compression.gzip.level", "9", ""},
		{"compression.gzip.level", "0", "below the minimum 1"},
		{"compression.gzip.level", "10", "above the maximum 9"},
		{"compression.lz4.level", "17", ""},
		{"compression.lz4.level", "18", "above the maximum 17"},
		{"compression.zstd.level", "-131072", ""},
		{"compression.zstd.level", "-131073", "below the minimum"},
		{"compression.zstd.level", "23", "above the maximum 22"},
		{"flush.messages", "1", ""},
		{"flush.messages", "0", "below the minimum 1"},
		{"flush.ms", "1000", ""},
		{"file.delete.delay.ms", "0", ""},
		{"message.downconversion.enable", "false", ""},
		{"message.format.version", "3.0-IV1", ""},
		{"message.format.version", "0.11.0", ""},
		{"message.format.version", "2.8", ""},
		{"message.format.version", "0.10.2-IV0", "record batch v2 only"},
		{"message.format.version", "latest", "not a Kafka version"},
		{"preallocate", "false", ""},
		{"preallocate", "true", "does not preallocate"},
		{"leader.replication.throttled.replicas", "", ""},
		{"follower.replication.throttled.replicas", "*", "no replication to throttle"},
		{"remote.storage.enable", "true", "no tiered storage"},
		{"remote.log.copy.disable", "false", ""},
		{"remote.log.delete.on.disable", "true", "no tiered storage"},
		{"local.retention.ms", "-2", ""},
		{"local.retention.ms", "1000", "no tiered storage"},
		{"local.retention.bytes", "-1", "no tiered storage"},
		{"segment.jitter.ms", "0", "does not jitter segment rolls"},
		{"index.interval.bytes", "4096", "spaces its index entries itself"},
		{"segment.index.bytes", "10485760", "sizes its indexes itself"},
		{"cleanup.policy", "compact", ""},
		{"cleanup.policy", "delete", ""},
		{"cleanup.policy", "compact,delete", ""},
		{"cleanup.policy", "delete,compact", ""},
		{"cleanup.policy", "compact, delete", ""},
		{"cleanup.policy", "", "the list is empty"},
		{"cleanup.policy", "compact,forever", `"forever" is not supported`},
		{"delete.retention.ms", "86400000", ""},
		{"delete.retention.ms", "0", ""},
		{"delete.retention.ms", "-1", "below the minimum 0"},
		{"min.compaction.lag.ms", "0", ""},
		{"min.compaction.lag.ms", "-1", "below the minimum 0"},
		{"max.compaction.lag.ms", "1", ""},
		{"max.compaction.lag.ms", maxLong, ""},
		{"max.compaction.lag.ms", "0", "below the minimum 1"},
		{"min.cleanable.dirty.ratio", "0.5", ""},
		{"min.cleanable.dirty.ratio", "0", ""},
		{"min.cleanable.dirty.ratio", "1", ""},
		{"min.cleanable.dirty.ratio", "0.01", ""},
		{"min.cleanable.dirty.ratio", "1e-3", ""},
		{"min.cleanable.dirty.ratio", "1.01", "not within [0, 1]"},
		{"min.cleanable.dirty.ratio", "-0.1", "not within [0, 1]"},
		{"min.cleanable.dirty.ratio", "NaN", "not a number"},
		{"min.cleanable.dirty.ratio", "half", "not a number"},
	} {
		t.Run(tc.key+"="+tc.value, func(t *testing.T) {
			err := ValidateTopicConfigs(map[string]string{tc.key: tc.value})
			switch {
			case tc.msg == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.msg != "" && (err == nil || !strings.Contains(err.Error(), tc.msg)):
				t.Fatalf("error %v, want one containing %q", err, tc.msg)
			}
		})
	}
}

// TestTopicConfigDefaultsValid: every key's default passes its own check,
// and every key is documented.
func TestTopicConfigDefaultsValid(t *testing.T) {
	for name, c := range topicConfigs {
		if c.Check != nil {
			if err := c.Check(c.Default); err != nil {
				t.Errorf("%s: default %q refused: %v", name, c.Default, err)
			}
		}
		if c.Doc == "" {
			t.Errorf("%s: no documentation", name)
		}
	}
}

// TestTopicSpecCompaction: Compacted follows cleanup.policy, and the
// compaction settings read back at their defaults or the topic's values.
func TestTopicSpecCompaction(t *testing.T) {
	for _, tc := range []struct {
		configs   map[string]string
		compacted bool
		ratio     float64
		minLag    int64
	}{
		{nil, false, 0.5, 0},
		{map[string]string{"cleanup.policy": "delete"}, false, 0.5, 0},
		{map[string]string{"cleanup.policy": "compact"}, true, 0.5, 0},
		{map[string]string{"cleanup.policy": "delete, compact", "min.cleanable.dirty.ratio": "0.01"}, true, 0.01, 0},
		{map[string]string{"cleanup.policy": "compact,delete", "min.compaction.lag.ms": "90000000"}, true, 0.5, 90000000},
	} {
		s := TopicSpec{Configs: tc.configs}
		if got := s.Compacted(); got != tc.compacted {
			t.Errorf("%v: Compacted() = %v", tc.configs, got)
		}
		if got := s.ConfigFloat("min.cleanable.dirty.ratio"); got != tc.ratio {
			t.Errorf("%v: min.cleanable.dirty.ratio %v, want %v", tc.configs, got, tc.ratio)
		}
		if got := s.ConfigInt("min.compaction.lag.ms"); got != tc.minLag {
			t.Errorf("%v: min.compaction.lag.ms %d, want %d", tc.configs, got, tc.minLag)
		}
		if got := s.ConfigInt("delete.retention.ms"); got != 86400000 {
			t.Errorf("%v: delete.retention.ms %d", tc.configs, got)
		}
		if got := s.ConfigInt("max.compaction.lag.ms"); got != math.MaxInt64 {
			t.Errorf("%v: max.compaction.lag.ms %d", tc.configs, got)
		}
	}
}

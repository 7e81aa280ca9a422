package desired

import (
	"strings"
	"testing"
)

// TestValidateTopicConfigs: the timestamp and compression keys are
// accepted within Kafka's ranges and refused outside them.
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
		{"delete.retention.ms", "1000", "does not compact"},
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

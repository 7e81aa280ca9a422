package main

import (
	"io"
	"strings"
	"testing"
)

// TestEnvironmentIsParsedStrictly: a malformed KAAS_* value is an error
// naming the variable, not a silent default; negative values are refused.
func TestEnvironmentIsParsedStrictly(t *testing.T) {
	for _, tc := range []struct{ env, value, want string }{
		{"KAAS_V", "high", `KAAS_V="high"`},
		{"KAAS_V", "", `KAAS_V=""`},
		{"KAAS_V", "-2", `KAAS_V="-2"`},
		{"KAAS_LOG_FORMAT", "xml", `KAAS_LOG_FORMAT="xml"`},
	} {
		t.Run(tc.env+"="+tc.value, func(t *testing.T) {
			t.Setenv(tc.env, tc.value)
			_, err := parseFlags(nil, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want one naming %s", err, tc.want)
			}
		})
	}
	for _, bad := range [][]string{{"--v", "-1"}, {"--status-poll-interval", "-1s"}} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

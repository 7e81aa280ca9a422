package main

import (
	"strings"
	"testing"
)

// TestEnvironmentIsParsedStrictly: a KAAS_* value the flag would refuse on
// the command line is refused from the environment too, naming the
// variable and the value, and booleans read as the flag package (and
// Kafka's configs) read them.
func TestEnvironmentIsParsedStrictly(t *testing.T) {
	for _, tc := range []struct {
		env, value string
		wantErr    string // "" = accepted
		check      func(options) bool
	}{
		{"KAAS_BROKER_ID", "abc", `KAAS_BROKER_ID="abc"`, nil},
		{"KAAS_BROKER_ID", "", `KAAS_BROKER_ID=""`, nil},
		{"KAAS_BROKER_ID", "-1", `KAAS_BROKER_ID="-1"`, nil},
		{"KAAS_BROKER_ID", "2147483648", `KAAS_BROKER_ID="2147483648"`, nil},
		{"KAAS_BROKER_ID", "2147483647", "", func(o options) bool { return o.id == 2147483647 }},
		{"KAAS_AUTO_CREATE_TOPICS", "True", "", func(o options) bool { return o.autoCreate }},
		{"KAAS_AUTO_CREATE_TOPICS", "TRUE", "", func(o options) bool { return o.autoCreate }},
		{"KAAS_AUTO_CREATE_TOPICS", "1", "", func(o options) bool { return o.autoCreate }},
		{"KAAS_AUTO_CREATE_TOPICS", "false", "", func(o options) bool { return !o.autoCreate }},
		{"KAAS_AUTO_CREATE_TOPICS", "yes", `KAAS_AUTO_CREATE_TOPICS="yes"`, nil},
		{"KAAS_DEBUG_CLOCK", "maybe", `KAAS_DEBUG_CLOCK="maybe"`, nil},
		{"KAAS_LEASE", "2", `KAAS_LEASE="2"`, nil},
		{"KAAS_HEARTBEAT_INTERVAL", "fast", `KAAS_HEARTBEAT_INTERVAL="fast"`, nil},
		{"KAAS_DEFAULT_PARTITIONS", "1x", `KAAS_DEFAULT_PARTITIONS="1x"`, nil},
		{"KAAS_MAX_REQUEST_BYTES", "0", `KAAS_MAX_REQUEST_BYTES="0"`, nil},
		{"KAAS_MAX_QUEUED_REQUEST_BYTES", "lots", `KAAS_MAX_QUEUED_REQUEST_BYTES="lots"`, nil},
		{"KAAS_V", "high", `KAAS_V="high"`, nil},
		{"KAAS_GROUP_MAX_SIZE", "ten", `KAAS_GROUP_MAX_SIZE="ten"`, nil},
		{"KAAS_OFFSETS_RETENTION", "7d", `KAAS_OFFSETS_RETENTION="7d"`, nil},
		{"KAAS_TRANSACTION_MAX_TIMEOUT", "15", `KAAS_TRANSACTION_MAX_TIMEOUT="15"`, nil},
		{"KAAS_RETENTION_CHECK_INTERVAL", "5", `KAAS_RETENTION_CHECK_INTERVAL="5"`, nil},
		{"KAAS_CHECK_VOLUME", "sometimes", `"sometimes"`, nil},
	} {
		t.Run(tc.env+"="+tc.value, func(t *testing.T) {
			t.Setenv(tc.env, tc.value)
			o, err := parseFlags(nil)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.wantErr == "" && !tc.check(o):
				t.Fatalf("accepted but read wrong: %+v", o)
			case tc.wantErr != "" && err == nil:
				t.Fatalf("accepted (id %d, autoCreate %v, lease %v); want an error naming %s", o.id, o.autoCreate, o.lease, tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
				t.Fatalf("error %q does not name %s", err, tc.wantErr)
			}
		})
	}
}

// TestFlagRanges: every numeric and duration flag refuses values out of
// its range at start instead of running with them (or with a silent
// substitute).
func TestFlagRanges(t *testing.T) {
	for _, tc := range []struct {
		args []string
		ok   bool
	}{
		{[]string{"--id", "0"}, true},
		{[]string{"--id", "2147483647"}, true},
		{[]string{"--id", "-1"}, false},
		{[]string{"--id", "2147483648"}, false},
		{[]string{"--default-partitions", "0"}, false},
		{[]string{"--default-partitions", "2147483648"}, false},
		{[]string{"--max-request-bytes", "0"}, false},
		{[]string{"--max-request-bytes", "-5"}, false},
		{[]string{"--max-request-bytes", "2147483648"}, false},
		{[]string{"--max-request-bytes", "1048576"}, true},
		{[]string{"--max-queued-request-bytes", "0"}, false},
		{[]string{"--max-queued-request-bytes", "1024", "--max-request-bytes", "2048"}, false},
		{[]string{"--shutdown-timeout", "-1s"}, false},
		{[]string{"--shutdown-timeout", "0s"}, true},
		{[]string{"--heartbeat-interval", "0s"}, false},
		{[]string{"--heartbeat-interval", "-1s"}, false},
		{[]string{"--lease", "100ms", "--heartbeat-interval", "200ms"}, false},
		{[]string{"--lease", "200ms", "--heartbeat-interval", "200ms"}, false},
		{[]string{"--v", "-1"}, false},
		{[]string{"--v", "4"}, true},
		{[]string{"--group-initial-rebalance-delay", "-1s"}, false},
		{[]string{"--group-min-session-timeout", "0s"}, false},
		{[]string{"--group-max-session-timeout", "1s", "--group-min-session-timeout", "2s"}, false},
		{[]string{"--offsets-retention", "0s"}, false},
		{[]string{"--offsets-retention-check-interval", "0s"}, false},
		{[]string{"--group-max-size", "0"}, false},
		{[]string{"--group-max-size", "2147483648"}, false},
		{[]string{"--transaction-max-timeout", "0s"}, false},
		{[]string{"--transaction-abort-check-interval", "0s"}, false},
		{[]string{"--transactional-id-expiration", "0s"}, false},
		{[]string{"--producer-id-expiration", "0s"}, false},
		{[]string{"--retention-check-interval", "0s"}, false},
	} {
		_, err := parseFlags(tc.args)
		if ok := err == nil; ok != tc.ok {
			t.Errorf("%v: err %v, want accepted=%v", tc.args, err, tc.ok)
		}
	}
}

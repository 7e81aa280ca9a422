package main

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kaas-dev/kaas/cmd/internal/kafkaadmin"
)

// TestQuotaEntities: the entity flags (kaasctl's and kafka-configs.sh's)
// name a user, a client ID, both, or their default entities.
func TestQuotaEntities(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		want    string
		wantErr string
	}{
		{args: nil, want: ""},
		{args: []string{"--user", "alice"}, want: "user=alice"},
		{args: []string{"--user-default"}, want: "user=<default>"},
		{args: []string{"--client-id", "app"}, want: "client-id=app"},
		{args: []string{"--user", "alice", "--client-id-default"}, want: "user=alice,client-id=<default>"},
		{args: []string{"--entity-type", "users", "--entity-name", "bob"}, want: "user=bob"},
		{args: []string{"--entity-type", "clients", "--entity-default"}, want: "client-id=<default>"},
		{args: []string{"--entity-type", "users", "--entity-default", "--client-id", "c"}, want: "user=<default>,client-id=c"},
		{args: []string{"--user", "a", "--user-default"}, wantErr: "not both"},
		{args: []string{"--user", ""}, wantErr: "name is empty"},
		{args: []string{"--entity-type", "brokers", "--entity-default"}, wantErr: "users or clients"},
		{args: []string{"--entity-type", "users"}, wantErr: "--entity-name N or --entity-default"},
		{args: []string{"--entity-type", "users", "--entity-name", "a", "--user", "b"}, wantErr: "same entity"},
	} {
		q, err := parseQuotaArgs(append([]string{"list"}, tc.args...))
		if err != nil {
			t.Fatal(err)
		}
		e, err := q.entity()
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%v: error %v, want one with %q", tc.args, err, tc.wantErr)
			}
		case err != nil:
			t.Errorf("%v: %v", tc.args, err)
		case e.String() != tc.want:
			t.Errorf("%v: entity %q, want %q", tc.args, e, tc.want)
		}
	}
}

// TestQuotaAlterations: --add takes KEY=VALUE lists and --delete KEY lists
// of Kafka's quota keys.
func TestQuotaAlterations(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		set        map[string]float64
		remove     []string
		wantErr    string
		shouldFail bool
	}{
		{args: []string{"--add", "producer_byte_rate=1048576,consumer_byte_rate=2097152", "--add", "request_percentage=50"},
			set: map[string]float64{"producer_byte_rate": 1048576, "consumer_byte_rate": 2097152, "request_percentage": 50}},
		{args: []string{"--delete", "producer_byte_rate,request_percentage"}, set: map[string]float64{},
			remove: []string{"producer_byte_rate", "request_percentage"}},
		{args: []string{"--add", "producer_byte_rate=1e6", "--delete", "consumer_byte_rate"},
			set: map[string]float64{"producer_byte_rate": 1e6}, remove: []string{"consumer_byte_rate"}},
		{args: []string{"--add", "fetch_rate=1"}, wantErr: `quota key "fetch_rate"`},
		{args: []string{"--add", "producer_byte_rate"}, wantErr: "KEY=VALUE"},
		{args: []string{"--add", "producer_byte_rate=-1"}, wantErr: "positive number"},
		{args: []string{"--add", "producer_byte_rate=1", "--delete", "producer_byte_rate"}, wantErr: "both added and deleted"},
		{args: nil, wantErr: "--add KEY=VALUE or --delete KEY"},
	} {
		q, err := parseQuotaArgs(append([]string{"set", "--user", "u"}, tc.args...))
		if err != nil {
			t.Fatal(err)
		}
		set, remove, err := q.alterations()
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%v: error %v, want one with %q", tc.args, err, tc.wantErr)
			}
		case err != nil:
			t.Errorf("%v: %v", tc.args, err)
		case !reflect.DeepEqual(set, tc.set) || !reflect.DeepEqual(remove, tc.remove):
			t.Errorf("%v: set %v remove %v, want %v %v", tc.args, set, remove, tc.set, tc.remove)
		}
	}
}

// TestQuotasPrinting: the table names default entities <default> and
// leaves a part an entity lacks as -.
func TestQuotasPrinting(t *testing.T) {
	alice, app := "alice", "app"
	entries := []kafkaadmin.QuotaEntry{
		{Entity: kafkaadmin.Entity{{Type: "user", Name: &alice}}, Values: map[string]float64{"producer_byte_rate": 1048576, "request_percentage": 12.5}},
		{Entity: kafkaadmin.Entity{{Type: "user"}, {Type: "client-id", Name: &app}}, Values: map[string]float64{"consumer_byte_rate": 2048}},
	}
	var out bytes.Buffer
	if err := printQuotas(&out, "table", entries); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"USER CLIENT ID QUOTAS", "alice - producer_byte_rate=1048576,request_percentage=12.5",
		"<default> app consumer_byte_rate=2048"} {
		if !containsLine(out.String(), want) {
			t.Errorf("no line %q in\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := printQuotas(&out, "json", entries); err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0]["user"] != "alice" || rows[0]["userDefault"] != nil || rows[1]["userDefault"] != true ||
		rows[1]["clientId"] != "app" {
		t.Fatalf("json: %s", out.String())
	}
}

// TestQuotasAgainstKfake: set, list and delete quotas through a Kafka
// broker's quota APIs.
func TestQuotasAgainstKfake(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]
	kaasctl := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		if err := run(append(args, "--bootstrap", addr), &out); err != nil {
			t.Fatalf("kaasctl %v: %v", args, err)
		}
		return out.String()
	}
	kaasctl("quotas", "set", "--user", "alice", "--add", "producer_byte_rate=1048576,consumer_byte_rate=2097152")
	kaasctl("quotas", "set", "--user-default", "--add", "producer_byte_rate=4096")
	table := kaasctl("quotas", "list")
	for _, want := range []string{"alice - consumer_byte_rate=2097152,producer_byte_rate=1048576", "<default> - producer_byte_rate=4096"} {
		if !containsLine(table, want) {
			t.Errorf("quotas list has no line %q:\n%s", want, table)
		}
	}
	var rows []quotaRow
	if err := json.Unmarshal([]byte(kaasctl("quotas", "set", "--entity-type", "users", "--entity-name", "alice", "--delete", "consumer_byte_rate", "-o", "json")), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || *rows[0].User != "alice" || !reflect.DeepEqual(rows[0].Values, map[string]float64{"producer_byte_rate": 1048576}) {
		t.Fatalf("after delete: %+v", rows)
	}
}

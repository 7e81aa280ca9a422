package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/cmd/internal/kafkaadmin"
)

// TestACLBindings: acls add's flags become every principal x host x
// resource x operation binding, as kafka-acls.sh --add makes them, and bad
// flags are refused with a reason.
func TestACLBindings(t *testing.T) {
	b := func(p, h string, rt kmsg.ACLResourceType, name string, pt kmsg.ACLResourcePatternType, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) kafkaadmin.Binding {
		return kafkaadmin.Binding{Principal: p, Host: h, ResourceType: rt, ResourceName: name, PatternType: pt, Operation: op, Permission: perm}
	}
	const (
		topic, group, cluster, txn = kmsg.ACLResourceTypeTopic, kmsg.ACLResourceTypeGroup, kmsg.ACLResourceTypeCluster, kmsg.ACLResourceTypeTransactionalId
		lit, pre                   = kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLResourcePatternTypePrefixed
		allow, deny                = kmsg.ACLPermissionTypeAllow, kmsg.ACLPermissionTypeDeny
	)
	for _, tc := range []struct {
		name    string
		args    []string
		want    []kafkaadmin.Binding
		wantErr string
	}{
		{name: "default operation All and host *", args: []string{"--allow-principal", "User:alice", "--topic", "orders"},
			want: []kafkaadmin.Binding{b("User:alice", "*", topic, "orders", lit, kmsg.ACLOperationAll, allow)}},
		{name: "cross product", args: []string{"--allow-principal", "User:alice", "--allow-host", "10.0.0.1", "--operation", "Read",
			"--operation", "describe", "--topic", "orders", "--group", "billing"},
			want: []kafkaadmin.Binding{
				b("User:alice", "10.0.0.1", topic, "orders", lit, kmsg.ACLOperationRead, allow),
				b("User:alice", "10.0.0.1", topic, "orders", lit, kmsg.ACLOperationDescribe, allow),
				b("User:alice", "10.0.0.1", group, "billing", lit, kmsg.ACLOperationRead, allow),
				b("User:alice", "10.0.0.1", group, "billing", lit, kmsg.ACLOperationDescribe, allow),
			}},
		{name: "allow and deny", args: []string{"--allow-principal", "User:*", "--deny-principal", "User:mallory", "--deny-host", "10.0.0.9",
			"--operation", "Write", "--topic", "logs-", "--resource-pattern-type", "prefixed"},
			want: []kafkaadmin.Binding{
				b("User:*", "*", topic, "logs-", pre, kmsg.ACLOperationWrite, allow),
				b("User:mallory", "10.0.0.9", topic, "logs-", pre, kmsg.ACLOperationWrite, deny),
			}},
		{name: "cluster and transactional ID", args: []string{"--allow-principal", "User:app", "--operation", "IdempotentWrite", "--cluster"},
			want: []kafkaadmin.Binding{b("User:app", "*", cluster, "kafka-cluster", lit, kmsg.ACLOperationIdempotentWrite, allow)}},
		{name: "transactional ID write", args: []string{"--allow-principal", "User:app", "--operation", "Write", "--transactional-id", "tx-1"},
			want: []kafkaadmin.Binding{b("User:app", "*", txn, "tx-1", lit, kmsg.ACLOperationWrite, allow)}},
		{name: "no principal", args: []string{"--topic", "orders"}, wantErr: "--allow-principal or --deny-principal"},
		{name: "no resource", args: []string{"--allow-principal", "User:alice"}, wantErr: "needs a resource"},
		{name: "bad principal", args: []string{"--allow-principal", "alice", "--topic", "t"}, wantErr: "TYPE:NAME"},
		{name: "bad operation", args: []string{"--allow-principal", "User:a", "--operation", "Fly", "--topic", "t"}, wantErr: `--operation "Fly"`},
		{name: "operation not on the resource", args: []string{"--allow-principal", "User:a", "--operation", "Read", "--cluster"}, wantErr: "does not apply to CLUSTER"},
		{name: "any pattern", args: []string{"--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "any"}, wantErr: "literal or prefixed"},
		{name: "host without principal", args: []string{"--deny-principal", "User:a", "--allow-host", "h", "--topic", "t"}, wantErr: "--allow-host needs --allow-principal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := parseACLArgs(append([]string{"add"}, tc.args...))
			if err != nil {
				t.Fatal(err)
			}
			got, err := a.bindings()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("binding %d: %v, want %v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

// TestACLFilters: list and remove match what their flags name, anything
// not named matching any value, with list's pattern default any and
// remove's literal.
func TestACLFilters(t *testing.T) {
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		name    string
		args    []string
		want    []kafkaadmin.Filter
		wantErr string
	}{
		{name: "list everything", args: []string{"list"}, want: []kafkaadmin.Filter{kafkaadmin.AnyFilter()}},
		{name: "list a principal's on a topic", args: []string{"list", "--principal", "User:alice", "--topic", "orders", "--resource-pattern-type", "match"},
			want: []kafkaadmin.Filter{{Principal: str("User:alice"), ResourceName: str("orders"), ResourceType: kmsg.ACLResourceTypeTopic,
				PatternType: kmsg.ACLResourcePatternTypeMatch, Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}}},
		{name: "remove a deny from a host", args: []string{"remove", "--deny-principal", "User:m", "--deny-host", "h", "--operation", "Write", "--group", "g"},
			want: []kafkaadmin.Filter{{Principal: str("User:m"), Host: str("h"), ResourceName: str("g"), ResourceType: kmsg.ACLResourceTypeGroup,
				PatternType: kmsg.ACLResourcePatternTypeLiteral, Operation: kmsg.ACLOperationWrite, Permission: kmsg.ACLPermissionTypeDeny}}},
		{name: "remove every binding of a topic", args: []string{"remove", "--topic", "t"},
			want: []kafkaadmin.Filter{{ResourceName: str("t"), ResourceType: kmsg.ACLResourceTypeTopic,
				PatternType: kmsg.ACLResourcePatternTypeLiteral, Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}}},
		{name: "remove needs a resource", args: []string{"remove", "--principal", "User:a"}, wantErr: "needs a resource"},
		{name: "bad pattern", args: []string{"list", "--resource-pattern-type", "glob"}, wantErr: "literal, prefixed, any or match"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := parseACLArgs(tc.args)
			if err != nil {
				t.Fatal(err)
			}
			got, err := a.filters()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d filters, want %d", len(got), len(tc.want))
			}
			for i := range got {
				if g, w := describeFilter(got[i]), describeFilter(tc.want[i]); g != w {
					t.Errorf("filter %d: %s, want %s", i, g, w)
				}
			}
		})
	}
	for _, bad := range [][]string{{}, {"grant"}, {"list", "-o", "yaml"}, {"list", "extra"}} {
		if _, err := parseACLArgs(bad); err == nil {
			t.Errorf("acls %v parsed", bad)
		}
	}
}

func describeFilter(f kafkaadmin.Filter) string {
	s := func(p *string) string {
		if p == nil {
			return "<any>"
		}
		return *p
	}
	return strings.Join([]string{s(f.Principal), s(f.Host), s(f.ResourceName), f.ResourceType.String(), f.PatternType.String(),
		f.Operation.String(), f.Permission.String()}, " ")
}

// TestACLsAgainstKfake: add, list (table and JSON), remove and list again
// through a Kafka broker's ACL APIs.
func TestACLsAgainstKfake(t *testing.T) {
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
	kaasctl("acls", "add", "--allow-principal", "User:alice", "--operation", "Read", "--operation", "Describe", "--topic", "orders")
	kaasctl("acls", "add", "--deny-principal", "User:bob", "--deny-host", "10.0.0.9", "--operation", "Read", "--group", "billing-",
		"--resource-pattern-type", "prefixed")
	table := kaasctl("acls", "list")
	for _, want := range []string{
		"PRINCIPAL HOST PERMISSION OPERATION RESOURCE TYPE RESOURCE NAME PATTERN",
		"User:alice * ALLOW READ TOPIC orders LITERAL",
		"User:alice * ALLOW DESCRIBE TOPIC orders LITERAL",
		"User:bob 10.0.0.9 DENY READ GROUP billing- PREFIXED",
	} {
		if !containsLine(table, want) {
			t.Errorf("acls list has no line %q:\n%s", want, table)
		}
	}
	var rows []aclRow
	if err := json.Unmarshal([]byte(kaasctl("acls", "list", "--principal", "User:alice", "-o", "json")), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0] != (aclRow{"User:alice", "*", "ALLOW", "READ", "TOPIC", "orders", "LITERAL"}) {
		t.Fatalf("acls list --principal User:alice: %+v", rows)
	}
	removed := kaasctl("acls", "remove", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "orders")
	if !containsLine(removed, "User:alice * ALLOW READ TOPIC orders LITERAL") || strings.Contains(removed, "DESCRIBE") {
		t.Fatalf("acls remove printed:\n%s", removed)
	}
	if err := json.Unmarshal([]byte(kaasctl("acls", "list", "--topic", "orders", "--output", "json")), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Operation != "DESCRIBE" {
		t.Fatalf("after remove: %+v", rows)
	}
}

// containsLine reports whether text has the line want, runs of spaces
// collapsed.
func containsLine(text, want string) bool {
	for _, l := range strings.Split(text, "\n") {
		if strings.Join(strings.Fields(l), " ") == want {
			return true
		}
	}
	return false
}

package acl

import (
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	topic   = kmsg.ACLResourceTypeTopic
	group   = kmsg.ACLResourceTypeGroup
	cluster = kmsg.ACLResourceTypeCluster
	txnID   = kmsg.ACLResourceTypeTransactionalId

	literal  = kmsg.ACLResourcePatternTypeLiteral
	prefixed = kmsg.ACLResourcePatternTypePrefixed

	allow = kmsg.ACLPermissionTypeAllow
	deny  = kmsg.ACLPermissionTypeDeny

	read     = kmsg.ACLOperationRead
	write    = kmsg.ACLOperationWrite
	describe = kmsg.ACLOperationDescribe
	all      = kmsg.ACLOperationAll
)

func bind(rt kmsg.ACLResourceType, pt kmsg.ACLResourcePatternType, name, principal, host string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) Binding {
	return Binding{ResourceType: rt, PatternType: pt, ResourceName: name, Principal: principal, Host: host, Operation: op, Permission: perm}
}

func TestAuthorize(t *testing.T) {
	type ask struct {
		principal, host string
		op              kmsg.ACLOperation
		rt              kmsg.ACLResourceType
		name            string
		want            bool
	}
	alice, bob := "User:alice", "User:bob"
	tests := []struct {
		name     string
		bindings []Binding
		cfg      Config
		asks     []ask
	}{
		{
			name: "no ACLs: closed, except to super users",
			cfg:  Config{SuperUsers: []string{"User:admin"}},
			asks: []ask{
				{alice, "10.0.0.1", write, topic, "orders", false},
				{"User:admin", "10.0.0.1", write, topic, "orders", true},
				{"User:admin", "10.0.0.1", kmsg.ACLOperationClusterAction, cluster, ClusterName, true},
			},
		},
		{
			name: "no ACLs with allow.everyone.if.no.acl.found: open",
			cfg:  Config{AllowIfNoACL: true},
			asks: []ask{{alice, "10.0.0.1", write, topic, "orders", true}},
		},
		{
			name:     "allow.everyone.if.no.acl.found opens only resources no ACL names",
			cfg:      Config{AllowIfNoACL: true},
			bindings: []Binding{bind(topic, literal, "orders", bob, "*", read, allow)},
			asks: []ask{
				{alice, "10.0.0.1", read, topic, "orders", false},
				{alice, "10.0.0.1", read, topic, "payments", true},
				{bob, "10.0.0.1", read, topic, "orders", true},
			},
		},
		{
			name:     "a literal ALLOW names one resource, one principal, one operation",
			bindings: []Binding{bind(topic, literal, "orders", alice, "*", write, allow)},
			asks: []ask{
				{alice, "10.0.0.1", write, topic, "orders", true},
				{alice, "10.0.0.1", read, topic, "orders", false},
				{alice, "10.0.0.1", write, topic, "orders2", false},
				{alice, "10.0.0.1", write, group, "orders", false},
				{bob, "10.0.0.1", write, topic, "orders", false},
			},
		},
		{
			name: "implied operations: DESCRIBE by READ, WRITE, DELETE, ALTER; DESCRIBE_CONFIGS by ALTER_CONFIGS",
			bindings: []Binding{
				bind(topic, literal, "r", alice, "*", read, allow),
				bind(topic, literal, "w", alice, "*", write, allow),
				bind(topic, literal, "d", alice, "*", kmsg.ACLOperationDelete, allow),
				bind(topic, literal, "a", alice, "*", kmsg.ACLOperationAlter, allow),
				bind(topic, literal, "c", alice, "*", kmsg.ACLOperationAlterConfigs, allow),
				bind(topic, literal, "x", alice, "*", kmsg.ACLOperationCreate, allow),
			},
			asks: []ask{
				{alice, "h", describe, topic, "r", true},
				{alice, "h", describe, topic, "w", true},
				{alice, "h", describe, topic, "d", true},
				{alice, "h", describe, topic, "a", true},
				{alice, "h", kmsg.ACLOperationDescribeConfigs, topic, "c", true},
				{alice, "h", describe, topic, "c", false},
				{alice, "h", describe, topic, "x", false},
				{alice, "h", write, topic, "r", false},
			},
		},
		{
			name:     "ALL allows every operation",
			bindings: []Binding{bind(group, literal, "g", alice, "*", all, allow)},
			asks: []ask{
				{alice, "h", read, group, "g", true},
				{alice, "h", kmsg.ACLOperationDelete, group, "g", true},
			},
		},
		{
			name: "wildcards: every resource, every user, every host; a host names one",
			bindings: []Binding{
				bind(topic, literal, WildcardResource, alice, "*", read, allow),
				bind(topic, literal, "public", WildcardPrincipal, "*", read, allow),
				bind(topic, literal, "office", bob, "10.0.0.7", read, allow),
			},
			asks: []ask{
				{alice, "h", read, topic, "anything", true},
				{bob, "h", read, topic, "public", true},
				{bob, "h", read, topic, "anything", false},
				{bob, "10.0.0.7", read, topic, "office", true},
				{bob, "10.0.0.8", read, topic, "office", false},
			},
		},
		{
			name:     "a PREFIXED pattern names every resource whose name starts with it",
			bindings: []Binding{bind(topic, prefixed, "team-a.", alice, "*", read, allow)},
			asks: []ask{
				{alice, "h", read, topic, "team-a.orders", true},
				{alice, "h", read, topic, "team-a.", true},
				{alice, "h", read, topic, "team-a", false},
				{alice, "h", read, topic, "team-b.orders", false},
			},
		},
		{
			name: "DENY wins over ALLOW, from any pattern that applies",
			bindings: []Binding{
				bind(topic, literal, WildcardResource, WildcardPrincipal, "*", all, allow),
				bind(topic, prefixed, "secret.", alice, "*", read, deny),
				bind(topic, literal, "audit", WildcardPrincipal, "10.6.6.6", all, deny),
			},
			asks: []ask{
				{alice, "h", read, topic, "secret.keys", false},
				{alice, "h", write, topic, "secret.keys", true},
				{bob, "h", read, topic, "secret.keys", true},
				{bob, "10.6.6.6", read, topic, "audit", false},
				{bob, "10.6.6.5", read, topic, "audit", true},
			},
		},
		{
			name: "a DENY is not widened by implication: DENY READ leaves DESCRIBE allowed",
			bindings: []Binding{
				bind(topic, literal, "t", alice, "*", all, allow),
				bind(topic, literal, "t", alice, "*", read, deny),
			},
			asks: []ask{
				{alice, "h", read, topic, "t", false},
				{alice, "h", describe, topic, "t", true},
			},
		},
		{
			name: "a super user is never denied",
			cfg:  Config{SuperUsers: []string{"User:admin"}},
			bindings: []Binding{
				bind(topic, literal, WildcardResource, WildcardPrincipal, "*", all, deny),
			},
			asks: []ask{
				{"User:admin", "h", write, topic, "t", true},
				{alice, "h", write, topic, "t", false},
			},
		},
		{
			name: "resource types do not mix",
			bindings: []Binding{
				bind(txnID, literal, "tx", alice, "*", write, allow),
				bind(cluster, literal, ClusterName, alice, "*", kmsg.ACLOperationIdempotentWrite, allow),
			},
			asks: []ask{
				{alice, "h", write, txnID, "tx", true},
				{alice, "h", write, topic, "tx", false},
				{alice, "h", kmsg.ACLOperationIdempotentWrite, cluster, ClusterName, true},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ix := New(tt.bindings, tt.cfg)
			for _, a := range tt.asks {
				if got := ix.Authorize(a.principal, a.host, a.op, a.rt, a.name); got != a.want {
					t.Errorf("Authorize(%s from %s, %s %s %q) = %v, want %v", a.principal, a.host, a.op, a.rt, a.name, got, a.want)
				}
			}
		})
	}
}

func TestAuthorizeAny(t *testing.T) {
	alice := "User:alice"
	tests := []struct {
		name     string
		bindings []Binding
		want     bool
	}{
		{"no ACL", nil, false},
		{"WRITE on one topic", []Binding{bind(topic, literal, "t", alice, "*", write, allow)}, true},
		{"WRITE on a prefix", []Binding{bind(topic, prefixed, "p.", alice, "*", write, allow)}, true},
		{"READ only", []Binding{bind(topic, literal, "t", alice, "*", read, allow)}, false},
		{"someone else's WRITE", []Binding{bind(topic, literal, "t", "User:bob", "*", write, allow)}, false},
		{"WRITE denied on that topic", []Binding{
			bind(topic, literal, "t", alice, "*", write, allow),
			bind(topic, literal, "t", alice, "*", write, deny)}, false},
		{"WRITE denied on a prefix of it", []Binding{
			bind(topic, literal, "p.t", alice, "*", write, allow),
			bind(topic, prefixed, "p.", alice, "*", all, deny)}, false},
		{"WRITE denied everywhere", []Binding{
			bind(topic, prefixed, "p.", alice, "*", write, allow),
			bind(topic, literal, WildcardResource, WildcardPrincipal, "*", write, deny)}, false},
		{"a deny elsewhere leaves the allow", []Binding{
			bind(topic, literal, "t", alice, "*", write, allow),
			bind(topic, literal, "u", alice, "*", write, deny)}, true},
		{"a longer prefix denied leaves the shorter allowed", []Binding{
			bind(topic, prefixed, "p.", alice, "*", write, allow),
			bind(topic, prefixed, "p.q.", alice, "*", write, deny)}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := New(tt.bindings, Config{}).AuthorizeAny(alice, "h", write, topic); got != tt.want {
				t.Errorf("AuthorizeAny = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	good := bind(topic, literal, "t", "User:alice", "*", read, allow)
	tests := []struct {
		name   string
		change func(*Binding)
		want   error
	}{
		{"good", func(*Binding) {}, nil},
		{"prefixed", func(b *Binding) { b.PatternType = prefixed }, nil},
		{"ALL", func(b *Binding) { b.Operation = all }, nil},
		{"any resource type", func(b *Binding) { b.ResourceType = kmsg.ACLResourceTypeAny }, ErrInvalid},
		{"delegation tokens", func(b *Binding) { b.ResourceType = kmsg.ACLResourceTypeDelegationToken }, ErrUnsupported},
		{"users", func(b *Binding) { b.ResourceType = kmsg.ACLResourceTypeUser }, ErrUnsupported},
		{"MATCH pattern", func(b *Binding) { b.PatternType = kmsg.ACLResourcePatternTypeMatch }, ErrInvalid},
		{"ANY pattern", func(b *Binding) { b.PatternType = kmsg.ACLResourcePatternTypeAny }, ErrInvalid},
		{"empty name", func(b *Binding) { b.ResourceName = "" }, ErrInvalid},
		{"principal without type", func(b *Binding) { b.Principal = "alice" }, ErrInvalid},
		{"principal without name", func(b *Binding) { b.Principal = "User:" }, ErrInvalid},
		{"empty host", func(b *Binding) { b.Host = "" }, ErrInvalid},
		{"ANY operation", func(b *Binding) { b.Operation = kmsg.ACLOperationAny }, ErrInvalid},
		{"unknown operation", func(b *Binding) { b.Operation = 99 }, ErrInvalid},
		{"ANY permission", func(b *Binding) { b.Permission = kmsg.ACLPermissionTypeAny }, ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := good
			tt.change(&b)
			err := b.Validate()
			if (tt.want == nil) != (err == nil) || (tt.want != nil && !errors.Is(err, tt.want)) {
				t.Fatalf("Validate(%v) = %v, want %v", b, err, tt.want)
			}
		})
	}
}

func TestFilter(t *testing.T) {
	str := func(s string) *string { return &s }
	bs := []Binding{
		bind(topic, literal, "orders", "User:alice", "*", read, allow),
		bind(topic, literal, WildcardResource, "User:bob", "*", read, allow),
		bind(topic, prefixed, "ord", "User:carol", "*", write, deny),
		bind(topic, prefixed, "pay", "User:alice", "*", read, allow),
		bind(group, literal, "orders", "User:alice", "10.0.0.1", read, allow),
	}
	any := Filter{ResourceType: kmsg.ACLResourceTypeAny, PatternType: kmsg.ACLResourcePatternTypeAny,
		Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}
	tests := []struct {
		name   string
		change func(*Filter)
		want   []int // indexes into bs
	}{
		{"everything", func(*Filter) {}, []int{0, 1, 2, 3, 4}},
		{"topics", func(f *Filter) { f.ResourceType = topic }, []int{0, 1, 2, 3}},
		{"ANY pattern, a name: that exact name, any pattern type", func(f *Filter) { f.ResourceName = str("orders") }, []int{0, 4}},
		{"LITERAL, a name", func(f *Filter) { f.PatternType = literal; f.ResourceName = str("orders") }, []int{0, 4}},
		{"LITERAL wildcard: the wildcard binding only", func(f *Filter) { f.PatternType = literal; f.ResourceName = str("*") }, []int{1}},
		{"PREFIXED, a name", func(f *Filter) { f.PatternType = prefixed; f.ResourceName = str("ord") }, []int{2}},
		{"PREFIXED, no name", func(f *Filter) { f.PatternType = prefixed }, []int{2, 3}},
		{"MATCH orders: literal, wildcard, prefixes", func(f *Filter) {
			f.ResourceType, f.PatternType, f.ResourceName = topic, kmsg.ACLResourcePatternTypeMatch, str("orders")
		}, []int{0, 1, 2}},
		{"principal, exact", func(f *Filter) { f.Principal = str("User:alice") }, []int{0, 3, 4}},
		{"host, exact", func(f *Filter) { f.Host = str("10.0.0.1") }, []int{4}},
		{"operation", func(f *Filter) { f.Operation = write }, []int{2}},
		{"permission", func(f *Filter) { f.Permission = deny }, []int{2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := any
			tt.change(&f)
			var got []int
			for i, b := range bs {
				if f.Matches(b) {
					got = append(got, i)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("matched %v, want %v", got, tt.want)
			}
		})
	}
	if err := (Filter{ResourceType: kmsg.ACLResourceTypeUnknown, PatternType: literal, Operation: read, Permission: allow}).Validate(); !errors.Is(err, ErrInvalid) {
		t.Fatalf("UNKNOWN resource type in a filter: %v", err)
	}
	if err := any.Validate(); err != nil {
		t.Fatalf("ANY filter: %v", err)
	}
}

func TestIndexBindings(t *testing.T) {
	b := bind(topic, literal, "t", "User:alice", "*", read, allow)
	c := bind(group, literal, "g", "User:alice", "*", read, allow)
	ix := New([]Binding{c, b, b}, Config{})
	if ix.Len() != 2 {
		t.Fatalf("Len = %d, want duplicates kept once", ix.Len())
	}
	if got := ix.All(); got[0] != b || got[1] != c {
		t.Fatalf("All = %v, want topics before groups", got)
	}
	f := Filter{ResourceType: group, PatternType: kmsg.ACLResourcePatternTypeAny, Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}
	if got := ix.Bindings(f); len(got) != 1 || got[0] != c {
		t.Fatalf("Bindings(groups) = %v", got)
	}
}

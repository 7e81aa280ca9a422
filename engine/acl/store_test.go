package acl

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/engine/versioned"
)

// TestStoreRoundTrip: every resource type, pattern type, operation and
// permission a binding may hold survives its file, under a name that is
// the same for the same binding and differs for any other.
func TestStoreRoundTrip(t *testing.T) {
	var bindings []Binding
	for _, rt := range []kmsg.ACLResourceType{topic, group, cluster, txnID} {
		name := "orders"
		if rt == cluster {
			name = ClusterName
		}
		for _, pt := range []kmsg.ACLResourcePatternType{literal, prefixed} {
			if rt == cluster && pt == prefixed {
				continue
			}
			for _, op := range []kmsg.ACLOperation{all, read, write, kmsg.ACLOperationCreate, kmsg.ACLOperationDelete,
				kmsg.ACLOperationAlter, describe, kmsg.ACLOperationClusterAction, kmsg.ACLOperationDescribeConfigs,
				kmsg.ACLOperationAlterConfigs, kmsg.ACLOperationIdempotentWrite} {
				for _, perm := range []kmsg.ACLPermissionType{allow, deny} {
					b := bind(rt, pt, name, "User:alice", "10.0.0.1", op, perm)
					if b.Validate() == nil {
						bindings = append(bindings, b)
					}
				}
			}
		}
	}
	bindings = append(bindings, bind(topic, literal, "*", "User:*", "*", read, allow))
	if len(bindings) < 50 {
		t.Fatalf("only %d valid bindings to test", len(bindings))
	}
	names := map[string]Binding{}
	for _, b := range bindings {
		name := FileName(b)
		if other, dup := names[name]; dup {
			t.Fatalf("%s and %s share the file %s", b, other, name)
		}
		names[name] = b
		if FileName(b) != name || !strings.HasSuffix(name, ".json") {
			t.Fatalf("file name of %s: %q", b, name)
		}
		got, err := Decode(versioned.Entry{Name: name, Data: Encode(b)})
		if err != nil || got != b {
			t.Fatalf("%s came back as %s, %v", b, got, err)
		}
	}
}

// TestStoreRefuses: a file that does not hold a valid binding, or holds
// one it is not named for, is refused with its name, and DecodeAll keeps
// the others.
func TestStoreRefuses(t *testing.T) {
	good := bind(topic, literal, "t", "User:alice", "*", read, allow)
	other := bind(topic, literal, "t", "User:bob", "*", read, allow)
	cases := map[string]versioned.Entry{
		"not json":      {Name: FileName(good), Data: []byte("{")},
		"unknown op":    {Name: FileName(good), Data: []byte(strings.Replace(string(Encode(good)), `"READ"`, `"FLY"`, 1))},
		"wrong name":    {Name: FileName(other), Data: Encode(good)},
		"invalid":       {Name: "x.json", Data: Encode(bind(topic, literal, "", "User:alice", "*", read, allow))},
		"any operation": {Name: "y.json", Data: Encode(bind(topic, literal, "t", "User:alice", "*", kmsg.ACLOperationAny, allow))},
	}
	entries := []versioned.Entry{{Name: FileName(good), Data: Encode(good)}}
	for what, e := range cases {
		if _, err := Decode(e); err == nil || !strings.Contains(err.Error(), e.Name) {
			t.Errorf("%s: %v", what, err)
		}
		entries = append(entries, e)
	}
	got, bad := DecodeAll(entries)
	if len(got) != 1 || got[0] != good || len(bad) != len(cases) {
		t.Fatalf("DecodeAll: %v, %d refused", got, len(bad))
	}
}

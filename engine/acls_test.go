package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/engine/acl"
	"github.com/kaas-dev/kaas/volume/memfs"
)

func startACLMember(t *testing.T, fsys *memfs.FS, id int32) *running {
	t.Helper()
	return startWith(t, Config{FS: fsys, DataDir: testData, ClusterDir: testCluster, BrokerID: id,
		HeartbeatInterval: 10 * time.Millisecond, Lease: 200 * time.Millisecond,
		ACLs: ACLConfig{Enabled: true, SuperUsers: []string{"User:admin"}}})
}

// TestACLsReachEveryBrokerBeforeTheAnswer: an ACL created on one broker is
// enforced by every live broker when CreateACLs returns, and a deletion
// on another likewise; DescribeACLs and DeleteACLs answer by filter.
func TestACLsReachEveryBrokerBeforeTheAnswer(t *testing.T) {
	ctx := safety(t)
	fsys := memfs.New()
	a, b := startACLMember(t, fsys, 1), startACLMember(t, fsys, 2)
	poll(t, ctx, "both brokers live to each other", func() error {
		if len(a.clusterView().live) != 2 || len(b.clusterView().live) != 2 {
			return errors.New("not yet")
		}
		return nil
	})
	read := acl.Binding{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: "orders", PatternType: kmsg.ACLResourcePatternTypePrefixed,
		Principal: "User:alice", Host: "*", Operation: kmsg.ACLOperationRead, Permission: kmsg.ACLPermissionTypeAllow}
	allowed := func(e *running) bool {
		return e.Authorizer().Authorize("User:alice", "10.1.1.1", kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, "orders-eu")
	}
	if allowed(a) || allowed(b) {
		t.Fatal("alice may read before any ACL")
	}
	for round := 0; round < 3; round++ {
		if err := a.CreateACLs(ctx, []acl.Binding{read}); err != nil {
			t.Fatal(err)
		}
		if !allowed(a) || !allowed(b) {
			t.Fatalf("round %d: created on broker 1, enforced by 1: %v, by 2: %v", round, allowed(a), allowed(b))
		}
		all := acl.Filter{ResourceType: kmsg.ACLResourceTypeAny, PatternType: kmsg.ACLResourcePatternTypeAny,
			Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}
		if got, err := b.DescribeACLs(all); err != nil || len(got) != 1 || got[0] != read {
			t.Fatalf("DescribeACLs on broker 2: %v %v", got, err)
		}
		matched, err := b.DeleteACLs(ctx, []acl.Filter{all, all})
		if err != nil || len(matched) != 2 || len(matched[0]) != 1 || len(matched[1]) != 1 {
			t.Fatalf("DeleteACLs: %v %v", matched, err)
		}
		if allowed(a) || allowed(b) {
			t.Fatalf("round %d: deleted on broker 2, still enforced by 1: %v, by 2: %v", round, allowed(a), allowed(b))
		}
	}
}

// TestACLsOff: a broker without an authorizer answers the ACL calls with
// ErrACLsDisabled and has no index.
func TestACLsOff(t *testing.T) {
	e := startEngine(t, memfs.New())
	if e.Authorizer() != nil {
		t.Fatal("an index without ACLs on")
	}
	if err := e.CreateACLs(context.Background(), nil); !errors.Is(err, ErrACLsDisabled) {
		t.Fatalf("CreateACLs: %v", err)
	}
	if _, err := e.DeleteACLs(context.Background(), nil); !errors.Is(err, ErrACLsDisabled) {
		t.Fatalf("DeleteACLs: %v", err)
	}
}

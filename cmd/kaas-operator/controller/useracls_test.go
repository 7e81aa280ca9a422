package controller

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/kaas-dev/kaas/cmd/internal/kafkaadmin"
	"github.com/kaas-dev/kaas/cmd/kaas-operator/api/v1alpha1"
)

// kafkaFake is a Kafka cluster (franz-go's kfake) with ACL and quota APIs,
// and a client of it.
func kafkaFake(t *testing.T) *kgo.Client {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func binding(p, host string, rt kmsg.ACLResourceType, name string, pt kmsg.ACLResourcePatternType, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) kafkaadmin.Binding {
	return kafkaadmin.Binding{Principal: p, Host: host, ResourceType: rt, ResourceName: name, PatternType: pt, Operation: op, Permission: perm}
}

func principalACLs(t *testing.T, k kafkaadmin.Requester, principal string) []kafkaadmin.Binding {
	t.Helper()
	bs, err := kafkaadmin.DescribeACLs(context.Background(), k, principalFilter(principal))
	if err != nil {
		t.Fatal(err)
	}
	return bs
}

func userQuotas(t *testing.T, k kafkaadmin.Requester, user string) map[string]float64 {
	t.Helper()
	e := kafkaadmin.Entity{{Type: kafkaadmin.EntityUser, Name: &user}}
	entries, err := kafkaadmin.DescribeQuotas(context.Background(), k, kafkaadmin.EntityComponents(e), true)
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range entries {
		if en.Entity.String() == e.String() {
			return en.Values
		}
	}
	return map[string]float64{}
}

func i64(v int64) *int64 { return &v }

const (
	topicRT, groupRT, txnRT, clusterRT = kmsg.ACLResourceTypeTopic, kmsg.ACLResourceTypeGroup, kmsg.ACLResourceTypeTransactionalId, kmsg.ACLResourceTypeCluster
	literal, prefixed                  = kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLResourcePatternTypePrefixed
	allowed, denied                    = kmsg.ACLPermissionTypeAllow, kmsg.ACLPermissionTypeDeny
)

// TestUserACLsAndQuotas: a User's spec.authorization becomes exactly its
// principal's bindings (missing ones created, others deleted, other
// principals' left alone) and spec.quotas its user entity's quotas; a
// changed spec is followed, and deleting the User removes both.
func TestUserACLsAndQuotas(t *testing.T) {
	k := kafkaFake(t)
	ctx := context.Background()
	stray := binding("User:alice", "*", topicRT, "stray", literal, kmsg.ACLOperationWrite, allowed)
	bobs := binding("User:bob", "*", topicRT, "orders", literal, kmsg.ACLOperationRead, allowed)
	if err := kafkaadmin.CreateACLs(ctx, k, []kafkaadmin.Binding{stray, bobs}); err != nil {
		t.Fatal(err)
	}
	bob := "bob"
	if err := kafkaadmin.AlterQuotas(ctx, k, kafkaadmin.Entity{{Type: kafkaadmin.EntityUser, Name: &bob}}, map[string]float64{"producer_byte_rate": 10}, nil); err != nil {
		t.Fatal(err)
	}

	spec := v1alpha1.UserSpec{
		Authorization: &v1alpha1.UserAuthorization{Type: "simple", ACLs: []v1alpha1.ACLRule{
			{Resource: v1alpha1.ACLRuleResource{Type: "topic", Name: "orders"}, Operations: []string{"Read", "Describe"}},
			{Resource: v1alpha1.ACLRuleResource{Type: "group", Name: "billing-", PatternType: "prefix"}, Operations: []string{"Read"}},
			{Resource: v1alpha1.ACLRuleResource{Type: "transactionalId", Name: "tx"}, Operations: []string{"Write"}, Host: "10.0.0.9", Type: "deny"},
			{Resource: v1alpha1.ACLRuleResource{Type: "cluster"}, Operations: []string{"IdempotentWrite"}},
		}},
		Quotas: &v1alpha1.UserQuotas{ProducerByteRate: i64(1048576), RequestPercentage: i64(50)},
	}
	f := newUserFixture(t, newUser("alice", spec))
	f.r.Kafka = k
	got := f.reconcile("alice", time.Minute)
	wantUserReady(t, got, metav1.ConditionTrue, ReasonCredentialWritten)
	if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady); !strings.Contains(c.Message, "5 ACL bindings and 2 quotas") {
		t.Fatalf("Ready message %q", c.Message)
	}
	if got.Status.ACLPrincipal != "User:alice" || got.Status.ACLs != 5 || got.Status.QuotaUser != "alice" {
		t.Fatalf("status %+v", got.Status)
	}
	want := []kafkaadmin.Binding{
		binding("User:alice", "*", topicRT, "orders", literal, kmsg.ACLOperationRead, allowed),
		binding("User:alice", "*", topicRT, "orders", literal, kmsg.ACLOperationDescribe, allowed),
		binding("User:alice", "*", groupRT, "billing-", prefixed, kmsg.ACLOperationRead, allowed),
		binding("User:alice", "*", clusterRT, "kafka-cluster", literal, kmsg.ACLOperationIdempotentWrite, allowed),
		binding("User:alice", "10.0.0.9", txnRT, "tx", literal, kmsg.ACLOperationWrite, denied),
	}
	kafkaadmin.SortBindings(want)
	if have := principalACLs(t, k, "User:alice"); !reflect.DeepEqual(have, want) {
		t.Fatalf("alice's ACLs %v, want %v", have, want)
	}
	if have := principalACLs(t, k, "User:bob"); !reflect.DeepEqual(have, []kafkaadmin.Binding{bobs}) {
		t.Fatalf("bob's ACLs %v", have)
	}
	if q := userQuotas(t, k, "alice"); !reflect.DeepEqual(q, map[string]float64{"producer_byte_rate": 1048576, "request_percentage": 50}) {
		t.Fatalf("alice's quotas %v", q)
	}

	// A changed spec: the deny rule dropped, a quota swapped for another.
	got.Spec.Authorization.ACLs = got.Spec.Authorization.ACLs[:2]
	got.Spec.Quotas = &v1alpha1.UserQuotas{ProducerByteRate: i64(2097152), ConsumerByteRate: i64(4096)}
	got.Generation++
	if err := f.c.Update(f.ctx, got); err != nil {
		t.Fatal(err)
	}
	got = f.reconcile("alice", time.Minute)
	if got.Status.ACLs != 3 || len(principalACLs(t, k, "User:alice")) != 3 {
		t.Fatalf("after the change: status %+v, ACLs %v", got.Status, principalACLs(t, k, "User:alice"))
	}
	if q := userQuotas(t, k, "alice"); !reflect.DeepEqual(q, map[string]float64{"producer_byte_rate": 2097152, "consumer_byte_rate": 4096}) {
		t.Fatalf("alice's quotas after the change %v", q)
	}

	// A binding deleted by hand comes back on the next look.
	if _, err := kafkaadmin.DeleteACLs(ctx, k, []kafkaadmin.Filter{want[0].Exact()}); err != nil {
		t.Fatal(err)
	}
	f.reconcile("alice", time.Minute)
	if n := len(principalACLs(t, k, "User:alice")); n != 3 {
		t.Fatalf("%d bindings after a resync, want 3", n)
	}

	if err := f.c.Delete(f.ctx, got); err != nil {
		t.Fatal(err)
	}
	if got := f.reconcile("alice", 0); got != nil {
		t.Fatalf("still there: %+v", got.ObjectMeta)
	}
	if have := principalACLs(t, k, "User:alice"); len(have) != 0 {
		t.Fatalf("alice's ACLs outlived the User: %v", have)
	}
	if q := userQuotas(t, k, "alice"); len(q) != 0 {
		t.Fatalf("alice's quotas outlived the User: %v", q)
	}
	if have := principalACLs(t, k, "User:bob"); len(have) != 1 || len(userQuotas(t, k, "bob")) != 1 {
		t.Fatalf("bob's ACLs or quotas went with alice: %v", have)
	}
}

// TestUserAuthorizationDropped: a spec that no longer has authorization
// or quotas takes away what the operator applied, and stops managing the
// principal.
func TestUserAuthorizationDropped(t *testing.T) {
	k := kafkaFake(t)
	f := newUserFixture(t, newUser("carol", v1alpha1.UserSpec{
		Authorization: &v1alpha1.UserAuthorization{Type: "simple", ACLs: []v1alpha1.ACLRule{
			{Resource: v1alpha1.ACLRuleResource{Type: "topic", Name: "*"}, Operations: []string{"All"}}}},
		Quotas: &v1alpha1.UserQuotas{ConsumerByteRate: i64(100)}}))
	f.r.Kafka = k
	got := f.reconcile("carol", time.Minute)
	if len(principalACLs(t, k, "User:carol")) != 1 || len(userQuotas(t, k, "carol")) != 1 {
		t.Fatal("not applied")
	}
	got.Spec.Authorization, got.Spec.Quotas = nil, nil
	got.Generation++
	if err := f.c.Update(f.ctx, got); err != nil {
		t.Fatal(err)
	}
	got = f.reconcile("carol", time.Minute)
	wantUserReady(t, got, metav1.ConditionTrue, ReasonCredentialWritten)
	if got.Status.ACLPrincipal != "" || got.Status.ACLs != 0 || got.Status.QuotaUser != "" {
		t.Fatalf("status %+v", got.Status)
	}
	if len(principalACLs(t, k, "User:carol")) != 0 || len(userQuotas(t, k, "carol")) != 0 {
		t.Fatal("the dropped ACLs or quotas are still on the cluster")
	}
}

// failing is a Kafka client whose every request fails.
type failing struct{}

func (failing) Request(context.Context, kmsg.Request) (kmsg.Response, error) {
	return nil, errors.New("dial tcp 127.0.0.1:9092: connection refused")
}

// TestUserKafkaRefusals: a User whose ACLs or quotas cannot be applied is
// not Ready, with the reason; a Kafka failure is retried with backoff.
func TestUserKafkaRefusals(t *testing.T) {
	withACLs := v1alpha1.UserSpec{Authorization: &v1alpha1.UserAuthorization{Type: "simple", ACLs: []v1alpha1.ACLRule{
		{Resource: v1alpha1.ACLRuleResource{Type: "topic", Name: "t"}, Operations: []string{"Read"}}}}}
	for _, tc := range []struct {
		name    string
		spec    v1alpha1.UserSpec
		kafka   kafkaadmin.Requester
		reason  string
		backoff bool
	}{
		{name: "no Kafka configured", spec: withACLs, reason: ReasonKafkaNotConfigured},
		{name: "quotas without Kafka", spec: v1alpha1.UserSpec{Quotas: &v1alpha1.UserQuotas{ProducerByteRate: i64(1)}}, reason: ReasonKafkaNotConfigured},
		{name: "Kafka unreachable", spec: withACLs, kafka: failing{}, reason: ReasonKafkaError, backoff: true},
		{name: "unknown operation", spec: v1alpha1.UserSpec{Authorization: &v1alpha1.UserAuthorization{Type: "simple", ACLs: []v1alpha1.ACLRule{
			{Resource: v1alpha1.ACLRuleResource{Type: "topic", Name: "t"}, Operations: []string{"Fly"}}}}}, kafka: failing{}, reason: ReasonInvalidSpec},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newUserFixture(t, newUser("u", tc.spec))
			f.r.Kafka = tc.kafka
			res, err := f.r.Reconcile(f.ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "u"}})
			if tc.backoff != (err != nil) || !tc.backoff && res.RequeueAfter != time.Second {
				t.Fatalf("reconcile: %+v, %v", res, err)
			}
			var got v1alpha1.User
			if err := f.c.Get(f.ctx, types.NamespacedName{Namespace: "ns", Name: "u"}, &got); err != nil {
				t.Fatal(err)
			}
			wantUserReady(t, &got, metav1.ConditionFalse, tc.reason)
		})
	}
}

// TestDesiredBindings: the spec's rules become bindings (defaults filled
// in, duplicates dropped), and rules Kafka has no binding for are refused.
func TestDesiredBindings(t *testing.T) {
	user := func(rules ...v1alpha1.ACLRule) *v1alpha1.User {
		return newUser("x", v1alpha1.UserSpec{UserName: "svc", Authorization: &v1alpha1.UserAuthorization{Type: "simple", ACLs: rules}})
	}
	rule := func(rt, name, pt string, ops ...string) v1alpha1.ACLRule {
		return v1alpha1.ACLRule{Resource: v1alpha1.ACLRuleResource{Type: rt, Name: name, PatternType: pt}, Operations: ops}
	}
	got, err := DesiredBindings(user(rule("topic", "t", "", "Read", "read"), rule("topic", "t", "literal", "Read")))
	if err != nil || !reflect.DeepEqual(got, []kafkaadmin.Binding{binding("User:svc", "*", topicRT, "t", literal, kmsg.ACLOperationRead, allowed)}) {
		t.Fatalf("bindings %v, %v", got, err)
	}
	for _, tc := range []struct {
		name string
		u    *v1alpha1.User
		want string
	}{
		{"type", newUser("x", v1alpha1.UserSpec{Authorization: &v1alpha1.UserAuthorization{Type: "opa"}}), "only simple"},
		{"resource type", user(rule("user", "u", "", "Read")), "resource type"},
		{"no name", user(rule("group", "", "", "Read")), "needs a name"},
		{"prefixed cluster", user(rule("cluster", "", "prefix", "Alter")), "cluster resource is literal"},
		{"pattern", user(rule("topic", "t", "match", "Read")), "literal or prefix"},
		{"operation", user(rule("topic", "t", "", "Any")), "operation"},
		{"no operations", user(rule("topic", "t", "")), "no operations"},
		{"rule type", user(v1alpha1.ACLRule{Resource: v1alpha1.ACLRuleResource{Type: "topic", Name: "t"}, Operations: []string{"Read"}, Type: "maybe"}), "allow or deny"},
	} {
		if _, err := DesiredBindings(tc.u); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one with %q", tc.name, err, tc.want)
		}
	}
}

package v1alpha1

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestDeepCopySharesNothing: a copy is equal, and changing it leaves the
// original alone (the hand-written DeepCopy misses no reference field).
func TestDeepCopySharesNothing(t *testing.T) {
	orig := &Topic{
		ObjectMeta: metav1.ObjectMeta{Name: "orders", Annotations: map[string]string{AnnotationAdopt: "true"}, Finalizers: []string{Finalizer}},
		Spec:       TopicSpec{Partitions: 3, Config: map[string]string{"retention.ms": "1000"}},
		Status: TopicStatus{TopicID: "id1",
			Conditions: []metav1.Condition{{Type: ConditionReady, Status: metav1.ConditionTrue, Reason: "Serving"}},
			Partitions: []PartitionStatus{{Partition: 0, State: "serving"}}},
	}
	list := &TopicList{Items: []Topic{*orig}}
	cp := list.DeepCopyObject().(*TopicList)
	if !reflect.DeepEqual(cp, list) {
		t.Fatalf("copy differs: %+v", cp)
	}
	c := &cp.Items[0]
	c.Annotations[AnnotationAdopt] = "false"
	c.Finalizers[0] = "x"
	c.Spec.Config["retention.ms"] = "5"
	c.Status.Conditions[0].Reason = "Opening"
	c.Status.Partitions[0].State = "pending"
	if !reflect.DeepEqual(list.Items[0], *orig) {
		t.Fatalf("changing the copy changed the original: %+v", list.Items[0])
	}
}

// TestUserDeepCopySharesNothing: the same for User.
func TestUserDeepCopySharesNothing(t *testing.T) {
	orig := &User{
		ObjectMeta: metav1.ObjectMeta{Name: "alice", Finalizers: []string{UserFinalizer}},
		Spec: UserSpec{Mechanism: "SCRAM-SHA-256", PasswordSecretRef: &SecretKeyRef{Name: "s", Key: "k"},
			Authorization: &UserAuthorization{Type: AuthorizationSimple, ACLs: []ACLRule{
				{Resource: ACLRuleResource{Type: ACLResourceTopic, Name: "orders"}, Operations: []string{"Read", "Describe"}}}},
			Quotas: &UserQuotas{ProducerByteRate: ptr(int64(1024)), ConsumerByteRate: ptr(int64(2048)), RequestPercentage: ptr(int64(50))}},
		Status: UserStatus{SecretName: "s", ACLPrincipal: "User:alice", ACLs: 2, QuotaUser: "alice",
			Conditions: []metav1.Condition{{Type: ConditionReady, Status: metav1.ConditionTrue, Reason: "CredentialWritten"}}},
	}
	list := &UserList{Items: []User{*orig}}
	cp := list.DeepCopyObject().(*UserList)
	if !reflect.DeepEqual(cp, list) {
		t.Fatalf("copy differs: %+v", cp)
	}
	c := &cp.Items[0]
	c.Finalizers[0] = "x"
	c.Spec.PasswordSecretRef.Key = "other"
	c.Spec.Authorization.ACLs[0].Operations[0] = "Write"
	c.Spec.Authorization.ACLs[0].Resource.Name = "other"
	*c.Spec.Quotas.ProducerByteRate = 1
	*c.Spec.Quotas.ConsumerByteRate = 1
	*c.Spec.Quotas.RequestPercentage = 1
	c.Status.Conditions[0].Reason = "SecretNotFound"
	if !reflect.DeepEqual(list.Items[0], *orig) {
		t.Fatalf("changing the copy changed the original: %+v", list.Items[0])
	}
}

func ptr[T any](v T) *T { return &v }

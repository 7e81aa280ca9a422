package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/cmd/internal/kafkaadmin"
	"github.com/kaas-dev/kaas/cmd/kaas-operator/api/v1alpha1"
)

// Reasons of a User's Ready condition for its ACLs and quotas.
const (
	ReasonKafkaNotConfigured = "KafkaNotConfigured"
	ReasonKafkaError         = "KafkaError"
)

const clusterResourceName = "kafka-cluster"

// Principal is the Kafka principal of a User: User:<userName>.
func Principal(u *v1alpha1.User) string { return "User:" + UserName(u) }

var aclResourceTypes = map[string]kmsg.ACLResourceType{
	v1alpha1.ACLResourceTopic:           kmsg.ACLResourceTypeTopic,
	v1alpha1.ACLResourceGroup:           kmsg.ACLResourceTypeGroup,
	v1alpha1.ACLResourceTransactionalID: kmsg.ACLResourceTypeTransactionalId,
	v1alpha1.ACLResourceCluster:         kmsg.ACLResourceTypeCluster,
}

// DesiredBindings are the ACL bindings u's spec.authorization asks for,
// one per rule and operation, without duplicates.
func DesiredBindings(u *v1alpha1.User) ([]kafkaadmin.Binding, error) {
	a := u.Spec.Authorization
	if a == nil {
		return nil, nil
	}
	if a.Type != v1alpha1.AuthorizationSimple {
		return nil, fmt.Errorf("authorization type %q: only simple", a.Type)
	}
	principal := Principal(u)
	seen := map[kafkaadmin.Binding]bool{}
	var out []kafkaadmin.Binding
	for i, r := range a.ACLs {
		rt, ok := aclResourceTypes[r.Resource.Type]
		if !ok {
			return nil, fmt.Errorf("acls[%d]: resource type %q: topic, group, transactionalId or cluster", i, r.Resource.Type)
		}
		name := r.Resource.Name
		switch {
		case rt == kmsg.ACLResourceTypeCluster:
			name = clusterResourceName
		case name == "":
			return nil, fmt.Errorf("acls[%d]: a %s resource needs a name", i, r.Resource.Type)
		}
		pt := kmsg.ACLResourcePatternTypeLiteral
		switch r.Resource.PatternType {
		case "", v1alpha1.ACLPatternLiteral:
		case v1alpha1.ACLPatternPrefix:
			if rt == kmsg.ACLResourceTypeCluster {
				return nil, fmt.Errorf("acls[%d]: the cluster resource is literal", i)
			}
			pt = kmsg.ACLResourcePatternTypePrefixed
		default:
			return nil, fmt.Errorf("acls[%d]: pattern type %q: literal or prefix", i, r.Resource.PatternType)
		}
		perm := kmsg.ACLPermissionTypeAllow
		switch r.Type {
		case "", v1alpha1.ACLRuleAllow:
		case v1alpha1.ACLRuleDeny:
			perm = kmsg.ACLPermissionTypeDeny
		default:
			return nil, fmt.Errorf("acls[%d]: type %q: allow or deny", i, r.Type)
		}
		host := r.Host
		if host == "" {
			host = "*"
		}
		if len(r.Operations) == 0 {
			return nil, fmt.Errorf("acls[%d]: no operations", i)
		}
		for _, o := range r.Operations {
			op, err := kmsg.ParseACLOperation(o)
			if err != nil || op == kmsg.ACLOperationAny || op == kmsg.ACLOperationUnknown ||
				op == kmsg.ACLOperationCreateTokens || op == kmsg.ACLOperationDescribeTokens {
				return nil, fmt.Errorf("acls[%d]: operation %q", i, o)
			}
			b := kafkaadmin.Binding{Principal: principal, Host: host, ResourceType: rt, ResourceName: name,
				PatternType: pt, Operation: op, Permission: perm}
			if !seen[b] {
				seen[b] = true
				out = append(out, b)
			}
		}
	}
	kafkaadmin.SortBindings(out)
	return out, nil
}

// DesiredQuotas are the quota keys u's spec.quotas asks for.
func DesiredQuotas(u *v1alpha1.User) map[string]float64 {
	q := u.Spec.Quotas
	out := map[string]float64{}
	if q == nil {
		return out
	}
	for key, v := range map[string]*int64{kafkaadmin.ProducerByteRate: q.ProducerByteRate,
		kafkaadmin.ConsumerByteRate: q.ConsumerByteRate, kafkaadmin.RequestPercentage: q.RequestPercentage} {
		if v != nil {
			out[key] = float64(*v)
		}
	}
	return out
}

var quotaKeys = []string{kafkaadmin.ProducerByteRate, kafkaadmin.ConsumerByteRate, kafkaadmin.RequestPercentage}

// principalFilter matches every binding of principal.
func principalFilter(principal string) kafkaadmin.Filter {
	f := kafkaadmin.AnyFilter()
	f.Principal = &principal
	return f
}

// syncACLs makes principal's bindings exactly want: it creates the
// missing ones and deletes the others. It returns how many it created and
// deleted.
func syncACLs(ctx context.Context, k kafkaadmin.Requester, principal string, want []kafkaadmin.Binding) (created, deleted int, err error) {
	have, err := kafkaadmin.DescribeACLs(ctx, k, principalFilter(principal))
	if err != nil {
		return 0, 0, err
	}
	wanted := map[kafkaadmin.Binding]bool{}
	for _, b := range want {
		wanted[b] = true
	}
	held := map[kafkaadmin.Binding]bool{}
	var extra []kafkaadmin.Filter
	for _, b := range have {
		held[b] = true
		if !wanted[b] {
			extra = append(extra, b.Exact())
		}
	}
	var missing []kafkaadmin.Binding
	for _, b := range want {
		if !held[b] {
			missing = append(missing, b)
		}
	}
	// Bindings both the old and the new spec hold are never touched, so
	// a change takes no right away that both grant.
	gone, derr := kafkaadmin.DeleteACLs(ctx, k, extra)
	cerr := kafkaadmin.CreateACLs(ctx, k, missing)
	if cerr == nil {
		created = len(missing)
	}
	return created, len(gone), errors.Join(derr, cerr)
}

// syncQuotas makes user's quotas exactly want.
func syncQuotas(ctx context.Context, k kafkaadmin.Requester, user string, want map[string]float64) (changed bool, err error) {
	e := kafkaadmin.Entity{{Type: kafkaadmin.EntityUser, Name: &user}}
	entries, err := kafkaadmin.DescribeQuotas(ctx, k, kafkaadmin.EntityComponents(e), true)
	if err != nil {
		return false, err
	}
	have := map[string]float64{}
	for _, en := range entries {
		if en.Entity.String() == e.String() {
			have = en.Values
		}
	}
	set := map[string]float64{}
	for key, v := range want {
		if hv, ok := have[key]; !ok || hv != v {
			set[key] = v
		}
	}
	var remove []string
	for _, key := range quotaKeys {
		if _, ok := have[key]; ok {
			if _, keep := want[key]; !keep {
				remove = append(remove, key)
			}
		}
	}
	if len(set) == 0 && len(remove) == 0 {
		return false, nil
	}
	return true, kafkaadmin.AlterQuotas(ctx, k, e, set, remove)
}

// ensureKafka makes the cluster hold u's ACLs and quotas (or none, for a
// spec that no longer asks for what status says the operator manages),
// and records in next what it manages.
func (r *UserReconciler) ensureKafka(ctx context.Context, u *v1alpha1.User, next *v1alpha1.UserStatus) (string, *notReady) {
	if u.Spec.Authorization == nil && u.Spec.Quotas == nil && next.ACLPrincipal == "" && next.QuotaUser == "" {
		return "", nil
	}
	want, err := DesiredBindings(u)
	if err != nil {
		return "", &notReady{reason: ReasonInvalidSpec, message: "spec.authorization: " + err.Error()}
	}
	if r.Kafka == nil {
		return "", &notReady{reason: ReasonKafkaNotConfigured,
			message: "spec.authorization and spec.quotas are applied through the Kafka APIs: start kaas-operator with --bootstrap (and a super user's SASL credentials)"}
	}
	var done []string
	if u.Spec.Authorization != nil || next.ACLPrincipal != "" {
		principal := Principal(u)
		if next.ACLPrincipal != "" {
			principal = next.ACLPrincipal
		}
		created, deleted, err := syncACLs(ctx, r.Kafka, principal, want)
		if err != nil {
			return "", kafkaError("ACLs of "+principal, err)
		}
		if created+deleted > 0 {
			r.event(u, corev1.EventTypeNormal, "ACLsApplied", "Update", fmt.Sprintf("%s: %d ACL bindings created, %d deleted", principal, created, deleted))
		}
		next.ACLPrincipal, next.ACLs = principal, int32(len(want))
		if u.Spec.Authorization == nil {
			next.ACLPrincipal, next.ACLs = "", 0
		} else {
			done = append(done, fmt.Sprintf("%d ACL bindings", len(want)))
		}
	}
	if u.Spec.Quotas != nil || next.QuotaUser != "" {
		user := UserName(u)
		if next.QuotaUser != "" {
			user = next.QuotaUser
		}
		quotas := DesiredQuotas(u)
		changed, err := syncQuotas(ctx, r.Kafka, user, quotas)
		if err != nil {
			return "", kafkaError("quotas of user "+user, err)
		}
		if changed {
			r.event(u, corev1.EventTypeNormal, "QuotasApplied", "Update", fmt.Sprintf("quotas of user %s set to %v", user, quotas))
		}
		next.QuotaUser = user
		if u.Spec.Quotas == nil {
			next.QuotaUser = ""
		} else {
			done = append(done, fmt.Sprintf("%d quotas", len(quotas)))
		}
	}
	return strings.Join(done, " and "), nil
}

func kafkaError(what string, err error) *notReady {
	return &notReady{reason: ReasonKafkaError, message: fmt.Sprintf("%s: %v", what, err), err: err}
}

// removeKafka deletes every ACL binding and quota of u the operator
// manages (or its spec asks for), for a User being deleted.
func (r *UserReconciler) removeKafka(ctx context.Context, u *v1alpha1.User) error {
	principal, user := u.Status.ACLPrincipal, u.Status.QuotaUser
	if principal == "" && u.Spec.Authorization != nil {
		principal = Principal(u)
	}
	if user == "" && u.Spec.Quotas != nil {
		user = UserName(u)
	}
	if principal == "" && user == "" {
		return nil
	}
	if r.Kafka == nil {
		// Not holding the User forever: with no Kafka admin configured the
		// operator could not have applied them either.
		r.event(u, corev1.EventTypeWarning, "KafkaNotConfigured", "Delete", fmt.Sprintf("the ACLs of %q and quotas of user %q are left on the cluster: kaas-operator has no --bootstrap", principal, user))
		return nil
	}
	if principal != "" {
		gone, err := kafkaadmin.DeleteACLs(ctx, r.Kafka, []kafkaadmin.Filter{principalFilter(principal)})
		if err != nil {
			return fmt.Errorf("delete the ACLs of %s: %w", principal, err)
		}
		if len(gone) > 0 {
			r.event(u, corev1.EventTypeNormal, "ACLsDeleted", "Delete", fmt.Sprintf("%d ACL bindings of %s deleted", len(gone), principal))
		}
	}
	if user != "" {
		if _, err := syncQuotas(ctx, r.Kafka, user, nil); err != nil {
			return fmt.Errorf("remove the quotas of user %s: %w", user, err)
		}
	}
	return nil
}

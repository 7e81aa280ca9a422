package wire

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Authorization of the group, transaction and inter-broker APIs, as
// Kafka's request handlers map them: the group APIs check the group
// (READ to take part, DESCRIBE to look, DELETE to remove) and then the
// topics they name; the transaction APIs check the transactional ID
// (WRITE to use it, DESCRIBE to look) before the group or topics they
// name. Authorization comes before routing, as in Kafka: a request a
// principal may not make is refused by whichever broker it reaches.

// groupACLOps are the operations a group has (Kafka's supported operations
// of the GROUP resource type), for KIP-430's authorized operations.
var groupACLOps = []kmsg.ACLOperation{kmsg.ACLOperationRead, kmsg.ACLOperationDescribe, kmsg.ACLOperationDelete}

// kip430Unasked is the authorized-operations field of an
// answer that was not asked for them (Kafka's Integer.MIN_VALUE).
const kip430Unasked int32 = -2147483648

// kip430Operations is the KIP-430 bit set (bit i for the operation of code
// i) of the operations in ops the principal may perform on the resource.
// With the authorizer off every operation is allowed, as Kafka answers
// without an authorizer.
func (c *conn) kip430Operations(rt kmsg.ACLResourceType, name string, ops []kmsg.ACLOperation) int32 {
	var bits int32
	for _, op := range ops {
		if c.allowed(op, rt, name) {
			bits |= 1 << uint(op)
		}
	}
	return bits
}

// fromBrokerPrincipal reports whether the connection's principal is one of the
// broker principals (the broker's own and the super users).
func (c *conn) fromBrokerPrincipal() bool {
	return c.s.brokerPrincipals[c.principalName()]
}

// interBrokerAllowed reports whether the connection may send an
// inter-broker-only request. With the authorizer on, as Kafka: a broker
// principal, or a principal with CLUSTER_ACTION on the cluster. With it
// off, only a broker principal once this broker authenticates clients,
// and anyone otherwise.
func (c *conn) interBrokerAllowed() bool {
	if c.authzOn() {
		return c.fromBrokerPrincipal() || c.allowedCluster(kmsg.ACLOperationClusterAction)
	}
	return len(c.s.brokerPrincipals) == 0 || c.fromBrokerPrincipal()
}

// splitAuthorizedTopics splits topics into those the principal may perform op on
// and the others; it allocates only when some topic is denied.
func splitAuthorizedTopics[T any](c *conn, op kmsg.ACLOperation, topics []T, name func(T) string) (allowed, denied []T) {
	all := true
	for _, t := range topics {
		if !c.allowedTopic(op, name(t)) {
			all = false
			break
		}
	}
	if all {
		return topics, nil
	}
	allowed = make([]T, 0, len(topics))
	for _, t := range topics {
		if c.allowedTopic(op, name(t)) {
			allowed = append(allowed, t)
		} else {
			denied = append(denied, t)
		}
	}
	return allowed, denied
}

// Codes and messages of the failures.
var (
	codeGroupAuthz   = kerr.GroupAuthorizationFailed.Code
	codeTopicAuthz   = kerr.TopicAuthorizationFailed.Code
	codeTxnAuthz     = kerr.TransactionalIDAuthorizationFailed.Code
	codeClusterAuthz = kerr.ClusterAuthorizationFailed.Code
)

// authzMessagePtr is a pointer to a copy of s, for optional message fields.
func authzMessagePtr(s string) *string { return &s }

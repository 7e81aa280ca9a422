package wire

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/engine/acl"
)

// Authorization: with the engine's authorizer on (--authorizer acl), every
// handler checks the resources a request names as Kafka maps API →
// resource → operation, and answers what it may not touch with Kafka's
// *_AUTHORIZATION_FAILED code and a message. A check takes no lock and
// allocates nothing (acl.Index); with the authorizer off every check
// passes.

// authzOn reports whether requests are checked at all.
func (c *conn) authzOn() bool { return c.s.eng.Authorizer() != nil }

// allowed reports whether the connection's principal, from its host, may
// perform op on the resource.
func (c *conn) allowed(op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	ix := c.s.eng.Authorizer()
	if ix == nil {
		return true
	}
	if ix.Authorize(c.aclPrincipal(), c.aclHost(), op, rt, name) {
		return true
	}
	c.s.log.V(1).Info("authorization denied", "principal", c.aclPrincipal(), "host", c.aclHost(),
		"operation", op.String(), "resourceType", rt.String(), "resource", name)
	return false
}

// allowedTopic, allowedGroup, allowedTxn and allowedCluster are allowed
// for one resource type.
func (c *conn) allowedTopic(op kmsg.ACLOperation, topic string) bool {
	return c.allowed(op, kmsg.ACLResourceTypeTopic, topic)
}

func (c *conn) allowedGroup(op kmsg.ACLOperation, group string) bool {
	return c.allowed(op, kmsg.ACLResourceTypeGroup, group)
}

func (c *conn) allowedTxn(op kmsg.ACLOperation, txnID string) bool {
	return c.allowed(op, kmsg.ACLResourceTypeTransactionalId, txnID)
}

func (c *conn) allowedCluster(op kmsg.ACLOperation) bool {
	return c.allowed(op, kmsg.ACLResourceTypeCluster, acl.ClusterName)
}

// allowedAnyOf reports whether the principal may perform op on at least
// one resource of type rt (KIP-679: an idempotent producer needs WRITE on
// some topic, or IDEMPOTENT_WRITE on the cluster).
func (c *conn) allowedAnyOf(op kmsg.ACLOperation, rt kmsg.ACLResourceType) bool {
	ix := c.s.eng.Authorizer()
	return ix == nil || ix.AuthorizeAny(c.aclPrincipal(), c.aclHost(), op, rt)
}

// aclPrincipal and aclHost are the principal and host ACLs check; the
// read loop sets them before a handler runs (notePrincipal), so handlers,
// also those running on their own goroutines, only read them.
func (c *conn) aclPrincipal() string { return c.aclName }
func (c *conn) aclHost() string      { return c.aclIP }

// notePrincipal keeps the connection's principal once it has one (a SASL
// principal never changes on re-authentication) and its host.
func (c *conn) notePrincipal() {
	if c.aclName != "" {
		return
	}
	if c.aclIP == "" {
		c.aclIP = c.ip.String()
	}
	p := c.principalName()
	if p == anonymous && c.sasl != nil {
		c.aclName = ""
		return
	}
	c.aclName = p
}

// Messages of the authorization failures, as Kafka words them.
func topicDenied(op kmsg.ACLOperation, topic string) string {
	return fmt.Sprintf("not authorized to %s topic %s", op, topic)
}

func groupDenied(op kmsg.ACLOperation, group string) string {
	return fmt.Sprintf("not authorized to %s group %s", op, group)
}

func txnDenied(op kmsg.ACLOperation, txnID string) string {
	return fmt.Sprintf("not authorized to %s transactional ID %s", op, txnID)
}

func clusterDenied(op kmsg.ACLOperation) string {
	return fmt.Sprintf("not authorized to %s the cluster", op)
}

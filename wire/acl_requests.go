package wire

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/engine"
	"github.com/kaas-dev/kaas/engine/acl"
)

// The ACL APIs (DescribeAcls, CreateAcls, DeleteAcls) share the gate
// Kafka's AclApis puts before them and the translation of their
// wire fields into the engine's bindings and filters.

// aclGate answers why the connection may not use an ACL API at all: no
// authorizer (SECURITY_DISABLED), or no right op on the cluster
// (CLUSTER_AUTHORIZATION_FAILED). It is nil when the request may go on.
func (c *conn) aclGate(op kmsg.ACLOperation) error {
	if !c.authzOn() {
		return &codedError{code: kerr.SecurityDisabled.Code, err: engine.ErrACLsDisabled}
	}
	if !c.allowedCluster(op) {
		return &codedError{code: kerr.ClusterAuthorizationFailed.Code, err: errors.New(clusterDenied(op))}
	}
	return nil
}

// aclError is the code an invalid binding or filter is refused with:
// INVALID_REQUEST, as Kafka's controller answers it.
func aclError(err error) error {
	if errors.Is(err, acl.ErrInvalid) || errors.Is(err, acl.ErrUnsupported) {
		return &codedError{code: kerr.InvalidRequest.Code, err: err}
	}
	return err
}

// validateCreation checks one binding as Kafka's broker and controller
// do before storing it; a CLUSTER binding must name kafka-cluster.
func validateCreation(b acl.Binding) error {
	if err := b.Validate(); err != nil {
		return aclError(err)
	}
	if b.ResourceType == kmsg.ACLResourceTypeCluster && b.ResourceName != acl.ClusterName {
		return &codedError{code: kerr.InvalidRequest.Code,
			err: fmt.Errorf("the only valid name for the CLUSTER resource is %s", acl.ClusterName)}
	}
	return nil
}

// validateFilter checks a DescribeAcls or DeleteAcls filter.
func validateFilter(f acl.Filter) error {
	if err := f.Validate(); err != nil {
		return aclError(err)
	}
	return nil
}

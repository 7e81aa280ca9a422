// Package acl is Kafka's authorization model: an ACL binding (a resource
// pattern and an access entry), the filters DescribeAcls and DeleteAcls
// select bindings with, and an immutable Index that answers whether a
// principal, from a host, may perform an operation on a resource, as
// Kafka's StandardAuthorizer does: super users may do anything, a matching
// DENY wins over any ALLOW, some operations imply others, and a resource no
// ACL names is open only with allow.everyone.if.no.acl.found.
//
// The enumerations are the wire's (kmsg), so a binding goes from a request
// to the index and back without a translation table.
package acl

import (
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka's names for the wildcards and the one cluster resource.
const (
	// WildcardResource, as a LITERAL pattern's name, matches every
	// resource of its type.
	WildcardResource = "*"
	// WildcardPrincipal matches every user.
	WildcardPrincipal = "User:*"
	// WildcardHost matches every client host.
	WildcardHost = "*"
	// ClusterName is the name of the CLUSTER resource.
	ClusterName = "kafka-cluster"
)

// Binding is one ACL: who (Principal, from Host) may or may not
// (Permission) do what (Operation) to which resources (the pattern:
// ResourceType, ResourceName, PatternType).
type Binding struct {
	ResourceType kmsg.ACLResourceType
	ResourceName string
	PatternType  kmsg.ACLResourcePatternType // LITERAL or PREFIXED
	Principal    string                      // "User:alice", or WildcardPrincipal
	Host         string                      // an IP address, or WildcardHost
	Operation    kmsg.ACLOperation
	Permission   kmsg.ACLPermissionType // ALLOW or DENY
}

func (b Binding) String() string {
	return fmt.Sprintf("(%s %s %s: %s %s %s from %s)", b.PatternType, b.ResourceType, b.ResourceName,
		b.Permission, b.Principal, b.Operation, b.Host)
}

// ErrInvalid refuses a binding or filter Kafka would refuse with
// INVALID_REQUEST; ErrUnsupported one that names a resource type kaas has
// nothing to authorize (DELEGATION_TOKEN, USER).
var (
	ErrInvalid     = errors.New("invalid ACL")
	ErrUnsupported = errors.New("unsupported ACL resource type")
)

// Validate checks b as Kafka's controller does before storing it: the
// types are specific (no ANY, MATCH or UNKNOWN), the name is not empty,
// and the principal reads Type:name. An ACL that can never match (a
// CLUSTER resource not named kafka-cluster) is stored, as in Kafka.
func (b Binding) Validate() error {
	switch b.ResourceType {
	case kmsg.ACLResourceTypeTopic, kmsg.ACLResourceTypeGroup, kmsg.ACLResourceTypeCluster, kmsg.ACLResourceTypeTransactionalId:
	case kmsg.ACLResourceTypeDelegationToken, kmsg.ACLResourceTypeUser:
		return fmt.Errorf("%w: %s ACLs are not supported by kaas", ErrUnsupported, b.ResourceType)
	default:
		return fmt.Errorf("%w: resource type %s", ErrInvalid, b.ResourceType)
	}
	switch b.PatternType {
	case kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLResourcePatternTypePrefixed:
	default:
		return fmt.Errorf("%w: pattern type %s (an ACL is LITERAL or PREFIXED)", ErrInvalid, b.PatternType)
	}
	if b.ResourceName == "" {
		return fmt.Errorf("%w: empty resource name", ErrInvalid)
	}
	if err := validPrincipal(b.Principal); err != nil {
		return err
	}
	if b.Host == "" {
		return fmt.Errorf("%w: empty host (%q is every host)", ErrInvalid, WildcardHost)
	}
	switch b.Operation {
	case kmsg.ACLOperationUnknown, kmsg.ACLOperationAny:
		return fmt.Errorf("%w: operation %s (an ACL names one operation, or ALL)", ErrInvalid, b.Operation)
	}
	if b.Operation < kmsg.ACLOperationAll || b.Operation > kmsg.ACLOperationDescribeTokens {
		return fmt.Errorf("%w: operation %d", ErrInvalid, b.Operation)
	}
	switch b.Permission {
	case kmsg.ACLPermissionTypeAllow, kmsg.ACLPermissionTypeDeny:
		return nil
	}
	return fmt.Errorf("%w: permission %s (an ACL is ALLOW or DENY)", ErrInvalid, b.Permission)
}

// validPrincipal accepts Kafka's "Type:name" form.
func validPrincipal(p string) error {
	typ, name, ok := strings.Cut(p, ":")
	if !ok || typ == "" || name == "" {
		return fmt.Errorf("%w: principal %q (want Type:name, as User:alice or %s)", ErrInvalid, p, WildcardPrincipal)
	}
	return nil
}

// implies reports whether an ALLOW of granted allows op: ALL allows
// everything, DESCRIBE is allowed by READ, WRITE, DELETE and ALTER, and
// DESCRIBE_CONFIGS by ALTER_CONFIGS. A DENY is never widened this way.
func implies(granted, op kmsg.ACLOperation) bool {
	if granted == op || granted == kmsg.ACLOperationAll {
		return true
	}
	switch op {
	case kmsg.ACLOperationDescribe:
		switch granted {
		case kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationDelete, kmsg.ACLOperationAlter:
			return true
		}
	case kmsg.ACLOperationDescribeConfigs:
		return granted == kmsg.ACLOperationAlterConfigs
	}
	return false
}

package acl

import (
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Filter selects bindings, as DescribeAcls and DeleteAcls name them: ANY
// (or a nil string) matches every value of a field; a pattern type of
// MATCH selects the bindings that would apply to the named resource (the
// literal name, the literal wildcard, and every prefix of the name).
type Filter struct {
	ResourceType kmsg.ACLResourceType
	ResourceName *string
	PatternType  kmsg.ACLResourcePatternType
	Principal    *string
	Host         *string
	Operation    kmsg.ACLOperation
	Permission   kmsg.ACLPermissionType
}

// Validate refuses a filter with an UNKNOWN field, which Kafka answers
// INVALID_REQUEST.
func (f Filter) Validate() error {
	switch {
	case f.ResourceType == kmsg.ACLResourceTypeUnknown || f.ResourceType > kmsg.ACLResourceTypeUser:
		return fmt.Errorf("%w: filter resource type %s", ErrInvalid, f.ResourceType)
	case f.PatternType == kmsg.ACLResourcePatternTypeUnknown || f.PatternType > kmsg.ACLResourcePatternTypePrefixed:
		return fmt.Errorf("%w: filter pattern type %s", ErrInvalid, f.PatternType)
	case f.Operation == kmsg.ACLOperationUnknown || f.Operation > kmsg.ACLOperationDescribeTokens:
		return fmt.Errorf("%w: filter operation %s", ErrInvalid, f.Operation)
	case f.Permission == kmsg.ACLPermissionTypeUnknown || f.Permission > kmsg.ACLPermissionTypeAllow:
		return fmt.Errorf("%w: filter permission %s", ErrInvalid, f.Permission)
	}
	return nil
}

// Matches reports whether f selects b.
func (f Filter) Matches(b Binding) bool {
	return f.matchesPattern(b) && f.matchesEntry(b)
}

func (f Filter) matchesPattern(b Binding) bool {
	if f.ResourceType != kmsg.ACLResourceTypeAny && f.ResourceType != b.ResourceType {
		return false
	}
	switch f.PatternType {
	case kmsg.ACLResourcePatternTypeAny, kmsg.ACLResourcePatternTypeMatch, b.PatternType:
	default:
		return false
	}
	if f.ResourceName == nil {
		return true
	}
	name := *f.ResourceName
	if f.PatternType != kmsg.ACLResourcePatternTypeMatch {
		return name == b.ResourceName
	}
	switch b.PatternType {
	case kmsg.ACLResourcePatternTypeLiteral:
		return name == b.ResourceName || b.ResourceName == WildcardResource
	case kmsg.ACLResourcePatternTypePrefixed:
		return strings.HasPrefix(name, b.ResourceName)
	}
	return false
}

// matchesEntry compares the entry fields exactly: a filter for
// WildcardPrincipal selects the wildcard bindings, not every binding.
func (f Filter) matchesEntry(b Binding) bool {
	if f.Principal != nil && *f.Principal != b.Principal {
		return false
	}
	if f.Host != nil && *f.Host != b.Host {
		return false
	}
	if f.Operation != kmsg.ACLOperationAny && f.Operation != b.Operation {
		return false
	}
	return f.Permission == kmsg.ACLPermissionTypeAny || f.Permission == b.Permission
}

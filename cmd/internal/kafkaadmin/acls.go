// Package kafkaadmin manages ACL bindings and client quotas through the
// Kafka APIs (DescribeAcls/CreateAcls/DeleteAcls, DescribeClientQuotas/
// AlterClientQuotas), so its callers (kaasctl, kaas-operator) work against
// any Kafka broker, not only kaas.
package kafkaadmin

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Requester sends one request to the cluster; *kgo.Client is one.
type Requester interface {
	Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
}

// Binding is one ACL: a principal allowed or denied one operation on a
// resource pattern from a host.
type Binding struct {
	Principal    string                      `json:"principal"`
	Host         string                      `json:"host"`
	ResourceType kmsg.ACLResourceType        `json:"resourceType"`
	ResourceName string                      `json:"resourceName"`
	PatternType  kmsg.ACLResourcePatternType `json:"patternType"`
	Operation    kmsg.ACLOperation           `json:"operation"`
	Permission   kmsg.ACLPermissionType      `json:"permission"`
}

func (b Binding) String() string {
	return fmt.Sprintf("%s %s %s from %s on %s %s:%s", b.Permission, b.Principal, b.Operation, b.Host,
		b.PatternType, b.ResourceType, b.ResourceName)
}

// Filter selects bindings as Kafka's DescribeAcls and DeleteAcls filters
// do: nil strings match any value, ANY matches any type, pattern MATCH
// matches the literal, wildcard and prefixed bindings that apply to a name.
type Filter struct {
	Principal, Host, ResourceName *string
	ResourceType                  kmsg.ACLResourceType
	PatternType                   kmsg.ACLResourcePatternType
	Operation                     kmsg.ACLOperation
	Permission                    kmsg.ACLPermissionType
}

// AnyFilter matches every binding.
func AnyFilter() Filter {
	return Filter{ResourceType: kmsg.ACLResourceTypeAny, PatternType: kmsg.ACLResourcePatternTypeAny,
		Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}
}

// Exact is the filter matching b alone.
func (b Binding) Exact() Filter {
	return Filter{Principal: &b.Principal, Host: &b.Host, ResourceName: &b.ResourceName, ResourceType: b.ResourceType,
		PatternType: b.PatternType, Operation: b.Operation, Permission: b.Permission}
}

// BrokerError is an error code a broker answered, with its message.
type BrokerError struct {
	Code    int16
	Message string
}

func (e *BrokerError) Error() string {
	name := fmt.Sprintf("error code %d", e.Code)
	if ke, ok := kerr.ErrorForCode(e.Code).(*kerr.Error); ok {
		name = ke.Message
		if e.Message == "" {
			return name + ": " + ke.Description
		}
	}
	if e.Message == "" {
		return name
	}
	return name + ": " + e.Message
}

// Unwrap lets errors.Is match kerr's sentinel errors.
func (e *BrokerError) Unwrap() error { return kerr.ErrorForCode(e.Code) }

func brokerError(code int16, msg *string) error {
	if code == 0 {
		return nil
	}
	e := &BrokerError{Code: code}
	if msg != nil {
		e.Message = *msg
	}
	return e
}

// DescribeACLs lists the bindings f matches, sorted.
func DescribeACLs(ctx context.Context, r Requester, f Filter) ([]Binding, error) {
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType, req.ResourceName, req.ResourcePatternType = f.ResourceType, f.ResourceName, f.PatternType
	req.Principal, req.Host, req.Operation, req.PermissionType = f.Principal, f.Host, f.Operation, f.Permission
	kresp, err := r.Request(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("DescribeAcls: %w", err)
	}
	resp := kresp.(*kmsg.DescribeACLsResponse)
	if err := brokerError(resp.ErrorCode, resp.ErrorMessage); err != nil {
		return nil, fmt.Errorf("DescribeAcls: %w", err)
	}
	var out []Binding
	for _, res := range resp.Resources {
		for _, a := range res.ACLs {
			out = append(out, Binding{Principal: a.Principal, Host: a.Host, ResourceType: res.ResourceType,
				ResourceName: res.ResourceName, PatternType: res.ResourcePatternType, Operation: a.Operation,
				Permission: a.PermissionType})
		}
	}
	SortBindings(out)
	return out, nil
}

// CreateACLs creates bs; it returns every binding's error, joined.
func CreateACLs(ctx context.Context, r Requester, bs []Binding) error {
	if len(bs) == 0 {
		return nil
	}
	req := kmsg.NewPtrCreateACLsRequest()
	for _, b := range bs {
		c := kmsg.NewCreateACLsRequestCreation()
		c.Principal, c.Host, c.ResourceType, c.ResourceName = b.Principal, b.Host, b.ResourceType, b.ResourceName
		c.ResourcePatternType, c.Operation, c.PermissionType = b.PatternType, b.Operation, b.Permission
		req.Creations = append(req.Creations, c)
	}
	kresp, err := r.Request(ctx, req)
	if err != nil {
		return fmt.Errorf("CreateAcls: %w", err)
	}
	resp := kresp.(*kmsg.CreateACLsResponse)
	if len(resp.Results) != len(bs) {
		return fmt.Errorf("CreateAcls: %d results for %d creations", len(resp.Results), len(bs))
	}
	var errs []error
	for i, res := range resp.Results {
		if err := brokerError(res.ErrorCode, res.ErrorMessage); err != nil {
			errs = append(errs, fmt.Errorf("create %s: %w", bs[i], err))
		}
	}
	return errors.Join(errs...)
}

// DeleteACLs deletes every binding the filters match and returns those it
// deleted, sorted; errors (of filters or of single matches) are joined.
func DeleteACLs(ctx context.Context, r Requester, fs []Filter) ([]Binding, error) {
	if len(fs) == 0 {
		return nil, nil
	}
	req := kmsg.NewPtrDeleteACLsRequest()
	for _, f := range fs {
		d := kmsg.NewDeleteACLsRequestFilter()
		d.ResourceType, d.ResourceName, d.ResourcePatternType = f.ResourceType, f.ResourceName, f.PatternType
		d.Principal, d.Host, d.Operation, d.PermissionType = f.Principal, f.Host, f.Operation, f.Permission
		req.Filters = append(req.Filters, d)
	}
	kresp, err := r.Request(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("DeleteAcls: %w", err)
	}
	resp := kresp.(*kmsg.DeleteACLsResponse)
	var out []Binding
	var errs []error
	for _, res := range resp.Results {
		if err := brokerError(res.ErrorCode, res.ErrorMessage); err != nil {
			errs = append(errs, fmt.Errorf("DeleteAcls: %w", err))
			continue
		}
		for _, m := range res.MatchingACLs {
			b := Binding{Principal: m.Principal, Host: m.Host, ResourceType: m.ResourceType, ResourceName: m.ResourceName,
				PatternType: m.ResourcePatternType, Operation: m.Operation, Permission: m.PermissionType}
			if err := brokerError(m.ErrorCode, m.ErrorMessage); err != nil {
				errs = append(errs, fmt.Errorf("delete %s: %w", b, err))
				continue
			}
			out = append(out, b)
		}
	}
	SortBindings(out)
	return out, errors.Join(errs...)
}

// SortBindings orders bindings by resource, then principal, host,
// operation and permission.
func SortBindings(bs []Binding) {
	sort.Slice(bs, func(i, j int) bool {
		a, b := bs[i], bs[j]
		switch {
		case a.ResourceType != b.ResourceType:
			return a.ResourceType < b.ResourceType
		case a.ResourceName != b.ResourceName:
			return a.ResourceName < b.ResourceName
		case a.PatternType != b.PatternType:
			return a.PatternType < b.PatternType
		case a.Principal != b.Principal:
			return a.Principal < b.Principal
		case a.Host != b.Host:
			return a.Host < b.Host
		case a.Operation != b.Operation:
			return a.Operation < b.Operation
		}
		return a.Permission < b.Permission
	})
}

package kafkaadmin

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Quota entity types and keys Kafka knows.
const (
	EntityUser     = "user"
	EntityClientID = "client-id"

	ProducerByteRate  = "producer_byte_rate"
	ConsumerByteRate  = "consumer_byte_rate"
	RequestPercentage = "request_percentage"
)

// EntityPart is one part of a quota entity: a user or a client ID, or
// (Name nil) the default one.
type EntityPart struct {
	Type string  `json:"type"`
	Name *string `json:"name"`
}

func (p EntityPart) String() string {
	if p.Name == nil {
		return p.Type + "=<default>"
	}
	return p.Type + "=" + *p.Name
}

// Entity is a quota entity: a user, a client ID, or both.
type Entity []EntityPart

func (e Entity) String() string {
	parts := make([]string, len(e))
	for i, p := range e {
		parts[i] = p.String()
	}
	return strings.Join(parts, ",")
}

// QuotaEntry is one entity's quotas.
type QuotaEntry struct {
	Entity Entity             `json:"entity"`
	Values map[string]float64 `json:"values"`
}

// DescribeQuotas asks for the quotas of the entities the components match
// (none: every entity); strict leaves out entities with parts the
// components do not name. Entries are sorted by entity.
func DescribeQuotas(ctx context.Context, r Requester, components []kmsg.DescribeClientQuotasRequestComponent, strict bool) ([]QuotaEntry, error) {
	req := kmsg.NewPtrDescribeClientQuotasRequest()
	req.Components, req.Strict = components, strict
	kresp, err := r.Request(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("DescribeClientQuotas: %w", err)
	}
	resp := kresp.(*kmsg.DescribeClientQuotasResponse)
	if err := brokerError(resp.ErrorCode, resp.ErrorMessage); err != nil {
		return nil, fmt.Errorf("DescribeClientQuotas: %w", err)
	}
	out := make([]QuotaEntry, 0, len(resp.Entries))
	for _, e := range resp.Entries {
		q := QuotaEntry{Values: map[string]float64{}}
		for _, p := range e.Entity {
			q.Entity = append(q.Entity, EntityPart{Type: p.Type, Name: p.Name})
		}
		sort.Slice(q.Entity, func(i, j int) bool { return q.Entity[i].Type > q.Entity[j].Type }) // user first
		for _, v := range e.Values {
			q.Values[v.Key] = v.Value
		}
		out = append(out, q)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Entity.String() < out[j].Entity.String() })
	return out, nil
}

// EntityComponents are the strict DescribeClientQuotas components that
// match exactly e.
func EntityComponents(e Entity) []kmsg.DescribeClientQuotasRequestComponent {
	var cs []kmsg.DescribeClientQuotasRequestComponent
	for _, p := range e {
		c := kmsg.NewDescribeClientQuotasRequestComponent()
		c.EntityType = p.Type
		if p.Name == nil {
			c.MatchType = kmsg.QuotasMatchTypeDefault
		} else {
			c.MatchType, c.Match = kmsg.QuotasMatchTypeExact, p.Name
		}
		cs = append(cs, c)
	}
	return cs
}

// AlterQuotas sets the keys of set and removes the keys of remove for one
// entity.
func AlterQuotas(ctx context.Context, r Requester, e Entity, set map[string]float64, remove []string) error {
	entry := kmsg.NewAlterClientQuotasRequestEntry()
	for _, p := range e {
		ep := kmsg.NewAlterClientQuotasRequestEntryEntity()
		ep.Type, ep.Name = p.Type, p.Name
		entry.Entity = append(entry.Entity, ep)
	}
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		op := kmsg.NewAlterClientQuotasRequestEntryOp()
		op.Key, op.Value = k, set[k]
		entry.Ops = append(entry.Ops, op)
	}
	for _, k := range remove {
		op := kmsg.NewAlterClientQuotasRequestEntryOp()
		op.Key, op.Remove = k, true
		entry.Ops = append(entry.Ops, op)
	}
	if len(entry.Ops) == 0 {
		return nil
	}
	req := kmsg.NewPtrAlterClientQuotasRequest()
	req.Entries = []kmsg.AlterClientQuotasRequestEntry{entry}
	kresp, err := r.Request(ctx, req)
	if err != nil {
		return fmt.Errorf("AlterClientQuotas: %w", err)
	}
	resp := kresp.(*kmsg.AlterClientQuotasResponse)
	var errs []error
	for _, res := range resp.Entries {
		if err := brokerError(res.ErrorCode, res.ErrorMessage); err != nil {
			errs = append(errs, fmt.Errorf("AlterClientQuotas %s: %w", e, err))
		}
	}
	if len(resp.Entries) == 0 {
		errs = append(errs, fmt.Errorf("AlterClientQuotas %s: no answer for the entity", e))
	}
	return errors.Join(errs...)
}

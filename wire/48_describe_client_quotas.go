package wire

// DescribeClientQuotas: versions 0-1.
//
// Behavior:
// * Answers the client quotas this broker enforces (engine/quota), each
//   entity with every key set on it, as Kafka's ClientQuotaControlManager
//   does.
// * Each filter component names an entity type and a match: EXACT (the
//   entity's part has that name), DEFAULT (the part is the default
//   entity) or ANY (the entity has that part). An entity matches when it
//   has every part the components name and each matches; with Strict it
//   must also have no other part. No component and no Strict matches
//   every entity.
// * A component with an empty entity type, a type named twice, an EXACT
//   without a name, a DEFAULT or ANY with one, or ip together with user
//   or client-id is INVALID_REQUEST; an unknown entity type or match type
//   is UNSUPPORTED_VERSION; each with a message and no entries. kaas keeps
//   no IP quotas, so an ip component matches nothing.
// * Needs DESCRIBE_CONFIGS on the cluster (Kafka's), else
//   CLUSTER_AUTHORIZATION_FAILED with a message.

import (
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/engine/quota"
)

func handleDescribeClientQuotas(c *conn, kreq kmsg.Request, r *reply) {
	req := kreq.(*kmsg.DescribeClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	fail := func(code int16, msg string) {
		resp.ErrorCode, resp.ErrorMessage, resp.Entries = code, &msg, nil
		r.finish(resp)
	}
	if !c.allowedCluster(kmsg.ACLOperationDescribeConfigs) {
		fail(kerr.ClusterAuthorizationFailed.Code, clusterDenied(kmsg.ACLOperationDescribeConfigs))
		return
	}
	f, err := quotaFilterOf(req.Components, req.Strict)
	if err != nil {
		fail(errorCode(err), err.Error())
		return
	}
	for _, d := range c.s.eng.ClientQuotas().Entities() {
		if !f.matches(d.Entity) {
			continue
		}
		e := kmsg.NewDescribeClientQuotasResponseEntry()
		for _, comp := range d.Entity.Components() {
			ee := kmsg.NewDescribeClientQuotasResponseEntryEntity()
			ee.Type, ee.Name = comp.Type, comp.Name
			e.Entity = append(e.Entity, ee)
		}
		for _, k := range quota.Keys {
			if v, ok := d.Values[k]; ok {
				ev := kmsg.NewDescribeClientQuotasResponseEntryValue()
				ev.Key, ev.Value = string(k), v
				e.Values = append(e.Values, ev)
			}
		}
		resp.Entries = append(resp.Entries, e)
	}
	sort.Slice(resp.Entries, func(i, j int) bool {
		return entityKey(resp.Entries[i].Entity) < entityKey(resp.Entries[j].Entity)
	})
	r.finish(resp)
}

// entityKey orders the answered entities (Kafka's order is its map's;
// kaas answers a stable one).
func entityKey(es []kmsg.DescribeClientQuotasResponseEntryEntity) string {
	s := ""
	for _, e := range es {
		s += e.Type + "\x00"
		if e.Name != nil {
			s += "n" + *e.Name
		}
		s += "\x00"
	}
	return s
}

// quotaFilter is a DescribeClientQuotas filter, checked.
type quotaFilter struct {
	user, client quotaPartFilter
	ip           bool // an ip component: matches no entity kaas keeps
	strict       bool
}

type quotaPartFilter struct {
	on    bool
	match kmsg.QuotasMatchType
	name  string
}

func (p quotaPartFilter) matches(part quota.Part) bool {
	if !p.on {
		return true
	}
	if !part.Present {
		return false
	}
	switch p.match {
	case kmsg.QuotasMatchTypeExact:
		return !part.Default && part.Name == p.name
	case kmsg.QuotasMatchTypeDefault:
		return part.Default
	}
	return true // ANY
}

func (f quotaFilter) matches(e quota.Entity) bool {
	if f.ip {
		return false
	}
	if f.strict && (e.User.Present != f.user.on || e.ClientID.Present != f.client.on) {
		return false
	}
	return f.user.matches(e.User) && f.client.matches(e.ClientID)
}

func invalidQuotaRequest(format string, args ...any) error {
	return &codedError{code: kerr.InvalidRequest.Code, err: fmt.Errorf(format, args...)}
}

func quotaFilterOf(comps []kmsg.DescribeClientQuotasRequestComponent, strict bool) (quotaFilter, error) {
	f := quotaFilter{strict: strict}
	seen := map[string]bool{}
	for _, c := range comps {
		if c.EntityType == "" {
			return f, invalidQuotaRequest("invalid empty entity type")
		}
		if seen[c.EntityType] {
			return f, invalidQuotaRequest("entity type %s cannot appear more than once in the filter", c.EntityType)
		}
		seen[c.EntityType] = true
		var dst *quotaPartFilter
		switch c.EntityType {
		case quota.TypeUser:
			dst = &f.user
		case quota.TypeClientID:
			dst = &f.client
		case quota.TypeIP:
			f.ip = true
		default:
			return f, &codedError{code: kerr.UnsupportedVersion.Code, err: fmt.Errorf("unsupported entity type %s", c.EntityType)}
		}
		switch c.MatchType {
		case kmsg.QuotasMatchTypeExact:
			if c.Match == nil {
				return f, invalidQuotaRequest("request specified MATCH_TYPE_EXACT, but set match string to null")
			}
		case kmsg.QuotasMatchTypeDefault, kmsg.QuotasMatchTypeAny:
			if c.Match != nil {
				return f, invalidQuotaRequest("request specified %s, but also specified a match string", matchTypeName(c.MatchType))
			}
		default:
			return f, &codedError{code: kerr.UnsupportedVersion.Code, err: fmt.Errorf("unknown match type %d", c.MatchType)}
		}
		if dst != nil {
			*dst = quotaPartFilter{on: true, match: c.MatchType}
			if c.Match != nil {
				dst.name = *c.Match
			}
		}
	}
	if f.ip && (f.user.on || f.client.on) {
		return f, invalidQuotaRequest("invalid entity filter component combination: an ip filter component cannot be used with a user or client-id component")
	}
	return f, nil
}

func matchTypeName(m kmsg.QuotasMatchType) string {
	if m == kmsg.QuotasMatchTypeDefault {
		return "MATCH_TYPE_DEFAULT"
	}
	return "MATCH_TYPE_SPECIFIED"
}

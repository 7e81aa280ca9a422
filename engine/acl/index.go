package acl

import (
	"cmp"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Index answers authorization questions over one set of bindings. It is
// immutable: a change builds a new Index (New), which the broker swaps in
// whole, so a check takes no lock and allocates nothing.
type Index struct {
	super       map[string]bool
	allowIfNone bool
	byType      map[kmsg.ACLResourceType]*typeIndex
	bindings    []Binding // sorted, without duplicates
}

// typeIndex holds one resource type's bindings by pattern.
type typeIndex struct {
	literal  map[string][]entry // by name; WildcardResource among them
	prefixed map[string][]entry // by prefix
	// prefixLens are the distinct lengths of the prefixes, ascending: a
	// name is looked up once per length, not once per prefix.
	prefixLens []int
}

// entry is the access part of a binding.
type entry struct {
	principal  string
	host       string
	op         kmsg.ACLOperation
	permission kmsg.ACLPermissionType
}

// Config is what an Index decides with besides its bindings.
type Config struct {
	// SuperUsers may do anything (Kafka's super.users), as principals
	// ("User:admin").
	SuperUsers []string
	// AllowIfNoACL opens a resource that no binding names to everyone
	// (allow.everyone.if.no.acl.found).
	AllowIfNoACL bool
}

// New indexes bindings (duplicates are kept once).
func New(bindings []Binding, cfg Config) *Index {
	ix := &Index{
		super:       map[string]bool{},
		allowIfNone: cfg.AllowIfNoACL,
		byType:      map[kmsg.ACLResourceType]*typeIndex{},
		bindings:    sortBindings(bindings),
	}
	for _, p := range cfg.SuperUsers {
		ix.super[p] = true
	}
	for _, b := range ix.bindings {
		t := ix.byType[b.ResourceType]
		if t == nil {
			t = &typeIndex{literal: map[string][]entry{}, prefixed: map[string][]entry{}}
			ix.byType[b.ResourceType] = t
		}
		e := entry{principal: b.Principal, host: b.Host, op: b.Operation, permission: b.Permission}
		if b.PatternType == kmsg.ACLResourcePatternTypePrefixed {
			t.prefixed[b.ResourceName] = append(t.prefixed[b.ResourceName], e)
			if !slices.Contains(t.prefixLens, len(b.ResourceName)) {
				t.prefixLens = append(t.prefixLens, len(b.ResourceName))
			}
			continue
		}
		t.literal[b.ResourceName] = append(t.literal[b.ResourceName], e)
	}
	for _, t := range ix.byType {
		slices.Sort(t.prefixLens)
	}
	return ix
}

// Authorize reports whether principal, connected from host, may perform op
// on the resource of type rt named name:
//   - a super user may do anything;
//   - a DENY that names the principal (or every user), the host (or every
//     host) and op (or ALL) refuses, whatever allows;
//   - else an ALLOW that names them, or an operation that implies op
//     (READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies
//     DESCRIBE_CONFIGS), allows;
//   - else a resource no binding names at all is allowed only with
//     AllowIfNoACL.
//
// The bindings that apply to a resource are its literal name's, the
// literal wildcard's, and those of every prefix of its name.
func (ix *Index) Authorize(principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	if ix.super[principal] {
		return true
	}
	t := ix.byType[rt]
	if t == nil {
		return ix.allowIfNone
	}
	var c check
	c.scan(t.literal[name], principal, host, op)
	c.scan(t.literal[WildcardResource], principal, host, op)
	for _, n := range t.prefixLens {
		if n > len(name) {
			break
		}
		c.scan(t.prefixed[name[:n]], principal, host, op)
	}
	switch {
	case c.denied:
		return false
	case c.allowed:
		return true
	}
	return !c.found && ix.allowIfNone
}

// check accumulates what the bindings that apply to a resource say.
type check struct {
	found   bool // some binding names the resource
	allowed bool
	denied  bool
}

func (c *check) scan(es []entry, principal, host string, op kmsg.ACLOperation) {
	if len(es) > 0 {
		c.found = true
	}
	for i := range es {
		e := &es[i]
		if e.principal != principal && e.principal != WildcardPrincipal {
			continue
		}
		if e.host != host && e.host != WildcardHost {
			continue
		}
		if e.permission == kmsg.ACLPermissionTypeDeny {
			if e.op == op || e.op == kmsg.ACLOperationAll {
				c.denied = true
			}
			continue
		}
		if implies(e.op, op) {
			c.allowed = true
		}
	}
}

// Bindings returns the bindings f selects, in a stable order.
func (ix *Index) Bindings(f Filter) []Binding {
	var out []Binding
	for _, b := range ix.bindings {
		if f.Matches(b) {
			out = append(out, b)
		}
	}
	return out
}

// All returns every binding, in a stable order. The caller must not
// change it.
func (ix *Index) All() []Binding { return ix.bindings }

// Len is the number of bindings.
func (ix *Index) Len() int { return len(ix.bindings) }

// sortBindings returns bindings sorted by resource, then entry, with
// duplicates removed.
func sortBindings(bindings []Binding) []Binding {
	out := slices.Clone(bindings)
	slices.SortFunc(out, compareBindings)
	return slices.Compact(out)
}

func compareBindings(a, b Binding) int {
	return cmp.Or(
		cmp.Compare(a.ResourceType, b.ResourceType),
		cmp.Compare(a.PatternType, b.PatternType),
		cmp.Compare(a.ResourceName, b.ResourceName),
		cmp.Compare(a.Principal, b.Principal),
		cmp.Compare(a.Host, b.Host),
		cmp.Compare(a.Operation, b.Operation),
		cmp.Compare(a.Permission, b.Permission),
	)
}

// AuthorizeAny reports whether principal, from host, may perform op on at
// least one resource of type rt (Kafka's authorizeByResourceType; KIP-679
// lets an idempotent producer in with WRITE on any topic): some ALLOW
// applies whose pattern no DENY covers whole. A DENY covers a pattern when
// it is the literal wildcard, the same literal, or a prefix of the
// pattern's name.
func (ix *Index) AuthorizeAny(principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType) bool {
	if ix.super[principal] {
		return true
	}
	t := ix.byType[rt]
	if t == nil {
		return ix.allowIfNone
	}
	applies := func(e *entry) bool {
		return (e.principal == principal || e.principal == WildcardPrincipal) && (e.host == host || e.host == WildcardHost)
	}
	denies := func(es []entry) bool {
		for i := range es {
			if e := &es[i]; e.permission == kmsg.ACLPermissionTypeDeny && applies(e) && (e.op == op || e.op == kmsg.ACLOperationAll) {
				return true
			}
		}
		return false
	}
	covered := func(name string, literal bool) bool {
		if denies(t.literal[WildcardResource]) || (literal && denies(t.literal[name])) {
			return true
		}
		for _, n := range t.prefixLens {
			if n > len(name) {
				break
			}
			if denies(t.prefixed[name[:n]]) {
				return true
			}
		}
		return false
	}
	allows := func(es []entry) bool {
		for i := range es {
			if e := &es[i]; e.permission == kmsg.ACLPermissionTypeAllow && applies(e) && implies(e.op, op) {
				return true
			}
		}
		return false
	}
	for name, es := range t.literal {
		if allows(es) && !covered(name, true) {
			return true
		}
	}
	for prefix, es := range t.prefixed {
		if allows(es) && !covered(prefix, false) {
			return true
		}
	}
	return false
}

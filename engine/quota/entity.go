package quota

import (
	"fmt"
	"math"
)

// Kafka's entity types.
const (
	TypeUser     = "user"
	TypeClientID = "client-id"
	TypeIP       = "ip"
)

// Part is one component of an entity: absent, a name, or the default
// entity (Kafka's null name: every user, or every client-id, without a
// quota of its own).
type Part struct {
	Present bool
	Default bool
	Name    string
}

// Named is the part for one name.
func Named(name string) Part { return Part{Present: true, Name: name} }

// DefaultPart is the default entity's part.
func DefaultPart() Part { return Part{Present: true, Default: true} }

// Entity is what a quota is set on: a user, a client-id, or both.
type Entity struct {
	User     Part
	ClientID Part
}

// Component is an entity component as the requests carry it; a nil Name
// is the default entity.
type Component struct {
	Type string
	Name *string
}

// EntityOf checks the components of an AlterClientQuotas entry and
// returns its entity. Kafka's combinations: user, client-id, user and
// client-id (ip alone is Kafka's too, but kaas keeps no IP quotas).
func EntityOf(components []Component) (Entity, error) {
	if len(components) == 0 {
		return Entity{}, fmt.Errorf("invalid empty client quota entity")
	}
	var e Entity
	ip := false
	for _, c := range components {
		p := Part{Present: true, Default: c.Name == nil}
		if c.Name != nil {
			p.Name = *c.Name
		}
		var dst *Part
		switch c.Type {
		case TypeUser:
			dst = &e.User
		case TypeClientID:
			dst = &e.ClientID
		case TypeIP:
			if ip {
				return Entity{}, fmt.Errorf("entity type %s specified more than once", c.Type)
			}
			ip = true
			continue
		case "":
			return Entity{}, fmt.Errorf("invalid empty entity type")
		default:
			return Entity{}, fmt.Errorf("unknown client quota entity type %q (known: user, client-id, ip)", c.Type)
		}
		if dst.Present {
			return Entity{}, fmt.Errorf("entity type %s specified more than once", c.Type)
		}
		*dst = p
	}
	if ip {
		if e.User.Present || e.ClientID.Present {
			return Entity{}, fmt.Errorf("invalid quota entity combination: ip cannot be combined with user or client-id")
		}
		return Entity{}, fmt.Errorf("IP quotas (entity type ip, connection_creation_rate) are not supported by kaas")
	}
	return e, nil
}

// Components is e as the responses carry it: user first, then client-id.
func (e Entity) Components() []Component {
	out := make([]Component, 0, 2)
	add := func(t string, p Part) {
		if !p.Present {
			return
		}
		c := Component{Type: t}
		if !p.Default {
			name := p.Name
			c.Name = &name
		}
		out = append(out, c)
	}
	add(TypeUser, e.User)
	add(TypeClientID, e.ClientID)
	return out
}

// String is e as Kafka's admin tools print it: "user=alice, client-id=<default>".
func (e Entity) String() string {
	s := ""
	for _, c := range e.Components() {
		if s != "" {
			s += ", "
		}
		name := "<default>"
		if c.Name != nil {
			name = *c.Name
		}
		s += c.Type + "=" + name
	}
	return "{" + s + "}"
}

// ParseKey checks a quota key: kaas knows Kafka's keys for users and
// client-ids but enforces only the three it names.
func ParseKey(s string) (Key, error) {
	switch k := Key(s); k {
	case ProducerByteRate, ConsumerByteRate, RequestPercentage:
		return k, nil
	case "controller_mutation_rate":
		return "", fmt.Errorf("quota key %s is not supported by kaas (supported: producer_byte_rate, consumer_byte_rate, request_percentage)", s)
	case "connection_creation_rate":
		return "", fmt.Errorf("quota key %s is for IP entities, which kaas does not support", s)
	default:
		return "", fmt.Errorf("unknown quota key %q (supported: producer_byte_rate, consumer_byte_rate, request_percentage)", s)
	}
}

// ValidateValue checks a quota's value as Kafka does: the byte rates are
// whole positive numbers of bytes a second (Kafka's LONG), the request
// percentage a positive number.
func ValidateValue(k Key, v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("value %v for quota %s is not a finite number", v, k)
	}
	if v <= 0 {
		return fmt.Errorf("value %v for quota %s must be positive", v, k)
	}
	switch k {
	case ProducerByteRate, ConsumerByteRate:
		if v != math.Trunc(v) || v > math.MaxInt64 {
			return fmt.Errorf("value %v for quota %s must be a whole number of bytes a second", v, k)
		}
	}
	return nil
}

// keyIndex is k's slot in a table's values; -1 for an unknown key.
func keyIndex(k Key) int {
	switch k {
	case ProducerByteRate:
		return 0
	case ConsumerByteRate:
		return 1
	case RequestPercentage:
		return 2
	}
	return -1
}

// Keys are the keys kaas keeps, in slot order.
var Keys = [numKeys]Key{ProducerByteRate, ConsumerByteRate, RequestPercentage}

const numKeys = 3

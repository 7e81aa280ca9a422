package quota

import "strings"

// Table is the client quotas as one broker enforces them, immutable once
// built: a new load builds a new table and swaps it in whole.
type Table struct {
	byEntity map[Entity]*values
}

// values are one entity's quotas, by key slot, with the entity's sensor
// cached for the lookups that match it by name.
type values struct {
	slot   [numKeys]float64
	set    [numKeys]bool
	sensor string // only for entities without a default part
}

// Quota is one stored quota.
type Quota struct {
	Entity Entity
	Key    Key
	Value  float64
}

// NewTable builds the table of quotas; of two quotas for one entity and
// key the later wins. Quotas with a key kaas does not keep are left out.
func NewTable(quotas []Quota) *Table {
	t := &Table{byEntity: make(map[Entity]*values, len(quotas))}
	for _, q := range quotas {
		i := keyIndex(q.Key)
		if i < 0 {
			continue
		}
		v := t.byEntity[q.Entity]
		if v == nil {
			v = &values{}
			if !q.Entity.User.Default && !q.Entity.ClientID.Default {
				v.sensor = SensorName(q.Entity.User.Name, q.Entity.ClientID.Name)
			}
			t.byEntity[q.Entity] = v
		}
		v.slot[i], v.set[i] = q.Value, true
	}
	return t
}

// Len is the number of entities with at least one quota.
func (t *Table) Len() int {
	if t == nil {
		return 0
	}
	return len(t.byEntity)
}

// precedence is Kafka's order of the entities a client's quota is looked
// up on, most specific first (ClientQuotaManager): for each, whether the
// user part is absent, named or the default, and the same for the
// client-id part.
var precedence = [...]struct{ user, client partKind }{
	{named, named},
	{named, deflt},
	{named, absent},
	{deflt, named},
	{deflt, deflt},
	{deflt, absent},
	{absent, named},
	{absent, deflt},
}

type partKind uint8

const (
	absent partKind = iota
	named
	deflt
)

func (k partKind) part(name string) Part {
	switch k {
	case named:
		return Part{Present: true, Name: name}
	case deflt:
		return Part{Present: true, Default: true}
	}
	return Part{}
}

// Resolve is the quota k of a client: each key is looked up on its own,
// on the entities in Kafka's order, and the first that has k applies.
// The sensor is Kafka's metric tags for the match: the client's user
// and client-id where the matched entity has that part (named or
// default), empty where it has not. So every client an entity matches by
// name shares one rate, and a default applies to each user (or
// client-id) on its own, as in Kafka. Resolve allocates nothing when the
// table is empty or the match is by name.
func (t *Table) Resolve(k Key, user, clientID string) (limit float64, sensor string, ok bool) {
	if t == nil || len(t.byEntity) == 0 {
		return 0, "", false
	}
	i := keyIndex(k)
	if i < 0 {
		return 0, "", false
	}
	for _, p := range precedence {
		v := t.byEntity[Entity{User: p.user.part(user), ClientID: p.client.part(clientID)}]
		if v == nil || !v.set[i] {
			continue
		}
		if p.user != deflt && p.client != deflt {
			return v.slot[i], v.sensor, true
		}
		u, c := "", ""
		if p.user != absent {
			u = user
		}
		if p.client != absent {
			c = clientID
		}
		return v.slot[i], SensorName(u, c), true
	}
	return 0, "", false
}

// sensorSep separates the two tags of a sensor name: a byte no principal
// or client-id a client sends in practice holds.
const sensorSep = "\x00"

// SensorName is the sensor of the metric tags user and clientID (either
// may be empty).
func SensorName(user, clientID string) string { return user + sensorSep + clientID }

// SensorTags splits a sensor name into its user and client-id tags.
func SensorTags(sensor string) (user, clientID string) {
	user, clientID, _ = strings.Cut(sensor, sensorSep)
	return user, clientID
}

// Described is one entity's quotas, as DescribeClientQuotas answers them.
type Described struct {
	Entity Entity
	Values map[Key]float64
}

// Entities returns every entity with its quotas.
func (t *Table) Entities() []Described {
	if t == nil {
		return nil
	}
	out := make([]Described, 0, len(t.byEntity))
	for e, v := range t.byEntity {
		d := Described{Entity: e, Values: make(map[Key]float64, numKeys)}
		for i, set := range v.set {
			if set {
				d.Values[Keys[i]] = v.slot[i]
			}
		}
		out = append(out, d)
	}
	return out
}

package quota

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/kaas-dev/kaas/engine/versioned"
)

// Dir is where the client quotas live under the cluster directory: one
// file a quota, named by a hash of its entity and its key, plus the
// version token (docs/volume.md, "Client quotas"). Setting a quota writes
// its file whole and removing it removes the file, so no change reads,
// modifies and writes back what another broker may be changing.
const Dir = "quotas"

type storedComponent struct {
	Type string  `json:"type"`
	Name *string `json:"name"` // null: the default entity
}

// stored is a quota as its file holds it.
type stored struct {
	Entity []storedComponent `json:"entity"`
	Key    string            `json:"key"`
	Value  float64           `json:"value"`
}

// entityID is the entity's identity as the hash covers it: each part's
// type, whether it is the default, and its name.
func entityID(e Entity) string {
	var b strings.Builder
	for _, c := range e.Components() {
		b.WriteString(c.Type)
		if c.Name == nil {
			b.WriteString("\x00d")
		} else {
			b.WriteString("\x00n")
			b.WriteString(*c.Name)
		}
		b.WriteString("\x00")
	}
	return b.String()
}

// FileName is the entry name of the quota k on e: "<hash of e>.<k>.json".
func FileName(e Entity, k Key) string {
	sum := sha256.Sum256([]byte(entityID(e)))
	return hex.EncodeToString(sum[:16]) + "." + string(k) + ".json"
}

// Encode is the file content of a quota.
func Encode(q Quota) []byte {
	s := stored{Key: string(q.Key), Value: q.Value}
	for _, c := range q.Entity.Components() {
		s.Entity = append(s.Entity, storedComponent{Type: c.Type, Name: c.Name})
	}
	out, _ := json.Marshal(s)
	return out
}

// Decode reads the quota an entry holds, checks it as a request's would
// be, and checks that the entry is named for it.
func Decode(en versioned.Entry) (Quota, error) {
	var s stored
	if err := json.Unmarshal(en.Data, &s); err != nil {
		return Quota{}, fmt.Errorf("quota %s: %w", en.Name, err)
	}
	comps := make([]Component, 0, len(s.Entity))
	for _, c := range s.Entity {
		comps = append(comps, Component{Type: c.Type, Name: c.Name})
	}
	e, err := EntityOf(comps)
	if err != nil {
		return Quota{}, fmt.Errorf("quota %s: %w", en.Name, err)
	}
	k, err := ParseKey(s.Key)
	if err != nil {
		return Quota{}, fmt.Errorf("quota %s: %w", en.Name, err)
	}
	if err := ValidateValue(k, s.Value); err != nil {
		return Quota{}, fmt.Errorf("quota %s: %w", en.Name, err)
	}
	q := Quota{Entity: e, Key: k, Value: s.Value}
	if n := FileName(e, k); n != en.Name {
		return Quota{}, fmt.Errorf("quota %s holds %s %s, whose file is %s", en.Name, e, k, n)
	}
	return q, nil
}

// DecodeAll reads every entry that holds a valid quota; the others are
// returned as errors, one each, and left out.
func DecodeAll(entries []versioned.Entry) ([]Quota, []error) {
	out := make([]Quota, 0, len(entries))
	var bad []error
	for _, en := range entries {
		q, err := Decode(en)
		if err != nil {
			bad = append(bad, err)
			continue
		}
		out = append(out, q)
	}
	return out, bad
}

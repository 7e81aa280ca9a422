package acl

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/engine/versioned"
)

// Dir is where the ACLs live under the cluster directory: one file a
// binding, named by a hash of the binding, plus the version token
// (docs/volume.md, "ACLs and client quotas").
const Dir = "acls"

// stored is a binding as its file holds it, with Kafka's names for the
// enumerations so that a person can read it.
type stored struct {
	ResourceType string `json:"resourceType"`
	ResourceName string `json:"resourceName"`
	PatternType  string `json:"patternType"`
	Principal    string `json:"principal"`
	Host         string `json:"host"`
	Operation    string `json:"operation"`
	Permission   string `json:"permission"`
}

// FileName is the entry name of b: its identity is its content.
func FileName(b Binding) string {
	sum := sha256.Sum256([]byte(strings.Join([]string{b.ResourceType.String(), b.PatternType.String(),
		b.ResourceName, b.Principal, b.Host, b.Operation.String(), b.Permission.String()}, "\x00")))
	return hex.EncodeToString(sum[:16]) + ".json"
}

// Encode is b's file content.
func Encode(b Binding) []byte {
	out, _ := json.Marshal(stored{
		ResourceType: b.ResourceType.String(), ResourceName: b.ResourceName, PatternType: b.PatternType.String(),
		Principal: b.Principal, Host: b.Host, Operation: b.Operation.String(), Permission: b.Permission.String(),
	})
	return out
}

// Decode reads the binding an entry holds and checks that the entry is
// named for it.
func Decode(e versioned.Entry) (Binding, error) {
	var s stored
	if err := json.Unmarshal(e.Data, &s); err != nil {
		return Binding{}, fmt.Errorf("ACL %s: %w", e.Name, err)
	}
	var b Binding
	var errs [4]error
	b.ResourceType, errs[0] = kmsg.ParseACLResourceType(s.ResourceType)
	b.PatternType, errs[1] = kmsg.ParseACLResourcePatternType(s.PatternType)
	b.Operation, errs[2] = kmsg.ParseACLOperation(s.Operation)
	b.Permission, errs[3] = kmsg.ParseACLPermissionType(s.Permission)
	for _, err := range errs {
		if err != nil {
			return Binding{}, fmt.Errorf("ACL %s: %w", e.Name, err)
		}
	}
	b.ResourceName, b.Principal, b.Host = s.ResourceName, s.Principal, s.Host
	if err := b.Validate(); err != nil {
		return Binding{}, fmt.Errorf("ACL %s: %w", e.Name, err)
	}
	if FileName(b) != e.Name {
		return Binding{}, fmt.Errorf("ACL %s holds %s, whose file is %s", e.Name, b, FileName(b))
	}
	return b, nil
}

// DecodeAll reads every entry that holds a valid binding; the others are
// returned as errors, one each, and left out.
func DecodeAll(entries []versioned.Entry) ([]Binding, []error) {
	out := make([]Binding, 0, len(entries))
	var bad []error
	for _, e := range entries {
		b, err := Decode(e)
		if err != nil {
			bad = append(bad, err)
			continue
		}
		out = append(out, b)
	}
	return out, bad
}

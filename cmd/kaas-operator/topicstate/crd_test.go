package topicstate

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/kaas-dev/kaas/engine/desired"
)

const crdPath = "../../../deploy/kaas/crds/topics.kaas.io.yaml"

// schemaProps is the part of an OpenAPI schema the checks read.
type schemaProps struct {
	Properties  map[string]schemaProps `yaml:"properties"`
	Maximum     *int64                 `yaml:"maximum"`
	MaxItems    *int64                 `yaml:"maxItems"`
	Pattern     string                 `yaml:"pattern"`
	Validations []struct {
		Rule    string `yaml:"rule"`
		Message string `yaml:"message"`
	} `yaml:"x-kubernetes-validations"`
}

func loadCRDSchema(t *testing.T) schemaProps {
	t.Helper()
	b, err := os.ReadFile(crdPath)
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Name   string `yaml:"name"`
				Schema struct {
					OpenAPIV3Schema schemaProps `yaml:"openAPIV3Schema"`
				} `yaml:"schema"`
			} `yaml:"versions"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal(b, &crd); err != nil {
		t.Fatalf("parse %s: %v", crdPath, err)
	}
	if len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Name != "v1alpha1" {
		t.Fatalf("want the one version v1alpha1, have %+v", crd.Spec.Versions)
	}
	return crd.Spec.Versions[0].Schema.OpenAPIV3Schema
}

// TestCRDConfigKeysMatchEngine: the CRD's CEL rule admits exactly the topic
// configs the engine knows, and its message names them all.
func TestCRDConfigKeysMatchEngine(t *testing.T) {
	config := loadCRDSchema(t).Properties["spec"].Properties["config"]
	if len(config.Validations) != 1 {
		t.Fatalf("spec.config has %d validations, want 1", len(config.Validations))
	}
	v := config.Validations[0]
	list := regexp.MustCompile(`\[([^\]]*)\]`).FindStringSubmatch(v.Rule)
	if list == nil {
		t.Fatalf("no list literal in rule %q", v.Rule)
	}
	var keys []string
	for _, m := range regexp.MustCompile(`'([^']*)'`).FindAllStringSubmatch(list[1], -1) {
		keys = append(keys, m[1])
	}
	want := desired.TopicConfigNames()
	if !slices.Equal(keys, want) {
		t.Fatalf("CRD config keys\n  %v\ndesired.TopicConfigNames()\n  %v", keys, want)
	}
	_, named, ok := strings.Cut(v.Message, ": ")
	if !ok || named != strings.Join(want, ", ") {
		t.Fatalf("message %q does not end with the allowed keys %q", v.Message, strings.Join(want, ", "))
	}
}

// TestCRDLimitsMatch: the CRD's bounds are the engine's and this
// package's.
func TestCRDLimitsMatch(t *testing.T) {
	root := loadCRDSchema(t)
	spec, status := root.Properties["spec"], root.Properties["status"]
	if m := spec.Properties["partitions"].Maximum; m == nil || *m != desired.MaxPartitions {
		t.Errorf("spec.partitions maximum %v, want %d", m, desired.MaxPartitions)
	}
	if m := status.Properties["partitions"].MaxItems; m == nil || *m != MaxListedPartitions {
		t.Errorf("status.partitions maxItems %v, want %d", m, MaxListedPartitions)
	}
	re := regexp.MustCompile(spec.Properties["topicName"].Pattern)
	for name, ok := range map[string]bool{"orders": true, "a.b_c-D9": true, strings.Repeat("x", 249): true,
		"": false, "a/b": false, "ä": false, strings.Repeat("x", 250): false} {
		if re.MatchString(name) != ok || (desired.ValidTopicName(name) == nil) != ok {
			t.Errorf("topic name %q: pattern matches %v, engine accepts %v, want %v",
				name, re.MatchString(name), desired.ValidTopicName(name) == nil, ok)
		}
	}
}

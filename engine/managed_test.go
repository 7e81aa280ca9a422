package engine

import (
	"errors"
	"maps"
	"path"
	"strings"
	"testing"

	"github.com/kaas-dev/kaas/engine/desired"
	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/memfs"
)

const testManagedBy = "kubernetes/ns/orders/u1"

// managedVolume is a cluster directory holding specs.
func managedVolume(t *testing.T, specs ...desired.TopicSpec) *memfs.FS {
	t.Helper()
	fsys := memfs.New()
	if err := volume.MkdirAllSync(fsys, path.Join(testCluster, desired.SpecsDir)); err != nil {
		t.Fatal(err)
	}
	for _, s := range specs {
		if err := desired.WriteTopicSpec(fsys, testCluster, s); err != nil {
			t.Fatal(err)
		}
	}
	return fsys
}

func sameSpec(a, b desired.TopicSpec) bool {
	return a.Name == b.Name && a.ID == b.ID && a.Partitions == b.Partitions && a.Deleted == b.Deleted &&
		a.Generation == b.Generation && a.ManagedBy == b.ManagedBy && maps.Equal(a.Configs, b.Configs)
}

// TestManagedTopicRefusesKafkaAdmin: the Kafka admin APIs do not change or
// delete a topic declared outside Kafka; the declaration is where it
// changes.
func TestManagedTopicRefusesKafkaAdmin(t *testing.T) {
	fsys := managedVolume(t)
	e, err := New(Config{FS: fsys, DataDir: testData, ClusterDir: testCluster, BrokerID: 1})
	if err != nil {
		t.Fatal(err)
	}
	spec, err := desired.EnsureTopic(fsys, testCluster, desired.ManagedTopic{Name: "orders", Partitions: 2,
		Configs: map[string]string{"retention.ms": "1000"}, ManagedBy: testManagedBy})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"AlterTopicConfigs", func() error {
			_, err := e.AlterTopicConfigs("orders", map[string]string{"retention.ms": "5"}, false)
			return err
		}},
		{"AlterTopicConfigs validate only", func() error {
			_, err := e.AlterTopicConfigs("orders", map[string]string{"retention.ms": "5"}, true)
			return err
		}},
		{"IncrementalAlterTopicConfigs", func() error {
			_, err := e.IncrementalAlterTopicConfigs("orders", []ConfigOp{{Name: "retention.ms", Op: ConfigDelete}}, false)
			return err
		}},
		{"CreatePartitions", func() error {
			_, err := e.CreatePartitions("orders", 4, false)
			return err
		}},
		{"DeleteTopic", func() error {
			_, err := e.DeleteTopic("orders")
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if !errors.Is(err, desired.ErrTopicManaged) || !strings.Contains(err.Error(), testManagedBy) {
				t.Fatalf("err = %v, want ErrTopicManaged naming %s", err, testManagedBy)
			}
			if on, _ := desired.ReadTopicSpec(fsys, testCluster, "orders"); !sameSpec(on, spec) {
				t.Fatalf("spec changed: %+v -> %+v", spec, on)
			}
		})
	}
	// Creating it again through Kafka finds it, as for any existing topic.
	if _, err := e.CreateTopic(CreateTopicRequest{Name: "orders", Partitions: 1}); !errors.Is(err, ErrTopicExists) {
		t.Fatalf("CreateTopic: %v, want ErrTopicExists", err)
	}
}

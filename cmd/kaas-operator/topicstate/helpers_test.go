package topicstate

import (
	"path"
	"testing"

	"github.com/kaas-dev/kaas/engine/desired"
	"github.com/kaas-dev/kaas/states"
	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/memfs"
)

const clusterDir = "data/__cluster"

// newVolume is a cluster directory as a broker leaves it at start.
func newVolume(t *testing.T) *memfs.FS {
	t.Helper()
	fsys := memfs.New()
	if err := volume.MkdirAllSync(fsys, path.Join(clusterDir, "topics")); err != nil {
		t.Fatal(err)
	}
	return fsys
}

// decl is the resource ns/orders (uid u1) asking for 3 partitions.
func decl() Declaration {
	return Declaration{Namespace: "ns", Name: "orders", UID: "u1", TopicName: "orders", Partitions: 3}
}

func writeSpec(t *testing.T, fsys volume.FS, spec desired.TopicSpec) {
	t.Helper()
	if err := desired.WriteTopicSpec(fsys, clusterDir, spec); err != nil {
		t.Fatal(err)
	}
}

func readSpecT(t *testing.T, fsys volume.FS, name string) desired.TopicSpec {
	t.Helper()
	s, err := readSpec(fsys, clusterDir, name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// ours is a spec of the default declaration.
func ours(id string, partitions int32) desired.TopicSpec {
	return desired.TopicSpec{Name: "orders", ID: id, Partitions: partitions, Generation: 1, ManagedBy: decl().ManagedBy()}
}

// record writes a partition-open record.
func record(t *testing.T, fsys volume.FS, topic, id string, partition int32, state string) {
	t.Helper()
	rec := &states.Record{Kind: states.PartitionOpen.Kind, Object: states.PartitionObject(topic, partition),
		Desired: states.PartitionOpen.End, State: states.State(state), TopicID: id, Epoch: 2, Owner: "broker-1"}
	if err := states.Save(fsys, clusterDir, rec); err != nil {
		t.Fatal(err)
	}
}

// conds maps a result's conditions by type to "Status/Reason".
func conds(r Result) map[string]string {
	out := map[string]string{}
	for _, c := range r.Conditions {
		out[c.Type] = c.Status + "/" + c.Reason
		if c.Message == "" {
			out[c.Type] += " (no message)"
		}
	}
	return out
}

func eventReasons(r Result) []string {
	var out []string
	for _, e := range r.Events {
		out = append(out, e.Reason)
	}
	return out
}

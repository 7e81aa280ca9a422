package desired

import (
	"errors"
	"maps"
	"path"
	"strings"
	"testing"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/memfs"
)

const (
	testCluster   = "data/__cluster"
	testManagedBy = "kubernetes/ns/orders/u1"
)

// managedVolume is a cluster directory holding specs.
func managedVolume(t *testing.T, specs ...TopicSpec) *memfs.FS {
	t.Helper()
	fsys := memfs.New()
	if err := volume.MkdirAllSync(fsys, path.Join(testCluster, SpecsDir)); err != nil {
		t.Fatal(err)
	}
	for _, s := range specs {
		if err := WriteTopicSpec(fsys, testCluster, s); err != nil {
			t.Fatal(err)
		}
	}
	return fsys
}

func managedSpec(id string, partitions int32, configs map[string]string) TopicSpec {
	return TopicSpec{Name: "orders", ID: id, Partitions: partitions, Configs: configs, Generation: 1, ManagedBy: testManagedBy}
}

func TestManagedEnsureTopic(t *testing.T) {
	want := func(partitions int32, configs map[string]string) ManagedTopic {
		return ManagedTopic{Name: "orders", Partitions: partitions, Configs: configs, ManagedBy: testManagedBy}
	}
	for _, tc := range []struct {
		name     string
		existing []TopicSpec
		want     ManagedTopic
		wantErr  error
		msg      string
		// after is the spec on the volume afterwards; ID "new" is a fresh
		// one. Nil: no spec.
		after *TopicSpec
	}{
		{name: "absent: created with a new ID", want: want(3, map[string]string{"retention.ms": "1000"}),
			after: &TopicSpec{Name: "orders", ID: "new", Partitions: 3, Configs: map[string]string{"retention.ms": "1000"}, Generation: 1, ManagedBy: testManagedBy}},
		{name: "same again: nothing written", existing: []TopicSpec{managedSpec("id1", 3, nil)}, want: want(3, map[string]string{}),
			after: &TopicSpec{Name: "orders", ID: "id1", Partitions: 3, Generation: 1, ManagedBy: testManagedBy}},
		{name: "partitions raised", existing: []TopicSpec{managedSpec("id1", 3, nil)}, want: want(5, nil),
			after: &TopicSpec{Name: "orders", ID: "id1", Partitions: 5, Generation: 2, ManagedBy: testManagedBy}},
		{name: "partitions lowered: refused", existing: []TopicSpec{managedSpec("id1", 3, nil)}, want: want(2, nil),
			wantErr: ErrInvalidPartitions, msg: "partitions can be added, not removed",
			after: &TopicSpec{Name: "orders", ID: "id1", Partitions: 3, Generation: 1, ManagedBy: testManagedBy}},
		{name: "configs replaced, not merged", existing: []TopicSpec{managedSpec("id1", 3, map[string]string{"retention.ms": "1000"})},
			want:  want(3, map[string]string{"segment.bytes": "4096"}),
			after: &TopicSpec{Name: "orders", ID: "id1", Partitions: 3, Configs: map[string]string{"segment.bytes": "4096"}, Generation: 2, ManagedBy: testManagedBy}},
		{name: "configs back to defaults", existing: []TopicSpec{managedSpec("id1", 3, map[string]string{"retention.ms": "1000"})},
			want:  want(3, nil),
			after: &TopicSpec{Name: "orders", ID: "id1", Partitions: 3, Generation: 2, ManagedBy: testManagedBy}},
		{name: "invalid config", want: want(3, map[string]string{"cleanup.policy": "forever"}), wantErr: ErrInvalidConfig, msg: "forever"},
		{name: "unknown config", want: want(3, map[string]string{"segment.jitter.ms": "1"}), wantErr: ErrInvalidConfig, msg: "segment.jitter.ms"},
		{name: "invalid name", want: ManagedTopic{Name: "a/b", Partitions: 1, ManagedBy: testManagedBy}, wantErr: ErrInvalidTopic},
		{name: "too many partitions", want: want(MaxPartitions+1, nil), wantErr: ErrInvalidPartitions},
		{name: "no ManagedBy", want: ManagedTopic{Name: "orders", Partitions: 1}, msg: "needs ManagedBy"},
		{name: "previous incarnation deleting",
			existing: []TopicSpec{{Name: "orders", ID: "d1", Partitions: 1, Generation: 2, Deleted: true}},
			want:     want(3, nil), wantErr: ErrTopicDeleting, msg: "d1",
			after: &TopicSpec{Name: "orders", ID: "d1", Partitions: 1, Generation: 2, Deleted: true}},
		{name: "managed by another declaration",
			existing: []TopicSpec{{Name: "orders", ID: "o1", Partitions: 1, Generation: 1, ManagedBy: "kubernetes/other/orders/u9"}},
			want:     want(3, nil), wantErr: ErrTopicManaged, msg: "kubernetes/other/orders/u9",
			after: &TopicSpec{Name: "orders", ID: "o1", Partitions: 1, Generation: 1, ManagedBy: "kubernetes/other/orders/u9"}},
		{name: "created through Kafka, not adopted",
			existing: []TopicSpec{{Name: "orders", ID: "k1", Partitions: 1, Generation: 1}},
			want:     want(3, nil), wantErr: ErrTopicUnmanaged,
			after: &TopicSpec{Name: "orders", ID: "k1", Partitions: 1, Generation: 1}},
		{name: "created through Kafka, adopted with the same spec",
			existing: []TopicSpec{{Name: "orders", ID: "k1", Partitions: 3, Generation: 1}},
			want:     ManagedTopic{Name: "orders", Partitions: 3, ManagedBy: testManagedBy, Adopt: true},
			after:    &TopicSpec{Name: "orders", ID: "k1", Partitions: 3, Generation: 2, ManagedBy: testManagedBy}},
		{name: "created through Kafka, adopted and raised",
			existing: []TopicSpec{{Name: "orders", ID: "k1", Partitions: 1, Generation: 4}},
			want:     ManagedTopic{Name: "orders", Partitions: 3, ManagedBy: testManagedBy, Adopt: true},
			after:    &TopicSpec{Name: "orders", ID: "k1", Partitions: 3, Generation: 5, ManagedBy: testManagedBy}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := managedVolume(t, tc.existing...)
			got, err := EnsureTopic(fsys, testCluster, tc.want)
			switch {
			case tc.wantErr == nil && tc.msg == "" && err != nil:
				t.Fatal(err)
			case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			case tc.msg != "" && (err == nil || !strings.Contains(err.Error(), tc.msg)):
				t.Fatalf("err = %v, want one saying %q", err, tc.msg)
			}
			on, rerr := ReadTopicSpec(fsys, testCluster, "orders")
			if tc.after == nil {
				if rerr == nil {
					t.Fatalf("a spec was written: %+v", on)
				}
				return
			}
			if rerr != nil {
				t.Fatal(rerr)
			}
			wantSpec := *tc.after
			if wantSpec.ID == "new" {
				if on.ID == "" {
					t.Fatal("no topic ID")
				}
				wantSpec.ID = on.ID
			}
			if !sameSpec(on, wantSpec) {
				t.Fatalf("on the volume %+v, want %+v", on, wantSpec)
			}
			// The spec returned is the one written or found.
			if !sameSpec(got, on) {
				t.Fatalf("returned %+v, on the volume %+v", got, on)
			}
		})
	}
}

func sameSpec(a, b TopicSpec) bool {
	return a.Name == b.Name && a.ID == b.ID && a.Partitions == b.Partitions && a.Deleted == b.Deleted &&
		a.Generation == b.Generation && a.ManagedBy == b.ManagedBy && maps.Equal(a.Configs, b.Configs)
}

// TestManagedEnsureTopicNewIDEachIncarnation: a name deleted and declared
// again gets a new topic ID.
func TestManagedEnsureTopicNewIDEachIncarnation(t *testing.T) {
	fsys := managedVolume(t)
	m := ManagedTopic{Name: "orders", Partitions: 1, ManagedBy: testManagedBy}
	first, err := EnsureTopic(fsys, testCluster, m)
	if err != nil {
		t.Fatal(err)
	}
	if err := RemoveTopicSpec(fsys, testCluster, "orders", first.ID); err != nil {
		t.Fatal(err)
	}
	second, err := EnsureTopic(fsys, testCluster, m)
	if err != nil {
		t.Fatal(err)
	}
	if second.ID == "" || second.ID == first.ID {
		t.Fatalf("topic IDs %q then %q", first.ID, second.ID)
	}
}

// TestManagedEnsureTopicMakesTopicsDir: a cluster directory no broker has
// started on takes a declaration; a missing cluster directory (a volume
// not mounted) is not made.
func TestManagedEnsureTopicMakesTopicsDir(t *testing.T) {
	fsys := memfs.New()
	m := ManagedTopic{Name: "orders", Partitions: 1, ManagedBy: testManagedBy}
	if _, err := EnsureTopic(fsys, testCluster, m); err == nil {
		t.Fatal("created a cluster directory")
	}
	if err := volume.MkdirAllSync(fsys, testCluster); err != nil {
		t.Fatal(err)
	}
	if _, err := EnsureTopic(fsys, testCluster, m); err != nil {
		t.Fatal(err)
	}
}

func TestManagedDeleteTopic(t *testing.T) {
	for _, tc := range []struct {
		name     string
		existing []TopicSpec
		id       string
		gone     bool
		wantErr  error
		deleted  bool // the spec is marked deleted afterwards
	}{
		{name: "absent: gone", id: "id1", gone: true},
		{name: "another ID under the name: gone", existing: []TopicSpec{managedSpec("id2", 1, nil)}, id: "id1", gone: true},
		{name: "ours: marked deleted", existing: []TopicSpec{managedSpec("id1", 1, nil)}, id: "id1", deleted: true},
		{name: "ours, already marked: still there",
			existing: []TopicSpec{{Name: "orders", ID: "id1", Partitions: 1, Generation: 2, Deleted: true, ManagedBy: testManagedBy}},
			id:       "id1", deleted: true},
		{name: "managed by another: untouched",
			existing: []TopicSpec{{Name: "orders", ID: "id1", Partitions: 1, Generation: 1, ManagedBy: "kubernetes/ns/orders/u2"}},
			id:       "id1", wantErr: ErrTopicManaged},
		{name: "created through Kafka: untouched",
			existing: []TopicSpec{{Name: "orders", ID: "id1", Partitions: 1, Generation: 1}},
			id:       "id1", wantErr: ErrTopicManaged},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := managedVolume(t, tc.existing...)
			gone, err := DeleteManagedTopic(fsys, testCluster, "orders", tc.id, testManagedBy)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if gone != tc.gone {
				t.Fatalf("gone = %v, want %v", gone, tc.gone)
			}
			on, rerr := ReadTopicSpec(fsys, testCluster, "orders")
			if len(tc.existing) == 0 {
				return
			}
			if rerr != nil {
				t.Fatal(rerr)
			}
			before := tc.existing[0]
			if on.Deleted != tc.deleted {
				t.Fatalf("deleted = %v, want %v", on.Deleted, tc.deleted)
			}
			wantGen := before.Generation
			if tc.deleted && !before.Deleted {
				wantGen++ // marking is a change
			}
			if on.Generation != wantGen {
				t.Fatalf("generation %d, want %d", on.Generation, wantGen)
			}
		})
	}
}

// TestManagedDeleteTopicReportsGone: the delete is reported gone once the
// topic-delete machine's last step removes the spec, or once the name
// names another incarnation.
func TestManagedDeleteTopicReportsGone(t *testing.T) {
	for _, then := range []string{"removed", "recreated"} {
		t.Run(then, func(t *testing.T) {
			fsys := managedVolume(t, managedSpec("id1", 2, nil))
			for range 2 {
				if gone, err := DeleteManagedTopic(fsys, testCluster, "orders", "id1", testManagedBy); gone || err != nil {
					t.Fatalf("gone %v, err %v before the machine finished", gone, err)
				}
			}
			if err := RemoveTopicSpec(fsys, testCluster, "orders", "id1"); err != nil { // the machine's forget step
				t.Fatal(err)
			}
			if then == "recreated" {
				if _, err := EnsureTopic(fsys, testCluster, ManagedTopic{Name: "orders", Partitions: 1, ManagedBy: "kubernetes/ns/orders/u2"}); err != nil {
					t.Fatal(err)
				}
			}
			if gone, err := DeleteManagedTopic(fsys, testCluster, "orders", "id1", testManagedBy); !gone || err != nil {
				t.Fatalf("gone %v, err %v after the machine finished", gone, err)
			}
		})
	}
}

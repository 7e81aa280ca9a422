package topicstate

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/kaas-dev/kaas/engine/desired"
	"github.com/kaas-dev/kaas/states"
	"github.com/kaas-dev/kaas/volume"
)

func TestDelete(t *testing.T) {
	for _, tc := range []struct {
		name    string
		setup   func(t *testing.T, fsys volume.FS)
		topicID string // the status's

		release bool // the finalizer goes
		want    map[string]string
		events  []string
		message string
		// spec: what the desired state holds afterwards.
		spec func(t *testing.T, s desired.TopicSpec)
	}{
		{name: "never created", release: true},
		{
			name: "a Kafka topic never adopted is not touched",
			setup: func(t *testing.T, fsys volume.FS) {
				writeSpec(t, fsys, desired.TopicSpec{Name: "orders", ID: "k1", Partitions: 1, Generation: 1})
			},
			release: true,
			spec: func(t *testing.T, s desired.TopicSpec) {
				if s.Deleted || s.ID != "k1" {
					t.Errorf("spec %+v", s)
				}
			},
		},
		{
			name:    "ours: marked deleted, waiting for the machine",
			setup:   func(t *testing.T, fsys volume.FS) { writeSpec(t, fsys, ours("id1", 3)) },
			topicID: "id1",
			want:    map[string]string{Ready: "False/Deleting", Reconciling: "True/Deleting", Failed: "False/None"},
			message: "waiting for a broker to start the topic-delete machine",
			spec: func(t *testing.T, s desired.TopicSpec) {
				if !s.Deleted || s.Generation != 2 {
					t.Errorf("spec %+v", s)
				}
			},
		},
		{
			name: "ours although the status lost its topic ID",
			setup: func(t *testing.T, fsys volume.FS) {
				writeSpec(t, fsys, ours("id1", 3))
			},
			want: map[string]string{Ready: "False/Deleting", Reconciling: "True/Deleting", Failed: "False/None"},
			spec: func(t *testing.T, s desired.TopicSpec) {
				if !s.Deleted {
					t.Errorf("spec %+v", s)
				}
			},
		},
		{
			name: "the machine's progress is reported",
			setup: func(t *testing.T, fsys volume.FS) {
				s := ours("id1", 3)
				s.Deleted = true
				writeSpec(t, fsys, s)
				rec := &states.Record{Kind: states.TopicDelete.Kind, Object: "orders", State: "renamed", TopicID: "id1",
					Owner: "broker-2", LastError: "trash not empty"}
				if err := states.Save(fsys, clusterDir, rec); err != nil {
					t.Fatal(err)
				}
			},
			topicID: "id1",
			want:    map[string]string{Ready: "False/Deleting", Reconciling: "True/Deleting", Failed: "False/None"},
			message: "topic-delete is at step renamed on broker-2, last error: trash not empty",
		},
		{name: "gone", topicID: "id1", release: true, events: []string{EventDeleted}},
		{
			name: "the name holds another incarnation: ours is gone",
			setup: func(t *testing.T, fsys volume.FS) {
				writeSpec(t, fsys, desired.TopicSpec{Name: "orders", ID: "k2", Partitions: 1, Generation: 1})
			},
			topicID: "id1", release: true, events: []string{EventDeleted},
			spec: func(t *testing.T, s desired.TopicSpec) {
				if s.Deleted || s.ID != "k2" {
					t.Errorf("the other incarnation was touched: %+v", s)
				}
			},
		},
		{
			name: "declared by another resource now: let go, untouched",
			setup: func(t *testing.T, fsys volume.FS) {
				writeSpec(t, fsys, desired.TopicSpec{Name: "orders", ID: "id1", Partitions: 3, Generation: 2, ManagedBy: "kubernetes/ns/other/u7"})
			},
			topicID: "id1", release: true, events: []string{EventReleased},
			spec: func(t *testing.T, s desired.TopicSpec) {
				if s.Deleted {
					t.Errorf("spec %+v", s)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := newVolume(t)
			if tc.setup != nil {
				tc.setup(t, fsys)
			}
			d := decl()
			d.TopicID = tc.topicID
			r := Delete(fsys, clusterDir, d)
			if r.RemoveFinalizer != tc.release || r.Err != nil {
				t.Fatalf("remove finalizer %v (want %v), err %v", r.RemoveFinalizer, tc.release, r.Err)
			}
			want := tc.want
			if want == nil {
				want = map[string]string{}
			}
			if got := conds(r); !maps.Equal(got, want) {
				t.Errorf("conditions %v, want %v", got, want)
			}
			if got := eventReasons(r); !slices.Equal(got, tc.events) {
				t.Errorf("events %v, want %v", got, tc.events)
			}
			if !tc.release && r.Requeue != RequeuePoll {
				t.Errorf("requeue %v while deleting", r.Requeue)
			}
			if tc.message != "" && !strings.Contains(mainMessage(r), tc.message) {
				t.Errorf("message %q does not say %q", mainMessage(r), tc.message)
			}
			if tc.spec != nil {
				tc.spec(t, readSpecT(t, fsys, "orders"))
			}
		})
	}
}

func TestPaused(t *testing.T) {
	r := Paused(decl(), false)
	want := map[string]string{Ready: "False/Paused", Reconciling: "False/Paused"}
	if got := conds(r); !maps.Equal(got, want) || r.RemoveFinalizer || r.Requeue != RequeueNone || r.Observed != nil {
		t.Fatalf("paused: %+v", r)
	}
	r = Paused(decl(), true)
	if !r.RemoveFinalizer || !slices.Equal(eventReasons(r), []string{EventReleased}) {
		t.Fatalf("paused and deleted: %+v", r)
	}
}

func TestManagedBy(t *testing.T) {
	d := decl()
	if got := d.ManagedBy(); got != "kubernetes/ns/orders/u1" {
		t.Fatal(got)
	}
	if !strings.HasPrefix("kubernetes/ns/orders/u0", d.resourcePrefix()) || strings.HasPrefix("kubernetes/ns/orders-2/u0", d.resourcePrefix()) {
		t.Fatal("resource prefix")
	}
}

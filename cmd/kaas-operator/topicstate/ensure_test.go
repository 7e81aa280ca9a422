package topicstate

import (
	"maps"
	"path"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/kaas-dev/kaas/engine/desired"
	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/faultfs"
)

func TestEnsure(t *testing.T) {
	for _, tc := range []struct {
		name   string
		setup  func(t *testing.T, fsys volume.FS)
		change func(d *Declaration)
		fault  faultfs.Injector // wraps the volume for the Ensure call

		want    map[string]string // conditions, "Status/Reason"
		events  []string
		requeue Requeue
		err     bool
		// topicID: "new" (a fresh one), "" (none), or the expected ID.
		topicID  string
		serving  string
		message  string // in the Failed (or else Ready) condition's message
		specWant func(t *testing.T, s desired.TopicSpec)
	}{
		{
			name:   "absent: created with a new topic ID, partitions pending",
			want:   map[string]string{Ready: "False/Opening", Reconciling: "True/Applying", Failed: "False/None"},
			events: []string{EventCreated}, requeue: RequeuePoll, topicID: "new", serving: "0/3",
			specWant: func(t *testing.T, s desired.TopicSpec) {
				if s.Partitions != 3 || s.ManagedBy != "kubernetes/ns/orders/u1" || s.Generation != 1 {
					t.Errorf("spec %+v", s)
				}
			},
		},
		{
			name: "ours, every partition serving: ready and settled",
			setup: func(t *testing.T, fsys volume.FS) {
				writeSpec(t, fsys, ours("id1", 3))
				for p := int32(0); p < 3; p++ {
					record(t, fsys, "orders", "id1", p, "serving")
				}
			},
			want:    map[string]string{Ready: "True/Serving", Reconciling: "False/Settled", Failed: "False/None"},
			requeue: RequeueResync, topicID: "id1", serving: "3/3",
		},
		{
			name: "ours, records of an earlier incarnation do not count",
			setup: func(t *testing.T, fsys volume.FS) {
				writeSpec(t, fsys, ours("id1", 3))
				record(t, fsys, "orders", "id1", 0, "serving")
				record(t, fsys, "orders", "old", 1, "serving")
				record(t, fsys, "orders", "id1", 2, "fenced")
			},
			want:    map[string]string{Ready: "False/Opening", Reconciling: "True/Opening", Failed: "False/None"},
			requeue: RequeuePoll, topicID: "id1", serving: "1/3",
			message: "partition 1 (pending), partition 2 (fenced on broker-1)",
		},
		{
			name: "partitions raised",
			setup: func(t *testing.T, fsys volume.FS) {
				writeSpec(t, fsys, ours("id1", 2))
				record(t, fsys, "orders", "id1", 0, "serving")
				record(t, fsys, "orders", "id1", 1, "serving")
			},
			want:   map[string]string{Ready: "False/Opening", Reconciling: "True/Applying", Failed: "False/None"},
			events: []string{EventUpdated}, requeue: RequeuePoll, topicID: "id1", serving: "2/3",
			specWant: func(t *testing.T, s desired.TopicSpec) {
				if s.Partitions != 3 || s.Generation != 2 || s.ID != "id1" {
					t.Errorf("spec %+v", s)
				}
			},
		},
		{
			name: "configs replaced while serving: ready, and applying",
			setup: func(t *testing.T, fsys volume.FS) {
				s := ours("id1", 3)
				s.Configs = map[string]string{"segment.bytes": "4096"}
				writeSpec(t, fsys, s)
				for p := int32(0); p < 3; p++ {
					record(t, fsys, "orders", "id1", p, "serving")
				}
			},
			change: func(d *Declaration) { d.Configs = map[string]string{"retention.ms": "1000"} },
			want:   map[string]string{Ready: "True/Serving", Reconciling: "True/Applying", Failed: "False/None"},
			events: []string{EventUpdated}, requeue: RequeuePoll, topicID: "id1", serving: "3/3",
			specWant: func(t *testing.T, s desired.TopicSpec) {
				if !maps.Equal(s.Configs, map[string]string{"retention.ms": "1000"}) || s.Generation != 2 {
					t.Errorf("spec %+v", s)
				}
			},
		},
		{
			name: "created through Kafka, not adopted",
			setup: func(t *testing.T, fsys volume.FS) {
				writeSpec(t, fsys, desired.TopicSpec{Name: "orders", ID: "k1", Partitions: 1, Generation: 1})
			},
			want:   map[string]string{Ready: "False/Failed", Reconciling: "False/Failed", Failed: "True/TopicExists"},
			events: []string{ReasonTopicExists}, requeue: RequeuePoll, topicID: "",
			message: `set the annotation kaas.io/adopt: "true"`,
			specWant: func(t *testing.T, s desired.TopicSpec) {
				if s.ManagedBy != "" || s.Partitions != 1 {
					t.Errorf("an unadopted topic was changed: %+v", s)
				}
			},
		},
		{
			name: "the same failure again is not announced again",
			setup: func(t *testing.T, fsys volume.FS) {
				writeSpec(t, fsys, desired.TopicSpec{Name: "orders", ID: "k1", Partitions: 1, Generation: 1})
			},
			change: func(d *Declaration) {
				r := Ensure(newVolumeWith(t, desired.TopicSpec{Name: "orders", ID: "k1", Partitions: 1, Generation: 1}), clusterDir, *d)
				d.Conditions = r.Conditions
			},
			want:    map[string]string{Ready: "False/Failed", Reconciling: "False/Failed", Failed: "True/TopicExists"},
			requeue: RequeuePoll, topicID: "",
		},
		{
			name: "created through Kafka, adopted",
			setup: func(t *testing.T, fsys volume.FS) {
				writeSpec(t, fsys, desired.TopicSpec{Name: "orders", ID: "k1", Partitions: 1, Generation: 1})
			},
			change: func(d *Declaration) { d.Adopt = true },
			want:   map[string]string{Ready: "False/Opening", Reconciling: "True/Applying", Failed: "False/None"},
			events: []string{EventAdopted}, requeue: RequeuePoll, topicID: "k1", serving: "0/3",
			specWant: func(t *testing.T, s desired.TopicSpec) {
				if s.ManagedBy != "kubernetes/ns/orders/u1" || s.Partitions != 3 || s.ID != "k1" {
					t.Errorf("spec %+v", s)
				}
			},
		},
		{
			name: "declared by another resource",
			setup: func(t *testing.T, fsys volume.FS) {
				writeSpec(t, fsys, desired.TopicSpec{Name: "orders", ID: "o1", Partitions: 3, Generation: 1, ManagedBy: "kubernetes/other/orders/u9"})
			},
			want:   map[string]string{Ready: "False/Failed", Reconciling: "False/Failed", Failed: "True/TopicClaimed"},
			events: []string{ReasonTopicClaimed}, requeue: RequeuePoll, topicID: "",
			message: "the Topic resource other/orders (uid u9)",
		},
		{
			name: "left by an earlier resource of this name: deleted, to be created anew",
			setup: func(t *testing.T, fsys volume.FS) {
				writeSpec(t, fsys, desired.TopicSpec{Name: "orders", ID: "s1", Partitions: 3, Generation: 1, ManagedBy: "kubernetes/ns/orders/u0"})
			},
			want:   map[string]string{Ready: "False/Opening", Reconciling: "True/WaitingForDelete", Failed: "False/None"},
			events: []string{EventReplaced}, requeue: RequeuePoll, topicID: "",
			specWant: func(t *testing.T, s desired.TopicSpec) {
				if !s.Deleted || s.ID != "s1" || s.ManagedBy != "kubernetes/ns/orders/u0" {
					t.Errorf("the stale incarnation is not marked deleted: %+v", s)
				}
			},
		},
		{
			name: "the name's previous incarnation is being deleted",
			setup: func(t *testing.T, fsys volume.FS) {
				writeSpec(t, fsys, desired.TopicSpec{Name: "orders", ID: "d1", Partitions: 1, Generation: 2, Deleted: true})
			},
			want:    map[string]string{Ready: "False/Opening", Reconciling: "True/WaitingForDelete", Failed: "False/None"},
			requeue: RequeuePoll, topicID: "", message: "topic ID d1",
		},
		{
			name: "invalid config: the owned topic keeps serving its last spec",
			setup: func(t *testing.T, fsys volume.FS) {
				writeSpec(t, fsys, ours("id1", 3))
				record(t, fsys, "orders", "id1", 0, "serving")
			},
			change: func(d *Declaration) { d.Configs = map[string]string{"segment.bytes": "ten"} },
			want:   map[string]string{Ready: "False/Failed", Reconciling: "False/Failed", Failed: "True/InvalidSpec"},
			events: []string{ReasonInvalidSpec}, requeue: RequeuePoll, topicID: "id1", serving: "1/3",
			message: "segment.bytes",
		},
		{
			name:   "invalid topic name",
			change: func(d *Declaration) { d.TopicName = "__consumer_offsets" },
			want:   map[string]string{Ready: "False/Failed", Reconciling: "False/Failed", Failed: "True/InvalidSpec"},
			events: []string{ReasonInvalidSpec}, requeue: RequeuePoll, topicID: "",
			message: "internal topic",
		},
		{
			name:   "fewer partitions than the topic has",
			setup:  func(t *testing.T, fsys volume.FS) { writeSpec(t, fsys, ours("id1", 5)) },
			want:   map[string]string{Ready: "False/Failed", Reconciling: "False/Failed", Failed: "True/InvalidPartitions"},
			events: []string{ReasonInvalidPartitions}, requeue: RequeuePoll, topicID: "id1", serving: "0/5",
			message: "partitions can be added, not removed",
		},
		{
			name:   "the volume fails: an error for backoff",
			fault:  faultfs.FailMatching(faultfs.OpOpen, path.Join(clusterDir, "topics", "*"), syscall.EIO, false, 0),
			want:   map[string]string{Ready: "False/Failed", Reconciling: "False/Failed", Failed: "True/VolumeError"},
			events: []string{ReasonVolumeError}, requeue: RequeuePoll, err: true, topicID: "keep",
			message: "input/output error",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := newVolume(t)
			if tc.setup != nil {
				tc.setup(t, fsys)
			}
			d := decl()
			if tc.change != nil {
				tc.change(&d)
			}
			var v volume.FS = fsys
			if tc.fault != nil {
				v = faultfs.New(fsys, tc.fault)
			}
			r := Ensure(v, clusterDir, d)

			if got := conds(r); !maps.Equal(got, tc.want) {
				t.Errorf("conditions %v, want %v", got, tc.want)
			}
			if got := eventReasons(r); !slices.Equal(got, tc.events) {
				t.Errorf("events %v, want %v", got, tc.events)
			}
			if r.Requeue != tc.requeue || (r.Err != nil) != tc.err || r.RemoveFinalizer {
				t.Errorf("requeue %v, err %v, remove finalizer %v", r.Requeue, r.Err, r.RemoveFinalizer)
			}
			checkObserved(t, r, tc.topicID, tc.serving, readSpecT(t, fsys, "orders"))
			if tc.message != "" && !strings.Contains(mainMessage(r), tc.message) {
				t.Errorf("message %q does not say %q", mainMessage(r), tc.message)
			}
			if tc.specWant != nil {
				tc.specWant(t, readSpecT(t, fsys, "orders"))
			}
		})
	}
}

func newVolumeWith(t *testing.T, spec desired.TopicSpec) volume.FS {
	fsys := newVolume(t)
	writeSpec(t, fsys, spec)
	return fsys
}

// checkObserved checks the status's topic fields: topicID "keep" means
// none are set, "new" a fresh ID (the one on the volume).
func checkObserved(t *testing.T, r Result, topicID, serving string, onVolume desired.TopicSpec) {
	t.Helper()
	if topicID == "keep" {
		if r.Observed != nil {
			t.Errorf("observed %+v, want the status left as it is", r.Observed)
		}
		return
	}
	if r.Observed == nil {
		t.Fatal("no observed status")
	}
	if topicID == "new" {
		topicID = onVolume.ID
		if topicID == "" {
			t.Fatal("no topic on the volume")
		}
	}
	o := r.Observed
	if o.TopicID != topicID || o.PartitionsServing != serving || o.TopicName == "" {
		t.Errorf("observed %+v, want topic ID %q serving %q", o, topicID, serving)
	}
}

// mainMessage is the Failed condition's message when it failed, else Ready's.
func mainMessage(r Result) string {
	var ready string
	for _, c := range r.Conditions {
		if c.Type == Failed && c.Status == True {
			return c.Message
		}
		if c.Type == Ready {
			ready = c.Message
		}
	}
	return ready
}

// TestEnsureIsIdempotent: a second look changes nothing on the volume and
// announces nothing.
func TestEnsureIsIdempotent(t *testing.T) {
	fsys := newVolume(t)
	d := decl()
	d.Configs = map[string]string{"retention.ms": "1000"}
	first := Ensure(fsys, clusterDir, d)
	spec := readSpecT(t, fsys, "orders")
	second := Ensure(fsys, clusterDir, d)
	if again := readSpecT(t, fsys, "orders"); again.Generation != spec.Generation || again.ID != spec.ID {
		t.Fatalf("second look changed the spec: %+v -> %+v", spec, again)
	}
	if len(second.Events) != 0 || conds(second)[Reconciling] != "True/Opening" {
		t.Fatalf("second look: events %v, conditions %v", eventReasons(second), conds(second))
	}
	if first.Observed.TopicID != second.Observed.TopicID {
		t.Fatalf("topic ID %s then %s", first.Observed.TopicID, second.Observed.TopicID)
	}
}

// TestEnsureWithoutTopicsDir: a cluster directory no broker has started on
// yet still takes a declaration.
func TestEnsureWithoutTopicsDir(t *testing.T) {
	fsys := newVolume(t)
	if err := fsys.Remove(path.Join(clusterDir, "topics")); err != nil {
		t.Fatal(err)
	}
	if r := Ensure(fsys, clusterDir, decl()); r.Err != nil {
		t.Fatal(r.Err)
	}
	if s := readSpecT(t, fsys, "orders"); s.ID == "" {
		t.Fatal("not created")
	}
}

// TestLargeTopicListsPartitionsNotServing: past MaxListedPartitions only the
// partitions not serving are listed, and the summary counts all.
func TestLargeTopicListsPartitionsNotServing(t *testing.T) {
	fsys := newVolume(t)
	n := int32(MaxListedPartitions + 10)
	writeSpec(t, fsys, ours("id1", n))
	for p := int32(0); p < n; p++ {
		if p != 7 && p != 505 {
			record(t, fsys, "orders", "id1", p, "serving")
		}
	}
	d := decl()
	d.Partitions = n
	r := Ensure(fsys, clusterDir, d)
	o := r.Observed
	if o.PartitionsServing != "508/510" || len(o.Partitions) != 2 || o.Partitions[0].Partition != 7 || o.Partitions[1].Partition != 505 {
		t.Fatalf("observed %s %+v", o.PartitionsServing, o.Partitions)
	}
	if r.Err != nil || !strings.Contains(mainMessage(r), "partition 7 (pending), partition 505 (pending)") {
		t.Fatalf("message %q", mainMessage(r))
	}
}

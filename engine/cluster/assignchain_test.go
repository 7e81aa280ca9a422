package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"testing"

	"github.com/kaas-dev/kaas/volume/memfs"
)

func liveWith(ids ...int32) []LiveBroker {
	var out []LiveBroker
	for _, id := range ids {
		out = append(out, LiveBroker{ID: id, Incarnation: fmt.Sprintf("inc-%d", id)})
	}
	return out
}

// Stamp then Apply gives back what was stamped, for every kind of change,
// and each entry's Since is the version that last changed it.
func TestStampApply(t *testing.T) {
	shards := Topic{ID: CoordinatorsID, Partitions: 4}
	steps := []struct {
		name   string
		topics []Topic
		live   []LiveBroker
		empty  bool
	}{
		{"first", []Topic{{ID: "a", Partitions: 8}, shards}, liveWith(1, 2, 3), false},
		{"nothing changes", []Topic{{ID: "a", Partitions: 8}, shards}, liveWith(1, 2, 3), true},
		{"a topic created", []Topic{{ID: "a", Partitions: 8}, {ID: "b", Partitions: 3}, shards}, liveWith(1, 2, 3), false},
		{"a topic grows", []Topic{{ID: "a", Partitions: 10}, {ID: "b", Partitions: 3}, shards}, liveWith(1, 2, 3), false},
		{"a broker dies", []Topic{{ID: "a", Partitions: 10}, {ID: "b", Partitions: 3}, shards}, liveWith(1, 3), false},
		{"a topic deleted", []Topic{{ID: "b", Partitions: 3}, shards}, liveWith(1, 3), false},
	}
	var prev *Assignment
	for _, st := range steps {
		next, err := NextAssignment(prev, st.topics, st.live, 1)
		if err != nil {
			t.Fatal(err)
		}
		d := Stamp(prev, next)
		if d.Empty() != st.empty {
			t.Fatalf("%s: delta empty %v, want %v: %+v", st.name, d.Empty(), st.empty, d)
		}
		if st.empty {
			continue
		}
		if prev != nil {
			got, err := prev.Apply(d)
			if err != nil {
				t.Fatalf("%s: apply: %v", st.name, err)
			}
			if err := sameAssignment(got, next); err != nil {
				t.Fatalf("%s: applied delta: %v", st.name, err)
			}
			// Entries the delta does not set keep their Since.
			for id, ps := range next.Topics {
				set := map[int32]bool{}
				for _, e := range d.Topics[id].Set {
					set[e.Index] = true
				}
				for i, o := range ps {
					switch {
					case set[int32(i)] && o.Since != next.Version:
						t.Fatalf("%s: %s/%d changed at %d, Since %d", st.name, id, i, next.Version, o.Since)
					case !set[int32(i)] && o.Since != prev.Topics[id][i].Since:
						t.Fatalf("%s: %s/%d unchanged, Since moved to %d", st.name, id, i, o.Since)
					}
				}
			}
		}
		prev = next
	}
	if prev.Version != 5 {
		t.Fatalf("version after five changes: %d", prev.Version)
	}
}

// A delta that does not apply to the version held is refused; one that
// leaves a new partition unset is refused.
func TestApplyRefusesWrongDeltas(t *testing.T) {
	a, _ := NextAssignment(nil, []Topic{{ID: "a", Partitions: 2}}, liveWith(1), 1)
	Stamp(nil, a)
	b, _ := NextAssignment(a, []Topic{{ID: "a", Partitions: 2}}, liveWith(2), 1)
	d := Stamp(a, b)
	other := *a
	other.Version = 7
	if _, err := other.Apply(d); err == nil {
		t.Fatal("a delta applied to another version")
	}
	d.Topics["a"] = TopicDelta{Partitions: 3, Set: d.Topics["a"].Set}
	if _, err := a.Apply(d); err == nil {
		t.Fatal("a delta growing a topic without setting the new partition applied")
	}
}

// Format 2 keeps each entry short, the incarnations in one table and the
// shards in their own place; format 1 (Legacy, and files of an older kaas)
// reads back the same.
func TestAssignmentFormats(t *testing.T) {
	a, _ := NextAssignment(nil, []Topic{{ID: "t", Partitions: 3}, {ID: CoordinatorsID, Partitions: 2}}, liveWith(1, 2), 4)
	Stamp(nil, a)
	b, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if !strings.HasPrefix(s, `{"format":2,"controllerEpoch":4,"version":1,`) || strings.Contains(s, "incarnation") ||
		strings.Contains(s, CoordinatorsID) || !strings.Contains(s, `"coordinators":[`) || !strings.Contains(s, `"brokers":{`) {
		t.Fatalf("format 2: %s", s)
	}
	if id, ok := parseAssignmentID(b[:60]); !ok || id != a.ID() {
		t.Fatalf("version from the first bytes: %v %v", id, ok)
	}
	var back Assignment
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if err := sameAssignment(&back, a); err != nil {
		t.Fatalf("format 2 round trip: %v", err)
	}

	legacy := *a
	legacy.Legacy = true
	b, err = json.Marshal(&legacy)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(b); strings.Contains(s, `"format"`) || !strings.Contains(s, `"incarnation":"inc-`) || !strings.Contains(s, `"`+CoordinatorsID+`":[`) {
		t.Fatalf("format 1: %s", s)
	}
	back = Assignment{}
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	// Format 1 keeps no Since.
	want := *a
	want.Topics = map[string][]PartitionOwner{"t": slices.Clone(a.Topics["t"])}
	want.Coordinators = slices.Clone(a.Coordinators)
	for _, ps := range [][]PartitionOwner{want.Topics["t"], want.Coordinators} {
		for i := range ps {
			ps[i].Since = 0
		}
	}
	if err := sameAssignment(&back, &want); err != nil {
		t.Fatalf("format 1 round trip: %v", err)
	}
	// A file of an older kaas: no version at all.
	old := []byte(`{"controllerEpoch":3,"topics":{"t":[{"broker":1,"leaderEpoch":2,"incarnation":"x"}]}}`)
	if id, ok := parseAssignmentID(old); !ok || id != (AssignmentVersion{ControllerEpoch: 3}) {
		t.Fatalf("version of an old file: %v %v", id, ok)
	}
	if err := json.Unmarshal([]byte(`{"format":3,"controllerEpoch":1,"topics":{}}`), &back); err == nil {
		t.Fatal("a format from a newer kaas was read")
	}
	two := *a
	two.Topics = map[string][]PartitionOwner{"t": {{Broker: 1, Incarnation: "x"}, {Broker: 1, Incarnation: "y"}}}
	if _, err := json.Marshal(&two); !errors.Is(err, errTwoIncarnations) {
		t.Fatalf("one broker in two incarnations: %v", err)
	}
}

// A reader follows the chain: deltas only after the version it holds,
// the base again after a compaction, and what changed each time.
func TestAssignmentReaderFollowsChain(t *testing.T) {
	m := memfs.New()
	r := NewAssignmentReader(m, clusterDir)
	var prev *Assignment
	var head *AssignmentHead
	commit := func(topics []Topic, live []LiveBroker, compact bool) {
		t.Helper()
		next, err := NextAssignment(prev, topics, live, 1)
		if err != nil {
			t.Fatal(err)
		}
		d := Stamp(prev, next)
		if head, err = CommitAssignment(m, clusterDir, head, next, d, compact); err != nil {
			t.Fatal(err)
		}
		prev = next
	}
	read := func() AssignmentUpdate {
		t.Helper()
		up, err := r.Read()
		if err != nil {
			t.Fatal(err)
		}
		if err := sameAssignment(up.Assignment, prev); err != nil {
			t.Fatalf("read: %v", err)
		}
		return up
	}
	commit([]Topic{{ID: "a", Partitions: 4}}, liveWith(1, 2), false) // no chain yet: a base
	if up := read(); !up.Full {
		t.Fatalf("first read: %+v", up)
	}
	if up := read(); !up.Unchanged {
		t.Fatalf("second read of the same head: %+v", up)
	}
	commit([]Topic{{ID: "a", Partitions: 4}, {ID: "b", Partitions: 2}}, liveWith(1, 2), false)
	commit([]Topic{{ID: "a", Partitions: 4}, {ID: "b", Partitions: 2}, {ID: CoordinatorsID, Partitions: 2}}, liveWith(1, 2), false)
	if up := read(); up.Full || !slices.Equal(up.Changed, []string{"b"}) || !up.Coordinators {
		t.Fatalf("read after two deltas: %+v", up)
	}
	if len(head.Deltas) != 2 {
		t.Fatalf("head %+v, want two deltas", head)
	}
	commit([]Topic{{ID: "b", Partitions: 2}, {ID: CoordinatorsID, Partitions: 2}}, liveWith(1), true)
	if head.Base != prev.ID() || len(head.Deltas) != 0 {
		t.Fatalf("head after a compaction: %+v", head)
	}
	if ents, _ := m.ReadDir(assignmentChainDir(clusterDir)); len(ents) != 1 {
		t.Fatalf("chain directory after a compaction: %d entries, want the head alone", len(ents))
	}
	// The chain no longer reaches back to the version the reader holds:
	// it reads the new base whole.
	if up := read(); !up.Full {
		t.Fatalf("read after a compaction: %+v", up)
	}
	if _, err := ReadAssignmentID(m, clusterDir); err != nil {
		t.Fatal(err)
	}
	if _, err := NewAssignmentReader(memfs.New(), clusterDir).Read(); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("no assignment: %v", err)
	}
	// A base older than its head names (a deposed controller's late
	// write): a fresh load says so, and the reader keeps what it had.
	old, _ := NextAssignment(nil, []Topic{{ID: "z", Partitions: 1}}, liveWith(1), 1)
	if err := WriteAssignment(m, clusterDir, old); err != nil {
		t.Fatal(err)
	}
	commit([]Topic{{ID: "b", Partitions: 3}, {ID: CoordinatorsID, Partitions: 2}}, liveWith(1), false)
	if _, _, err := LoadAssignment(m, clusterDir); !errors.Is(err, errChainBehind) {
		t.Fatalf("load over an older base: %v", err)
	}
	if up := read(); up.Full || !slices.Equal(up.Changed, []string{"b"}) {
		t.Fatalf("a reader holding the chain's base follows it: %+v", up)
	}
}

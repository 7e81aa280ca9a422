package engine

import (
	"slices"
	"testing"

	"github.com/kaas-dev/kaas/engine/cluster"
	"github.com/kaas-dev/kaas/engine/desired"
	"github.com/kaas-dev/kaas/engine/groups"
)

func TestAssignmentBase(t *testing.T) {
	at := func(epoch int32) *cluster.Assignment { return &cluster.Assignment{ControllerEpoch: epoch} }
	written, older := at(5), at(4)
	for _, tc := range []struct {
		name            string
		onDisk, written *cluster.Assignment
		wantBase        *cluster.Assignment
		rewrite, stop   bool
	}{
		{"nothing yet", nil, nil, nil, false, false},
		{"file from an older controller", older, nil, older, false, false},
		{"a newer controller wrote it", at(6), written, nil, false, true},
		{"own write is on disk", written, written, written, false, false},
		{"a deposed controller's late write replaced ours", at(4), written, written, true, false},
		{"file unreadable after our write", nil, written, written, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base, rewrite, stop := assignmentBase(tc.onDisk, tc.written, 5)
			if base != tc.wantBase || rewrite != tc.rewrite || stop != tc.stop {
				t.Fatalf("assignmentBase = (%v, %v, %v), want (%v, %v, %v)", base, rewrite, stop, tc.wantBase, tc.rewrite, tc.stop)
			}
		})
	}
}

func TestNewPartitions(t *testing.T) {
	shards := func() []partitionRef {
		var refs []partitionRef
		for i := range int32(groups.Shards) {
			refs = append(refs, partitionRef{GroupsTopicID, i})
		}
		return refs
	}
	base := &cluster.Assignment{Topics: map[string][]cluster.PartitionOwner{
		"a": make([]cluster.PartitionOwner, 2),
	}, Coordinators: make([]cluster.PartitionOwner, groups.Shards)}
	topics := []desired.TopicSpec{
		{Name: "ta", ID: "a", Partitions: 3},
		{Name: "tb", ID: "b", Partitions: 1},
		{Name: "gone", ID: "c", Partitions: 4, Deleted: true},
	}
	got := newPartitions(base, topics)
	want := []partitionRef{{"a", 2}, {"b", 0}}
	if !slices.Equal(got, want) {
		t.Fatalf("with a base: %v, want %v", got, want)
	}
	got = newPartitions(nil, topics[:1])
	want = append([]partitionRef{{"a", 0}, {"a", 1}, {"a", 2}}, shards()...)
	if !slices.Equal(got, want) {
		t.Fatalf("with no base: %v, want %v", got, want)
	}
}

func TestPlanAssignment(t *testing.T) {
	live := []cluster.LiveBroker{{ID: 1, Incarnation: "i1"}, {ID: 2, Incarnation: "i2"}}
	topics := []desired.TopicSpec{{Name: "orders", ID: "o", Partitions: 2}}
	first, _, err := planAssignment(assignmentInput{Epoch: 1, Topics: topics, Live: live,
		Fences: map[partitionRef]int32{{"o", 1}: 7}})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("new partitions start above their fences", func(t *testing.T) {
		ps := first.Topics["o"]
		if len(ps) != 2 || ps[0].LeaderEpoch < 1 || ps[1].LeaderEpoch < 8 {
			t.Fatalf("owners %+v: want epoch ≥1 for a partition with no fence and ≥8 over fence 7", ps)
		}
		if first.MaxLeaderEpoch < ps[1].LeaderEpoch {
			t.Fatalf("MaxLeaderEpoch %d below a handed-out epoch %d", first.MaxLeaderEpoch, ps[1].LeaderEpoch)
		}
		if len(first.Coordinators) != groups.Shards {
			t.Fatalf("coordinator shards: %d, want %d", len(first.Coordinators), groups.Shards)
		}
		if first.Version != 1 {
			t.Fatalf("first version %d, want 1", first.Version)
		}
	})
	t.Run("nothing changed: nothing to write", func(t *testing.T) {
		next, _, err := planAssignment(assignmentInput{Epoch: 1, Base: first, Topics: topics, Live: live})
		if err != nil || next != nil {
			t.Fatalf("plan = %v, %v; want nothing to write", next, err)
		}
	})
	t.Run("a rewrite writes even when nothing changed", func(t *testing.T) {
		next, _, err := planAssignment(assignmentInput{Epoch: 1, Base: first, Rewrite: true, Topics: topics, Live: live})
		if err != nil || next == nil {
			t.Fatalf("plan = %v, %v; want the assignment again", next, err)
		}
		if next.Version != first.Version+1 {
			t.Fatalf("rewrite at version %d, want %d", next.Version, first.Version+1)
		}
	})
	t.Run("a deleted topic leaves the assignment", func(t *testing.T) {
		gone := []desired.TopicSpec{{Name: "orders", ID: "o", Partitions: 2, Deleted: true}}
		next, _, err := planAssignment(assignmentInput{Epoch: 1, Base: first, Topics: gone, Live: live})
		if err != nil || next == nil {
			t.Fatalf("plan = %v, %v", next, err)
		}
		if _, ok := next.Topics["o"]; ok {
			t.Fatalf("deleted topic still assigned: %+v", next.Topics["o"])
		}
		if next.MaxLeaderEpoch < first.MaxLeaderEpoch {
			t.Fatalf("MaxLeaderEpoch went back from %d to %d", first.MaxLeaderEpoch, next.MaxLeaderEpoch)
		}
		if next.Version != first.Version+1 {
			t.Fatalf("changed assignment at version %d, want %d", next.Version, first.Version+1)
		}
	})
	owner := first.Topics["o"][0]
	inc := map[int32]string{1: "i1", 2: "i2"}[owner.Broker]
	for _, tc := range []struct {
		name string
		ask  reopenAsk
		bump bool
	}{
		{"the owner asks at its epoch", reopenAsk{owner.Broker, inc, partitionRef{"o", 0}, owner.LeaderEpoch}, true},
		{"an older epoch's ask", reopenAsk{owner.Broker, inc, partitionRef{"o", 0}, owner.LeaderEpoch - 1}, false},
		{"a previous incarnation", reopenAsk{owner.Broker, "old", partitionRef{"o", 0}, owner.LeaderEpoch}, false},
		{"not the owner", reopenAsk{3 - owner.Broker, inc, partitionRef{"o", 0}, owner.LeaderEpoch}, false},
		{"no such partition", reopenAsk{owner.Broker, inc, partitionRef{"o", 9}, owner.LeaderEpoch}, false},
	} {
		t.Run("reopen: "+tc.name, func(t *testing.T) {
			next, _, err := planAssignment(assignmentInput{Epoch: 1, Base: first, Topics: topics, Live: live,
				Reopen: []reopenAsk{tc.ask}})
			if err != nil {
				t.Fatal(err)
			}
			if !tc.bump {
				if next != nil {
					t.Fatalf("assignment changed: %+v", next.Topics["o"])
				}
				return
			}
			if next == nil || next.Topics["o"][0].LeaderEpoch != owner.LeaderEpoch+1 {
				t.Fatalf("want epoch %d, got %+v", owner.LeaderEpoch+1, next)
			}
		})
	}
	t.Run("a stale controller is refused", func(t *testing.T) {
		if _, _, err := planAssignment(assignmentInput{Epoch: 0, Base: first, Topics: topics, Live: live}); err == nil {
			t.Fatal("want an error for a controller epoch below the base's")
		}
	})
}

func TestTopicsToReconcile(t *testing.T) {
	held := map[string]desired.TopicSpec{
		"same":    {Name: "same", ID: "1", Generation: 2},
		"changed": {Name: "changed", ID: "2", Generation: 1},
		"reborn":  {Name: "reborn", ID: "3", Generation: 1},
		"deleted": {Name: "deleted", ID: "4", Generation: 1},
	}
	specs := []desired.TopicSpec{
		{Name: "same", ID: "1", Generation: 2},
		{Name: "changed", ID: "2", Generation: 2},
		{Name: "reborn", ID: "30", Generation: 1},
		{Name: "deleted", ID: "4", Generation: 1, Deleted: true},
		{Name: "new", ID: "5", Generation: 1},
	}
	got := topicsToReconcile(specs, func(name string) (desired.TopicSpec, bool) {
		s, ok := held[name]
		return s, ok
	})
	want := []string{"changed", "reborn", "deleted", "new"}
	if !slices.Equal(got, want) {
		t.Fatalf("topicsToReconcile = %v, want %v", got, want)
	}
}

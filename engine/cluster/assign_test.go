package cluster

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/kaas-dev/kaas/volume/memfs"
)

func brokers(ids ...int32) []LiveBroker {
	var out []LiveBroker
	for _, id := range ids {
		out = append(out, LiveBroker{ID: id, Zone: fmt.Sprintf("z%d", id%2)})
	}
	return out
}

// topics3000 is 10 topics of 300 partitions.
func topics3000() []Topic {
	var ts []Topic
	for i := range 10 {
		ts = append(ts, Topic{ID: fmt.Sprintf("6f1c2a%02d-topic-id", i), Partitions: 300})
	}
	return ts
}

func TestAssignStableAndOrderIndependent(t *testing.T) {
	live := brokers(1, 2, 3, 4, 5)
	rng := rand.New(rand.NewPCG(1, 2))
	for p := range int32(500) {
		want := Assign("topic-a", p, live, "")
		if want < 1 || want > 5 {
			t.Fatalf("partition %d: broker %d", p, want)
		}
		shuffled := slices.Clone(live)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		if got := Assign("topic-a", p, shuffled, ""); got != want {
			t.Fatalf("partition %d: %d with another order, %d sorted", p, got, want)
		}
	}
	if got := Assign("t", 0, nil, ""); got != -1 {
		t.Fatalf("no live brokers: %d, want -1", got)
	}
	// Golden values pin the hash: every broker and every version of kaas
	// must compute the same owner, or two brokers would both think they
	// own a partition across an upgrade.
	var golden []int32
	for p := range int32(10) {
		golden = append(golden, Assign("golden", p, live, ""))
	}
	if want := goldenOwners; !slices.Equal(golden, want) {
		t.Fatalf("golden owners %v, want %v: the hash changed", golden, want)
	}
}

var goldenOwners = []int32{2, 2, 4, 4, 4, 1, 2, 5, 4, 3}

func TestAssignMinimalMovement(t *testing.T) {
	ts := topics3000()
	three, _ := NextAssignment(nil, ts, brokers(0, 1, 2), 1)
	count := map[int32]int{}
	for _, ps := range three.Topics {
		for _, p := range ps {
			count[p.Broker]++
		}
	}
	for id, n := range count {
		if n < 900 || n > 1100 {
			t.Errorf("broker %d owns %d of 3000 partitions, want about 1000", id, n)
		}
	}

	// Broker 1 dies: exactly its partitions move, and they spread over the
	// other two.
	two, err := NextAssignment(three, ts, brokers(0, 2), 2)
	if err != nil {
		t.Fatal(err)
	}
	moved, to := 0, map[int32]int{}
	for id, ps := range three.Topics {
		for p, before := range ps {
			after := two.Topics[id][p]
			if before.Broker != 1 && after != before {
				t.Fatalf("%s/%d moved from surviving broker %d to %d", id, p, before.Broker, after.Broker)
			}
			if before.Broker == 1 {
				moved++
				to[after.Broker]++
				if after.LeaderEpoch != before.LeaderEpoch+1 {
					t.Fatalf("%s/%d moved without an epoch bump: %+v -> %+v", id, p, before, after)
				}
			}
		}
	}
	t.Logf("one of three brokers died: %d of 3000 partitions moved (%d to broker 0, %d to broker 2)", moved, to[0], to[2])
	if moved != count[1] || moved < 900 || moved > 1100 || to[0] < 400 || to[2] < 400 {
		t.Fatalf("moved %d (%v), broker 1 owned %d", moved, to, count[1])
	}

	// It comes back: the same owners as before, each moved partition's
	// epoch bumped once more.
	back, _ := NextAssignment(two, ts, brokers(0, 1, 2), 3)
	for id, ps := range three.Topics {
		for p, before := range ps {
			after := back.Topics[id][p]
			if after.Broker != before.Broker {
				t.Fatalf("%s/%d: owner %d after rejoin, %d before", id, p, after.Broker, before.Broker)
			}
			wantEpoch := before.LeaderEpoch
			if before.Broker == 1 {
				wantEpoch += 2
			}
			if after.LeaderEpoch != wantEpoch {
				t.Fatalf("%s/%d: epoch %d, want %d", id, p, after.LeaderEpoch, wantEpoch)
			}
		}
	}
}

func TestAssignZones(t *testing.T) {
	live := []LiveBroker{{ID: 1, Zone: "a"}, {ID: 2, Zone: "b"}, {ID: 3, Zone: "a"}, {ID: 4, Zone: "b"}, {ID: 5}}
	seen := map[string]map[int32]bool{"a": {}, "b": {}, "c": {}, "": {}}
	for p := range int32(200) {
		for zone := range seen {
			got := Assign("t", p, live, zone)
			seen[zone][got] = true
			switch zone {
			case "a", "b":
				if live[slices.IndexFunc(live, func(b LiveBroker) bool { return b.ID == got })].Zone != zone {
					t.Fatalf("zone %s, partition %d: broker %d is outside the zone", zone, p, got)
				}
				// Preferring a zone is rendezvous over that zone's brokers.
				var inZone []LiveBroker
				for _, b := range live {
					if b.Zone == zone {
						inZone = append(inZone, b)
					}
				}
				if want := Assign("t", p, inZone, ""); got != want {
					t.Fatalf("zone %s, partition %d: %d, want %d", zone, p, got, want)
				}
			default: // no broker in the zone, or no zone: all brokers
				if want := Assign("t", p, live, ""); got != want {
					t.Fatalf("zone %q, partition %d: %d, want fallback %d", zone, p, got, want)
				}
			}
		}
	}
	for zone, want := range map[string][]int32{"a": {1, 3}, "b": {2, 4}, "c": {1, 2, 3, 4, 5}, "": {1, 2, 3, 4, 5}} {
		var got []int32
		for id := range seen[zone] {
			got = append(got, id)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("zone %q used brokers %v, want %v", zone, got, want)
		}
	}
}

// maxEpoch is the highest epoch a holds or held (deleted topics').
func maxEpoch(a *Assignment) int32 {
	m := a.MaxLeaderEpoch
	for _, ps := range a.Topics {
		for _, o := range ps {
			m = max(m, o.LeaderEpoch)
		}
	}
	return m
}

// TestNextAssignmentEpochs also covers epochs never reused: t2 is deleted
// at step 6 and its name comes back at step 8 as t2b (a new incarnation
// has a new ID), whose partitions start above every epoch t2 ever had.
func TestNextAssignmentEpochs(t *testing.T) {
	ts := []Topic{{ID: "t1", Partitions: 64}, {ID: "t2", Partitions: 16}}
	steps := []struct {
		live   []LiveBroker
		topics []Topic
	}{
		{brokers(1, 2, 3), ts},
		{brokers(1, 2, 3), ts}, // nothing changes
		{brokers(1, 3), ts},
		{nil, ts}, // everyone gone: unowned, epochs bumped
		{brokers(2), ts},
		{brokers(1, 2, 3, 4), append(slices.Clone(ts), Topic{ID: "t3", Partitions: 8})},
		{brokers(1, 2, 3, 4), []Topic{{ID: "t1", Partitions: 80}, {ID: "t3", Partitions: 8}}}, // t2 deleted, t1 grown
		{brokers(4), []Topic{{ID: "t1", Partitions: 80}, {ID: "t3", Partitions: 8}}},
		{brokers(4), []Topic{{ID: "t1", Partitions: 80}, {ID: "t3", Partitions: 8}, {ID: "t2b", Partitions: 16}}},
	}
	var prev *Assignment
	for i, s := range steps {
		next, err := NextAssignment(prev, s.topics, s.live, int32(i+1))
		if err != nil {
			t.Fatal(err)
		}
		again, _ := NextAssignment(prev, s.topics, s.live, int32(i+1))
		if !reflect.DeepEqual(next, again) {
			t.Fatalf("step %d: same inputs, different assignments", i)
		}
		if len(next.Topics) != len(s.topics) {
			t.Fatalf("step %d: %d topics, want %d", i, len(next.Topics), len(s.topics))
		}
		for _, tp := range s.topics {
			ps := next.Topics[tp.ID]
			if len(ps) != int(tp.Partitions) {
				t.Fatalf("step %d: topic %s has %d partitions", i, tp.ID, len(ps))
			}
			for p, cur := range ps {
				if want := Assign(tp.ID, int32(p), s.live, ""); cur.Broker != want {
					t.Fatalf("step %d %s/%d: owner %d, want %d", i, tp.ID, p, cur.Broker, want)
				}
				var old *PartitionOwner
				if prev != nil {
					if o, ok := prev.Owner(tp.ID, int32(p)); ok {
						old = &o
					}
				}
				switch {
				case old == nil && prev == nil && cur.LeaderEpoch != 0:
					t.Fatalf("step %d %s/%d: new partition in the first assignment at epoch %d", i, tp.ID, p, cur.LeaderEpoch)
				case old == nil && prev != nil && cur.LeaderEpoch <= maxEpoch(prev):
					t.Fatalf("step %d %s/%d: new partition at epoch %d, an epoch up to %d was handed out before", i, tp.ID, p, cur.LeaderEpoch, maxEpoch(prev))
				case old != nil && old.Broker == cur.Broker && cur.LeaderEpoch != old.LeaderEpoch:
					t.Fatalf("step %d %s/%d: same owner, epoch %d -> %d", i, tp.ID, p, old.LeaderEpoch, cur.LeaderEpoch)
				case old != nil && old.Broker != cur.Broker && cur.LeaderEpoch != old.LeaderEpoch+1:
					t.Fatalf("step %d %s/%d: owner %d -> %d, epoch %d -> %d", i, tp.ID, p, old.Broker, cur.Broker, old.LeaderEpoch, cur.LeaderEpoch)
				}
			}
		}
		prev = next
	}
	if _, err := NextAssignment(prev, ts, nil, prev.ControllerEpoch-1); !errors.Is(err, ErrStaleController) {
		t.Fatalf("older controller epoch: %v, want ErrStaleController", err)
	}
}

func TestAssignmentFileAndStaleController(t *testing.T) {
	m := memfs.New()
	r := NewAssignmentReader(m, clusterDir)
	if _, err := r.Read(); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("no assignment yet: %v", err)
	}
	ts := []Topic{{ID: "t", Partitions: 4}}
	a5, _ := NextAssignment(nil, ts, brokers(1, 2), 5)
	if err := WriteAssignment(m, clusterDir, a5); err != nil {
		t.Fatal(err)
	}
	got, err := r.Read()
	if err != nil || !reflect.DeepEqual(got.Assignment, a5) {
		t.Fatalf("read %+v, %v; want %+v", got, err, a5)
	}
	// Durable: survives a crash right after the write.
	if got, err := ReadAssignment(m.CrashClone(), clusterDir); err != nil || !reflect.DeepEqual(got, a5) {
		t.Fatalf("after crash: %+v, %v", got, err)
	}

	// A deposed controller (epoch 4) writes late: refused.
	a4, _ := NextAssignment(nil, ts, brokers(1), 4)
	if err := WriteAssignment(m, clusterDir, a4); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Read(); !errors.Is(err, ErrStaleController) {
		t.Fatalf("epoch 4 after 5: %v, want ErrStaleController", err)
	}
	// A fresh reader that has seen controller epoch 6 claimed refuses 5 too.
	r2 := NewAssignmentReader(m, clusterDir)
	r2.ObserveControllerEpoch(6)
	r2.ObserveControllerEpoch(3) // never goes back
	if err := WriteAssignment(m, clusterDir, a5); err != nil {
		t.Fatal(err)
	}
	if _, err := r2.Read(); !errors.Is(err, ErrStaleController) || r2.HighestControllerEpoch() != 6 {
		t.Fatalf("epoch 5 after 6 seen: %v (highest %d)", err, r2.HighestControllerEpoch())
	}
	// The same epoch again, and a newer one, are accepted.
	if _, err := r.Read(); err != nil {
		t.Fatalf("same epoch again: %v", err)
	}
	a6, _ := NextAssignment(a5, ts, brokers(2), 6)
	if err := WriteAssignment(m, clusterDir, a6); err != nil {
		t.Fatal(err)
	}
	for _, rr := range []*AssignmentReader{r, r2} {
		if got, err := rr.Read(); err != nil || got.Assignment.ControllerEpoch != 6 {
			t.Fatalf("epoch 6: %+v, %v", got, err)
		}
	}
	if err := WriteAssignment(m, clusterDir, &Assignment{}); err == nil {
		t.Fatal("assignment without a controller epoch written")
	}
}

// A broker restarted under the same ID (a new incarnation) is a new owner:
// its partitions get a new leader epoch, the others keep theirs.
func TestNextAssignmentIncarnationChange(t *testing.T) {
	ts := []Topic{{ID: "t1", Partitions: 32}}
	live := []LiveBroker{{ID: 1, Incarnation: "a"}, {ID: 2, Incarnation: "b"}}
	first, err := NextAssignment(nil, ts, live, 1)
	if err != nil {
		t.Fatal(err)
	}
	same, err := NextAssignment(first, ts, live, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(first, same) {
		t.Fatal("same incarnations, different assignment")
	}
	restarted := []LiveBroker{{ID: 1, Incarnation: "a2"}, {ID: 2, Incarnation: "b"}}
	next, err := NextAssignment(first, ts, restarted, 2)
	if err != nil {
		t.Fatal(err)
	}
	moved := 0
	for p, cur := range next.Topics["t1"] {
		old := first.Topics["t1"][p]
		if cur.Broker != old.Broker {
			t.Fatalf("partition %d: owner %d -> %d on a restart", p, old.Broker, cur.Broker)
		}
		switch cur.Broker {
		case 1:
			moved++
			if cur.LeaderEpoch != old.LeaderEpoch+1 || cur.Incarnation != "a2" {
				t.Fatalf("partition %d of the restarted broker: %+v after %+v", p, cur, old)
			}
		case 2:
			if cur != old {
				t.Fatalf("partition %d of the other broker changed: %+v after %+v", p, cur, old)
			}
		}
	}
	if moved == 0 {
		t.Fatal("broker 1 owns nothing; the case tests nothing")
	}
}

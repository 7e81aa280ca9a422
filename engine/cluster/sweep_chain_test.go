package cluster

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"testing"

	"github.com/kaas-dev/kaas/volume"
)

// chainRounds are the topics of the chain sweep's rounds: a topic is
// created, one grows, one is deleted.
var chainRounds = [][]Topic{
	{{ID: "t-orders", Partitions: 4}, {ID: "t-payments", Partitions: 2}},
	{{ID: "t-orders", Partitions: 6}, {ID: "t-payments", Partitions: 2}},
	{{ID: "t-orders", Partitions: 6}},
}

// chainControllerRound is the engine's controller round on the chain,
// reduced to what touches the volume: load the chain, compute the next
// assignment, Stamp it, Verify, commit (compact or as a delta). It records
// every assignment it tried to commit, by version, in ct.tried, and the
// last whose commit returned success in ct.committed.
func chainControllerRound(fsys volume.FS, b *broker, topics []Topic, ct *clusterTrial, compact bool) error {
	st := b.el.Status()
	if !st.IsController {
		return nil
	}
	prev, head, err := LoadAssignment(fsys, clusterDir)
	if errors.Is(err, fs.ErrNotExist) {
		prev, head, err = nil, nil, nil
	}
	if err != nil {
		return err
	}
	if prev != nil && prev.ControllerEpoch > st.Epoch {
		return nil
	}
	next, err := NextAssignment(prev, append(topics, Topic{ID: CoordinatorsID, Partitions: 3}), b.obs.Live(), st.Epoch)
	if err != nil {
		return err
	}
	d := Stamp(prev, next)
	if prev != nil && d.Empty() && !compact {
		return nil
	}
	if ok, err := b.el.Verify(); err != nil || !ok {
		return err
	}
	ct.tried[next.ID()] = next
	if _, err := CommitAssignment(fsys, clusterDir, head, next, d, compact); err != nil {
		return err
	}
	ct.committed = next.ID()
	return nil
}

// assignmentChainProcedure: broker 2, controller at epoch 2, commits a
// delta for each of chainRounds with broker 3 leaving before the last,
// then compacts the chain.
func assignmentChainProcedure() clusterProcedure {
	return clusterProcedure{
		name:   "assignment-chain",
		covers: []string{"CommitAssignment"},
		setup: func(t *testing.T, fsys volume.FS, ct *clusterTrial) {
			setupCluster(t, fsys, ct)
			b, err := crashedBroker(fsys, ct)
			if err != nil || !b.el.Status().IsController {
				t.Fatalf("broker 2 campaign: %+v, %v", b.el.Status(), err)
			}
			// The chain starts: a base and a head at epoch 2.
			if err := chainControllerRound(fsys, b, chainRounds[0], ct, true); err != nil {
				t.Fatal(err)
			}
			if head, err := ReadAssignmentHead(fsys, clusterDir); err != nil || len(head.Deltas) != 0 {
				t.Fatalf("head after the first commit: %+v, %v", head, err)
			}
			ct.chainFrom = ct.tried[ct.committed]
		},
		work: func(fsys volume.FS, ct *clusterTrial) error {
			b, err := crashedBroker(fsys, ct)
			if err != nil {
				return err
			}
			for i, topics := range chainRounds[1:] {
				if i == len(chainRounds)-2 {
					b.obs.Observe([]Heartbeat{{BrokerID: 3, Counter: 1 << 20, KafkaAddr: "b3:9092", Incarnation: "c1", Leaving: true}})
				}
				if err := chainControllerRound(fsys, b, topics, ct, false); err != nil {
					return err
				}
			}
			if err := chainControllerRound(fsys, b, chainRounds[len(chainRounds)-1], ct, true); err != nil {
				return err
			}
			// The next round's read: the compaction's removals are best
			// effort, so a crash during them shows here.
			_, _, err = LoadAssignment(fsys, clusterDir)
			return err
		},
		checkCrashed: func(t *testing.T, fsys volume.FS, ct *clusterTrial) {
			t.Helper()
			checkChain(t, fsys, ct)
			checkClaims(t, fsys)
		},
		restart: func(t *testing.T, fsys volume.FS, ct *clusterTrial) {
			t.Helper()
			last := chainRounds[len(chainRounds)-1]
			restartBrokers(t, fsys, ct, func(b *broker, r int) {
				// A delta, then a compaction, as the controller's rounds go.
				for _, compact := range []bool{false, true} {
					if err := chainControllerRound(fsys, b, last, ct, compact); err != nil {
						t.Fatalf("round %d: broker %d controller round: %v", r, b.id, err)
					}
					checkChain(t, fsys, ct)
				}
			}, func(bs []*broker) bool { return chainConverged(t, fsys, bs, last) })
		},
	}
}

// checkChain checks that the chain loads, at a version no older than the
// last commit that returned success, with exactly what was committed at
// that version; and that a reader following the chain from the setup's
// version reads the same.
func checkChain(t *testing.T, fsys volume.FS, ct *clusterTrial) {
	t.Helper()
	a, _, err := LoadAssignment(fsys, clusterDir)
	if err != nil {
		t.Fatalf("the chain does not load after the crash: %v", err)
	}
	if a.ID().Before(ct.committed) {
		t.Fatalf("the chain went back to %s; %s was committed", a.ID(), ct.committed)
	}
	want, ok := ct.tried[a.ID()]
	if !ok {
		t.Fatalf("the chain loads %s, which no commit wrote", a.ID())
	}
	if err := sameAssignment(a, want); err != nil {
		t.Fatalf("the chain at %s: %v", a.ID(), err)
	}
	if ct.chainFrom != nil {
		r := NewAssignmentReader(fsys, clusterDir)
		r.cur = ct.chainFrom
		up, err := r.Read()
		if err != nil && !errors.Is(err, errChainBehind) {
			t.Fatalf("a reader following the chain: %v", err)
		}
		// The reader follows the head, whose write commits a delta; a
		// compaction's base is current once renamed, and the reader sees
		// it when the head names it: it may read the chain's version
		// before, never anything that was not committed.
		if got := up.Assignment; err == nil && got.ID() != a.ID() {
			want, ok := ct.tried[got.ID()]
			if !ok || !got.ID().Before(a.ID()) || got.ID().Before(ct.chainFrom.ID()) {
				t.Fatalf("a reader following the chain reads %s, a load %s", got.ID(), a.ID())
			}
			if err := sameAssignment(got, want); err != nil {
				t.Fatalf("a reader following the chain: %v", err)
			}
		}
	}
}

// sameAssignment compares two assignments' versions and entries.
func sameAssignment(a, b *Assignment) error {
	if a.ID() != b.ID() || len(a.Topics) != len(b.Topics) {
		return fmt.Errorf("%s with %d topics, want %s with %d", a.ID(), len(a.Topics), b.ID(), len(b.Topics))
	}
	cmp := func(what string, x, y []PartitionOwner) error {
		if len(x) != len(y) {
			return fmt.Errorf("%s: %d entries, want %d", what, len(x), len(y))
		}
		for i := range x {
			if x[i] != y[i] {
				return fmt.Errorf("%s/%d: %+v, want %+v", what, i, x[i], y[i])
			}
		}
		return nil
	}
	for id, ps := range b.Topics {
		if err := cmp(id, a.Topics[id], ps); err != nil {
			return err
		}
	}
	return cmp("coordinators", a.Coordinators, b.Coordinators)
}

// chainConverged reports whether one of bs is the controller, the chain
// holds topics all on brokers 2 and 3 at that controller's epoch, and
// the chain directory holds nothing the head does not name.
func chainConverged(t *testing.T, fsys volume.FS, bs []*broker, topics []Topic) bool {
	t.Helper()
	var ctl *broker
	for _, b := range bs {
		if b.el.Status().IsController {
			ctl = b
		}
	}
	if ctl == nil {
		return false
	}
	a, head, err := LoadAssignment(fsys, clusterDir)
	if err != nil || head == nil || a.ControllerEpoch != ctl.el.Status().Epoch || len(a.Topics) != len(topics) {
		return false
	}
	for _, tp := range topics {
		for _, p := range a.Topics[tp.ID] {
			if p.Broker != 2 && p.Broker != 3 {
				return false
			}
		}
	}
	ents, err := fsys.ReadDir(path.Join(clusterDir, AssignmentChainDir))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() != assignmentHeadFile && (len(head.Deltas) == 0 || !strings.HasPrefix(e.Name(), deltaPrefix)) {
			t.Fatalf("left in the chain directory after a compaction: %s", e.Name())
		}
	}
	return true
}

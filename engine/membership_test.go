package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kaas-dev/kaas/engine/cluster"
	"github.com/kaas-dev/kaas/engine/desired"
	"github.com/kaas-dev/kaas/states"
	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/faultfs"
	"github.com/kaas-dev/kaas/volume/memfs"
)

func startMember(t *testing.T, fsys volume.FS, id int32) *running {
	t.Helper()
	return startZonedMember(t, fsys, id, "")
}

func startZonedMember(t *testing.T, fsys volume.FS, id int32, zone string) *running {
	t.Helper()
	return startWith(t, Config{FS: fsys, DataDir: testData, ClusterDir: testCluster, BrokerID: id, Zone: zone,
		HeartbeatInterval: 10 * time.Millisecond, Lease: 200 * time.Millisecond})
}

// poll waits for cond, checking every few milliseconds.
func poll(t *testing.T, ctx context.Context, what string, cond func() error) {
	t.Helper()
	var err error
	for ctx.Err() == nil {
		if err = cond(); err == nil {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("gave up waiting for %s: %v", what, err)
}

// owners returns which engine serves each partition of topic, checking
// that exactly one does and that both answer ErrNotServing elsewhere and
// name the same leader and epoch.
func owners(name string, n int32, es ...*Engine) ([]int32, []int32, error) {
	own, epochs := make([]int32, n), make([]int32, n)
	for p := range n {
		own[p] = -1
		for _, e := range es {
			part, err := e.Partition(name, p)
			switch {
			case err == nil && own[p] >= 0:
				return nil, nil, errors.New("two owners")
			case err == nil:
				own[p], epochs[p] = e.BrokerID(), part.Epoch()
			case !errors.Is(err, ErrNotServing):
				return nil, nil, err
			}
		}
		if own[p] < 0 {
			return nil, nil, errors.New("partition without owner")
		}
		for _, e := range es {
			v, ok := e.Topic(name)
			if !ok || v.Leaders[p] != own[p] || v.Epochs[p] != epochs[p] {
				return nil, nil, errors.New("routing disagrees with the owner")
			}
		}
	}
	return own, epochs, nil
}

func TestTwoBrokersSharePartitionsAndFailOver(t *testing.T) {
	ctx := safety(t)
	fsys := memfs.New()
	e1, e2 := startMember(t, fsys, 1), startMember(t, fsys, 2)
	const n = 16
	if _, err := e1.CreateTopic(CreateTopicRequest{Name: "shared", Partitions: n}); err != nil {
		t.Fatal(err)
	}
	// The other broker cannot give the name a second topic ID.
	if _, err := e2.CreateTopic(CreateTopicRequest{Name: "shared", Partitions: 3}); !errors.Is(err, ErrTopicExists) {
		t.Fatalf("second create: %v, want ErrTopicExists", err)
	}
	var own, epochs []int32
	poll(t, ctx, "one owner per partition, both brokers used", func() error {
		var err error
		if own, epochs, err = owners("shared", n, e1.Engine, e2.Engine); err != nil {
			return err
		}
		count := map[int32]int{}
		for _, o := range own {
			count[o]++
		}
		if len(count) != 2 || !e1.Ready() || !e2.Ready() {
			return errors.New("not both brokers serving")
		}
		return nil
	})
	if c1, c2 := e1.ControllerID(), e2.ControllerID(); c1 != c2 || c1 < 1 {
		t.Fatalf("controllers %d and %d", c1, c2)
	}
	if bs := e1.Brokers(); len(bs) != 2 {
		t.Fatalf("brokers %+v", bs)
	}

	// Broker 2 leaves (SIGTERM): broker 1 takes its partitions over under
	// higher epochs and keeps its own.
	e2.stop(t)
	poll(t, ctx, "broker 1 serving everything", func() error {
		now, nowEpochs, err := owners("shared", n, e1.Engine)
		if err != nil {
			return err
		}
		for p := range now {
			switch {
			case own[p] == 2 && nowEpochs[p] <= epochs[p]:
				t.Fatalf("partition %d moved from broker 2 at epoch %d to %d", p, epochs[p], nowEpochs[p])
			case own[p] == 1 && nowEpochs[p] != epochs[p]:
				t.Fatalf("partition %d of broker 1 changed epoch %d -> %d", p, epochs[p], nowEpochs[p])
			}
		}
		return nil
	})

	// Broker 2 comes back (a new incarnation) and the topic is deleted
	// through it: the controller drives the delete to its end.
	e2 = startMember(t, fsys, 2)
	poll(t, ctx, "broker 2 serving again", func() error {
		_, _, err := owners("shared", n, e1.Engine, e2.Engine)
		return err
	})
	if _, err := e2.DeleteTopic("shared"); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, "topic deleted", func() error {
		if _, err := desired.ReadTopicSpec(fsys, testCluster, "shared"); !errors.Is(err, fs.ErrNotExist) {
			return errors.New("desired state still there")
		}
		if _, err := fsys.Stat(states.TopicDir(testData, "shared")); !errors.Is(err, fs.ErrNotExist) {
			return errors.New("topic directory still there")
		}
		return nil
	})
	for _, e := range []*Engine{e1.Engine, e2.Engine} {
		for p := range int32(n) {
			if _, err := e.Partition("shared", p); err == nil {
				t.Fatalf("broker %d still serves partition %d of a deleted topic", e.BrokerID(), p)
			}
		}
	}
}

func TestControllerForRoutesZonedClientsInZone(t *testing.T) {
	ctx := safety(t)
	fsys := memfs.New()
	es := []*running{startZonedMember(t, fsys, 1, "a"), startZonedMember(t, fsys, 2, "a"), startZonedMember(t, fsys, 3, "b")}
	poll(t, ctx, "all three live and one controller", func() error {
		for _, e := range es {
			if len(e.Brokers()) != 3 || e.ControllerID() < 0 || e.ControllerID() != es[0].ControllerID() {
				return errors.New("not settled")
			}
		}
		return nil
	})
	ctrl := es[0].ControllerID()
	inA := es[0].ControllerFor("a")
	for _, tc := range []struct {
		zone string
		ok   func(int32) bool
	}{
		{"", func(id int32) bool { return id == ctrl }},
		{"a", func(id int32) bool { return id == 1 || id == 2 }},
		{"b", func(id int32) bool { return id == 3 }},
		{"nowhere", func(id int32) bool { return id == ctrl }},
	} {
		for _, e := range es {
			got := e.ControllerFor(tc.zone)
			if !tc.ok(got) {
				t.Errorf("broker %d: ControllerFor(%q) = %d", e.BrokerID(), tc.zone, got)
			}
			if tc.zone == "a" && got != inA {
				t.Errorf("broker %d names %d for zone a, broker 1 names %d", e.BrokerID(), got, inA)
			}
		}
	}
}

// TestControllerOverwritesADeposedControllersLateWrite: an assignment
// written late by an older controller epoch (its controller was deposed
// between its check and its write) is neither obeyed nor built upon: the
// controller rewrites its own last assignment, and no leader epoch goes
// back.
func TestControllerOverwritesADeposedControllersLateWrite(t *testing.T) {
	ctx := safety(t)
	fsys := memfs.New()
	e := startMember(t, fsys, 1)
	spec, err := e.CreateTopic(CreateTopicRequest{Name: "late", Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	var before *cluster.Assignment
	poll(t, ctx, "serving", func() error {
		if _, _, err := owners("late", 2, e.Engine); err != nil {
			return err
		}
		before, err = cluster.ReadAssignment(fsys, testCluster)
		return err
	})
	if before.ControllerEpoch < 1 || before.Topics[spec.ID][0].LeaderEpoch < 1 {
		t.Fatalf("assignment %+v", before)
	}
	// The late write: an older controller epoch, whose epochs are lower.
	late := cluster.Assignment{ControllerEpoch: before.ControllerEpoch - 1, Topics: map[string][]cluster.PartitionOwner{}}
	for _, o := range before.Topics[spec.ID] {
		o.LeaderEpoch = 0
		late.Topics[spec.ID] = append(late.Topics[spec.ID], o)
	}
	b, err := json.Marshal(late)
	if err != nil {
		t.Fatal(err)
	}
	if err := volume.WriteFileAtomic(fsys, cluster.AssignmentPath(testCluster), b); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, "the controller's assignment back in place", func() error {
		now, err := cluster.ReadAssignment(fsys, testCluster)
		if err != nil {
			return err
		}
		if now.ControllerEpoch != before.ControllerEpoch {
			return fmt.Errorf("controller epoch %d", now.ControllerEpoch)
		}
		if !reflect.DeepEqual(now.Topics, before.Topics) {
			t.Fatalf("assignment after the late write %+v, before %+v", now.Topics, before.Topics)
		}
		return nil
	})
	for p := range int32(2) {
		part, err := e.Partition("late", p)
		if err != nil || part.Epoch() != before.Topics[spec.ID][p].LeaderEpoch {
			t.Fatalf("partition %d: %v, epoch changed", p, err)
		}
	}
}

// A broker whose volume stalls can neither renew its heartbeat nor learn
// that it lost its partitions: it must stop answering for them (reads
// included) before the lease others wait out runs out, so that no client
// ever reads a deposed owner's stale high watermark.
func TestStalledBrokerStopsServingBeforeItsLeaseRunsOut(t *testing.T) {
	ctx := safety(t)
	mem := memfs.New()
	var stalled atomic.Bool
	release := make(chan struct{})
	fsys1 := faultfs.New(mem, func(op faultfs.Op) faultfs.Action {
		if stalled.Load() && strings.Contains(op.Path, "/"+cluster.BrokersDir+"/") {
			return faultfs.Stall(release)
		}
		return faultfs.Proceed
	})
	e1, e2 := startMember(t, fsys1, 1), startMember(t, mem, 2)
	const n = 8
	if _, err := e1.CreateTopic(CreateTopicRequest{Name: "stall", Partitions: n}); err != nil {
		t.Fatal(err)
	}
	var own []int32
	poll(t, ctx, "both brokers serving", func() error {
		var err error
		if own, _, err = owners("stall", n, e1.Engine, e2.Engine); err != nil {
			return err
		}
		if !slices.Contains(own, 1) {
			return errors.New("broker 1 owns nothing yet")
		}
		return nil
	})
	stalled.Store(true)
	t.Cleanup(func() { close(release) })
	// Until broker 2 serves one of broker 1's partitions, at most one
	// broker answers for each; broker 1 gives up first, saying why.
	gaveUp := false
	poll(t, ctx, "broker 2 taking over broker 1's partitions", func() error {
		for p := range int32(n) {
			if own[p] != 1 {
				continue
			}
			_, err1 := e1.Partition("stall", p)
			_, err2 := e2.Partition("stall", p)
			if err1 == nil && err2 == nil {
				t.Fatalf("partition %d served by both brokers", p)
			}
			if err1 != nil && strings.Contains(err1.Error(), "has not renewed its heartbeat") {
				gaveUp = true
			}
			if err2 != nil {
				return fmt.Errorf("partition %d: %w", p, err2)
			}
		}
		return nil
	})
	if !gaveUp {
		t.Error("broker 1 never said it stopped serving for want of a heartbeat")
	}
}

// TestBrokerStuckReadingAPeerKeepsServing: a round stuck reading another
// broker's heartbeat (a busy shared volume) keeps this broker beating, and
// since the assignment's head still names what it has read, each beat
// renews its serving lease: it serves its partitions on, and the peer,
// seeing the beats, takes nothing over.
func TestBrokerStuckReadingAPeerKeepsServing(t *testing.T) {
	ctx := safety(t)
	mem := memfs.New()
	var stalled atomic.Bool
	release := make(chan struct{})
	peer := "/" + cluster.BrokersDir + "/2"
	fsys1 := faultfs.New(mem, func(op faultfs.Op) faultfs.Action {
		if stalled.Load() && op.Kind == faultfs.OpOpen && strings.Contains(op.Path, peer) {
			return faultfs.Stall(release)
		}
		return faultfs.Proceed
	})
	// A longer lease than startMember's: the test holds broker 1 to
	// serving without a gap, which a loaded test machine must not break.
	member := func(fsys volume.FS, id int32) *running {
		return startWith(t, Config{FS: fsys, DataDir: testData, ClusterDir: testCluster, BrokerID: id,
			HeartbeatInterval: 20 * time.Millisecond, Lease: time.Second})
	}
	e1, e2 := member(fsys1, 1), member(mem, 2)
	const n = 8
	if _, err := e1.CreateTopic(CreateTopicRequest{Name: "busy", Partitions: n}); err != nil {
		t.Fatal(err)
	}
	var own []int32
	poll(t, ctx, "both brokers serving", func() error {
		var err error
		if own, _, err = owners("busy", n, e1.Engine, e2.Engine); err != nil {
			return err
		}
		if !slices.Contains(own, 1) {
			return errors.New("broker 1 owns nothing yet")
		}
		// A change of the assignment still in flight would be the
		// round's to apply: the renewal waits for it, rightly.
		if !e1.areader.HeadUnchanged() {
			return errors.New("broker 1 has not read the current assignment yet")
		}
		return nil
	})
	stalled.Store(true)
	t.Cleanup(func() { close(release) })
	// Three leases: without the renewal, broker 1 would stop serving after
	// three quarters of one.
	until := time.Now().Add(3 * e1.cfg.Lease)
	for time.Now().Before(until) {
		for p := range int32(n) {
			if own[p] != 1 {
				continue
			}
			if _, err := e1.Partition("busy", p); err != nil {
				t.Fatalf("partition %d while broker 1's round is stuck on a peer's heartbeat: %v", p, err)
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
}

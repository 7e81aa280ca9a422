package engine

import (
	"context"
	"errors"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kaas-dev/kaas/engine/cluster"
	"github.com/kaas-dev/kaas/engine/desired"
	"github.com/kaas-dev/kaas/states"
	"github.com/kaas-dev/kaas/volume/memfs"
)

func budgetConfig(fsys *memfs.FS, budget int) Config {
	return Config{FS: fsys, DataDir: testData, ClusterDir: testCluster, BrokerID: 1, AutoCreateTopics: true,
		MaxPartitionsPerBroker: budget, HeartbeatInterval: 20 * time.Millisecond, Lease: 400 * time.Millisecond,
		ResyncInterval: 100 * time.Millisecond}
}

// TestPartitionBudgetAdmission: CreateTopics, CreatePartitions and
// auto-creation that would make more partitions than the broker's budget
// are refused whole, before anything is written; what fits is admitted.
func TestPartitionBudgetAdmission(t *testing.T) {
	fsys := memfs.New()
	e := startWith(t, budgetConfig(fsys, 10))
	steps := []struct {
		what    string
		do      func() error
		wantErr string // "" admitted; else a piece of the refusal
	}{
		{"create 11", func() error { _, err := e.CreateTopic(CreateTopicRequest{Name: "a", Partitions: 11}); return err },
			"creating 11 partitions would make 11 on 1 broker; each broker holds at most 10 (--max-partitions-per-broker)"},
		{"validate-only 11", func() error {
			_, err := e.CreateTopic(CreateTopicRequest{Name: "a", Partitions: 11, ValidateOnly: true})
			return err
		}, "would make 11"},
		{"create 6", func() error { _, err := e.CreateTopic(CreateTopicRequest{Name: "b", Partitions: 6}); return err }, ""},
		{"create 5 more", func() error { _, err := e.CreateTopic(CreateTopicRequest{Name: "c", Partitions: 5}); return err },
			"creating 5 partitions would make 11 on 1 broker"},
		{"grow b to 11", func() error { _, err := e.CreatePartitions("b", 11, false); return err }, "creating 5 partitions would make 11"},
		{"grow b to 9", func() error { _, err := e.CreatePartitions("b", 9, false); return err }, ""},
		{"auto-create 1", func() error { return e.AutoCreate("d") }, ""},
		{"auto-create 1 more", func() error { return e.AutoCreate("e") }, "would make 11"},
	}
	for _, s := range steps {
		err := s.do()
		switch {
		case s.wantErr == "" && err != nil:
			t.Fatalf("%s: %v, want admitted", s.what, err)
		case s.wantErr != "" && (!errors.Is(err, ErrPartitionBudget) || !strings.Contains(err.Error(), s.wantErr)):
			t.Fatalf("%s: %v, want ErrPartitionBudget with %q", s.what, err, s.wantErr)
		}
	}
	for _, name := range []string{"a", "c", "e"} {
		if _, err := desired.ReadTopicSpec(fsys, testCluster, name); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("refused topic %s left a desired state: %v", name, err)
		}
	}
	if s, _ := desired.ReadTopicSpec(fsys, testCluster, "b"); s.Partitions != 9 {
		t.Errorf("topic b has %d partitions, want 9", s.Partitions)
	}
}

// TestClusterPartitionBudget: the cluster holds the sum of its live
// brokers' budgets, each from its heartbeat, this broker's standing in for
// a broker that publishes none.
func TestClusterPartitionBudget(t *testing.T) {
	cases := []struct {
		name     string
		live     []int32
		budgets  map[int32]int32 // heartbeat budgets of the others
		capacity int64
		per      int64
		brokers  int
	}{
		{"alone, before its first beat", nil, nil, 10, 10, 1},
		{"alone", []int32{1}, nil, 10, 10, 1},
		{"three alike", []int32{1, 2, 3}, map[int32]int32{2: 10, 3: 10}, 30, 10, 3},
		{"one without a budget in its heartbeat", []int32{1, 2}, nil, 20, 10, 2},
		{"different budgets", []int32{1, 2, 3}, map[int32]int32{2: 20}, 40, -1, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, err := New(budgetConfig(memfs.New(), 10))
			if err != nil {
				t.Fatal(err)
			}
			e.updateClusterView(func(v *clusterView) {
				hbs := map[int32]cluster.Heartbeat{}
				for _, id := range c.live {
					v.live = append(v.live, cluster.LiveBroker{ID: id})
					hbs[id] = cluster.Heartbeat{BrokerID: id, MaxPartitions: c.budgets[id]}
				}
				v.heartbeats = hbs
			})
			capacity, brokers, per := e.clusterPartitionBudget()
			if capacity != c.capacity || brokers != c.brokers || per != c.per {
				t.Fatalf("capacity %d on %d brokers (per broker %d), want %d on %d (%d)", capacity, brokers, per, c.capacity, c.brokers, c.per)
			}
		})
	}
	e, _ := New(budgetConfig(memfs.New(), 10))
	e.updateClusterView(func(v *clusterView) {
		v.live = []cluster.LiveBroker{{ID: 1}, {ID: 2}}
		v.heartbeats = map[int32]cluster.Heartbeat{2: {BrokerID: 2, MaxPartitions: 30}}
	})
	_, err := e.CreateTopic(CreateTopicRequest{Name: "x", Partitions: 41})
	if !errors.Is(err, ErrPartitionBudget) || !strings.Contains(err.Error(), "would make 41 on 2 live brokers, which hold at most 40 together") {
		t.Fatalf("41 partitions on brokers of 10 and 30: %v", err)
	}
}

// TestPartitionBudgetOpens: a broker whose desired state assigns it more
// partitions than its budget (written before the budget, or by another
// broker) serves its budget's worth, reports the rest as not served (over
// the budget) in Readiness, Describe and the reconcile status, and opens
// them once slots free up.
func TestPartitionBudgetOpens(t *testing.T) {
	fsys := memfs.New()
	const budget = 10
	e := startWith(t, budgetConfig(fsys, budget))
	ctx := safety(t)
	if _, err := e.CreateTopic(CreateTopicRequest{Name: "small", Partitions: 4}); err != nil {
		t.Fatal(err)
	}
	mustServing(t, ctx, e.Engine, "small")
	wide := desired.TopicSpec{Name: "wide", ID: uuid.NewString(), Partitions: 10, Generation: 1}
	if err := desired.WriteTopicSpec(fsys, testCluster, wide); err != nil {
		t.Fatal(err)
	}
	served := func() int {
		n := 0
		for _, tv := range e.Topics() {
			for _, ep := range tv.Epochs {
				if ep >= 0 {
					n++
				}
			}
		}
		return n
	}
	overBudget := func(st BrokerStatus) int {
		n := 0
		for _, ts := range st.Topics {
			for _, ps := range ts.Partitions {
				if !ps.Serving && strings.Contains(ps.Error, "partition budget") {
					n++
				}
			}
		}
		return n
	}
	pollFor(t, ctx, "the budget's worth of partitions served, the rest reported", func() bool {
		ready, why := e.Readiness()
		return served() == budget && overBudget(e.Describe()) == 4 && !ready &&
			strings.Contains(why, "4 of the 14 partitions assigned to this broker are not served: it holds 10 open, all of its partition budget (--max-partitions-per-broker 10)")
	})
	if n := e.openSlots.Load(); n != budget {
		t.Fatalf("%d partitions open, budget %d", n, budget)
	}
	st := e.Describe()
	failed := 0
	for _, ts := range st.Topics {
		for _, ps := range ts.Partitions {
			if !ps.Serving && strings.Contains(ps.Error, "partition budget") {
				failed++
				if rec := statusOf(t, fsys, states.PartitionOpen.Kind, states.PartitionObject(ts.Name, ps.Partition)); rec == nil || !strings.Contains(rec.LastError, "partition budget") {
					t.Errorf("reconcile status of %s/%d: %+v, want the budget named", ts.Name, ps.Partition, rec)
				}
			}
		}
	}
	if failed != 4 || st.PartitionsOpen != budget || st.PartitionBudget != budget || st.Ready {
		t.Fatalf("status: %d partitions reported over the budget, %d open of %d, ready %v; want 4, 10 of 10, false", failed, st.PartitionsOpen, st.PartitionBudget, st.Ready)
	}
	// Deleting a topic frees its slots; the waiting partitions open.
	if _, err := e.DeleteTopic("small"); err != nil {
		t.Fatal(err)
	}
	mustServing(t, ctx, e.Engine, "wide")
	pollFor(t, ctx, "ready with every wide partition served", func() bool { r, _ := e.Readiness(); return r })
	if n := e.openSlots.Load(); n != 10 {
		t.Fatalf("%d partitions open after the delete, want 10", n)
	}
}

// pollFor waits for cond, checking every few milliseconds (an open failure
// notifies nobody).
func pollFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("gave up waiting for %s", what)
		case <-tick.C:
		}
	}
}

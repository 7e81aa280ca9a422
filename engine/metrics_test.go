package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	"github.com/kaas-dev/kaas/engine/reconcile"
	"github.com/kaas-dev/kaas/states"
	"github.com/kaas-dev/kaas/volume/memfs"
)

// TestControlPlaneCollector checks exact values after known events: saved
// machine steps, a key's failed pass, a released partition, producer IDs.
func TestControlPlaneCollector(t *testing.T) {
	e, err := New(Config{FS: memfs.New(), DataDir: testData, ClusterDir: testCluster, BrokerID: 3})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	open := states.PartitionOpen.NewRecord(states.PartitionObject("t", 0), "id", "broker-3", now)
	for _, step := range []struct {
		lastError string
		attempts  int
	}{{"fence: boom", 1}, {"fence: boom", 2}, {"waiting: fence: epoch", 2}} {
		open.LastError, open.Attempts = step.lastError, step.attempts
		if err := e.save(open); err != nil {
			t.Fatal(err)
		}
	}
	// One step that succeeds, driven: counted ok when it succeeds.
	lastStep := states.Definition{Kind: states.PartitionOpen.Kind, Initial: "recovered", End: states.PartitionOpen.End,
		Steps: []states.Step{{From: "recovered", Event: "serve", To: states.PartitionOpen.End}}}
	done := states.PartitionOpen.NewRecord(states.PartitionObject("t", 1), "id", "broker-3", now)
	done.State = "recovered"
	if err := e.drive(t.Context(), lastStep, done, states.Actions{"serve": func(context.Context) error { return nil }}); err != nil {
		t.Fatal(err)
	}
	k, _ := e.queue.Get(t.Context())
	ended := e.queue.Done(k, reconcile.Result{}, errors.New("volume down"))
	e.reconciles.notePass(k.Kind, ended.Outcome)
	for range 3 {
		if _, err := e.NextProducerID(); err != nil {
			t.Fatal(err)
		}
	}
	want := `
# HELP kaas_machine_records State machine records as this broker's reconciler last wrote or drove them, by kind and current state; kind "reconcile" counts the reconcile keys whose last pass did not succeed, by outcome.
# TYPE kaas_machine_records gauge
kaas_machine_records{kind="partition-open",state="pending"} 1
kaas_machine_records{kind="partition-open",state="serving"} 1
kaas_machine_records{kind="reconcile",state="failed"} 1
# HELP kaas_producer_ids_total Producer IDs issued by this broker.
# TYPE kaas_producer_ids_total counter
kaas_producer_ids_total 3
`
	if err := testutil.CollectAndCompare(e.ControlPlaneCollector(), strings.NewReader(want), "kaas_machine_records", "kaas_producer_ids_total"); err != nil {
		t.Error(err)
	}
	c := e.ControlPlaneCollector()
	for _, tc := range []struct {
		series string
		want   float64
	}{
		{`kaas_reconcile_total{kind="partition-open",result="ok"}`, 1},
		{`kaas_reconcile_total{kind="partition-open",result="error"}`, 2},
		{`kaas_reconcile_total{kind="partition-open",result="waiting"}`, 1},
		{`kaas_reconcile_total{kind="` + string(k.Kind) + `",result="error"}`, 1},
		{`kaas_reconcile_attempts{kind="partition-open"}`, 2},
		{`kaas_reconcile_attempts{kind="` + string(k.Kind) + `"}`, 1},
		{`kaas_is_controller`, 0},
		{`kaas_lease_remaining_seconds`, 0},
	} {
		if got := seriesValue(t, c, tc.series); got != tc.want {
			t.Errorf("%s = %v, want %v", tc.series, got, tc.want)
		}
	}
	// A released partition leaves the book.
	e.machines.forget(states.PartitionOpen.Kind, states.PartitionObject("t", 0))
	if got := seriesValue(t, c, `kaas_reconcile_attempts{kind="partition-open"}`); got != 0 {
		t.Errorf("attempts after release = %v, want 0", got)
	}
}

// seriesValue is the value of one series (name and labels as the text
// format prints them) that c collects.
func seriesValue(t *testing.T, c interface {
	Describe(chan<- *prometheus.Desc)
	Collect(chan<- prometheus.Metric)
}, series string) float64 {
	t.Helper()
	name, _, _ := strings.Cut(series, "{")
	b, err := testutil.CollectAndFormat(c, expfmt.TypeTextPlain, name)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("no series %s in:\n%s", series, b)
	return 0
}

// TestAssignmentMetrics: kaas_cluster_partitions counts the topic
// partitions of the assignment read, and kaas_assignment_version grows
// with each change the controller writes.
func TestAssignmentMetrics(t *testing.T) {
	ctx := safety(t)
	e := startEngine(t, memfs.New())
	c := e.ControlPlaneCollector()
	var before float64
	for _, step := range []struct {
		topic      string
		partitions int32
		total      float64
	}{{"a", 3, 3}, {"b", 2, 5}} {
		if _, err := e.CreateTopic(CreateTopicRequest{Name: step.topic, Partitions: step.partitions}); err != nil {
			t.Fatal(err)
		}
		mustServing(t, ctx, e.Engine, step.topic)
		poll(t, ctx, "the assignment holding "+step.topic, func() error {
			if got := seriesValue(t, c, "kaas_cluster_partitions"); got != step.total {
				return fmt.Errorf("kaas_cluster_partitions %v, want %v", got, step.total)
			}
			return nil
		})
		v := seriesValue(t, c, "kaas_assignment_version")
		if v <= before {
			t.Fatalf("assignment version %v after %s, was %v", v, step.topic, before)
		}
		before = v
	}
}

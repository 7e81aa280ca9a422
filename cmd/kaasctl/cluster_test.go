package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kaas-dev/kaas/engine/cluster"
	"github.com/kaas-dev/kaas/engine/desired"
	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/memfs"
)

// TestObserveBrokers: a broker is live when its counter moves while kaasctl
// watches, whatever time its file might claim; one whose counter stands
// still for the whole window is not.
func TestObserveBrokers(t *testing.T) {
	fsys := memfs.New()
	const dir = "/c"
	for _, hb := range []cluster.Heartbeat{
		{BrokerID: 1, Counter: 10, KafkaAddr: "127.0.0.1:1", Incarnation: "a"},
		{BrokerID: 2, Counter: 99, KafkaAddr: "127.0.0.1:2", Incarnation: "b"},
	} {
		if err := cluster.WriteHeartbeat(fsys, dir, hb); err != nil {
			t.Fatal(err)
		}
	}
	clock := time.Unix(0, 0)
	waits := 0
	wait := func(d time.Duration) {
		clock = clock.Add(d)
		waits++
		if waits == 3 { // broker 1 beats while we watch; broker 2 never does
			if err := cluster.WriteHeartbeat(fsys, dir, cluster.Heartbeat{BrokerID: 1, Counter: 11, KafkaAddr: "127.0.0.1:1", Incarnation: "a"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	hbs, moved, err := observeBrokers(fsys, dir, time.Second, func() time.Time { return clock }, wait)
	if err != nil {
		t.Fatal(err)
	}
	if !moved[1] || moved[2] || len(hbs) != 2 || hbs[1].Counter != 11 {
		t.Fatalf("moved %v, heartbeats %v", moved, hbs)
	}
	if clock.Sub(time.Unix(0, 0)) < time.Second {
		t.Fatalf("gave up after %v: a still broker must be watched for the whole window", clock.Sub(time.Unix(0, 0)))
	}
}

func TestAssignmentCommand(t *testing.T) {
	data := t.TempDir()
	dir := filepath.Join(data, "__cluster")
	osfs := volume.OS()
	if err := volume.MkdirAllSync(osfs, filepath.Join(dir, "topics")); err != nil {
		t.Fatal(err)
	}
	spec := desired.TopicSpec{Name: "orders", ID: "11111111-1111-1111-1111-111111111111", Partitions: 2, Generation: 1}
	if err := desired.WriteTopicSpec(osfs, dir, spec); err != nil {
		t.Fatal(err)
	}
	a := &cluster.Assignment{ControllerEpoch: 4, Topics: map[string][]cluster.PartitionOwner{
		spec.ID: {{Broker: 1, LeaderEpoch: 3}, {Broker: 2, LeaderEpoch: 5}},
	}}
	if err := cluster.WriteAssignment(osfs, dir, a); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run([]string{"assignment", "--data", data, "-o", "json"}, &out); err != nil {
		t.Fatal(err)
	}
	var got struct {
		ControllerEpoch int32
		Partitions      []assignmentRow
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if got.ControllerEpoch != 4 || len(got.Partitions) != 2 || got.Partitions[1].Topic != "orders" ||
		got.Partitions[1].Broker != 2 || got.Partitions[1].LeaderEpoch != 5 {
		t.Fatalf("assignment %+v", got)
	}
	out.Reset()
	if err := run([]string{"assignment", "--data", data}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "controller epoch 4") || !strings.Contains(out.String(), "orders") {
		t.Fatalf("table:\n%s", out.String())
	}
	if err := run([]string{"brokers", "--admin", "http://127.0.0.1:1"}, &out); err == nil {
		t.Fatal("brokers --admin accepted: it reads the volume")
	}
}

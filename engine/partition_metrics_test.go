package engine

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kaas-dev/kaas/volume/memfs"
	"github.com/kaas-dev/kaas/volume/partlog/partlogtest"
)

func TestPartitionMetricsAfterAppends(t *testing.T) {
	ctx := safety(t)
	e := startEngine(t, memfs.New())
	for _, tp := range []struct {
		name string
		n    int32
	}{{"a", 1}, {"b", 2}, {"c", 1}} {
		if _, err := e.CreateTopic(CreateTopicRequest{Name: tp.name, Partitions: tp.n}); err != nil {
			t.Fatal(err)
		}
		mustServing(t, ctx, e.Engine, tp.name)
	}
	size := map[string]int{}
	produce := func(topic string, idx int32, records int) {
		b := partlogtest.MakeBatch(records, 16, 1000, -1, -1, -1)
		if _, err := mustPartition(t, e.Engine, topic, idx).Produce(ctx, b); err != nil {
			t.Fatal(err)
		}
		size[fmt.Sprintf("%s/%d", topic, idx)] += len(b)
	}
	produce("a", 0, 2)
	produce("a", 0, 3)
	produce("b", 1, 1)
	produce("c", 0, 4)

	// A cap of two topics: a and b by name get series, c folds into other.
	want := fmt.Sprintf(`
# HELP kaas_log_end_offset Offset the next batch appended to a served partition gets.
# TYPE kaas_log_end_offset gauge
kaas_log_end_offset{partition="0",topic="a"} 5
kaas_log_end_offset{partition="0",topic="b"} 0
kaas_log_end_offset{partition="1",topic="b"} 1
# HELP kaas_log_size_bytes Bytes of a served partition's log segments (topics beyond the series cap summed under topic="other").
# TYPE kaas_log_size_bytes gauge
kaas_log_size_bytes{partition="0",topic="a"} %d
kaas_log_size_bytes{partition="0",topic="b"} 0
kaas_log_size_bytes{partition="1",topic="b"} %d
kaas_log_size_bytes{partition="all",topic="other"} %d
# HELP kaas_log_start_offset First offset of a served partition's log.
# TYPE kaas_log_start_offset gauge
kaas_log_start_offset{partition="0",topic="a"} 0
kaas_log_start_offset{partition="0",topic="b"} 0
kaas_log_start_offset{partition="1",topic="b"} 0
# HELP kaas_partitions Partitions this broker holds, by state: owned (assigned here), serving, opening, failed.
# TYPE kaas_partitions gauge
kaas_partitions{state="failed"} 0
kaas_partitions{state="opening"} 0
kaas_partitions{state="owned"} 4
kaas_partitions{state="serving"} 4
`, size["a/0"], size["b/1"], size["c/0"])
	if err := testutil.CollectAndCompare(e.PartitionMetrics(2), strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}

	// Each sequential produce waited for its own round: four rounds, every
	// byte produced made durable once.
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(e.SyncRoundMetrics())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][2]float64{}
	for _, mf := range mfs {
		h := mf.GetMetric()[0].GetHistogram()
		got[mf.GetName()] = [2]float64{float64(h.GetSampleCount()), h.GetSampleSum()}
	}
	total := float64(size["a/0"] + size["b/1"] + size["c/0"])
	if g := got["kaas_produce_fsync_batch_bytes"]; g != [2]float64{4, total} {
		t.Errorf("fsync batch bytes count, sum = %v, want 4, %v", g, total)
	}
	for _, name := range []string{"kaas_produce_fsync_duration_seconds", "kaas_fence_check_duration_seconds"} {
		if got[name][0] != 4 {
			t.Errorf("%s: %v observations, want 4", name, got[name][0])
		}
	}
}

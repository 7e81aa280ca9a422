package engine

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kaas-dev/kaas/engine/txns"
	"github.com/kaas-dev/kaas/volume/memfs"
	"github.com/kaas-dev/kaas/volume/partlog/partlogtest"
)

// TestCoordinatorMetrics checks the group and transaction families after
// known events: commits of three groups (a cap of two), five records in
// the partition they commit for, one committed transaction.
func TestCoordinatorMetrics(t *testing.T) {
	ctx := safety(t)
	e := startEngine(t, memfs.New())
	if _, err := e.CreateTopic(CreateTopicRequest{Name: "events", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	mustServing(t, ctx, e.Engine, "events")
	if _, err := mustPartition(t, e.Engine, "events", 0).Produce(ctx, partlogtest.MakeBatch(5, 16, 1000, -1, -1, -1)); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, "coordinator shards open", func() error {
		for _, g := range []string{"g1", "g2", "g3"} {
			if _, err := e.GroupCoordinator(g); err != nil {
				return err
			}
		}
		_, err := e.TxnCoordinator("tx")
		return err
	})
	for group, offset := range map[string]int64{"g1": 2, "g2": 5, "g3": 1} {
		c, err := e.GroupCoordinator(group)
		if err != nil {
			t.Fatal(err)
		}
		if code := simpleCommit(ctx, c, group, offset); code != 0 {
			t.Fatalf("commit %s: error %d", group, code)
		}
	}

	tc, err := e.TxnCoordinator("tx")
	if err != nil {
		t.Fatal(err)
	}
	pid, epoch, code := tc.InitProducerID(ctx, "tx", time.Minute, -1, -1)
	if code != 0 {
		t.Fatalf("InitProducerID: %d", code)
	}
	if codes := tc.AddPartitions(ctx, "tx", pid, epoch, []txns.TopicPartition{{Topic: "events", Partition: 0}}); codes[0] != 0 {
		t.Fatalf("AddPartitions: %d", codes[0])
	}
	if code := tc.EndTxn(ctx, "tx", pid, epoch, true); code != 0 {
		t.Fatalf("EndTxn: %d", code)
	}
	poll(t, ctx, "the transaction completed", func() error {
		if tc.StateCounts()["CompleteCommit"] != 1 {
			return errors.New("not yet")
		}
		return nil
	})

	// The producer wrote nothing to events, so no marker went there: the
	// log end is 5.
	want := `
# HELP kaas_consumer_group_committed_offset A group's committed offset of a partition, from its coordinator (capped groups and topics); subtract it from kaas_log_end_offset for the lag of partitions served elsewhere.
# TYPE kaas_consumer_group_committed_offset gauge
kaas_consumer_group_committed_offset{group="g1",partition="0",topic="events"} 2
kaas_consumer_group_committed_offset{group="g2",partition="0",topic="events"} 5
# HELP kaas_consumer_group_lag Records between a group's committed offset and the log end, where this broker is both the group's coordinator and the partition's leader (capped groups and topics).
# TYPE kaas_consumer_group_lag gauge
kaas_consumer_group_lag{group="g1",partition="0",topic="events"} 3
kaas_consumer_group_lag{group="g2",partition="0",topic="events"} 0
# HELP kaas_group_members Members of a group whose coordinator is this broker (groups beyond the series cap summed under group="other").
# TYPE kaas_group_members gauge
kaas_group_members{group="g1"} 0
kaas_group_members{group="g2"} 0
kaas_group_members{group="other"} 0
# HELP kaas_groups Consumer groups whose coordinator is this broker, by state.
# TYPE kaas_groups gauge
kaas_groups{state="CompletingRebalance"} 0
kaas_groups{state="Empty"} 3
kaas_groups{state="PreparingRebalance"} 0
kaas_groups{state="Stable"} 0
# HELP kaas_transactions Transactional IDs whose coordinator is this broker, by Kafka's transaction state.
# TYPE kaas_transactions gauge
kaas_transactions{state="CompleteAbort"} 0
kaas_transactions{state="CompleteCommit"} 1
kaas_transactions{state="Empty"} 0
kaas_transactions{state="Ongoing"} 0
kaas_transactions{state="PrepareAbort"} 0
kaas_transactions{state="PrepareCommit"} 0
# HELP kaas_transactions_total Transactions this broker's coordinators completed, by result: committed, aborted, and timed_out (aborts of transactions past their timeout, counted in aborted too).
# TYPE kaas_transactions_total counter
kaas_transactions_total{result="aborted"} 0
kaas_transactions_total{result="committed"} 1
kaas_transactions_total{result="timed_out"} 0
`
	if err := testutil.CollectAndCompare(e.CoordinatorMetrics(2, 10), strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	// A topic cap that leaves events out leaves its offsets out too.
	if n := testutil.CollectAndCount(e.CoordinatorMetrics(2, 0), "kaas_consumer_group_committed_offset", "kaas_consumer_group_lag"); n != 0 {
		t.Fatalf("%d offset series for a topic beyond the cap", n)
	}
}

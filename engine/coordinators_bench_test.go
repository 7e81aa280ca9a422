package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/engine/groups"
	"github.com/kaas-dev/kaas/engine/groupstore"
	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/partlog"
)

// BenchmarkShardTakeover measures what a new coordinator does before it
// answers for a shard's groups: fence the shard's log, open it (recovering
// the tail), load the newest valid snapshot and the records after it, and
// replay them into a coordinator. The shard holds groups×partitions
// committed offsets, on the real filesystem in a temp dir, left either by
// an owner that released it cleanly (a final snapshot: "snapshot") or by
// one that died without any snapshot ("log only").
//
//	go test -run XXX -bench ShardTakeover -benchtime 5x ./engine/
func BenchmarkShardTakeover(b *testing.B) {
	for _, size := range []struct{ groups, partitions int }{{100, 100}, {1000, 100}} {
		for _, clean := range []bool{true, false} {
			name := fmt.Sprintf("offsets=%d/log-only", size.groups*size.partitions)
			if clean {
				name = fmt.Sprintf("offsets=%d/snapshot", size.groups*size.partitions)
			}
			b.Run(name, func(b *testing.B) { benchShardTakeover(b, size.groups, size.partitions, clean) })
		}
	}
}

func benchShardTakeover(b *testing.B, nGroups, nPartitions int, clean bool) {
	dir := b.TempDir()
	fsys := volume.OS()
	open := func(epoch int32, snapshotEvery int64) (*groupstore.Store, *groups.Coordinator, groupstore.LoadStats) {
		if _, err := partlog.ClaimFence(fsys, dir, epoch); err != nil {
			b.Fatal(err)
		}
		st, stats, err := groupstore.Open(groupstore.Config{FS: fsys, Dir: dir, Epoch: epoch, PreviousEpochs: []int32{epoch - 1},
			SnapshotEveryBytes: snapshotEvery, Logger: logr.Discard()})
		if err != nil {
			b.Fatal(err)
		}
		c := groups.New(groups.Config{Journal: st, InitialRebalanceDelay: -1})
		if err := st.Records(c.Replay); err != nil {
			b.Fatal(err)
		}
		c.Start()
		return st, c, stats
	}
	every := int64(1 << 40) // no snapshot while filling
	st, c, _ := open(1, every)
	ctx := context.Background()
	for g := range nGroups {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.Generation = 8, fmt.Sprintf("group-%05d", g), -1
		t := kmsg.NewOffsetCommitRequestTopic()
		t.Topic = "orders"
		for p := range nPartitions {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch = int32(p), int64(1000+g+p), -1
			t.Partitions = append(t.Partitions, rp)
		}
		req.Topics = append(req.Topics, t)
		if code := c.OffsetCommit(ctx, req).Topics[0].Partitions[0].ErrorCode; code != 0 {
			b.Fatalf("commit: error %d", code)
		}
	}
	c.Close()
	if clean {
		if err := st.Close(); err != nil { // final snapshot
			b.Fatal(err)
		}
	}
	// Each iteration is one takeover at the next epoch; the previous
	// owner releases cleanly (or not at all) in the same way.
	epoch := int32(2)
	var took time.Duration
	var stats groupstore.LoadStats
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		st2, c2, s := open(epoch, every)
		took += time.Since(start)
		stats = s
		b.StopTimer()
		if got := c2.ListGroups(nil); len(got) != nGroups {
			b.Fatalf("loaded %d groups, want %d", len(got), nGroups)
		}
		c2.Close()
		if clean {
			if err := st2.Close(); err != nil {
				b.Fatal(err)
			}
		}
		epoch++
		b.StartTimer()
	}
	b.ReportMetric(float64(took.Milliseconds())/float64(b.N), "ms/takeover")
	b.ReportMetric(float64(stats.SnapshotRecords), "snapshot-records")
	b.ReportMetric(float64(stats.ReplayedRecords), "replayed-records")
}

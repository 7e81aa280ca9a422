package groups

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/go-logr/logr"
)

// BenchmarkOffsetCommit: parallel simple commits of one partition each,
// spread over 16 groups, with a journal that is durable at once.
func BenchmarkOffsetCommit(b *testing.B) {
	c := New(Config{Journal: &nullJournal{}, Logger: logr.Discard()})
	c.Start()
	defer c.Close()
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		n := next.Add(1)
		req := commitReq("bench-"+strconv.FormatInt(n%16, 10), "", -1, "topic", map[int32]int64{int32(n): 0})
		ctx := context.Background()
		for i := int64(0); pb.Next(); i++ {
			req.Topics[0].Partitions[0].Offset = i
			if resp := c.OffsetCommit(ctx, req); resp.Topics[0].Partitions[0].ErrorCode != 0 {
				b.Fatal(resp.Topics[0].Partitions[0].ErrorCode)
			}
		}
	})
}

// nullJournal is durable at once and keeps nothing.
type nullJournal struct{ off atomic.Int64 }

func (j *nullJournal) Append(recs []Record) (int64, func(context.Context) error, error) {
	return j.off.Add(int64(len(recs))) - int64(len(recs)), durableNow, nil
}

func durableNow(context.Context) error { return nil }

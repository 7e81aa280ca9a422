package specs

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Every open of a partition starts a new leader epoch, so a consumer that
// lives across broker restarts sees the epoch change and (KIP-320) checks
// for truncation with OffsetForLeaderEpoch. It must go on from where it was:
// no reset, no record twice, none skipped.
var _ = Describe("a consumer across broker restarts", Label("clients"), func() {
	It("keeps its position through new leader epochs after SIGTERM and kill -9", func(ctx SpecContext) {
		b := StartBroker(GinkgoT().TempDir())
		topic := UniqueName("epochs")
		CreateTopic(ctx, NewAdmin(b), topic, 2)
		producer := NewClient(b, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
			kgo.RecordRetries(100))
		validations := &requestCounter{key: 23} // OffsetForLeaderEpoch
		consumer := NewClient(b, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
			topic: {0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart()},
		}), kgo.FetchMaxWait(200*time.Millisecond), kgo.WithHooks(validations))

		next := 0
		produce := func(n int) {
			for range n {
				r := producer.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("v%06d", next))})
				Expect(r.FirstErr()).NotTo(HaveOccurred())
				next++
			}
		}
		seen := map[string]int{}
		lastOffset := map[int32]int64{0: -1, 1: -1}
		consumeUntil := func(total int) {
			Eventually(func(g Gomega) {
				pctx, cancel := context.WithTimeout(ctx, time.Second)
				defer cancel()
				fs := consumer.PollFetches(pctx)
				fs.EachRecord(func(r *kgo.Record) {
					// Offsets only move forward per partition: a reset or a
					// truncation would show up here.
					Expect(r.Offset).To(Equal(lastOffset[r.Partition]+1), "partition %d", r.Partition)
					lastOffset[r.Partition] = r.Offset
					seen[string(r.Value)]++
				})
				g.Expect(len(seen)).To(Equal(total))
			}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(10 * time.Millisecond).Should(Succeed())
		}

		produce(200)
		consumeUntil(200)
		for round, restart := range []func(){b.Restart, func() { b.Kill9(); b.Restart() }, b.Restart} {
			By(fmt.Sprintf("restart %d", round+1))
			restart()
			produce(200)
			consumeUntil(200 * (round + 2))
		}
		for v, n := range seen {
			Expect(n).To(Equal(1), "record %s seen %d times", v, n)
		}
		Expect(seen).To(HaveLen(next))
		// The client really checked for truncation after the epoch changes.
		Expect(validations.n.Load()).To(BeNumerically(">=", 1), "the consumer never sent OffsetForLeaderEpoch")
		AddReportEntry("OffsetForLeaderEpoch requests from the consumer", validations.n.Load())
	}, SpecTimeout(3*time.Minute))
})

// requestCounter counts the requests of one API key a client writes.
type requestCounter struct {
	key int16
	n   atomic.Int64
}

func (c *requestCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _ time.Duration, _ time.Duration, err error) {
	if key == c.key && err == nil {
		c.n.Add(1)
	}
}

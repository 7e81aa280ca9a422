package specs

import (
	"fmt"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Batches are stored as the producer compressed them; consumers decompress.
var _ = Describe("compressed batches", Label("clients"), func() {
	DescribeTable("round-trip through the broker exactly as produced",
		func(ctx SpecContext, codec kgo.CompressionCodec, codecID uint8) {
			dir := GinkgoT().TempDir()
			b := StartBroker(dir)
			topic := UniqueName("codec")
			CreateTopic(ctx, NewAdmin(b), topic, 2)
			cl := NewClient(b, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(codec),
				kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
			const n = 20000
			var mu sync.Mutex
			want := map[int32][]sentRecord{}
			var failed error
			for i := range n {
				// Repetitive values compress well, so every codec really
				// compresses; the index keeps each one distinct.
				v := []byte(fmt.Sprintf("record %06d %s", i, "kaas kaas kaas kaas kaas kaas kaas kaas"))
				k := []byte(fmt.Sprintf("k%d", i))
				cl.Produce(ctx, &kgo.Record{Key: k, Value: v}, func(r *kgo.Record, err error) {
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						failed = err
						return
					}
					want[r.Partition] = append(want[r.Partition], sentRecord{Key: r.Key, Value: r.Value})
				})
			}
			Expect(cl.Flush(ctx)).To(Succeed())
			Expect(failed).NotTo(HaveOccurred())
			counts := map[int32]int{}
			for p, rs := range want {
				counts[p] = len(rs)
			}
			got := consumeAll(ctx, b, topic, counts)
			Expect(compareRecords(want, got)).To(BeEmpty())
			for _, rs := range got {
				for _, r := range rs {
					Expect(r.Attrs.CompressionType()).To(Equal(codecID), "the broker stored the batch as the producer compressed it")
				}
			}
		},
		Entry("gzip", kgo.GzipCompression(), uint8(1)),
		Entry("snappy", kgo.SnappyCompression(), uint8(2)),
		Entry("lz4", kgo.Lz4Compression(), uint8(3)),
		Entry("zstd", kgo.ZstdCompression(), uint8(4)),
		Entry("none", kgo.NoCompression(), uint8(0)),
	)
})

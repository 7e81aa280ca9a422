package specs

import (
	"bytes"
	"fmt"
	"time"

	"github.com/IBM/sarama"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("sarama round trip", Label("clients"), func() {
	It("produces with an idempotent acks=all SyncProducer and reads back exactly with ConsumePartition", func(ctx SpecContext) {
		const (
			total      = 3000
			partitions = 3
			batch      = 100
		)
		b := StartBroker(GinkgoT().TempDir())
		topic := UniqueName("sarama")
		CreateTopic(ctx, NewAdmin(b), topic, partitions)

		cfg := sarama.NewConfig()
		cfg.ClientID = "kaas-specs-sarama"
		cfg.Version = sarama.V2_1_0_0
		cfg.Net.MaxOpenRequests = 1
		cfg.Producer.RequiredAcks = sarama.WaitForAll
		cfg.Producer.Idempotent = true
		cfg.Producer.Return.Successes = true
		cfg.Producer.Return.Errors = true
		cfg.Producer.Retry.Max = 10
		cfg.Producer.Retry.Backoff = 200 * time.Millisecond
		cfg.Producer.Partitioner = sarama.NewManualPartitioner
		cfg.Consumer.Return.Errors = true
		cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
		cfg.Consumer.MaxWaitTime = 500 * time.Millisecond
		Expect(cfg.Validate()).To(Succeed())

		By("producing with sarama.SyncProducer (idempotent, WaitForAll)")
		prod, err := sarama.NewSyncProducer([]string{b.Addr}, cfg)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { _ = prod.Close() })

		want := map[int32][]*sarama.ProducerMessage{}
		for start := 0; start < total; start += batch {
			var msgs []*sarama.ProducerMessage
			for i := start; i < start+batch && i < total; i++ {
				p := int32(i % partitions)
				m := &sarama.ProducerMessage{
					Topic:     topic,
					Partition: p,
					Key:       sarama.StringEncoder(fmt.Sprintf("key-%05d", i)),
					Value:     sarama.ByteEncoder(fmt.Appendf(nil, "sarama-value-%05d-%s", i, bytes.Repeat([]byte{'x'}, i%200))),
					Headers: []sarama.RecordHeader{
						{Key: []byte("seq"), Value: fmt.Appendf(nil, "%d", i)},
						{Key: []byte("client"), Value: []byte("sarama")},
					},
				}
				msgs = append(msgs, m)
				want[p] = append(want[p], m)
			}
			Expect(prod.SendMessages(msgs)).To(Succeed(), "SendMessages batch starting at %d", start)
		}
		for p, ms := range want {
			for i, m := range ms {
				Expect(m.Partition).To(Equal(p))
				Expect(m.Offset).To(BeEquivalentTo(i), "acknowledged offset of partition %d message #%d", p, i)
			}
		}

		By("consuming each partition from OffsetOldest")
		cons, err := sarama.NewConsumer([]string{b.Addr}, cfg)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { _ = cons.Close() })
		for p := range int32(partitions) {
			pc, err := cons.ConsumePartition(topic, p, sarama.OffsetOldest)
			Expect(err).NotTo(HaveOccurred(), "ConsumePartition %d", p)
			for i, w := range want[p] {
				var got *sarama.ConsumerMessage
				select {
				case got = <-pc.Messages():
				case cerr := <-pc.Errors():
					Fail(fmt.Sprintf("partition %d: consumer error after %d messages: %v", p, i, cerr))
				case <-time.After(30 * time.Second):
					Fail(fmt.Sprintf("partition %d: no message for 30s after %d of %d", p, i, len(want[p])))
				case <-ctx.Done():
					Fail("interrupted")
				}
				wk, _ := w.Key.Encode()
				wv, _ := w.Value.Encode()
				Expect(got.Offset).To(BeEquivalentTo(i), "partition %d offset", p)
				Expect(got.Key).To(Equal(wk), "partition %d offset %d key", p, i)
				Expect(got.Value).To(Equal(wv), "partition %d offset %d value", p, i)
				Expect(got.Headers).To(HaveLen(len(w.Headers)), "partition %d offset %d headers", p, i)
				for h := range w.Headers {
					Expect(got.Headers[h].Key).To(Equal(w.Headers[h].Key))
					Expect(got.Headers[h].Value).To(Equal(w.Headers[h].Value))
				}
			}
			Consistently(pc.Messages()).WithTimeout(300*time.Millisecond).ShouldNot(Receive(), "partition %d: more messages than produced", p)
			Expect(pc.Close()).To(Succeed())
		}
	}, SpecTimeout(3*time.Minute))
})

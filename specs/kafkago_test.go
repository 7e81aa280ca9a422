package specs

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/segmentio/kafka-go"
)

var _ = Describe("segmentio/kafka-go round trip", Label("clients"), func() {
	It("produces with a RequireAll Writer and reads back exactly with a partition Reader (no group)", func(ctx SpecContext) {
		const (
			total      = 3000
			partitions = 3
			batch      = 200
		)
		b := StartBroker(GinkgoT().TempDir())
		topic := UniqueName("kafkago")
		CreateTopic(ctx, NewAdmin(b), topic, partitions)

		logf := kafka.LoggerFunc(func(format string, args ...any) {
			fmt.Fprintf(GinkgoWriter, "[kafka-go] "+format+"\n", args...)
		})

		By("producing with kafka.Writer (RequiredAcks=-1), partition chosen from a header")
		w := &kafka.Writer{
			Addr:         kafka.TCP(b.Addr),
			Topic:        topic,
			RequiredAcks: kafka.RequireAll,
			BatchSize:    batch,
			BatchTimeout: 10 * time.Millisecond,
			WriteTimeout: 30 * time.Second,
			ReadTimeout:  30 * time.Second,
			ErrorLogger:  logf,
			Balancer: kafka.BalancerFunc(func(m kafka.Message, parts ...int) int {
				for _, h := range m.Headers {
					if h.Key == "partition" {
						p, _ := strconv.Atoi(string(h.Value))
						return p
					}
				}
				return parts[0]
			}),
		}
		DeferCleanup(func() { _ = w.Close() })

		want := map[int][]kafka.Message{}
		for start := 0; start < total; start += batch {
			var msgs []kafka.Message
			for i := start; i < start+batch && i < total; i++ {
				p := i % partitions
				m := kafka.Message{
					Key:   fmt.Appendf(nil, "key-%05d", i),
					Value: fmt.Appendf(nil, "kafka-go-value-%05d-%s", i, bytes.Repeat([]byte{'y'}, i%300)),
					Headers: []kafka.Header{
						{Key: "partition", Value: []byte(strconv.Itoa(p))},
						{Key: "seq", Value: fmt.Appendf(nil, "%d", i)},
					},
				}
				msgs = append(msgs, m)
				want[p] = append(want[p], m)
			}
			Expect(w.WriteMessages(ctx, msgs...)).To(Succeed(), "WriteMessages batch starting at %d", start)
		}
		Expect(w.Close()).To(Succeed())

		By("reading each partition from FirstOffset with kafka.Reader{Partition: p}")
		for p := range partitions {
			r := kafka.NewReader(kafka.ReaderConfig{
				Brokers:     []string{b.Addr},
				Topic:       topic,
				Partition:   p,
				MinBytes:    1,
				MaxBytes:    10 << 20,
				MaxWait:     500 * time.Millisecond,
				ErrorLogger: logf,
			})
			Expect(r.SetOffset(kafka.FirstOffset)).To(Succeed())
			for i, wm := range want[p] {
				rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				got, err := r.ReadMessage(rctx)
				cancel()
				Expect(err).NotTo(HaveOccurred(), "partition %d: ReadMessage after %d of %d", p, i, len(want[p]))
				Expect(got.Partition).To(Equal(p))
				Expect(got.Offset).To(BeEquivalentTo(i), "partition %d offset", p)
				Expect(got.Key).To(Equal(wm.Key), "partition %d offset %d key", p, i)
				Expect(got.Value).To(Equal(wm.Value), "partition %d offset %d value", p, i)
				Expect(got.Headers).To(HaveLen(len(wm.Headers)), "partition %d offset %d headers", p, i)
				for h := range wm.Headers {
					Expect(got.Headers[h].Key).To(Equal(wm.Headers[h].Key))
					Expect(got.Headers[h].Value).To(Equal(wm.Headers[h].Value))
				}
			}
			By(fmt.Sprintf("partition %d: nothing past the last record", p))
			rctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
			extra, err := r.ReadMessage(rctx)
			cancel()
			Expect(err).To(MatchError(context.DeadlineExceeded), "partition %d: want no extra message (got offset %d: %q)", p, extra.Offset, extra.Value)
			Expect(r.Close()).To(Succeed())
		}
	}, SpecTimeout(3*time.Minute))
})

package specs

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// tp is one partition of one topic.
type tp struct {
	topic     string
	partition int32
}

// ownership is a partition's leader and leader epoch as one broker answers.
type ownership struct {
	leader, epoch int32
}

// clusterMetadata asks exactly broker b (not whichever broker a client
// picks) for the metadata of topics: the broker IDs it lists and each
// partition's leader and epoch (leader -1 where it has none), and the
// controller it names.
func clusterMetadata(ctx context.Context, b *Broker, topics []string) ([]int32, map[tp]ownership, int32, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.WithLogger(nil))
	if err != nil {
		return nil, nil, -1, err
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	resp, err := req.RequestWith(rctx, cl.SeedBrokers()[0])
	if err != nil {
		return nil, nil, -1, err
	}
	var ids []int32
	for _, br := range resp.Brokers {
		ids = append(ids, br.NodeID)
	}
	out := map[tp]ownership{}
	for _, t := range resp.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return ids, nil, -1, fmt.Errorf("topic %v: %w", t.Topic, err)
		}
		for _, p := range t.Partitions {
			o := ownership{leader: p.Leader, epoch: p.LeaderEpoch}
			if kerr.ErrorForCode(p.ErrorCode) != nil {
				o.leader = -1
			}
			out[tp{*t.Topic, p.Partition}] = o
		}
	}
	return ids, out, resp.ControllerID, nil
}

// Several kaas-broker processes sharing one data directory form one
// cluster: every partition has exactly one owner, clients work through any
// broker, and a killed broker's partitions move to the others under higher
// leader epochs with no acknowledged record lost or duplicated.
var _ = Describe("three brokers on one volume", Label("cluster"), func() {
	It("assigns each partition one owner and fails over a SIGKILLed broker", func(ctx SpecContext) {
		dirs := SharedDataDirs(3)
		brokers := []*Broker{
			StartBroker(dirs[0], WithBrokerID(1)),
			StartBroker(dirs[1], WithBrokerID(2)),
			StartBroker(dirs[2], WithBrokerID(3)),
		}
		topics := []string{UniqueName("cluster-a"), UniqueName("cluster-b")}
		adm := NewAdmin(brokers[1])
		for _, t := range topics {
			CreateTopic(ctx, adm, t, 6)
		}

		// agreed waits until every broker in bs lists exactly the brokers in
		// want and names the same leader for every partition, each one of
		// want; it returns that ownership.
		var controller int32
		agreed := func(bs []*Broker, want []int32, within time.Duration) map[tp]ownership {
			var got map[tp]ownership
			Eventually(func(g Gomega) {
				got = nil
				controllers := map[int32]bool{}
				for _, b := range bs {
					ids, owners, ctrl, err := clusterMetadata(ctx, b, topics)
					controllers[ctrl] = true
					controller = ctrl
					g.Expect(err).NotTo(HaveOccurred(), "metadata from broker %d", b.ID)
					g.Expect(ids).To(ConsistOf(want), "brokers listed by broker %d", b.ID)
					g.Expect(owners).To(HaveLen(12), "partitions listed by broker %d", b.ID)
					for k, o := range owners {
						g.Expect(want).To(ContainElement(o.leader), "%v as broker %d answers", k, b.ID)
					}
					if got == nil {
						got = owners
					} else {
						g.Expect(owners).To(Equal(got), "broker %d disagrees", b.ID)
					}
				}
				g.Expect(controllers).To(HaveLen(1), "brokers name different controllers")
				g.Expect(want).To(ContainElement(controller), "the controller is not a live broker")
			}).WithContext(ctx).WithTimeout(within).WithPolling(100 * time.Millisecond).Should(Succeed())
			return got
		}
		owners := agreed(brokers, []int32{1, 2, 3}, 30*time.Second)
		perBroker := map[int32]int{}
		for _, o := range owners {
			perBroker[o.leader]++
		}
		AddReportEntry("partitions per broker", perBroker)

		// Idempotent acks=all producer over all three brokers.
		producer := NewClient(brokers[0], kgo.SeedBrokers(brokers[0].Addr, brokers[1].Addr, brokers[2].Addr),
			kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(1000), kgo.RecordDeliveryTimeout(60*time.Second),
			kgo.ProducerLinger(2*time.Millisecond), kgo.MaxBufferedRecords(1000),
			kgo.RecordPartitioner(kgo.ManualPartitioner()))
		type ack struct {
			value  string
			offset int64
		}
		var (
			ackMu   sync.Mutex
			acked   = map[tp][]ack{}
			nAcked  atomic.Int64
			nFailed atomic.Int64
			pending sync.WaitGroup
		)
		pctx, stopProducing := context.WithCancel(ctx)
		defer stopProducing()
		producing := make(chan struct{})
		go func() {
			defer GinkgoRecover()
			defer close(producing)
			for seq := 0; pctx.Err() == nil; seq++ {
				r := &kgo.Record{Topic: topics[seq%2], Partition: int32(seq / 2 % 6), Value: []byte(fmt.Sprintf("v%08d", seq))}
				pending.Add(1)
				producer.Produce(pctx, r, func(r *kgo.Record, err error) {
					defer pending.Done()
					if err != nil {
						if !errors.Is(err, context.Canceled) {
							nFailed.Add(1) // not merely cut off by the end of producing
							fmt.Fprintf(GinkgoWriter, "produce %s failed: %v\n", r.Value, err)
						}
						return
					}
					ackMu.Lock()
					acked[tp{r.Topic, r.Partition}] = append(acked[tp{r.Topic, r.Partition}], ack{string(r.Value), r.Offset})
					ackMu.Unlock()
					nAcked.Add(1)
				})
				if seq%50 == 49 {
					time.Sleep(5 * time.Millisecond)
				}
			}
		}()
		ackedAtLeast := func(n int64) {
			Eventually(nAcked.Load).WithContext(ctx).WithTimeout(30 * time.Second).Should(BeNumerically(">=", n))
		}
		ackedAtLeast(2000)

		// SIGKILL the controller if it owns partitions (so that both the
		// controller and the partitions fail over), else the owner of the
		// first partition of the first topic.
		victimID := owners[tp{topics[0], 0}].leader
		if perBroker[controller] > 0 {
			victimID = controller
		}
		victim := brokers[victimID-1]
		By(fmt.Sprintf("SIGKILL broker %d", victimID))
		before := nAcked.Load()
		killedAt := time.Now()
		victim.Kill9()
		var survivors []*Broker
		var survivorIDs []int32
		for _, b := range brokers {
			if b != victim {
				survivors, survivorIDs = append(survivors, b), append(survivorIDs, int32(b.ID))
			}
		}
		after := agreed(survivors, survivorIDs, 10*time.Second)
		AddReportEntry("failover: kill to agreed metadata", time.Since(killedAt).String())
		moved := 0
		for k, o := range owners {
			n := after[k]
			if o.leader == victimID {
				moved++
				Expect(n.leader).NotTo(Equal(victimID))
				Expect(n.epoch).To(BeNumerically(">", o.epoch), "%v moved without a higher epoch", k)
			} else {
				Expect(n).To(Equal(o), "%v moved although its owner lives", k)
			}
		}
		AddReportEntry("partitions moved by the kill", moved)
		ackedAtLeast(before + 2000) // producing continues on the new owners

		By(fmt.Sprintf("restarting broker %d", victimID))
		victim.Restart()
		rejoined := agreed(brokers, []int32{1, 2, 3}, 15*time.Second)
		for k, o := range rejoined {
			Expect(o.epoch).To(BeNumerically(">=", after[k].epoch), "%v went back in epochs", k)
		}
		ackedAtLeast(nAcked.Load() + 2000)

		stopProducing()
		<-producing
		pending.Wait()
		AddReportEntry("records acknowledged / failed", fmt.Sprintf("%d / %d", nAcked.Load(), nFailed.Load()))
		Expect(nFailed.Load()).To(BeZero(), "produces failed other than by the end of producing")

		// A consumer in assign mode, through any broker, reads every
		// acknowledged record exactly where it was acknowledged, once.
		assign := map[string]map[int32]kgo.Offset{}
		for _, t := range topics {
			assign[t] = map[int32]kgo.Offset{}
			for p := int32(0); p < 6; p++ {
				assign[t][p] = kgo.NewOffset().AtStart()
			}
		}
		consumer := NewClient(brokers[2], kgo.SeedBrokers(brokers[2].Addr, brokers[0].Addr),
			kgo.ConsumePartitions(assign), kgo.FetchMaxWait(200*time.Millisecond))
		ackMu.Lock()
		defer ackMu.Unlock()
		ends := map[tp]int64{}
		for k, as := range acked {
			for _, a := range as {
				ends[k] = max(ends[k], a.offset+1)
			}
		}
		seen := map[string]int{}
		atOffset := map[tp]map[int64]string{}
		next := map[tp]int64{}
		Eventually(func(g Gomega) {
			fctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			fs := consumer.PollFetches(fctx)
			fs.EachRecord(func(r *kgo.Record) {
				k := tp{r.Topic, r.Partition}
				Expect(r.Offset).To(BeNumerically(">=", next[k]), "%v went backwards", k)
				next[k] = r.Offset + 1
				if atOffset[k] == nil {
					atOffset[k] = map[int64]string{}
				}
				atOffset[k][r.Offset] = string(r.Value)
				seen[string(r.Value)]++
			})
			for k, end := range ends {
				g.Expect(next[k]).To(BeNumerically(">=", end), "%v consumed up to %d of %d", k, next[k], end)
			}
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(10 * time.Millisecond).Should(Succeed())
		for k, as := range acked {
			for _, a := range as {
				Expect(atOffset[k][a.offset]).To(Equal(a.value), "acknowledged %s at %v offset %d", a.value, k, a.offset)
			}
		}
		for v, n := range seen {
			Expect(n).To(Equal(1), "record %s stored %d times", v, n)
		}
	}, SpecTimeout(4*time.Minute))
})

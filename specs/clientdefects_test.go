package specs

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/IBM/sarama"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Defects real clients hit (issue 15, finding 10), each through the client
// that hit it.
var _ = Describe("defects real clients hit", Label("clients"), func() {
	It("sarama's offset manager and kcat's assign mode start from a group with no commits", func(ctx SpecContext) {
		kcatPath()
		b := StartBroker(GinkgoT().TempDir())
		topic := UniqueName("nocommit")
		CreateTopic(ctx, NewAdmin(b), topic, 2)

		By("sarama: an offset manager for a group that does not exist yet")
		cfg := sarama.NewConfig()
		cfg.Version = sarama.V2_1_0_0
		cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
		client, err := sarama.NewClient([]string{b.Addr}, cfg)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { _ = client.Close() })
		om, err := sarama.NewOffsetManagerFromClient(UniqueName("fresh-group"), client)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { _ = om.Close() })
		pom, err := om.ManagePartition(topic, 1)
		Expect(err).NotTo(HaveOccurred(), "sarama ManagePartition on a group without commits")
		DeferCleanup(func() { _ = pom.Close() })
		next, _ := pom.NextOffset()
		Expect(next).To(Equal(sarama.OffsetOldest), "no committed offset: the configured initial offset")

		By("sarama: ClusterAdmin.ListConsumerGroupOffsets for named partitions")
		adm, err := sarama.NewClusterAdminFromClient(client)
		Expect(err).NotTo(HaveOccurred())
		offs, err := adm.ListConsumerGroupOffsets(UniqueName("fresh-group"), map[string][]int32{topic: {0, 1}})
		Expect(err).NotTo(HaveOccurred())
		for p := range int32(2) {
			blk := offs.GetBlock(topic, p)
			Expect(blk).NotTo(BeNil(), "partition %d missing from the answer", p)
			Expect(blk.Offset).To(BeEquivalentTo(-1))
		}

		By("kcat: assign mode with a group.id and stored offsets reaches the end of an empty partition")
		start := time.Now()
		runKcat(ctx, nil, "-b", b.Addr, "-C", "-t", topic, "-p", "0", "-o", "stored", "-X", "group.id="+UniqueName("kcat-group"),
			"-X", "auto.offset.reset=earliest", "-e", "-q")
		Expect(time.Since(start)).To(BeNumerically("<", 10*time.Second))
	}, SpecTimeout(2*time.Minute))

	It("lists __consumer_offsets as internal, and a regex consumer skips it", func(ctx SpecContext) {
		kcatPath()
		b := StartBroker(GinkgoT().TempDir())
		topic := UniqueName("regex")
		CreateTopic(ctx, NewAdmin(b), topic, 1)
		md := runKcat(ctx, nil, "-b", b.Addr, "-L")
		Expect(md).To(ContainSubstring(`topic "__consumer_offsets" with 16 partitions`), "kcat -L:\n%s", md)

		adm := NewAdmin(b)
		listed, err := adm.ListTopicsWithInternal(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(listed.Has("__consumer_offsets")).To(BeTrue())
		Expect(listed["__consumer_offsets"].IsInternal).To(BeTrue())
		plain, err := adm.ListTopics(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(plain.Has("__consumer_offsets")).To(BeFalse(), "kadm.ListTopics leaves internal topics out")

		prod := NewClient(b)
		Expect(prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("one")}).FirstErr()).To(Succeed())
		cons := NewClient(b, kgo.ConsumeRegex(), kgo.ConsumeTopics(".*"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		fctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		fs := cons.PollFetches(fctx)
		Expect(fs.Err0()).NotTo(HaveOccurred())
		fs.EachRecord(func(r *kgo.Record) { Expect(r.Topic).To(Equal(topic)) })
		Expect(cons.GetConsumeTopics()).NotTo(ContainElement("__consumer_offsets"))
	}, SpecTimeout(2*time.Minute))

	It("kcat -C -e exits promptly on a freshly created, empty topic", func(ctx SpecContext) {
		kcatPath()
		b := StartBroker(GinkgoT().TempDir())
		for _, partitions := range []int32{1, 4} {
			topic := UniqueName("empty")
			resp, err := NewAdmin(b).CreateTopic(ctx, partitions, -1, nil, topic)
			Expect(err).NotTo(HaveOccurred())
			Expect(resp.Err).NotTo(HaveOccurred())
			start := time.Now()
			runKcat(ctx, nil, "-b", b.Addr, "-C", "-t", topic, "-e", "-q")
			Expect(time.Since(start)).To(BeNumerically("<", 5*time.Second), "kcat -C -e on an empty topic of %d partitions", partitions)
		}
	}, SpecTimeout(2*time.Minute))

	It("a topic created through one broker has a leader for every partition on every broker once CreateTopics answered", func(ctx SpecContext) {
		kcatPath()
		dirs := SharedDataDirs(3)
		brokers := []*Broker{
			StartBroker(dirs[0], WithBrokerID(1)),
			StartBroker(dirs[1], WithBrokerID(2)),
			StartBroker(dirs[2], WithBrokerID(3)),
		}
		// One client per broker, each asking only its seed (no metadata
		// cache shared with the creating client).
		direct := make([]*kgo.Client, len(brokers))
		for i, b := range brokers {
			direct[i] = NewClient(b)
			_, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, direct[i])
			Expect(err).NotTo(HaveOccurred())
		}
		adm := kadm.NewClient(direct[0])
		var missing []string
		var firstProduce []time.Duration
		for round := range 5 {
			topic := UniqueName(fmt.Sprintf("fresh%d", round))
			start := time.Now()
			resp, err := adm.CreateTopic(ctx, 12, -1, nil, topic)
			Expect(err).NotTo(HaveOccurred())
			Expect(resp.Err).NotTo(HaveOccurred())
			for i := range brokers {
				req := kmsg.NewPtrMetadataRequest()
				rt := kmsg.NewMetadataRequestTopic()
				rt.Topic = kmsg.StringPtr(topic)
				req.Topics = append(req.Topics, rt)
				md, err := req.RequestWith(ctx, direct[i])
				Expect(err).NotTo(HaveOccurred())
				Expect(md.Topics).To(HaveLen(1))
				if md.Topics[0].ErrorCode != 0 {
					missing = append(missing, fmt.Sprintf("%s on broker %d: topic error %d", topic, brokers[i].ID, md.Topics[0].ErrorCode))
					continue
				}
				for _, p := range md.Topics[0].Partitions {
					if p.Leader < 0 || p.ErrorCode != 0 {
						missing = append(missing, fmt.Sprintf("%s/%d on broker %d: leader %d error %d", topic, p.Partition, brokers[i].ID, p.Leader, p.ErrorCode))
					}
				}
			}
			// kcat (librdkafka) from the third broker: produce one record
			// to each partition at once.
			var lines strings.Builder
			for range 12 {
				lines.WriteString("x\n")
			}
			runKcat(ctx, strings.NewReader(lines.String()), "-b", brokers[2].Addr, "-P", "-t", topic, "-X", "acks=all", "-X", "message.timeout.ms=10000")
			firstProduce = append(firstProduce, time.Since(start))
		}
		fmt.Fprintf(GinkgoWriter, "CreateTopics → kcat produced to every partition: %v\n", firstProduce)
		Expect(missing).To(BeEmpty(), "partitions without a leader right after CreateTopics answered")
	}, SpecTimeout(3*time.Minute))
})

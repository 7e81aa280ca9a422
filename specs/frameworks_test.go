package specs

import (
	"fmt"
	"time"

	"github.com/IBM/sarama"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/engine/desired/desiredtest"
)

// frameworkTopicName is the name a framework topic is created under by
// one admin client (each client creates every set).
func frameworkTopicName(client string, i int, ft desiredtest.FrameworkTopic) string {
	return fmt.Sprintf("%s-%d-%s", client, i, ft.Name)
}

// expectFrameworkTopic checks a framework topic as one admin client reads
// it back: its partitions, each config it was created with set on the
// topic, and the check its framework makes of the described configs.
func expectFrameworkTopic(ft desiredtest.FrameworkTopic, partitions int, described map[string]string, fromTopic map[string]bool) {
	GinkgoHelper()
	Expect(partitions).To(Equal(int(ft.Partitions)), "%s %s: partitions", ft.Framework, ft.Kind)
	for k, want := range ft.Configs {
		Expect(described).To(HaveKeyWithValue(k, want), "%s %s: %s", ft.Framework, ft.Kind, k)
		Expect(fromTopic[k]).To(BeTrue(), "%s %s: %s not described as set on the topic", ft.Framework, ft.Kind, k)
	}
	if ft.Verify != nil {
		Expect(ft.Verify(described)).To(Succeed(), "%s's check of its %s", ft.Framework, ft.Kind)
	}
}

var _ = Describe("Topics frameworks create", Label("frameworks"), Ordered, func() {
	var b *Broker
	BeforeAll(func() {
		b = StartBroker(GinkgoT().TempDir())
	})

	It("accepts every framework's key set from kadm and reads it back as the framework checks it", func(ctx SpecContext) {
		adm := NewAdmin(b)
		for i, ft := range desiredtest.FrameworkTopics {
			name := frameworkTopicName("kadm", i, ft)
			configs := map[string]*string{}
			for k, v := range ft.Configs {
				configs[k] = kadm.StringPtr(v)
			}
			By(fmt.Sprintf("creating %s's %s %s", ft.Framework, ft.Kind, name))
			resp, err := adm.CreateTopic(ctx, ft.Partitions, ft.Replication, configs, name)
			Expect(err).NotTo(HaveOccurred())
			Expect(resp.Err).NotTo(HaveOccurred(), resp.ErrMessage)
			Expect(resp.ReplicationFactor).To(BeEquivalentTo(1))

			rc := describeTopic(ctx, adm, name)
			described, fromTopic := map[string]string{}, map[string]bool{}
			for _, c := range rc.Configs {
				described[c.Key] = c.MaybeValue()
				fromTopic[c.Key] = c.Source == kmsg.ConfigSourceDynamicTopicConfig
			}
			var partitions int
			Eventually(func(g Gomega) {
				md, err := adm.Metadata(ctx, name)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(md.Topics[name].Err).NotTo(HaveOccurred())
				partitions = len(md.Topics[name].Partitions)
			}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
			expectFrameworkTopic(ft, partitions, described, fromTopic)
		}
	}, SpecTimeout(2*time.Minute))

	It("accepts every framework's key set from sarama's ClusterAdmin, the call goka and other sarama users make", func(ctx SpecContext) {
		sadm := newSaramaAdmin(b, sarama.V2_8_0_0)
		for i, ft := range desiredtest.FrameworkTopics {
			name := frameworkTopicName("sarama", i, ft)
			entries := map[string]*string{}
			for k, v := range ft.Configs {
				entries[k] = &v
			}
			By(fmt.Sprintf("creating %s's %s %s", ft.Framework, ft.Kind, name))
			Expect(sadm.CreateTopic(name, &sarama.TopicDetail{NumPartitions: ft.Partitions, ReplicationFactor: ft.Replication,
				ConfigEntries: entries}, false)).To(Succeed())

			results, err := sadm.DescribeConfigs([]*sarama.ConfigResource{{Type: sarama.TopicResource, Name: name}},
				sarama.DescribeConfigsOptions{})
			Expect(err).NotTo(HaveOccurred())
			Expect(results).To(HaveLen(1))
			Expect(results[0].ErrorCode).To(Equal(sarama.ErrNoError), results[0].ErrorMsg)
			described, fromTopic := map[string]string{}, map[string]bool{}
			for _, e := range results[0].Configs {
				described[e.Name] = e.Value
				fromTopic[e.Name] = e.Source == sarama.SourceTopic
			}
			var partitions int
			Eventually(func(g Gomega) {
				md, err := sadm.DescribeTopics([]string{name})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(md).To(HaveLen(1))
				g.Expect(md[0].Err).To(Equal(sarama.ErrNoError))
				partitions = len(md[0].Partitions)
			}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
			expectFrameworkTopic(ft, partitions, described, fromTopic)
		}
	}, SpecTimeout(2*time.Minute))

	It("refuses a keyless record on a compacted topic with INVALID_RECORD, and takes keyed ones", func(ctx SpecContext) {
		adm := NewAdmin(b)
		topic := UniqueName("compacted")
		createTopicWithConfigs(ctx, adm, topic, 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")})
		cl := NewClient(b)
		Expect(cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("no key")}).FirstErr()).To(MatchError(kerr.InvalidRecord))
		Expect(cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte("k"), Value: []byte("keyed")}).FirstErr()).To(Succeed())
	}, SpecTimeout(time.Minute))
})

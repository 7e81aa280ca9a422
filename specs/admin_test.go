package specs

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/IBM/sarama"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func cfgValue(c kadm.Config) string { return c.MaybeValue() }

// topicConfig returns one described config of a topic.
func topicConfig(rc kadm.ResourceConfig, key string) kadm.Config {
	GinkgoHelper()
	for _, c := range rc.Configs {
		if c.Key == key {
			return c
		}
	}
	Fail(fmt.Sprintf("config %s not described: %+v", key, rc.Configs))
	return kadm.Config{}
}

func describeTopic(ctx SpecContext, adm *kadm.Client, topic string) kadm.ResourceConfig {
	GinkgoHelper()
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	Expect(err).NotTo(HaveOccurred())
	rc, err := rcs.On(topic, nil)
	Expect(err).NotTo(HaveOccurred())
	Expect(rc.Err).NotTo(HaveOccurred())
	return rc
}

// newSaramaAdmin is a sarama ClusterAdmin of b speaking version's requests,
// closed when the spec ends.
func newSaramaAdmin(b *Broker, version sarama.KafkaVersion) sarama.ClusterAdmin {
	GinkgoHelper()
	cfg := sarama.NewConfig()
	cfg.Version = version
	cfg.Admin.Timeout = 15 * time.Second
	sadm, err := sarama.NewClusterAdmin([]string{b.Addr}, cfg)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(sadm.Close)
	return sadm
}

var _ = Describe("Admin APIs", Label("admin"), func() {
	It("describes and alters configs, adds partitions and deletes records, with Kafka's error codes", func(ctx SpecContext) {
		b := StartBroker(GinkgoT().TempDir(), WithBrokerArgs("--default-partitions=2"))
		cl := NewClient(b)
		adm := kadm.NewClient(cl)
		topic := UniqueName("admin")
		CreateTopic(ctx, adm, topic, 3)

		By("describing the topic's configs: defaults, with their sources and broker synonyms")
		rc := describeTopic(ctx, adm, topic)
		ret := topicConfig(rc, "retention.ms")
		Expect(cfgValue(ret)).To(Equal("604800000"))
		Expect(ret.Source).To(Equal(kmsg.ConfigSourceDefaultConfig))
		Expect(ret.Synonyms).NotTo(BeEmpty())
		Expect(ret.Synonyms[len(ret.Synonyms)-1].Key).To(Equal("log.retention.ms"))
		Expect(cfgValue(topicConfig(rc, "cleanup.policy"))).To(Equal("delete"))

		By("IncrementalAlterConfigs: SET retention.ms and segment.bytes")
		alter := func(ops ...kadm.AlterConfig) error {
			GinkgoHelper()
			resp, err := adm.AlterTopicConfigs(ctx, ops, topic)
			Expect(err).NotTo(HaveOccurred())
			Expect(resp).To(HaveLen(1))
			return resp[0].Err
		}
		Expect(alter(kadm.AlterConfig{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("3600000")},
			kadm.AlterConfig{Op: kadm.SetConfig, Name: "segment.bytes", Value: kadm.StringPtr("1048576")})).To(Succeed())
		rc = describeTopic(ctx, adm, topic)
		Expect(cfgValue(topicConfig(rc, "retention.ms"))).To(Equal("3600000"))
		Expect(topicConfig(rc, "retention.ms").Source).To(Equal(kmsg.ConfigSourceDynamicTopicConfig))
		Expect(cfgValue(topicConfig(rc, "segment.bytes"))).To(Equal("1048576"))

		By("IncrementalAlterConfigs: DELETE retention.ms back to its default")
		Expect(alter(kadm.AlterConfig{Op: kadm.DeleteConfig, Name: "retention.ms"})).To(Succeed())
		rc = describeTopic(ctx, adm, topic)
		Expect(topicConfig(rc, "retention.ms").Source).To(Equal(kmsg.ConfigSourceDefaultConfig))
		Expect(topicConfig(rc, "segment.bytes").Source).To(Equal(kmsg.ConfigSourceDynamicTopicConfig))

		By("refusing unknown keys, bad values and APPEND to a non-list config with INVALID_CONFIG")
		Expect(alter(kadm.AlterConfig{Op: kadm.SetConfig, Name: "no.such.config", Value: kadm.StringPtr("1")})).To(MatchError(kerr.InvalidConfig))
		Expect(alter(kadm.AlterConfig{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("soon")})).To(MatchError(kerr.InvalidConfig))
		Expect(alter(kadm.AlterConfig{Op: kadm.SetConfig, Name: "cleanup.policy", Value: kadm.StringPtr("forever")})).To(MatchError(kerr.InvalidConfig))
		Expect(alter(kadm.AlterConfig{Op: kadm.AppendConfig, Name: "retention.ms", Value: kadm.StringPtr("1")})).To(MatchError(kerr.InvalidConfig))
		Expect(cfgValue(topicConfig(describeTopic(ctx, adm, topic), "segment.bytes"))).To(Equal("1048576"))

		By("AlterConfigs (a raw kmsg request): the full replace drops segment.bytes and sets retention.bytes")
		full := kmsg.NewPtrAlterConfigsRequest()
		res := kmsg.NewAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, topic
		kv := kmsg.NewAlterConfigsRequestResourceConfig()
		kv.Name, kv.Value = "retention.bytes", kmsg.StringPtr("10485760")
		res.Configs = append(res.Configs, kv)
		full.Resources = append(full.Resources, res)
		fresp, err := full.RequestWith(ctx, cl)
		Expect(err).NotTo(HaveOccurred())
		Expect(fresp.Resources).To(HaveLen(1))
		Expect(fresp.Resources[0].ErrorCode).To(BeZero())
		rc = describeTopic(ctx, adm, topic)
		Expect(topicConfig(rc, "segment.bytes").Source).To(Equal(kmsg.ConfigSourceDefaultConfig))
		Expect(cfgValue(topicConfig(rc, "retention.bytes"))).To(Equal("10485760"))
		kv.Name = "segment.jitter.ms"
		full.Resources[0].Configs[0] = kv
		fresp, err = full.RequestWith(ctx, cl)
		Expect(err).NotTo(HaveOccurred())
		Expect(fresp.Resources[0].ErrorCode).To(Equal(kerr.InvalidConfig.Code))
		Expect(fresp.Resources[0].ErrorMessage).NotTo(BeNil())

		By("CreatePartitions 3 → 6, then producing to and consuming from the new partitions")
		cps, err := adm.UpdatePartitions(ctx, 6, topic)
		Expect(err).NotTo(HaveOccurred())
		Expect(cps[topic].Err).NotTo(HaveOccurred())
		prod := NewClient(b, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		for p := int32(0); p < 6; p++ {
			for i := range 3 {
				Expect(prod.ProduceSync(ctx, &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "p%d-%d", p, i)}).FirstErr()).To(Succeed())
			}
		}
		got := consumeAll(ctx, b, topic, map[int32]int{0: 3, 1: 3, 2: 3, 3: 3, 4: 3, 5: 3})
		for p := int32(3); p < 6; p++ {
			Expect(got[p]).To(HaveLen(3))
			Expect(string(got[p][0].Value)).To(Equal(fmt.Sprintf("p%d-0", p)))
		}

		By("decreasing the partition count: INVALID_PARTITIONS")
		cps, err = adm.UpdatePartitions(ctx, 4, topic)
		Expect(err).NotTo(HaveOccurred())
		Expect(cps[topic].Err).To(MatchError(kerr.InvalidPartitions))

		By("DeleteRecords moves the low watermark of partition 4")
		dr, err := adm.DeleteRecords(ctx, kadm.Offsets{topic: {4: {Topic: topic, Partition: 4, At: 2}}})
		Expect(err).NotTo(HaveOccurred())
		drr, ok := dr.Lookup(topic, 4)
		Expect(ok).To(BeTrue())
		Expect(drr.Err).NotTo(HaveOccurred())
		Expect(drr.LowWatermark).To(Equal(int64(2)))
		starts, err := adm.ListStartOffsets(ctx, topic)
		Expect(err).NotTo(HaveOccurred())
		so, ok := starts.Lookup(topic, 4)
		Expect(ok).To(BeTrue())
		Expect(so.Offset).To(Equal(int64(2)))

		By("fetching below the low watermark: OFFSET_OUT_OF_RANGE")
		fetch := kmsg.NewPtrFetchRequest()
		fetch.Version, fetch.ReplicaID, fetch.MaxBytes = 12, -1, 1<<20
		md, err := adm.Metadata(ctx, topic)
		Expect(err).NotTo(HaveOccurred())
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic, ft.TopicID = topic, md.Topics[topic].ID // by name or ID: the client picks the version
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch = 4, 0, 1<<20, -1
		ft.Partitions = append(ft.Partitions, fp)
		fetch.Topics = append(fetch.Topics, ft)
		fr, err := fetch.RequestWith(ctx, cl)
		Expect(err).NotTo(HaveOccurred())
		Expect(fr.Topics[0].Partitions[0].ErrorCode).To(Equal(kerr.OffsetOutOfRange.Code))
		Expect(fr.Topics[0].Partitions[0].LogStartOffset).To(Equal(int64(2)))

		By("DeleteRecords above the high watermark: OFFSET_OUT_OF_RANGE")
		dr, err = adm.DeleteRecords(ctx, kadm.Offsets{topic: {4: {Topic: topic, Partition: 4, At: 100}}})
		Expect(err).NotTo(HaveOccurred())
		drr, _ = dr.Lookup(topic, 4)
		Expect(errors.Is(drr.Err, kerr.OffsetOutOfRange)).To(BeTrue(), "%v", drr.Err)

		By("describing the broker's configs: read-only, with sources")
		brs, err := adm.DescribeBrokerConfigs(ctx, int32(b.ID))
		Expect(err).NotTo(HaveOccurred())
		Expect(brs).To(HaveLen(1))
		Expect(brs[0].Err).NotTo(HaveOccurred())
		bc := map[string]kadm.Config{}
		for _, c := range brs[0].Configs {
			bc[c.Key] = c
		}
		Expect(cfgValue(bc["broker.id"])).To(Equal(strconv.Itoa(b.ID)))
		Expect(cfgValue(bc["num.partitions"])).To(Equal("2"))
		Expect(bc["num.partitions"].Source).To(Equal(kmsg.ConfigSourceStaticBrokerConfig))
		Expect(bc["log.retention.ms"].Source).To(Equal(kmsg.ConfigSourceDefaultConfig))
		Expect(cfgValue(bc["auto.create.topics.enable"])).To(Equal("true"))
		bresp, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "num.partitions", Value: kadm.StringPtr("3")}}, int32(b.ID))
		Expect(err).NotTo(HaveOccurred())
		Expect(bresp[0].Err).To(MatchError(kerr.InvalidRequest))

		By("sarama's ClusterAdmin describes the topic's configs")
		sadm := newSaramaAdmin(b, sarama.V2_1_0_0)
		results, err := sadm.DescribeConfigs([]*sarama.ConfigResource{{Type: sarama.TopicResource, Name: topic}},
			sarama.DescribeConfigsOptions{IncludeSynonyms: true, IncludeDocumentation: true})
		Expect(err).NotTo(HaveOccurred())
		Expect(results).To(HaveLen(1))
		Expect(results[0].ErrorCode).To(Equal(sarama.ErrNoError), results[0].ErrorMsg)
		byName := map[string]sarama.ConfigEntry{}
		for _, e := range results[0].Configs {
			byName[e.Name] = e
		}
		Expect(byName["retention.bytes"].Value).To(Equal("10485760"))
		Expect(byName["retention.bytes"].Source).To(Equal(sarama.SourceTopic))
		Expect(byName["retention.ms"].Default).To(BeTrue())
	}, SpecTimeout(60*time.Second))
})

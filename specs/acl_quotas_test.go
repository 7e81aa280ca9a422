package specs

// The client quota APIs (DescribeClientQuotas, AlterClientQuotas) with real
// clients, on a broker with the ACL authorizer on: franz-go kadm, sarama's
// ClusterAdmin and segmentio/kafka-go set client quotas for users,
// client-ids, both, and their defaults, describe them strictly and not, and
// remove them; a user without the cluster's right is refused. (Quota
// enforcement, a client held to its rate, is the quota spec's.)

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/IBM/sarama"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

var _ = Describe("client quotas with real clients", Ordered, ContinueOnFailure, Label("acl", "quota", "clients"), func() {
	var (
		b   *Broker
		adm *kadm.Client
	)

	BeforeAll(func(ctx SpecContext) {
		b = startACLBrokers(ctx, 1)[0]
		adm = scramAdmin(aclAdmin, b.Addr)
	}, NodeTimeout(2*time.Minute))

	It("franz-go kadm alters and describes client quotas (user, default user, user and client-id); a user without the cluster right may not", func(ctx SpecContext) {
		user, clientID := UniqueName("kadm-quota"), UniqueName("kadm-client")
		str := func(s string) *string { return &s }
		userEntity := kadm.ClientQuotaEntity{{Type: "user", Name: str(user)}}
		defaultUser := kadm.ClientQuotaEntity{{Type: "user"}}
		userClient := kadm.ClientQuotaEntity{{Type: "user", Name: str(user)}, {Type: "client-id", Name: str(clientID)}}
		set := func(e kadm.ClientQuotaEntity, key string, v float64, remove bool) kadm.AlterClientQuotaEntry {
			return kadm.AlterClientQuotaEntry{Entity: e, Ops: []kadm.AlterClientQuotaOp{{Key: key, Value: v, Remove: remove}}}
		}

		By("User:app is refused AlterClientQuotas and DescribeClientQuotas")
		appAdm := scramAdmin("app", b.Addr)
		altered, err := appAdm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{set(userEntity, "producer_byte_rate", 1024, false)})
		if err == nil {
			Expect(altered).To(HaveLen(1))
			err = altered[0].Err
		}
		Expect(err).To(MatchError(kerr.ClusterAuthorizationFailed))
		_, err = appAdm.DescribeClientQuotas(ctx, false, nil)
		Expect(err).To(MatchError(kerr.ClusterAuthorizationFailed))

		By("the admin sets producer_byte_rate for the user, consumer_byte_rate for the default user and request_percentage for the user and client-id")
		altered, err = adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
			set(userEntity, "producer_byte_rate", 1048576, false),
			set(defaultUser, "consumer_byte_rate", 2097152, false),
			set(userClient, "request_percentage", 50, false),
		})
		Expect(err).NotTo(HaveOccurred())
		for _, a := range altered {
			Expect(a.Err).NotTo(HaveOccurred(), "AlterClientQuotas %v: %s", a.Entity, a.ErrMessage)
		}

		exact := []kadm.DescribeClientQuotaComponent{{Type: "user", MatchName: str(user), MatchType: 0}}
		By("DescribeClientQuotas strict of user=" + user + ": only that entity")
		got, err := adm.DescribeClientQuotas(ctx, true, exact)
		Expect(err).NotTo(HaveOccurred())
		Expect(describedQuotas(got)).To(Equal([]string{"{user=" + user + "} producer_byte_rate=1048576"}))
		By("DescribeClientQuotas not strict: the user and client-id entity too")
		got, err = adm.DescribeClientQuotas(ctx, false, exact)
		Expect(err).NotTo(HaveOccurred())
		Expect(describedQuotas(got)).To(ConsistOf(
			"{user="+user+"} producer_byte_rate=1048576",
			"{client-id="+clientID+", user="+user+"} request_percentage=50"))
		By("DescribeClientQuotas of the default user")
		got, err = adm.DescribeClientQuotas(ctx, true, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchType: 1}})
		Expect(err).NotTo(HaveOccurred())
		Expect(describedQuotas(got)).To(Equal([]string{"{user=<default>} consumer_byte_rate=2097152"}))

		By("removing every one, after which none is described")
		altered, err = adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
			set(userEntity, "producer_byte_rate", 0, true),
			set(defaultUser, "consumer_byte_rate", 0, true),
			set(userClient, "request_percentage", 0, true),
		})
		Expect(err).NotTo(HaveOccurred())
		for _, a := range altered {
			Expect(a.Err).NotTo(HaveOccurred(), "AlterClientQuotas remove %v: %s", a.Entity, a.ErrMessage)
		}
		got, err = adm.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchType: 2}})
		Expect(err).NotTo(HaveOccurred())
		Expect(describedQuotas(got)).To(BeEmpty())
	}, SpecTimeout(time.Minute))

	It("sarama ClusterAdmin alters and describes client quotas", func(ctx SpecContext) {
		runSaramaQuotas(b, "sarama-app")
	}, SpecTimeout(time.Minute))

	It("segmentio/kafka-go alters and describes client quotas", func(ctx SpecContext) {
		runKafkaGoQuotas(ctx, b, "kafkago-app")
	}, SpecTimeout(time.Minute))
})

// describedQuotas are described client quotas, one a line per value as
// "{type=name, ...} key=value" with the entity's components sorted.
func describedQuotas(qs kadm.DescribedClientQuotas) []string {
	var out []string
	for _, q := range qs {
		var comps []string
		for _, c := range q.Entity {
			comps = append(comps, c.String())
		}
		for _, v := range q.Values {
			out = append(out, quotaLine(comps, v.Key, v.Value))
		}
	}
	sort.Strings(out)
	return out
}

// quotaLine is one quota value as describedQuotas spells it, from
// components already spelled type=name.
func quotaLine(comps []string, key string, value float64) string {
	sort.Strings(comps)
	return fmt.Sprintf("{%s} %s=%s", strings.Join(comps, ", "), key, strconv.FormatFloat(value, 'f', -1, 64))
}

// ---------------------------------------------------------------------------
// sarama

// saramaQuotaLines spells what DescribeClientQuotas returned as
// describedQuotas does.
func saramaQuotaLines(es []sarama.DescribeClientQuotasEntry) []string {
	var out []string
	for _, e := range es {
		var comps []string
		for _, c := range e.Entity {
			name := c.Name
			if c.MatchType == sarama.QuotaMatchDefault {
				name = "<default>"
			}
			comps = append(comps, string(c.EntityType)+"="+name)
		}
		for k, v := range e.Values {
			out = append(out, quotaLine(comps, k, v))
		}
	}
	sort.Strings(out)
	return out
}

// runSaramaQuotas sets, describes and removes client quotas with sarama's
// ClusterAdmin as the admin; user may not describe them.
func runSaramaQuotas(b *Broker, user string) {
	GinkgoHelper()
	ca := saramaAdmin(b, aclAdmin)
	quotaUser, clientID := UniqueName("sarama-quota"), UniqueName("sarama-client")
	userEntity := []sarama.QuotaEntityComponent{{EntityType: sarama.QuotaEntityUser, MatchType: sarama.QuotaMatchExact, Name: quotaUser}}
	clientDefault := []sarama.QuotaEntityComponent{{EntityType: sarama.QuotaEntityClientID, MatchType: sarama.QuotaMatchDefault}}
	userClient := []sarama.QuotaEntityComponent{userEntity[0], {EntityType: sarama.QuotaEntityClientID, MatchType: sarama.QuotaMatchExact, Name: clientID}}

	By("AlterClientQuotas: the user's producer_byte_rate, the default client-id's consumer_byte_rate, the user and client-id's request_percentage")
	Expect(ca.AlterClientQuotas(userEntity, sarama.ClientQuotasOp{Key: "producer_byte_rate", Value: 524288}, false)).To(Succeed())
	Expect(ca.AlterClientQuotas(clientDefault, sarama.ClientQuotasOp{Key: "consumer_byte_rate", Value: 1048576}, false)).To(Succeed())
	Expect(ca.AlterClientQuotas(userClient, sarama.ClientQuotasOp{Key: "request_percentage", Value: 25}, false)).To(Succeed())

	exactUser := []sarama.QuotaFilterComponent{{EntityType: sarama.QuotaEntityUser, MatchType: sarama.QuotaMatchExact, Match: quotaUser}}
	By("DescribeClientQuotas of the user, strict and not")
	got, err := ca.DescribeClientQuotas(exactUser, true)
	Expect(err).NotTo(HaveOccurred(), "sarama DescribeClientQuotas strict")
	Expect(saramaQuotaLines(got)).To(Equal([]string{"{user=" + quotaUser + "} producer_byte_rate=524288"}))
	got, err = ca.DescribeClientQuotas(exactUser, false)
	Expect(err).NotTo(HaveOccurred(), "sarama DescribeClientQuotas")
	Expect(saramaQuotaLines(got)).To(ConsistOf(
		"{user="+quotaUser+"} producer_byte_rate=524288",
		"{client-id="+clientID+", user="+quotaUser+"} request_percentage=25"))
	By("DescribeClientQuotas of the default client-id")
	got, err = ca.DescribeClientQuotas([]sarama.QuotaFilterComponent{{EntityType: sarama.QuotaEntityClientID, MatchType: sarama.QuotaMatchDefault}}, true)
	Expect(err).NotTo(HaveOccurred())
	Expect(saramaQuotaLines(got)).To(Equal([]string{"{client-id=<default>} consumer_byte_rate=1048576"}))

	By(user + " is refused DescribeClientQuotas")
	_, err = saramaAdmin(b, user).DescribeClientQuotas(exactUser, false)
	Expect(err).To(HaveOccurred(), "sarama DescribeClientQuotas as %s", user)

	By("removing them; none is described afterwards")
	Expect(ca.AlterClientQuotas(userEntity, sarama.ClientQuotasOp{Key: "producer_byte_rate", Remove: true}, false)).To(Succeed())
	Expect(ca.AlterClientQuotas(clientDefault, sarama.ClientQuotasOp{Key: "consumer_byte_rate", Remove: true}, false)).To(Succeed())
	Expect(ca.AlterClientQuotas(userClient, sarama.ClientQuotasOp{Key: "request_percentage", Remove: true}, false)).To(Succeed())
	got, err = ca.DescribeClientQuotas(exactUser, false)
	Expect(err).NotTo(HaveOccurred())
	Expect(saramaQuotaLines(got)).To(BeEmpty())
}

// ---------------------------------------------------------------------------
// segmentio/kafka-go

// kafkaGoQuotaLines spells what DescribeClientQuotas returned as
// describedQuotas does; kafka-go names a default entity "".
func kafkaGoQuotaLines(es []kafka.DescribeClientQuotasResponseQuotas) []string {
	var out []string
	for _, e := range es {
		var comps []string
		for _, c := range e.Entities {
			name := c.EntityName
			if name == "" {
				name = "<default>"
			}
			comps = append(comps, c.EntityType+"="+name)
		}
		for _, v := range e.Values {
			out = append(out, quotaLine(comps, v.Key, v.Value))
		}
	}
	sort.Strings(out)
	return out
}

// runKafkaGoQuotas sets, describes and removes client quotas with
// kafka-go as the admin; user may not alter them.
func runKafkaGoQuotas(ctx context.Context, b *Broker, user string) {
	GinkgoHelper()
	cl := kafkaGoClient(b, aclAdmin)
	clientID := UniqueName("kafkago-client")
	entity := []kafka.AlterClientQuotaEntity{{EntityType: "client-id", EntityName: clientID}}
	ops := []kafka.AlterClientQuotaOps{{Key: "producer_byte_rate", Value: 2097152}, {Key: "consumer_byte_rate", Value: 4194304}}
	alter := func(c *kafka.Client, ops []kafka.AlterClientQuotaOps) []error {
		GinkgoHelper()
		resp, err := c.AlterClientQuotas(ctx, &kafka.AlterClientQuotasRequest{Entries: []kafka.AlterClientQuotaEntry{{Entities: entity, Ops: ops}}})
		Expect(err).NotTo(HaveOccurred(), "kafka-go AlterClientQuotas")
		var errs []error
		for _, e := range resp.Entries {
			errs = append(errs, e.Error)
		}
		return errs
	}

	By(user + ", without ALTER_CONFIGS on the cluster, is refused AlterClientQuotas")
	errs := alter(kafkaGoClient(b, user), ops)
	Expect(errs).To(HaveLen(1))
	Expect(errors.Is(errs[0], kafka.ClusterAuthorizationFailed)).To(BeTrue(), "kafka-go AlterClientQuotas as %s: %v", user, errs[0])

	By("AlterClientQuotas of a client-id's producer_byte_rate and consumer_byte_rate")
	Expect(alter(cl, ops)).To(Equal([]error{nil}))
	describe := func() []string {
		GinkgoHelper()
		resp, err := cl.DescribeClientQuotas(ctx, &kafka.DescribeClientQuotasRequest{Strict: true,
			Components: []kafka.DescribeClientQuotasRequestComponent{{EntityType: "client-id", MatchType: 0, Match: clientID}}})
		Expect(err).NotTo(HaveOccurred(), "kafka-go DescribeClientQuotas")
		Expect(resp.Error).NotTo(HaveOccurred())
		return kafkaGoQuotaLines(resp.Entries)
	}
	By("DescribeClientQuotas of the client-id")
	Expect(describe()).To(Equal([]string{
		fmt.Sprintf("{client-id=%s} consumer_byte_rate=4194304", clientID),
		fmt.Sprintf("{client-id=%s} producer_byte_rate=2097152", clientID),
	}))
	By("removing the producer_byte_rate, then both")
	Expect(alter(cl, []kafka.AlterClientQuotaOps{{Key: "producer_byte_rate", Remove: true}})).To(Equal([]error{nil}))
	Expect(describe()).To(Equal([]string{fmt.Sprintf("{client-id=%s} consumer_byte_rate=4194304", clientID)}))
	Expect(alter(cl, []kafka.AlterClientQuotaOps{{Key: "consumer_byte_rate", Remove: true}})).To(Equal([]error{nil}))
	Expect(describe()).To(BeEmpty())
}

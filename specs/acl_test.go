package specs

// Issue 18 with real clients, on one broker with --authorizer acl and
// --super-users User:admin whose listener is SASL_PLAINTEXT with
// SCRAM-SHA-512: a user without ACLs is refused with
// TOPIC_AUTHORIZATION_FAILED and produces and reads once the admin grants
// it (acceptance 1, without its quota part, which the quota spec runs);
// franz-go kadm, sarama's ClusterAdmin and segmentio/kafka-go create,
// describe and delete ACLs (the client quota APIs are
// specs/acl_quotas_test.go's); librdkafka hands its application
// TOPIC_AUTHORIZATION_FAILED and GROUP_AUTHORIZATION_FAILED.

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var _ = Describe("authorization with real clients", Ordered, ContinueOnFailure, Label("acl", "security", "clients"), func() {
	var (
		b   *Broker
		adm *kadm.Client
	)

	BeforeAll(func(ctx SpecContext) {
		b = startACLBrokers(ctx, 1)[0]
		adm = scramAdmin(aclAdmin, b.Addr)
	}, NodeTimeout(2*time.Minute))

	It("refuses a SCRAM user without ACLs with TOPIC_AUTHORIZATION_FAILED, and lets it produce and read once kadm grants it", func(ctx SpecContext) {
		const records = 100
		topic, group := UniqueName("acl-accept"), UniqueName("acl-accept")
		CreateTopic(ctx, adm, topic, 2)

		By("producing as User:app, which no ACL names")
		Expect(produceAs(ctx, "app", topic, b.Addr)).To(MatchError(kerr.TopicAuthorizationFailed))

		By("the admin grants WRITE, READ and DESCRIBE on the topic and READ on the group, with kadm")
		expectCreated(ctx, adm, kadm.NewACLs().Allow(principal("app")).Topics(topic).
			Operations(kadm.OpWrite, kadm.OpRead, kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral))
		expectCreated(ctx, adm, kadm.NewACLs().Allow(principal("app")).Groups(group).
			Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral))

		By(fmt.Sprintf("User:app produces %d records (idempotent, acks=all) and reads them back as group %s", records, group))
		prod := scramClient("app", []string{b.Addr}, kgo.DefaultProduceTopic(topic))
		var want []string
		var rs []*kgo.Record
		for i := range records {
			v := fmt.Sprintf("%s-%04d", topic, i)
			want = append(want, v)
			rs = append(rs, &kgo.Record{Key: []byte(v), Value: []byte(v)})
		}
		Expect(prod.ProduceSync(ctx, rs...).FirstErr()).To(Succeed(), "User:app produces after CreateAcls")
		prod.Close()
		expectExactlyOnce(runFranzGroupWith(ctx, scramOpts("app", b.Addr), group, topic, records), want)
		expectCommittedToEnd(ctx, adm, group, topic)

		By("after DeleteAcls of its WRITE, User:app is refused again (DESCRIBE and READ stay)")
		del, err := adm.DeleteACLs(ctx, kadm.NewACLs().Allow(principal("app")).AllowHosts().Topics(topic).
			Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternLiteral))
		Expect(err).NotTo(HaveOccurred())
		Expect(deletedCount(del)).To(Equal(1))
		Expect(produceAs(ctx, "app", topic, b.Addr)).To(MatchError(kerr.TopicAuthorizationFailed))
	}, SpecTimeout(90*time.Second))

	It("franz-go kadm creates, describes (MATCH too) and deletes ACLs; a user without ALTER on the cluster may not", func(ctx SpecContext) {
		user, prefix, group := principal(UniqueName("kadm-user")), UniqueName("kadm")+"-", UniqueName("kadm-group")
		By("User:app, without ALTER on the cluster, is refused CreateAcls")
		res, err := scramAdmin("app", b.Addr).CreateACLs(ctx, kadm.NewACLs().Allow(user).Topics(prefix+"x").
			Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral))
		if err == nil {
			Expect(res).NotTo(BeEmpty())
			err = res[0].Err
		}
		Expect(err).To(MatchError(kerr.ClusterAuthorizationFailed))

		By("the admin creates an allow on a topic prefix, a deny on one topic and an allow on a group")
		expectCreated(ctx, adm, kadm.NewACLs().Allow(user).Topics(prefix).Operations(kadm.OpRead, kadm.OpDescribe).
			ResourcePatternType(kadm.ACLPatternPrefixed))
		expectCreated(ctx, adm, kadm.NewACLs().Deny(user).DenyHosts("127.0.0.1").Topics(prefix+"secret").
			Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral))
		expectCreated(ctx, adm, kadm.NewACLs().Allow(user).Groups(group).Operations(kadm.OpRead).
			ResourcePatternType(kadm.ACLPatternLiteral))
		want := []string{
			"ALLOW " + user + " * DESCRIBE TOPIC PREFIXED " + prefix,
			"ALLOW " + user + " * READ GROUP LITERAL " + group,
			"ALLOW " + user + " * READ TOPIC PREFIXED " + prefix,
			"DENY " + user + " 127.0.0.1 READ TOPIC LITERAL " + prefix + "secret",
		}

		byUser := func() *kadm.ACLBuilder {
			return kadm.NewACLs().Allow(user).AllowHosts().Deny(user).DenyHosts().AnyResource().
				Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny)
		}
		By("DescribeAcls of the user's ACLs, any resource")
		described, err := adm.DescribeACLs(ctx, byUser())
		Expect(err).NotTo(HaveOccurred())
		Expect(describedACLs(described)).To(Equal(want))

		By("DescribeAcls with a MATCH filter on the denied topic: the prefixed allows and the literal deny")
		matched, err := adm.DescribeACLs(ctx, kadm.NewACLs().Allow().AllowHosts().Deny().DenyHosts().
			Topics(prefix+"secret").Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternMatch))
		Expect(err).NotTo(HaveOccurred())
		Expect(describedACLs(matched)).To(Equal([]string{want[0], want[2], want[3]}))

		By("DeleteAcls of the user's ACLs, then DescribeAcls finds none")
		del, err := adm.DeleteACLs(ctx, byUser())
		Expect(err).NotTo(HaveOccurred())
		Expect(deletedCount(del)).To(Equal(len(want)))
		described, err = adm.DescribeACLs(ctx, byUser())
		Expect(err).NotTo(HaveOccurred())
		Expect(describedACLs(described)).To(BeEmpty())
	}, SpecTimeout(time.Minute))

	It("sarama ClusterAdmin creates, lists and deletes ACLs", func(ctx SpecContext) {
		runSaramaACLs(b, "sarama-app")
	}, SpecTimeout(time.Minute))

	It("segmentio/kafka-go creates, describes and deletes ACLs", func(ctx SpecContext) {
		runKafkaGoACLs(ctx, b, "kafkago-app")
	}, SpecTimeout(time.Minute))

	It("librdkafka (confluent-kafka-python) hands its application TOPIC_AUTHORIZATION_FAILED on produce and GROUP_AUTHORIZATION_FAILED on a group", func(ctx SpecContext) {
		confluentInstalled()
		topic, group := UniqueName("acl-rdkafka"), UniqueName("acl-rdkafka")
		CreateTopic(ctx, adm, topic, 1)
		By("User:rdkafka may DESCRIBE and READ the topic, not WRITE it, and has no ACL on the group")
		expectCreated(ctx, adm, kadm.NewACLs().Allow(principal("rdkafka")).Topics(topic).
			Operations(kadm.OpDescribe, kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral))
		args := []string{filepath.Join("testdata", "confluent_authz.py"), b.Addr, topic, group,
			"security.protocol=SASL_PLAINTEXT", "sasl.mechanisms=SCRAM-SHA-512",
			"sasl.username=rdkafka", "sasl.password=" + aclPassword}
		out := runScript(ctx, "confluent-kafka-python", exec.CommandContext(ctx, systemPython, args...))
		Expect(strings.Fields(out)).To(Equal([]string{
			"produce", fmt.Sprint(kerr.TopicAuthorizationFailed.Code),
			"consume", fmt.Sprint(kerr.GroupAuthorizationFailed.Code),
		}), "error codes confluent-kafka-python handed the application")
	}, SpecTimeout(time.Minute))
})

// describedACLs are the ACLs results describe, one a line as
// "PERMISSION principal host OPERATION TYPE PATTERN name", sorted.
func describedACLs(results kadm.DescribeACLsResults) []string {
	GinkgoHelper()
	var out []string
	for _, r := range results {
		Expect(r.Err).NotTo(HaveOccurred(), "DescribeAcls filter: %s", r.ErrMessage)
		for _, d := range r.Described {
			out = append(out, aclLine(d.Permission, d.Principal, d.Host, d.Operation, d.Type, d.Pattern, d.Name))
		}
	}
	sort.Strings(out)
	return out
}

// aclLine is one ACL as describedACLs spells it.
func aclLine(perm kmsg.ACLPermissionType, principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType, pattern kmsg.ACLResourcePatternType, name string) string {
	return fmt.Sprintf("%s %s %s %s %s %s %s", perm, principal, host, op, rt, pattern, name)
}

// deletedCount is how many ACLs a DeleteAcls deleted.
func deletedCount(results kadm.DeleteACLsResults) int {
	GinkgoHelper()
	n := 0
	for _, r := range results {
		Expect(r.Err).NotTo(HaveOccurred(), "DeleteAcls filter: %s", r.ErrMessage)
		for _, d := range r.Deleted {
			Expect(d.Err).NotTo(HaveOccurred(), "DeleteAcls match: %s", d.ErrMessage)
			n++
		}
	}
	return n
}

package specs

// The ACL APIs through sarama's ClusterAdmin and segmentio/kafka-go's
// Client, logged in with SCRAM-SHA-512 as the super user of the
// authorization spec's broker: each creates ACLs, lists them with a filter
// (MATCH too), and deletes them by that filter; a user without the
// cluster's right is refused.

import (
	"context"
	"errors"
	"sort"

	"github.com/IBM/sarama"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/segmentio/kafka-go"
	kafkascram "github.com/segmentio/kafka-go/sasl/scram"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ---------------------------------------------------------------------------
// sarama

// saramaAdmin is a sarama ClusterAdmin of b logged in as user, closed at
// cleanup. Version 2.8 makes it send the flexible versions of the ACL and
// quota APIs.
func saramaAdmin(b *Broker, user string) sarama.ClusterAdmin {
	GinkgoHelper()
	cfg := sarama.NewConfig()
	cfg.ClientID = "kaas-specs-sarama"
	cfg.Version = sarama.V2_8_0_0
	cfg.Net.SASL.Enable = true
	cfg.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA512
	cfg.Net.SASL.Version = sarama.SASLHandshakeV1
	cfg.Net.SASL.User, cfg.Net.SASL.Password = user, aclPassword
	cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &saramaSCRAM{} }
	cfg.Admin.Retry.Max = 2
	cfg.Metadata.Retry.Max = 2
	Expect(cfg.Validate()).To(Succeed())
	ca, err := sarama.NewClusterAdmin([]string{b.Addr}, cfg)
	Expect(err).NotTo(HaveOccurred(), "sarama NewClusterAdmin as %s", user)
	DeferCleanup(func() { _ = ca.Close() })
	return ca
}

// saramaACLLines spells what ListAcls returned as describedACLs does.
func saramaACLLines(rs []sarama.ResourceAcls) []string {
	var out []string
	for _, r := range rs {
		for _, a := range r.Acls {
			out = append(out, aclLine(kmsg.ACLPermissionType(a.PermissionType), a.Principal, a.Host,
				kmsg.ACLOperation(a.Operation), kmsg.ACLResourceType(r.ResourceType),
				kmsg.ACLResourcePatternType(r.ResourcePatternType), r.ResourceName))
		}
	}
	sort.Strings(out)
	return out
}

// runSaramaACLs creates, lists and deletes ACLs with sarama's ClusterAdmin
// as the admin (sarama's CreateACLs drops the per-ACL errors of its
// answer: ListAcls checks what was stored), and checks that user, who may not DESCRIBE the cluster, is
// refused ListAcls.
func runSaramaACLs(b *Broker, user string) {
	GinkgoHelper()
	ca := saramaAdmin(b, aclAdmin)
	subject, topic, groupPrefix := principal(UniqueName("sarama-user")), UniqueName("sarama-acl"), UniqueName("sarama-group")+"-"

	By("CreateACLs: a topic's WRITE and READ, a group prefix's READ; then a DENY of ALTER on the cluster")
	Expect(ca.CreateACLs([]*sarama.ResourceAcls{
		{Resource: sarama.Resource{ResourceType: sarama.AclResourceTopic, ResourceName: topic, ResourcePatternType: sarama.AclPatternLiteral},
			Acls: []*sarama.Acl{
				{Principal: subject, Host: "*", Operation: sarama.AclOperationWrite, PermissionType: sarama.AclPermissionAllow},
				{Principal: subject, Host: "*", Operation: sarama.AclOperationRead, PermissionType: sarama.AclPermissionAllow},
			}},
		{Resource: sarama.Resource{ResourceType: sarama.AclResourceGroup, ResourceName: groupPrefix, ResourcePatternType: sarama.AclPatternPrefixed},
			Acls: []*sarama.Acl{{Principal: subject, Host: "*", Operation: sarama.AclOperationRead, PermissionType: sarama.AclPermissionAllow}}},
	})).To(Succeed(), "sarama CreateACLs")
	Expect(ca.CreateACLs([]*sarama.ResourceAcls{{
		Resource: sarama.Resource{ResourceType: sarama.AclResourceCluster, ResourceName: "kafka-cluster", ResourcePatternType: sarama.AclPatternLiteral},
		Acls:     []*sarama.Acl{{Principal: subject, Host: "127.0.0.1", Operation: sarama.AclOperationAlter, PermissionType: sarama.AclPermissionDeny}}}})).
		To(Succeed(), "sarama CreateACLs of a DENY")
	want := []string{
		"ALLOW " + subject + " * READ GROUP PREFIXED " + groupPrefix,
		"ALLOW " + subject + " * READ TOPIC LITERAL " + topic,
		"ALLOW " + subject + " * WRITE TOPIC LITERAL " + topic,
		"DENY " + subject + " 127.0.0.1 ALTER CLUSTER LITERAL kafka-cluster",
	}

	bySubject := sarama.AclFilter{ResourceType: sarama.AclResourceAny, ResourcePatternTypeFilter: sarama.AclPatternAny,
		Principal: &subject, Operation: sarama.AclOperationAny, PermissionType: sarama.AclPermissionAny}
	By("ListAcls of the principal, any resource")
	listed, err := ca.ListAcls(bySubject)
	Expect(err).NotTo(HaveOccurred(), "sarama ListAcls")
	Expect(saramaACLLines(listed)).To(Equal(want))

	By("ListAcls of the topic's READ with a MATCH filter")
	readFilter := sarama.AclFilter{ResourceType: sarama.AclResourceTopic, ResourceName: &topic, ResourcePatternTypeFilter: sarama.AclPatternMatch,
		Operation: sarama.AclOperationRead, PermissionType: sarama.AclPermissionAllow}
	listed, err = ca.ListAcls(readFilter)
	Expect(err).NotTo(HaveOccurred(), "sarama ListAcls MATCH")
	Expect(saramaACLLines(listed)).To(Equal([]string{want[1]}))

	By(user + ", without DESCRIBE on the cluster, is refused ListAcls")
	_, err = saramaAdmin(b, user).ListAcls(bySubject)
	Expect(errors.Is(err, sarama.ErrClusterAuthorizationFailed)).To(BeTrue(), "sarama ListAcls as %s: %v", user, err)

	By("DeleteACL by the principal's filter, then ListAcls finds none")
	matched, err := ca.DeleteACL(bySubject, false)
	Expect(err).NotTo(HaveOccurred(), "sarama DeleteACL")
	Expect(matched).To(HaveLen(len(want)))
	for _, m := range matched {
		Expect(m.Err).To(Equal(sarama.ErrNoError))
	}
	listed, err = ca.ListAcls(bySubject)
	Expect(err).NotTo(HaveOccurred())
	Expect(saramaACLLines(listed)).To(BeEmpty())
}

// ---------------------------------------------------------------------------
// segmentio/kafka-go

// kafkaGoClient is a kafka-go Client of b logged in as user.
func kafkaGoClient(b *Broker, user string) *kafka.Client {
	GinkgoHelper()
	mech, err := kafkascram.Mechanism(kafkascram.SHA512, user, aclPassword)
	Expect(err).NotTo(HaveOccurred())
	transport := &kafka.Transport{SASL: mech, ClientID: "kaas-specs-kafka-go"}
	DeferCleanup(transport.CloseIdleConnections)
	return &kafka.Client{Addr: kafka.TCP(b.Addr), Transport: transport}
}

// kafkaGoACLLines spells what DescribeACLs returned as describedACLs does.
func kafkaGoACLLines(rs []kafka.ACLResource) []string {
	var out []string
	for _, r := range rs {
		for _, a := range r.ACLs {
			out = append(out, aclLine(kmsg.ACLPermissionType(a.PermissionType), a.Principal, a.Host,
				kmsg.ACLOperation(a.Operation), kmsg.ACLResourceType(r.ResourceType),
				kmsg.ACLResourcePatternType(r.PatternType), r.ResourceName))
		}
	}
	sort.Strings(out)
	return out
}

// runKafkaGoACLs creates, describes and deletes ACLs with kafka-go as the
// admin; user may not create them.
func runKafkaGoACLs(ctx context.Context, b *Broker, user string) {
	GinkgoHelper()
	cl := kafkaGoClient(b, aclAdmin)
	subject, txnPrefix, topic := principal(UniqueName("kafkago-user")), UniqueName("kafkago-txn")+"-", UniqueName("kafkago-acl")
	entries := []kafka.ACLEntry{
		{ResourceType: kafka.ResourceTypeTopic, ResourceName: topic, ResourcePatternType: kafka.PatternTypeLiteral,
			Principal: subject, Host: "*", Operation: kafka.ACLOperationTypeDescribe, PermissionType: kafka.ACLPermissionTypeAllow},
		{ResourceType: kafka.ResourceTypeTransactionalID, ResourceName: txnPrefix, ResourcePatternType: kafka.PatternTypePrefixed,
			Principal: subject, Host: "*", Operation: kafka.ACLOperationTypeWrite, PermissionType: kafka.ACLPermissionTypeAllow},
		{ResourceType: kafka.ResourceTypeTopic, ResourceName: "*", ResourcePatternType: kafka.PatternTypeLiteral,
			Principal: subject, Host: "*", Operation: kafka.ACLOperationTypeDelete, PermissionType: kafka.ACLPermissionTypeDeny},
	}
	want := []string{
		"ALLOW " + subject + " * DESCRIBE TOPIC LITERAL " + topic,
		"ALLOW " + subject + " * WRITE TRANSACTIONAL_ID PREFIXED " + txnPrefix,
		"DENY " + subject + " * DELETE TOPIC LITERAL *",
	}

	By(user + ", without ALTER on the cluster, is refused CreateACLs")
	refused, err := kafkaGoClient(b, user).CreateACLs(ctx, &kafka.CreateACLsRequest{ACLs: entries[:1]})
	Expect(err).NotTo(HaveOccurred(), "kafka-go CreateACLs as %s", user)
	Expect(refused.Errors).To(HaveLen(1))
	Expect(errors.Is(refused.Errors[0], kafka.ClusterAuthorizationFailed)).To(BeTrue(), "kafka-go CreateACLs as %s: %v", user, refused.Errors[0])

	By("CreateACLs: a topic's DESCRIBE, a transactional ID prefix's WRITE, a DENY of DELETE on every topic")
	created, err := cl.CreateACLs(ctx, &kafka.CreateACLsRequest{ACLs: entries})
	Expect(err).NotTo(HaveOccurred(), "kafka-go CreateACLs")
	Expect(created.Errors).To(HaveLen(len(entries)))
	for i, e := range created.Errors {
		Expect(e).NotTo(HaveOccurred(), "kafka-go CreateACLs entry %d", i)
	}

	bySubject := kafka.ACLFilter{ResourceTypeFilter: kafka.ResourceTypeAny, ResourcePatternTypeFilter: kafka.PatternTypeAny,
		PrincipalFilter: subject, Operation: kafka.ACLOperationTypeAny, PermissionType: kafka.ACLPermissionTypeAny}
	By("DescribeACLs of the principal, any resource")
	described, err := cl.DescribeACLs(ctx, &kafka.DescribeACLsRequest{Filter: bySubject})
	Expect(err).NotTo(HaveOccurred(), "kafka-go DescribeACLs")
	Expect(described.Error).NotTo(HaveOccurred())
	Expect(kafkaGoACLLines(described.Resources)).To(Equal(want))

	By("DescribeACLs with a MATCH filter on the topic: its literal allow and the wildcard deny")
	described, err = cl.DescribeACLs(ctx, &kafka.DescribeACLsRequest{Filter: kafka.ACLFilter{ResourceTypeFilter: kafka.ResourceTypeTopic,
		ResourceNameFilter: topic, ResourcePatternTypeFilter: kafka.PatternTypeMatch, Operation: kafka.ACLOperationTypeAny,
		PermissionType: kafka.ACLPermissionTypeAny}})
	Expect(err).NotTo(HaveOccurred(), "kafka-go DescribeACLs MATCH")
	Expect(described.Error).NotTo(HaveOccurred())
	Expect(kafkaGoACLLines(described.Resources)).To(Equal([]string{want[0], want[2]}))

	By("DeleteACLs by the principal's filter, then DescribeACLs finds none")
	deleted, err := cl.DeleteACLs(ctx, &kafka.DeleteACLsRequest{Filters: []kafka.DeleteACLsFilter{{
		ResourceTypeFilter: kafka.ResourceTypeAny, ResourcePatternTypeFilter: kafka.PatternTypeAny, PrincipalFilter: subject,
		Operation: kafka.ACLOperationTypeAny, PermissionType: kafka.ACLPermissionTypeAny}}})
	Expect(err).NotTo(HaveOccurred(), "kafka-go DeleteACLs")
	Expect(deleted.Results).To(HaveLen(1))
	Expect(deleted.Results[0].Error).NotTo(HaveOccurred())
	Expect(deleted.Results[0].MatchingACLs).To(HaveLen(len(want)))
	described, err = cl.DescribeACLs(ctx, &kafka.DescribeACLsRequest{Filter: bySubject})
	Expect(err).NotTo(HaveOccurred())
	Expect(kafkaGoACLLines(described.Resources)).To(BeEmpty())
}

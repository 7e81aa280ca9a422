package specs

// Authorization holds through takeover: two brokers on one shared data
// directory with the ACL authorizer on. An ACL created through one broker
// is enforced by the other within the bound of engine/synced.go; a user
// allowed on topic A and only allowed to DESCRIBE topic B is refused
// WRITE and READ on B by B's leader, and still refused by the broker that
// takes B's partition over when that leader is SIGKILLed; the killed
// broker, restarted, enforces the stored ACLs and one created through it.

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

var _ = Describe("authorization through takeover", Label("acl", "cluster"), func() {
	It("keeps refusing the unauthorized on a partition that moves, and enforces on every broker an ACL created on one", func(ctx SpecContext) {
		const user = "takeover-app"
		bs := startACLBrokers(ctx, 2)
		topicA, topicB, topicC := UniqueName("acl-allowed"), UniqueName("acl-refused"), UniqueName("acl-unnamed")
		adm := scramAdmin(aclAdmin, brokerAddrs(bs)...)
		CreateTopic(ctx, adm, topicA, 2)
		CreateTopic(ctx, adm, topicB, 1)
		CreateTopic(ctx, adm, topicC, 1)

		By("before any ACL, every broker refuses the user DESCRIBE on A")
		for _, b := range bs {
			codes, _, err := metadataFrom(ctx, user, b.Addr, topicA)
			Expect(err).NotTo(HaveOccurred(), "metadata from broker %d", b.ID)
			Expect(errName(codes[topicA])).To(Equal(errName(kerr.TopicAuthorizationFailed.Code)), "broker %d", b.ID)
		}

		By("creating, through broker 1, WRITE, READ and DESCRIBE on A and only DESCRIBE on B for the user")
		adm1 := scramAdmin(aclAdmin, bs[0].Addr)
		created := time.Now()
		expectCreated(ctx, adm1, kadm.NewACLs().Allow(principal(user)).Topics(topicA).
			Operations(kadm.OpWrite, kadm.OpRead, kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral))
		expectCreated(ctx, adm1, kadm.NewACLs().Allow(principal(user)).Topics(topicB).
			Operations(kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral))
		answered := time.Since(created)
		By(fmt.Sprintf("broker 2 enforces them within %v of CreateAcls", aclSyncBound))
		Eventually(func(g Gomega) {
			codes, _, err := metadataFrom(ctx, user, bs[1].Addr, topicA, topicB, topicC)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(errName(codes[topicA])).To(Equal("NONE"), "topic A")
			g.Expect(errName(codes[topicB])).To(Equal("NONE"), "topic B")
			g.Expect(errName(codes[topicC])).To(Equal(errName(kerr.TopicAuthorizationFailed.Code)), "topic C")
		}).WithContext(ctx).WithTimeout(aclSyncBound).Should(Succeed())
		AddReportEntry("CreateAcls through broker 1: answered / enforced by broker 2",
			fmt.Sprintf("%v / %v", answered.Round(time.Millisecond), time.Since(created).Round(time.Millisecond)))

		leaderID := agreedLeader(ctx, bs, topicB)
		victim, survivor := bs[0], bs[1]
		if int32(survivor.ID) == leaderID {
			victim, survivor = survivor, victim
		}
		By(fmt.Sprintf("broker %d, the leader of B's partition, refuses WRITE and READ on B and serves A", victim.ID))
		expectAuthorizedOnlyOnA(ctx, user, brokerAddrs(bs), topicA, topicB)

		By(fmt.Sprintf("SIGKILL broker %d; broker %d takes B's partition over", victim.ID, survivor.ID))
		victim.Kill9()
		killed := time.Now()
		Eventually(func(g Gomega) {
			_, parts, err := metadataFrom(ctx, aclAdmin, survivor.Addr, topicB)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(parts[topicB]).To(HaveLen(1))
			g.Expect(parts[topicB][0]).To(Equal(partitionAnswer{leader: int32(survivor.ID)}))
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
		AddReportEntry("takeover of B's partition", time.Since(killed).Round(time.Millisecond).String())
		By(fmt.Sprintf("broker %d, B's new leader, still refuses WRITE and READ on B and serves A", survivor.ID))
		expectAuthorizedOnlyOnA(ctx, user, []string{survivor.Addr}, topicA, topicB)

		By(fmt.Sprintf("restarting broker %d: it enforces the stored ACLs", victim.ID))
		victim.Restart()
		codes, _, err := metadataFrom(ctx, user, victim.Addr, topicA, topicC)
		Expect(err).NotTo(HaveOccurred())
		Expect(errName(codes[topicA])).To(Equal("NONE"), "topic A from the restarted broker")
		Expect(errName(codes[topicC])).To(Equal(errName(kerr.TopicAuthorizationFailed.Code)), "topic C from the restarted broker")

		By(fmt.Sprintf("creating WRITE on B through broker %d: the user produces to B", victim.ID))
		expectCreated(ctx, scramAdmin(aclAdmin, victim.Addr), kadm.NewACLs().Allow(principal(user)).Topics(topicB).
			Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternLiteral))
		Eventually(func() error {
			return produceAs(ctx, user, topicB, brokerAddrs(bs)...)
		}).WithContext(ctx).WithTimeout(aclSyncBound + 10*time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	}, SpecTimeout(3*time.Minute))
})

// agreedLeader waits until every broker of bs names the same leader, one
// of them, for partition 0 of topic, and returns it.
func agreedLeader(ctx context.Context, bs []*Broker, topic string) int32 {
	GinkgoHelper()
	var leader int32
	Eventually(func(g Gomega) {
		leader = -1
		for _, b := range bs {
			_, parts, err := metadataFrom(ctx, aclAdmin, b.Addr, topic)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(parts[topic]).NotTo(BeEmpty())
			p := parts[topic][0]
			g.Expect(errName(p.code)).To(Equal("NONE"), "partition 0 of %s from broker %d", topic, b.ID)
			g.Expect(brokerIDs(bs)).To(ContainElement(p.leader))
			if leader == -1 {
				leader = p.leader
			}
			g.Expect(p.leader).To(Equal(leader), "broker %d names another leader", b.ID)
		}
	}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
	return leader
}

// expectAuthorizedOnlyOnA checks, through clients of addrs logged in as
// user, that producing to and fetching from topicB are refused with
// TOPIC_AUTHORIZATION_FAILED and that producing to topicA works.
func expectAuthorizedOnlyOnA(ctx context.Context, user string, addrs []string, topicA, topicB string) {
	GinkgoHelper()
	Expect(produceAs(ctx, user, topicB, addrs...)).To(MatchError(kerr.TopicAuthorizationFailed), "produce to B")
	Expect(fetchErrAs(ctx, user, topicB, addrs...)).To(MatchError(kerr.TopicAuthorizationFailed), "fetch from B")
	Expect(produceAs(ctx, user, topicA, addrs...)).To(Succeed(), "produce to A")
}

// fetchErrAs consumes partition 0 of topic from its start through a new
// client of addrs logged in as user and returns the first error it gets
// (nil if a record comes first, an error if nothing comes within 20 s).
func fetchErrAs(ctx context.Context, user, topic string, addrs ...string) error {
	GinkgoHelper()
	cl, err := kgo.NewClient(append(scramOpts(user, addrs...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxWait(200*time.Millisecond))...)
	Expect(err).NotTo(HaveOccurred())
	defer cl.Close()
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for {
		fs := cl.PollFetches(cctx)
		if err := cctx.Err(); err != nil {
			return fmt.Errorf("no record and no error from %s within 20 s: %w", topic, err)
		}
		var first error
		fs.EachError(func(_ string, _ int32, err error) {
			if first == nil {
				first = err
			}
		})
		if first != nil || fs.NumRecords() > 0 {
			return first
		}
	}
}

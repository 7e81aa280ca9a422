package specs

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/twmb/franz-go/pkg/kgo"
)

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

		// agreed waits until every broker in bs lists exactly the brokers of
		// bs and names the same controller and the same leader for every
		// partition, each one of bs; it returns the controller and the
		// ownership.
		agreed := func(bs []*Broker, within time.Duration) (int32, map[tp]ownership) {
			GinkgoHelper()
			return brokersAgree(ctx, bs, topics, 12, within, agreePolling(100*time.Millisecond))
		}
		controller, owners := agreed(brokers, 30*time.Second)
		perBroker := map[int32]int{}
		for _, o := range owners {
			perBroker[o.leader]++
		}
		AddReportEntry("partitions per broker", perBroker)

		// Idempotent acks=all producer over all three brokers.
		ledger := startLedgerProducer(ctx, brokerAddrs(brokers), topics, 6,
			kgo.RecordRetries(1000), kgo.RecordDeliveryTimeout(60*time.Second))
		ledger.waitAcked(ctx, 2000, 30*time.Second)

		// SIGKILL the controller if it owns partitions (so that both the
		// controller and the partitions fail over), else the owner of the
		// first partition of the first topic.
		victimID := owners[tp{topics[0], 0}].leader
		if perBroker[controller] > 0 {
			victimID = controller
		}
		victim := brokers[victimID-1]
		By(fmt.Sprintf("SIGKILL broker %d", victimID))
		before := ledger.acked()
		killedAt := time.Now()
		victim.Kill9()
		_, after := agreed(without(brokers, victim), 10*time.Second)
		AddReportEntry("failover: kill to agreed metadata", time.Since(killedAt).String())
		AddReportEntry("partitions moved by the kill", expectOnlyVictimMoved(owners, after, victimID))
		ledger.waitAcked(ctx, before+2000, 30*time.Second) // producing continues on the new owners

		By(fmt.Sprintf("restarting broker %d", victimID))
		victim.Restart()
		_, rejoined := agreed(brokers, 15*time.Second)
		expectNoEpochWentBack(after, rejoined)
		ledger.waitMore(ctx, 2000, 30*time.Second)

		ledger.finish(ctx)
		failed := ledger.failures()
		AddReportEntry("records acknowledged / failed", fmt.Sprintf("%d / %d", ledger.acked(), len(failed)))
		Expect(failed).To(BeEmpty(), "produces failed")

		// A consumer in assign mode, through any broker, reads every
		// acknowledged record exactly where it was acknowledged, once.
		ledger.verify(ctx, brokerAddrs([]*Broker{brokers[2], brokers[0]}), 60*time.Second)
	}, SpecTimeout(4*time.Minute))
})

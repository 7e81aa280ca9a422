package specs

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// zonedMetadata asks broker b, as a client whose client.id is clientID,
// for the controller it should use and the racks of the brokers.
func zonedMetadata(ctx context.Context, b *Broker, clientID string) (int32, map[int32]string, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.ClientID(clientID), kgo.WithLogger(nil))
	if err != nil {
		return -1, nil, err
	}
	defer cl.Close()
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(rctx, cl.SeedBrokers()[0])
	if err != nil {
		return -1, nil, err
	}
	racks := map[int32]string{}
	for _, br := range resp.Brokers {
		racks[br.NodeID] = ""
		if br.Rack != nil {
			racks[br.NodeID] = *br.Rack
		}
	}
	return resp.ControllerID, racks, nil
}

// Brokers run with --zone; a client names its zone in client.id
// (kaas_az=<zone>). Partition leadership does not depend on the client (one
// writer per partition), but controller requests go to a broker in the
// client's zone, and every broker names the same one.
var _ = Describe("zones", Label("cluster"), func() {
	It("advertises racks and routes a zoned client's controller requests in its zone", func(ctx SpecContext) {
		dirs := SharedDataDirs(3)
		brokers := []*Broker{
			StartBroker(dirs[0], WithBrokerID(1), WithBrokerArgs("--zone", "zone-a")),
			StartBroker(dirs[1], WithBrokerID(2), WithBrokerArgs("--zone", "zone-a")),
			StartBroker(dirs[2], WithBrokerID(3), WithBrokerArgs("--zone", "zone-b")),
		}
		answers := func(clientID string) (ctrl int32) {
			Eventually(func(g Gomega) {
				seen := map[int32]bool{}
				for _, b := range brokers {
					c, racks, err := zonedMetadata(ctx, b, clientID)
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(racks).To(Equal(map[int32]string{1: "zone-a", 2: "zone-a", 3: "zone-b"}))
					seen[c] = true
					ctrl = c
				}
				g.Expect(seen).To(HaveLen(1), "brokers name different controllers to %q", clientID)
				g.Expect(ctrl).To(BeNumerically(">=", 1))
			}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
			return ctrl
		}
		elected := answers("specs")
		Expect(answers("specs,kaas_az=zone-b")).To(Equal(int32(3)))
		Expect(answers("kaas_az=zone-a")).To(BeElementOf(int32(1), int32(2)))
		Expect(answers("specs,kaas_az=zone-c")).To(Equal(elected), "a zone without brokers falls back to the elected controller")

		By("creating a topic through the controller a zone-b client is given")
		zoned := NewClient(brokers[2], kgo.ClientID("specs,kaas_az=zone-b"))
		topic := UniqueName("zoned")
		req := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 3, 1
		req.Topics = append(req.Topics, rt)
		req.TimeoutMillis = 10000
		resp, err := req.RequestWith(ctx, zoned.Broker(3))
		Expect(err).NotTo(HaveOccurred())
		Expect(resp.Topics).To(HaveLen(1))
		Expect(resp.Topics[0].ErrorCode).To(BeZero(), "create through broker 3: %v", resp.Topics[0].ErrorMessage)
		Eventually(func(g Gomega) {
			_, owners, _, err := clusterMetadata(ctx, brokers[0], []string{topic})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(owners).To(HaveLen(3))
			for _, o := range owners {
				g.Expect(o.leader).To(BeNumerically(">=", 1))
			}
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
	}, SpecTimeout(2*time.Minute))
})

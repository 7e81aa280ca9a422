package specs

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// A rolling restart with SIGTERM, one broker at a time, under idempotent
// acks=all load: each broker hands its partitions off before it exits, so
// clients see only retriable errors, never wait out the lease, and no
// acknowledged record is lost or stored twice.
var _ = Describe("a rolling restart of three brokers with SIGTERM under load", Label("cluster", "slow"), func() {
	It("shows clients only retriable errors and loses or duplicates no acknowledged record", func(ctx SpecContext) {
		dirs := SharedDataDirs(3)
		addrs := distinctFreeAddrs(3)
		var brokers []*Broker
		for i := range 3 {
			brokers = append(brokers, StartBroker(dirs[i], WithBrokerID(i+1), withListenAddr(addrs, i)))
		}
		topics := []string{UniqueName("roll-a"), UniqueName("roll-b")}
		adm := NewAdmin(brokers[0])
		for _, t := range topics {
			CreateTopic(ctx, adm, t, 6)
		}
		const partitions = 12
		brokersAgree(ctx, brokers, topics, partitions, 30*time.Second)

		ledger := startLedgerProducer(ctx, addrs, topics, 6)
		ledger.waitMore(ctx, 2000, 30*time.Second)

		type restart struct {
			Broker             int
			WasController      bool
			Exit               string // SIGTERM to exit 0
			HandedOff          string // SIGTERM to the survivors agreeing on owners without it
			Rejoined           string // start to all three agreeing again
			LongestAckGap      string // on any partition, from SIGTERM until rejoined and 1000 more acks
			GapPartition       string
			ClientErrorsByKind map[string]int
		}
		var restarts []restart
		for i, b := range brokers {
			ctrl, _ := brokersAgree(ctx, brokers, topics, partitions, 30*time.Second)
			errsBefore, _ := ledger.errs.summary()

			By(fmt.Sprintf("SIGTERM broker %d", b.ID))
			termAt := time.Now()
			b.Stop() // exit status 0 within 30s, or the spec fails
			exited := time.Since(termAt)
			brokersAgree(ctx, without(brokers, b), topics, partitions, 10*time.Second)
			handedOff := time.Since(termAt)
			ledger.waitMore(ctx, 500, 30*time.Second) // the survivors serve every partition

			By(fmt.Sprintf("restarting broker %d", b.ID))
			startAt := time.Now()
			b.Restart()
			brokersAgree(ctx, brokers, topics, partitions, 30*time.Second)
			rejoined := time.Since(startAt)
			ledger.waitMore(ctx, 1000, 30*time.Second)

			gap, where := ledger.longestGap(termAt, time.Now())
			errsAfter, _ := ledger.errs.summary()
			delta := map[string]int{}
			for k, n := range errsAfter {
				if d := n - errsBefore[k]; d > 0 {
					delta[k] = d
				}
			}
			restarts = append(restarts, restart{
				Broker: b.ID, WasController: ctrl == int32(b.ID),
				Exit: exited.Round(time.Millisecond).String(), HandedOff: handedOff.Round(time.Millisecond).String(),
				Rejoined: rejoined.Round(time.Millisecond).String(), LongestAckGap: gap.Round(time.Millisecond).String(),
				GapPartition: fmt.Sprintf("%s/%d", where.topic, where.partition), ClientErrorsByKind: delta,
			})
			fmt.Fprintf(GinkgoWriter, "restart %d: %+v\n", i+1, restarts[len(restarts)-1])
			// The partitions were handed off, not left to the lease: the
			// bound is generous, the figure is reported.
			Expect(gap).To(BeNumerically("<", 10*time.Second), "longest gap between acks around the restart of broker %d", b.ID)
		}
		AddReportEntry("rolling restart, per broker", restarts)

		ledger.finish(ctx)
		byKind, unexpected := ledger.errs.summary()
		AddReportEntry("client errors by kind", byKind)
		AddReportEntry("client errors, most frequent", ledger.errs.distinct(12))
		AddReportEntry("records acknowledged", ledger.acked())
		Expect(ledger.failures()).To(BeEmpty(), "errors surfaced to produce callbacks")
		Expect(unexpected).To(BeEmpty(), "client errors that are neither retriable nor connection errors")
		ledger.verify(ctx, addrs, 90*time.Second)
	}, SpecTimeout(6*time.Minute))
})

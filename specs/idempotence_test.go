package specs

// Idempotent producers of two clients (franz-go, librdkafka through kcat),
// acks=all, against three brokers while the owner of their partitions is
// SIGKILLed and SIGSTOPped past its lease (and comes back a fenced zombie
// on SIGCONT), three times each: every acknowledged record is stored
// exactly once, at its acknowledged offset, and librdkafka's in order.

import (
	"fmt"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	idemFranzPartitions = 6
	idemRounds          = 6 // SIGKILL and SIGSTOP alternately
)

var _ = Describe("idempotent producers while partition owners die and stall", Label("txn", "cluster"), func() {
	It("store every record franz-go and librdkafka (kcat) were acknowledged exactly once across SIGKILLs and fenced SIGSTOP zombies", func(ctx SpecContext) {
		kcatPath() // fail early when kcat is missing
		started := time.Now()
		brokers := startTxnBrokers(3)
		seeds := brokerAddrs(brokers)
		adm := txnAdmin(brokers)
		franzTopic, kcatTopic := UniqueName("idem-franz"), UniqueName("idem-kcat")
		CreateTopic(ctx, adm, franzTopic, idemFranzPartitions)
		CreateTopic(ctx, adm, kcatTopic, 1)
		topics := []string{franzTopic, kcatTopic}
		const parts = idemFranzPartitions + 1
		ids := topicIDStrings(ctx, adm, topics...)
		// Agreement includes the rendezvous owner among bs: brokers list
		// a returning member a controller round before its partitions
		// move back, and a round must not start between the two.
		agree := func(bs []*Broker) map[tp]ownership {
			GinkgoHelper()
			_, owners := brokersAgree(ctx, bs, topics, parts, 30*time.Second,
				rendezvousOwners(ids), agreePolling(100*time.Millisecond))
			return owners
		}
		agree(brokers)

		By("producing with franz-go (idempotent, acks=all, 6 partitions, 1,200 records/s) and kcat (enable.idempotence, acks=all, 200 lines/s)")
		ledger := startPacedLedger(ctx, seeds, franzTopic, idemFranzPartitions, 5*time.Millisecond)
		kc := startKcatProducer(ctx, seeds, kcatTopic, 0, 5*time.Millisecond)
		ledger.waitMore(ctx, 500, 30*time.Second)
		kc.waitMore(ctx, 100, 30*time.Second)

		type round struct {
			Fault, Victim         string
			KcatPartition         bool // the victim owned kcat's partition
			FranzPartitions       int  // of franz-go's partitions the victim owned
			Moved                 string
			Rejoined              string // restart / SIGCONT → all three agree again
			FranzAcked, KcatAcked int64
		}
		var rounds []round
		kcatPart := tp{kcatTopic, 0}
		for i := range idemRounds {
			kill := i%2 == 0
			owners := agree(brokers)
			// Rounds 1-2 and 5-6 hit the owner of kcat's partition, 3-4
			// the broker owning most of franz-go's partitions (another
			// one where it can): each client sees both faults.
			victimID := owners[kcatPart].leader
			if (i/2)%2 == 1 {
				most := map[int32]int{}
				for k, o := range owners {
					if k.topic == franzTopic {
						most[o.leader]++
					}
				}
				best := -1
				for _, b := range brokers {
					id := int32(b.ID)
					if n := most[id]; n > best || (n == best && id != owners[kcatPart].leader) {
						victimID, best = id, n
					}
				}
			}
			victim := txnBrokerByID(brokers, victimID)
			survivors := without(brokers, victim)
			r := round{Fault: "SIGSTOP", Victim: fmt.Sprintf("broker %d", victim.ID), KcatPartition: owners[kcatPart].leader == victimID}
			if kill {
				r.Fault = "SIGKILL"
			}
			for k, o := range owners {
				if k.topic == franzTopic && o.leader == victimID {
					r.FranzPartitions++
				}
			}
			By(fmt.Sprintf("round %d: %s broker %d, owner of %d franz-go partitions and of kcat's: %t",
				i+1, r.Fault, victim.ID, r.FranzPartitions, r.KcatPartition))
			faultAt := time.Now()
			if kill {
				victim.Kill9()
			} else {
				victim.Pause()
				foWaitStopped(ctx, victim.Pid())
			}
			// For a SIGSTOP this is past the lease: the survivors took its
			// partitions over under higher epochs while it cannot run.
			after := agree(survivors)
			expectOnlyVictimMoved(owners, after, victimID)
			r.Moved = time.Since(faultAt).Round(time.Millisecond).String()
			// franz-go acknowledged again through the survivors. (A
			// client's requests in flight to a stopped broker wait for
			// it, or for their timeout: librdkafka's is 30 s.)
			ledger.waitMore(ctx, 300, 60*time.Second)

			backAt := time.Now()
			if kill {
				victim.Restart()
			} else {
				// It wakes up with produce requests in its sockets for
				// partitions it no longer owns: a fenced zombie.
				victim.Resume()
			}
			expectNoEpochWentBack(after, agree(brokers))
			r.Rejoined = time.Since(backAt).Round(time.Millisecond).String()
			ledger.waitMore(ctx, 300, 60*time.Second)
			kc.waitMore(ctx, 100, 60*time.Second)
			r.FranzAcked, r.KcatAcked = ledger.acked(), int64(kc.deliveredCount())
			fmt.Fprintf(GinkgoWriter, "round %d: %+v\n", i+1, r)
			rounds = append(rounds, r)
		}

		By("stopping both producers; kcat delivers what it has and exits")
		ledger.finish(ctx)
		out := kc.finish(ctx, 120*time.Second)

		By("reading both topics back")
		ledger.verify(ctx, seeds, 90*time.Second) // franz-go: every ack at its offset, no value twice
		byClass, unexpected := ledger.errs.summary()
		AddReportEntry("franz-go client errors by kind", byClass)
		AddReportEntry("franz-go client errors, most frequent", ledger.errs.distinct(12))
		Expect(ledger.failures()).To(BeEmpty(), "franz-go: errors surfaced to produce callbacks")
		Expect(unexpected).To(BeEmpty(), "franz-go: client errors that are neither retriable nor connection errors, or a reset producer ID")

		ends, err := topicEnds(ctx, adm, kcatTopic)
		Expect(err).NotTo(HaveOccurred())
		consumer, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumePartitions(fromStart([]string{kcatTopic}, 1)),
			kgo.FetchMaxWait(200*time.Millisecond), kgo.WithLogger(nil))
		Expect(err).NotTo(HaveOccurred())
		defer consumer.Close()
		var stored []*kgo.Record
		readFromStart(ctx, consumer, map[tp]int64{kcatPart: ends[0]}, 90*time.Second, func(r *kgo.Record) { stored = append(stored, r) })
		expectKcatExactlyOnce(out, stored)

		AddReportEntry("rounds", rounds)
		summary := fmt.Sprintf("IDEMPOTENCE rounds=%d franz-go acked=%d kcat lines=%d delivered=%d runtime=%v",
			len(rounds), ledger.acked(), out.lines, len(out.delivered), time.Since(started).Round(time.Second))
		AddReportEntry("summary", summary)
		fmt.Fprintln(GinkgoWriter, summary)
	}, SpecTimeout(5*time.Minute))
})

// expectKcatExactlyOnce checks a kcat producer's run against what its
// partition holds: kcat succeeded (exit 0, no failed delivery, no fatal
// error) and reported every line it was fed delivered, at distinct
// offsets; every line is stored exactly once, at one of those offsets, in
// the order it was fed (librdkafka's idempotent producer keeps a
// partition's order), and nothing else is stored.
func expectKcatExactlyOnce(out kcatOutcome, stored []*kgo.Record) {
	GinkgoHelper()
	tail := out.other[max(0, len(out.other)-20):]
	AddReportEntry("kcat", fmt.Sprintf("%d lines fed, %d delivery reports, %d failed, exit %v; stderr besides reports (last 20):\n%s",
		out.lines, len(out.delivered), out.failed, out.exitErr, strings.Join(tail, "\n")))
	Expect(out.fatal).To(BeEmpty(), "kcat: fatal client errors")
	Expect(out.failed).To(BeZero(), "kcat: failed deliveries")
	Expect(out.exitErr).NotTo(HaveOccurred(), "kcat's exit status")
	Expect(out.lines).To(BeNumerically(">", 0))
	Expect(out.delivered).To(HaveLen(out.lines), "kcat: delivery reports against lines fed")
	// librdkafka reports a retried batch it learns was already stored
	// (OUT_OF_ORDER_SEQUENCE_NUMBER below the sequence it had acked) as
	// delivered at an unknown offset (-1001). Those lines are checked by
	// value below, as every line is: stored exactly once, in order.
	acked, unknown := map[int64]bool{}, 0
	for _, o := range out.delivered {
		if o < 0 {
			unknown++
			continue
		}
		Expect(acked[o]).To(BeFalse(), "kcat: two deliveries reported at offset %d", o)
		acked[o] = true
	}
	AddReportEntry("kcat deliveries at an unknown offset", unknown)

	want := map[string]int{} // line → its number
	for i := 1; i <= out.lines; i++ {
		want[kcatLine(i)] = i
	}
	seen := map[string][]int64{}
	var extra, unacked, order []string
	prev := 0
	for _, r := range stored {
		v := string(r.Value)
		seen[v] = append(seen[v], r.Offset)
		n, ok := want[v]
		switch {
		case !ok:
			extra = append(extra, fmt.Sprintf("%q at offset %d", v, r.Offset))
			continue
		case !acked[r.Offset]:
			unacked = append(unacked, fmt.Sprintf("%s at offset %d", v, r.Offset))
		}
		if n <= prev && len(order) < 10 {
			order = append(order, fmt.Sprintf("%s at offset %d after %s", v, r.Offset, kcatLine(prev)))
		}
		prev = max(prev, n)
	}
	var missing, dups []string
	for i := 1; i <= out.lines; i++ {
		switch at := seen[kcatLine(i)]; {
		case len(at) == 0:
			missing = append(missing, kcatLine(i))
		case len(at) > 1:
			dups = append(dups, fmt.Sprintf("%s at offsets %v", kcatLine(i), at))
		}
	}
	clip := func(s []string) []string { slices.Sort(s); return s[:min(len(s), 20)] }
	Expect(clip(missing)).To(BeEmpty(), "kcat: lines reported delivered and not stored (%d)", len(missing))
	Expect(clip(dups)).To(BeEmpty(), "kcat: lines stored more than once (%d)", len(dups))
	Expect(clip(extra)).To(BeEmpty(), "kcat: records stored that no line was")
	Expect(len(unacked)).To(BeNumerically("<=", unknown), "kcat: lines stored at an offset no delivery report named, beyond the %d reported at an unknown offset: %v", unknown, clip(unacked))
	Expect(order).To(BeEmpty(), "kcat: lines stored out of the order they were fed")
	Expect(stored).To(HaveLen(out.lines), "kcat: records in the partition")
}

package specs

// Transactions: InitProducerId never issues a (producer ID, epoch) twice
// while every broker restarts fifty times, and a consume-transform-produce
// copier (franz-go's GroupTransactSession; sarama's transactional producer)
// copies every input record into its output exactly once for
// read_committed readers, through deliberate aborts and the SIGKILL of the
// output's partition owner and of the transaction coordinator.

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	pidRestarts         = 3 * 50 // every broker of three 50 times, round-robin, SIGKILL and SIGTERM alternately
	pidIdempotentCalls  = 3      // concurrent idempotent callers
	txnCopyPartitions   = 6
	txnCopyBatch        = 500 // records per transaction
	txnCopyAbortEvery   = 10  // every 10th transaction is aborted on purpose
	txnFranzCopyRecords = 100_000
	// txnFranzCopyPace spaces the franz-go copier's transactions (at most
	// ~3,300 records/s) so that the copy outlasts its four kills: each costs
	// a failover, five commits and a restart that waits one lease, and an
	// unpaced copy on a local directory finished before the third.
	txnFranzCopyPace = 150 * time.Millisecond
	txnSaramaRecords = 20_000
)

var _ = Describe("InitProducerId while every broker restarts 50 times", Label("txn", "cluster", "slow"), func() {
	// pidRestartRun restarts every broker of a three-broker cluster,
	// pidRestarts times in all, while idempotent callers and one caller per
	// transactional ID in txnIDs call InitProducerId, and checks every
	// answer they got.
	pidRestartRun := func(ctx SpecContext, txnIDs []string) {
		started := time.Now()
		brokers := startTxnBrokers(3)
		seeds := brokerAddrs(brokers)
		log := newPIDLog()
		var callers []*pidCaller
		for i := range pidIdempotentCalls {
			callers = append(callers, startIdempotentPIDCaller(ctx, seeds, brokerIDs(brokers), i, log))
		}
		for i, id := range txnIDs {
			callers = append(callers, startTransactionalPIDCaller(ctx, seeds, pidIdempotentCalls+i, id, log))
		}
		DeferCleanup(func() {
			for _, c := range callers {
				c.finish()
			}
		})
		// progress waits until every kind of caller has got an answer
		// since before.
		progress := func(before map[string]int, what string) {
			GinkgoHelper()
			Eventually(func(g Gomega) {
				now := log.counts()
				g.Expect(now[""]).To(BeNumerically(">", before[""]), "idempotent answers")
				for _, id := range txnIDs {
					g.Expect(now[id]).To(BeNumerically(">", before[id]), "answers for transactional ID %s", id)
				}
			}).WithContext(ctx).WithTimeout(30*time.Second).WithPolling(20*time.Millisecond).Should(Succeed(),
				"InitProducerId answers after %s; %s", what, log.summary())
		}
		progress(map[string]int{}, "start-up")

		var kills, terms int
		for i := range pidRestarts {
			b := brokers[i%len(brokers)]
			if i%2 == 0 {
				b.Kill9()
				kills++
			} else {
				b.Stop()
				terms++
			}
			b.Restart()
			progress(log.counts(), fmt.Sprintf("restart %d (broker %d)", i+1, b.ID))
		}
		for _, c := range callers {
			c.finish()
		}

		summary := log.summary()
		fmt.Fprintf(GinkgoWriter, "InitProducerId: %d restarts (%d SIGKILL, %d SIGTERM) in %v\n%s\n",
			pidRestarts, kills, terms, time.Since(started).Round(time.Second), summary)
		AddReportEntry("InitProducerId answers", summary)
		AddReportEntry("restarts", fmt.Sprintf("%d (%d SIGKILL, %d SIGTERM) in %v", pidRestarts, kills, terms, time.Since(started).Round(time.Second)))
		log.mu.Lock()
		unexpected := log.unexpected
		log.mu.Unlock()
		Expect(unexpected).To(BeEmpty(), "InitProducerId errors a producer does not retry")
		Expect(log.check()).To(BeEmpty(), "InitProducerId answers")
	}

	It("never issues a producer ID or a (producer ID, epoch) twice, and moves each transactional ID's epoch strictly up", func(ctx SpecContext) {
		pidRestartRun(ctx, []string{UniqueName("txn-a"), UniqueName("txn-b"), UniqueName("txn-c"), UniqueName("txn-d")})
	}, SpecTimeout(6*time.Minute))
})

var _ = Describe("a consume-transform-produce copier in transactions", Label("txn", "cluster"), func() {
	It("copies 100,000 records exactly once for read_committed readers with franz-go's GroupTransactSession while the output's owner and the transaction coordinator are SIGKILLed", func(ctx SpecContext) {
		brokers := startTxnBrokers(3, withGroupFlags())
		seeds := brokerAddrs(brokers)
		adm := txnAdmin(brokers)
		in, out := UniqueName("txn-in"), UniqueName("txn-out")
		group, txnID := UniqueName("txn-copier"), UniqueName("txn-copier")
		CreateTopic(ctx, adm, in, txnCopyPartitions)
		CreateTopic(ctx, adm, out, txnCopyPartitions)
		preloadInput(ctx, seeds, in, txnCopyPartitions, txnFranzCopyRecords)
		inEnds, err := topicEnds(ctx, adm, in)
		Expect(err).NotTo(HaveOccurred())

		reportTxnStateOnFailure(ctx, adm, group, txnID)
		By(fmt.Sprintf("copying %s → %s in transactions of %d records, every %dth aborted on purpose", in, out, txnCopyBatch, txnCopyAbortEvery))
		copyStart := time.Now()
		c := startFranzCopier(ctx, seeds, in, out, group, txnID, txnCopyBatch, txnCopyAbortEvery)
		DeferCleanup(func() { c.stop.Store(true) })

		type kill struct {
			Victim, What string
			Committed    string // SIGKILL → the copier's next committed transaction
			Five         string // SIGKILL → five transactions committed: past the failover
		}
		var kills []kill
		lookup := NewClient(brokers[0], kgo.SeedBrokers(seeds...))
		for i, at := range []float64{0.15, 0.35, 0.55, 0.75} {
			Eventually(c.committedRecs.Load).WithContext(ctx).WithTimeout(90*time.Second).WithPolling(20*time.Millisecond).
				Should(BeNumerically(">=", int64(at*txnFranzCopyRecords)), "records copied in committed transactions")
			var victim *Broker
			var what string
			if i%2 == 0 {
				k := tp{out, int32(i % txnCopyPartitions)}
				_, owners := brokersAgree(ctx, brokers, []string{in, out}, 2*txnCopyPartitions, 30*time.Second)
				victim, what = txnBrokerByID(brokers, owners[k].leader), fmt.Sprintf("owner of %s/%d", k.topic, k.partition)
			} else {
				victim, what = txnCoordinatorBroker(ctx, lookup, brokers, txnID, 30*time.Second), "transaction coordinator of "+txnID
			}
			Expect(c.committedRecs.Load()).To(BeNumerically("<", int64(txnFranzCopyRecords)),
				"the copy finished before kill %d: nothing is left to fail over (pace the copier slower)", i+1)
			By(fmt.Sprintf("kill %d at %d%% copied: SIGKILL broker %d, %s", i+1, int(at*100), victim.ID, what))
			before := c.committedTxns.Load()
			killedAt := time.Now()
			victim.Kill9()
			k := kill{Victim: fmt.Sprintf("broker %d", victim.ID), What: what}
			for _, w := range []struct {
				n  int64
				at *string
			}{{1, &k.Committed}, {5, &k.Five}} {
				Eventually(c.committedTxns.Load).WithContext(ctx).WithTimeout(60*time.Second).WithPolling(5*time.Millisecond).
					Should(BeNumerically(">=", before+w.n), "transactions committed after the SIGKILL")
				*w.at = time.Since(killedAt).Round(time.Millisecond).String()
			}
			kills = append(kills, k)
			victim.Restart()
		}

		By("waiting until the group has committed every input partition's end offset")
		Eventually(func() bool { return groupCopied(ctx, adm, group, in, inEnds) }).WithContext(ctx).
			WithTimeout(120*time.Second).WithPolling(250*time.Millisecond).Should(BeTrue(), "the copier's committed offsets reach the input's end")
		took := time.Since(copyStart)
		c.finish(ctx)

		By("reading the output at both isolation levels")
		outEnds := waitNoOpenTxns(ctx, adm, out, 60*time.Second)
		committedOut := readTxnOutput(ctx, seeds, out, outEnds, true, 90*time.Second)
		uncommittedOut := readTxnOutput(ctx, seeds, out, outEnds, false, 90*time.Second)
		figures := c.figures(len(kills), took)
		fmt.Fprintf(GinkgoWriter, "franz-go copier: %+v; kills %+v; read_committed %d, read_uncommitted %d\n",
			figures, kills, len(committedOut), len(uncommittedOut))
		AddReportEntry("franz-go copier", figures)
		AddReportEntry("kills", kills)
		AddReportEntry("output records", fmt.Sprintf("read_committed %d, read_uncommitted %d, input %d", len(committedOut), len(uncommittedOut), txnFranzCopyRecords))
		c.mu.Lock()
		AddReportEntry("errors the copier handled", c.errs)
		c.mu.Unlock()
		byKind, unexpected := c.clientLog.summary()
		AddReportEntry("copier client log: errors by kind", byKind)
		AddReportEntry("copier client log: most frequent", c.clientLog.distinct(12))
		AddReportEntry("copier client log: neither retriable nor connection errors", unexpected)
		checkTxnCopy(c.copyLedger, txnFranzCopyRecords, committedOut, uncommittedOut)
		Expect(figures.Deliberate).To(BeNumerically(">=", txnFranzCopyRecords/txnCopyBatch/txnCopyAbortEvery), "deliberate aborts")
	}, SpecTimeout(6*time.Minute))

	It("copies 20,000 records exactly once for read_committed readers with sarama's transactional producer while the transaction coordinator is SIGKILLed", func(ctx SpecContext) {
		brokers := startTxnBrokers(3, withGroupFlags())
		seeds := brokerAddrs(brokers)
		adm := txnAdmin(brokers)
		in, out := UniqueName("txn-sarama-in"), UniqueName("txn-sarama-out")
		group, txnID := UniqueName("txn-sarama"), UniqueName("txn-sarama")
		CreateTopic(ctx, adm, in, txnCopyPartitions)
		CreateTopic(ctx, adm, out, txnCopyPartitions)
		preloadInput(ctx, seeds, in, txnCopyPartitions, txnSaramaRecords)
		inEnds, err := topicEnds(ctx, adm, in)
		Expect(err).NotTo(HaveOccurred())

		reportTxnStateOnFailure(ctx, adm, group, txnID)
		By(fmt.Sprintf("copying %s → %s with sarama, batches of up to %d records per partition, every %dth transaction aborted on purpose", in, out, txnCopyBatch, txnCopyAbortEvery))
		copyStart := time.Now()
		lookup := NewClient(brokers[0], kgo.SeedBrokers(seeds...))
		var killed string
		kill := func(l *copyLedger) {
			Eventually(l.committedRecs.Load).WithContext(ctx).WithTimeout(90*time.Second).WithPolling(20*time.Millisecond).
				Should(BeNumerically(">=", int64(txnSaramaRecords*3/10)), "records copied in committed transactions")
			victim := txnCoordinatorBroker(ctx, lookup, brokers, txnID, 30*time.Second)
			By(fmt.Sprintf("SIGKILL broker %d, the transaction coordinator of %s", victim.ID, txnID))
			before := l.committedTxns.Load()
			killedAt := time.Now()
			victim.Kill9()
			Eventually(l.committedTxns.Load).WithContext(ctx).WithTimeout(60*time.Second).WithPolling(10*time.Millisecond).
				Should(BeNumerically(">", before+1), "transactions committed after the SIGKILL")
			killed = fmt.Sprintf("broker %d, copying again %v after", victim.ID, time.Since(killedAt).Round(time.Millisecond))
			victim.Restart()
		}
		l := runSaramaCopier(ctx, seeds, in, out, group, txnID, txnCopyBatch, txnCopyAbortEvery, kill,
			func() bool { return groupCopied(ctx, adm, group, in, inEnds) }, 3*time.Minute)
		took := time.Since(copyStart)
		AddReportEntry("kill", killed)

		By("reading the output at both isolation levels")
		outEnds := waitNoOpenTxns(ctx, adm, out, 60*time.Second)
		committedOut := readTxnOutput(ctx, seeds, out, outEnds, true, 60*time.Second)
		uncommittedOut := readTxnOutput(ctx, seeds, out, outEnds, false, 60*time.Second)
		figures := l.figures(1, took)
		fmt.Fprintf(GinkgoWriter, "sarama copier: %+v; read_committed %d, read_uncommitted %d\n", figures, len(committedOut), len(uncommittedOut))
		AddReportEntry("sarama copier", figures)
		AddReportEntry("output records", fmt.Sprintf("read_committed %d, read_uncommitted %d, input %d", len(committedOut), len(uncommittedOut), txnSaramaRecords))
		l.mu.Lock()
		AddReportEntry("errors the copier handled", l.errs)
		l.mu.Unlock()
		checkTxnCopy(l, txnSaramaRecords, committedOut, uncommittedOut)
		Expect(figures.Deliberate).To(BeNumerically(">=", 1), "deliberate aborts")
	}, SpecTimeout(5*time.Minute))
})

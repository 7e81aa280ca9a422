package specs

// Issue 19: the dashboard and alerts proven against a real Prometheus. Three
// brokers are scraped every second; every dashboard query and every alert
// expression evaluates; a SIGKILLed broker makes the "broker down",
// "heartbeat" and "not serving" alerts fire within their for: and resolve
// after the restart.
//
// The rules are deploy/monitoring/kaas-alerts.yaml with every for: set to
// 2 s (monitoring.RulesWithFor): the expressions and thresholds are the
// production ones, only the waits are shortened, so there is one rules
// file and nothing to drift.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kaas-dev/kaas/deploy/monitoring"
)

// promFor is the for: of every rule in this spec.
const promFor = "2s"

// coreFamilies are families every broker exports with no traffic at all:
// once the kaas families exist, each must be scraped from every broker.
var coreFamilies = []string{
	"kaas_partitions", "kaas_is_controller", "kaas_controller_epoch", "kaas_connections",
	"kaas_heartbeat_age_seconds", "kaas_lease_remaining_seconds",
	"kaas_volume_free_bytes", "kaas_volume_size_bytes", "kaas_volume_check_passed",
	"kaas_assignment_version", "kaas_cluster_partitions",
	"kaas_groups", "kaas_transactions", "kaas_transactions_total",
	"go_goroutines", "process_resident_memory_bytes",
}

// trafficPanels are dashboard panels that must have series once the
// spec's traffic ran: produce and fetch, a committed group, a committed
// transaction.
var trafficPanels = []string{
	"Bytes in per topic (top 10)", "Records in per topic (top 10)", "Log size per topic (top 10)",
	"Group members (top 10)", "Consumer lag per group and topic (top 10)", "Transactions ended by result",
	"Volume check at start-up (1 passed)",
}

var _ = Describe("Monitoring against a real Prometheus", Label("prometheus", "slow"), func() {
	It("scrapes three brokers, evaluates every dashboard query and alert, and fires and resolves the broker-down alerts on a killed broker", func(ctx SpecContext) {
		bin := prometheusBinary()
		dirs := SharedDataDirs(3)
		var brokers []*Broker
		for i, d := range dirs {
			brokers = append(brokers, StartBroker(d, WithBrokerID(i+1)))
		}
		Expect(brokerServesMetrics(brokers[0])).To(Succeed(), "a broker serves /metrics")

		By("a topic over every broker, some records, a committed consumer group and a transaction, so the data panels have series")
		topic := UniqueName("prom")
		CreateTopic(ctx, NewAdmin(brokers[0]), topic, 12)
		produceAndConsume(ctx, brokers[0], topic, 60)
		commitOneTransaction(ctx, brokers[0], topic)

		By("promtool check metrics passes on every broker's /metrics")
		for _, b := range brokers {
			Expect(promtoolCheckMetrics(b)).To(Succeed(), "broker %d", b.ID)
		}

		rules, err := monitoring.RulesWithFor(promFor)
		Expect(err).NotTo(HaveOccurred())
		targets := make([]string, len(brokers))
		for i, b := range brokers {
			targets[i] = b.AdminAddr
		}
		prom := startPrometheus(bin, targets, rules)

		By("every target up")
		Eventually(func(g Gomega) {
			ts, err := prom.targets()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ts).To(HaveLen(3))
			for _, t := range ts {
				g.Expect(t.Health).To(Equal("up"), "%s: %s", t.ScrapeURL, t.LastError)
			}
			up, err := prom.query(`sum(up{job="kaas"})`)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(up).To(HaveLen(1))
			g.Expect(up[0].Value[1]).To(Equal("3"))
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())

		By("the core kaas families scraped from every broker")
		Eventually(func(g Gomega) {
			for _, f := range coreFamilies {
				got, err := prom.query(fmt.Sprintf(`count by (instance) ({__name__=%q, job="kaas"})`, f))
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(got).To(HaveLen(3), "%s from every broker", f)
			}
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(time.Second).Should(Succeed())

		By("every dashboard query evaluates, and the traffic panels have series (rates once two scrapes saw the counters)")
		qs, err := monitoring.DashboardQueries()
		Expect(err).NotTo(HaveOccurred())
		var empty []string
		Eventually(func(g Gomega) {
			empty = nil
			for _, q := range qs {
				got, err := prom.query(monitoring.Expand(q.Expr, "10s"))
				g.Expect(err).NotTo(HaveOccurred(), "panel %q (%s): %s", q.Panel, q.RefID, q.Expr)
				if len(got) == 0 {
					empty = append(empty, q.Panel+" "+q.RefID)
				}
			}
			for _, p := range trafficPanels {
				g.Expect(empty).NotTo(ContainElement(HavePrefix(p+" ")), "panel %q has no series after the traffic", p)
			}
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(time.Second).Should(Succeed())
		AddReportEntry("dashboard queries with no series", fmt.Sprintf("%d of %d: %s", len(empty), len(qs), strings.Join(empty, "; ")))

		By("every alert expression evaluates, and none of the broker alerts fires on a healthy cluster")
		alerts, err := monitoring.Alerts()
		Expect(err).NotTo(HaveOccurred())
		for _, a := range alerts {
			_, err := prom.query(a.Expr)
			Expect(err).NotTo(HaveOccurred(), "alert %s: %s", a.Name, a.Expr)
		}
		brokerAlerts := []string{"KaasBrokerDown", "KaasBrokerHeartbeatStale", "KaasPartitionsNotServing", "KaasNoController", "KaasPartitionFailed"}
		for _, name := range brokerAlerts {
			got, err := prom.firing(name, nil)
			Expect(err).NotTo(HaveOccurred())
			Expect(got).To(BeEmpty(), "%s fires on a healthy cluster", name)
		}

		victim := brokers[2]
		ownedByVictim := 0.0
		owned, err := prom.query(fmt.Sprintf(`sum(kaas_partitions{job="kaas", state="owned", instance=%q})`, victim.AdminAddr))
		Expect(err).NotTo(HaveOccurred())
		if len(owned) == 1 {
			ownedByVictim, _ = strconv.ParseFloat(owned[0].Value[1].(string), 64)
		}
		By(fmt.Sprintf("SIGKILL broker %d (it owns %v partitions)", victim.ID, ownedByVictim))
		killedAt := time.Now()
		victim.Kill9()

		// What must fire, and within how long: for: plus two scrape and
		// evaluation rounds; the heartbeat alert first waits out its 10 s
		// threshold.
		type expectation struct {
			alert  string
			labels map[string]string
			within time.Duration
		}
		// Any heartbeat alert is the victim's (the others beat); its broker
		// label's spelling is the metric's business.
		want := []expectation{
			{"KaasBrokerDown", map[string]string{"instance": victim.AdminAddr}, 15 * time.Second},
			{"KaasBrokerHeartbeatStale", nil, 30 * time.Second},
		}
		if ownedByVictim > 0 {
			want = append(want, expectation{"KaasPartitionsNotServing", map[string]string{"instance": victim.AdminAddr}, 15 * time.Second})
		}
		for _, w := range want {
			left := max(w.within-time.Since(killedAt), 0) + time.Second
			Eventually(func() ([]promAlert, error) { return prom.firing(w.alert, w.labels) }).
				WithContext(ctx).WithTimeout(left).WithPolling(250*time.Millisecond).
				ShouldNot(BeEmpty(), "%s %v did not fire within %s of the kill", w.alert, w.labels, w.within)
			AddReportEntry("fired", fmt.Sprintf("%s %v after %s", w.alert, w.labels, time.Since(killedAt).Round(100*time.Millisecond)))
		}
		got, err := prom.firing("KaasNoController", nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(got).To(BeEmpty(), "the survivors keep a controller")

		By(fmt.Sprintf("restart broker %d: the alerts resolve", victim.ID))
		victim.Restart()
		restartedAt := time.Now()
		Eventually(func(g Gomega) {
			for _, w := range want {
				got, err := prom.firing(w.alert, w.labels)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(got).To(BeEmpty(), "%s still firing", w.alert)
			}
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
		AddReportEntry("resolved", fmt.Sprintf("all within %s of the restart", time.Since(restartedAt).Round(100*time.Millisecond)))
	})
})

// commitOneTransaction commits one transaction of one record to topic, so
// the transaction families have a completed transaction.
func commitOneTransaction(ctx context.Context, b *Broker, topic string) {
	GinkgoHelper()
	cl := NewClient(b, kgo.DefaultProduceTopic(topic), kgo.TransactionalID(UniqueName("prom-txn")))
	Expect(cl.BeginTransaction()).To(Succeed())
	Expect(cl.ProduceSync(ctx, &kgo.Record{Value: []byte("in a transaction")}).FirstErr()).To(Succeed())
	Expect(cl.EndTransaction(ctx, kgo.TryCommit)).To(Succeed())
}

// produceAndConsume writes n records to topic and reads them back in a
// consumer group that commits, so the throughput, group and lag series exist.
func produceAndConsume(ctx context.Context, b *Broker, topic string, n int) {
	GinkgoHelper()
	cl := NewClient(b, kgo.DefaultProduceTopic(topic))
	for i := range n {
		Expect(cl.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("r%d", i))}).FirstErr()).To(Succeed())
	}
	group := UniqueName("prom-group")
	cons := NewClient(b, kgo.ConsumeTopics(topic), kgo.ConsumerGroup(group), kgo.DisableAutoCommit())
	read := 0
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for read < n/2 {
		fs := cons.PollFetches(cctx)
		Expect(cctx.Err()).NotTo(HaveOccurred(), "read %d of %d records", read, n/2)
		read += fs.NumRecords()
	}
	Expect(cons.CommitUncommittedOffsets(cctx)).To(Succeed())
}

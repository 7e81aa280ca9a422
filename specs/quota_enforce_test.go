package specs

// Client quotas held by the broker: with the ACL authorizer on, User:app
// gets producer_byte_rate and consumer_byte_rate quotas of 1 MiB/s (set
// with kadm); a franz-go producer and consumer of User:app run flat out
// for 30 s and are held to the quota by ThrottleTimeMs alone (KIP-219:
// answered at once, then not read for the throttle), without an error,
// while the super user on the same broker runs unthrottled.
//
// The rate is measured from the client's first request: Kafka's quota
// measures over 11 one-second samples and lets a new client spend ten
// seconds of its quota at once, so a rate taken over a window that starts
// later swings with where that window falls in the samples' cycle.

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	quotaRate = 1 << 20 // bytes/s: the producer and consumer quotas of User:app
	quotaRun  = 30 * time.Second
	// quotaRecord is the value bytes of each record, sent uncompressed:
	// a quota meters the bytes on the wire.
	quotaRecord = 1 << 10
	// quotaBatch keeps batches, and fetch answers, small against the
	// quota: each throttle is then short and the measured rate smooth.
	quotaBatch = 16 << 10
	// quotaAdminBytes is what the super user produces and then consumes.
	quotaAdminBytes = 64 << 20
)

var _ = Describe("client quotas held by the broker", Ordered, Label("acl", "quota"), func() {
	var (
		b            *Broker
		adm          *kadm.Client
		appTopic     string
		adminTopic   string
		appHooks     = &throttleHooks{}
		adminHooks   = &throttleHooks{}
		mib          = func(bytes int64, d time.Duration) float64 { return float64(bytes) / (1 << 20) / d.Seconds() }
		withinQuota  = BeNumerically("~", 1.0, 0.25) // MiB/s: the quota ±25 %
		appTotalWant = fmt.Sprintf("within 25 %% of %d MiB/s", quotaRate>>20)
	)

	BeforeAll(func(ctx SpecContext) {
		b = startACLBrokers(ctx, 1)[0]
		adm = scramAdmin(aclAdmin, b.Addr)
		appTopic, adminTopic = UniqueName("quota-app"), UniqueName("quota-admin")
		CreateTopic(ctx, adm, appTopic, 1)
		CreateTopic(ctx, adm, adminTopic, 1)
		By("the admin grants User:app WRITE, READ and DESCRIBE on both topics")
		expectCreated(ctx, adm, kadm.NewACLs().Allow(principal("app")).Topics(appTopic, adminTopic).
			Operations(kadm.OpWrite, kadm.OpRead, kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral))
		By("the admin sets producer_byte_rate and consumer_byte_rate of 1 MiB/s for User:app")
		str := func(s string) *string { return &s }
		altered, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
			Entity: kadm.ClientQuotaEntity{{Type: "user", Name: str("app")}},
			Ops: []kadm.AlterClientQuotaOp{
				{Key: "producer_byte_rate", Value: quotaRate},
				{Key: "consumer_byte_rate", Value: quotaRate},
			},
		}})
		Expect(err).NotTo(HaveOccurred())
		for _, a := range altered {
			Expect(a.Err).NotTo(HaveOccurred(), "AlterClientQuotas: %s", a.ErrMessage)
		}
	}, NodeTimeout(2*time.Minute))

	It("holds User:app's producer to producer_byte_rate while the super user produces unthrottled beside it", func(ctx SpecContext) {
		app := scramClient("app", []string{b.Addr}, kgo.DefaultProduceTopic(appTopic), kgo.WithHooks(appHooks),
			kgo.ProducerBatchMaxBytes(quotaBatch), kgo.MaxBufferedRecords(256), kgo.RecordDeliveryTimeout(2*quotaRun),
			kgo.ProducerBatchCompression(kgo.NoCompression()))
		admin := scramClient(aclAdmin, []string{b.Addr}, kgo.DefaultProduceTopic(adminTopic), kgo.WithHooks(adminHooks),
			kgo.ProducerBatchMaxBytes(quotaBatch), kgo.ProducerBatchCompression(kgo.NoCompression()))

		By(fmt.Sprintf("User:app produces flat out for %v", quotaRun))
		var appBytes atomic.Int64
		var appErr error
		var errOnce sync.Once
		value := make([]byte, quotaRecord)
		start := time.Now()
		end := start.Add(quotaRun)
		done := make(chan struct{})
		go func() {
			defer GinkgoRecover()
			defer close(done)
			for time.Now().Before(end) && ctx.Err() == nil {
				app.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
					switch {
					case err != nil:
						if ctx.Err() == nil {
							errOnce.Do(func() { appErr = err })
						}
					case time.Now().Before(end):
						appBytes.Add(quotaRecord)
					}
				})
			}
		}()

		By(fmt.Sprintf("meanwhile the admin, a super user without a quota, produces %d MiB", quotaAdminBytes>>20))
		select { // past the client's first burst (see the file comment)
		case <-time.After(quotaRun / 3):
		case <-ctx.Done():
		}
		adminStart := time.Now()
		var adminFailed atomic.Int64
		for range quotaAdminBytes / quotaRecord {
			admin.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
				if err != nil {
					adminFailed.Add(1)
				}
			})
		}
		Expect(admin.Flush(ctx)).To(Succeed())
		Expect(adminFailed.Load()).To(BeZero(), "the admin's records that failed")
		adminRate := mib(quotaAdminBytes, time.Since(adminStart))
		Expect(time.Now().Before(end)).To(BeTrue(), "the admin's produce ran within User:app's")

		<-done
		appRate := mib(appBytes.Load(), quotaRun)
		report := fmt.Sprintf("producer_byte_rate %d MiB/s: User:app %.3f MiB/s over %v (throttled %d times, after the answer %d), the admin %.1f MiB/s (throttled %d times)",
			quotaRate>>20, appRate, quotaRun, appHooks.count.Load(), appHooks.after.Load(), adminRate, adminHooks.count.Load())
		fmt.Fprintln(GinkgoWriter, report)
		AddReportEntry("produce quota", report)
		Expect(appErr).NotTo(HaveOccurred(), "a producer over its quota is slowed, never refused")
		Expect(appRate).To(withinQuota, appTotalWant)
		Expect(appHooks.after.Load()).To(BeNumerically(">", 0), "KIP-219: the client waits out the throttle after the answer")
		Expect(adminHooks.count.Load()).To(BeZero(), "the super user has no quota")
		Expect(adminRate).To(BeNumerically(">=", 3*appRate), "the super user runs at least 3 times faster")
	}, SpecTimeout(2*time.Minute))

	It("holds User:app's consumer to consumer_byte_rate; the super user then reads the same records unthrottled", func(ctx SpecContext) {
		appHooks.reset()
		adminHooks.reset()
		consumer := func(user string, hooks *throttleHooks) *kgo.Client {
			return scramClient(user, []string{b.Addr}, kgo.ConsumeTopics(adminTopic), kgo.WithHooks(hooks),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
				kgo.FetchMaxBytes(4*quotaBatch), kgo.FetchMaxPartitionBytes(4*quotaBatch))
		}
		// consume polls until until, or until want value bytes, and
		// answers the value bytes it got.
		consume := func(cl *kgo.Client, until time.Time, want int64) int64 {
			cctx, cancel := context.WithDeadline(ctx, until)
			defer cancel()
			var got int64
			for got < want {
				fs := cl.PollFetches(cctx)
				if cctx.Err() != nil {
					break
				}
				fs.EachError(func(t string, p int32, err error) {
					Fail(fmt.Sprintf("fetch %s/%d: %v", t, p, err))
				})
				fs.EachRecord(func(r *kgo.Record) { got += int64(len(r.Value)) })
			}
			return got
		}

		By(fmt.Sprintf("User:app consumes the admin's %d MiB flat out for %v", quotaAdminBytes>>20, quotaRun))
		start := time.Now()
		appBytes := consume(consumer("app", appHooks), start.Add(quotaRun), quotaAdminBytes)
		appRate := mib(appBytes, quotaRun)

		By("the admin consumes all of them")
		adminStart := time.Now()
		adminBytes := consume(consumer(aclAdmin, adminHooks), adminStart.Add(time.Minute), quotaAdminBytes)
		adminRate := mib(adminBytes, time.Since(adminStart))

		report := fmt.Sprintf("consumer_byte_rate %d MiB/s: User:app %.3f MiB/s over %v (throttled %d times, after the answer %d), the admin %.1f MiB/s (throttled %d times)",
			quotaRate>>20, appRate, quotaRun, appHooks.count.Load(), appHooks.after.Load(), adminRate, adminHooks.count.Load())
		fmt.Fprintln(GinkgoWriter, report)
		AddReportEntry("consume quota", report)
		Expect(appBytes).To(BeNumerically("<", quotaAdminBytes), "User:app was still reading when the run ended")
		Expect(appRate).To(withinQuota, appTotalWant)
		Expect(appHooks.after.Load()).To(BeNumerically(">", 0), "KIP-219: the client waits out the throttle after the answer")
		Expect(adminBytes).To(Equal(int64(quotaAdminBytes)), "the admin reads every record")
		Expect(adminHooks.count.Load()).To(BeZero(), "the super user has no quota")
		Expect(adminRate).To(BeNumerically(">=", 3*appRate), "the super user runs at least 3 times faster")
	}, SpecTimeout(2*time.Minute))
})

// throttleHooks counts the throttles a franz-go client is told of, and
// those it waits out itself after the answer (KIP-219).
type throttleHooks struct{ count, after atomic.Int64 }

func (h *throttleHooks) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, after bool) {
	if d <= 0 {
		return
	}
	h.count.Add(1)
	if after {
		h.after.Add(1)
	}
}

func (h *throttleHooks) reset() { h.count.Store(0); h.after.Store(0) }

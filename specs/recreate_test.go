package specs

// Spec 3 (issue 7): a topic deleted and recreated under its name is a new
// topic. While idempotent franz-go producers (with stale metadata) and a
// franz-go consumer group keep running, the topic is deleted and recreated
// every recreatePeriod; no record of an old incarnation is ever read
// through a new one, and each incarnation starts at offset 0.
//
// What the spec can prove, and how:
//   - S_k, incarnation k's offset → value map per partition, is complete:
//     before k is deleted the producers are held at a gate and flushed
//     (every record they sent is acknowledged or failed), then k is read
//     whole by name, its topic ID checked in metadata before and after.
//     Nothing is written to k after that read: the next write is after
//     the delete, into no topic or into k+1.
//   - Each S_k starts at offset 0 and is dense (no transactions: no
//     control records), and the S_k are disjoint by value (every value is
//     produced once and failed records are never re-sent).
//   - Every acknowledged record is in exactly one S_k, at its acknowledged
//     partition and offset, acknowledged while k existed.
//   - Every record a group member received is S_k[p][o] of the incarnation
//     k it matches, received while k existed or within recreateSlack of
//     its delete's end (a response in flight across the delete); never an
//     old incarnation's record after that. A received record matching no
//     S_k at its offset fails the spec (old data under a new offset).
//   - The group starts each new incarnation at offset 0 of each partition
//     (the old incarnation's committed offsets do not apply to it).

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	// recreatePeriod is how long each incarnation but the last lives.
	recreatePeriod = 60 * time.Second
	// recreateCycles delete+recreate cycles: recreateCycles+1 incarnations.
	recreateCycles = 2
	// recreateLastLife is how long the last incarnation runs.
	recreateLastLife = 15 * time.Second
	// recreateAbsent is how long the topic stays deleted before it is
	// created again (producers and consumers meet a missing topic).
	recreateAbsent = 2 * time.Second
	// recreateSlack bounds a fetch response in flight across a delete.
	recreateSlack      = 5 * time.Second
	recreatePartitions = 3
	recreateProducers  = 2
	recreateMembers    = 2
)

// incarnationLife is one incarnation of the spec's topic.
type incarnationLife struct {
	id          [16]byte
	createSent  time.Time // no record of it can exist before
	deleteStart time.Time // zero while live
	deleteDone  time.Time
	// records is S_k: partition → offset → value.
	records map[int32]map[int64]string
}

type recreateAck struct {
	value     string
	partition int32
	offset    int64
	at        time.Time
}

type recreateRecv struct {
	member    int
	value     string
	partition int32
	offset    int64
	at        time.Time
}

var _ = Describe("a topic deleted and recreated under load", Label("lifecycle", "slow"), func() {
	It("never serves an old incarnation's records through a new one (recreate)", func(ctx SpecContext) {
		b := StartBroker(GinkgoT().TempDir(), withGroupFlags(), WithBrokerArgs("--auto-create-topics=false"))
		adm := NewAdmin(b)
		topic := UniqueName("recreate")
		group := UniqueName("recreate-group")

		var (
			livesMu sync.Mutex
			lives   []*incarnationLife
		)
		create := func() {
			GinkgoHelper()
			sent := time.Now()
			CreateTopic(ctx, adm, topic, recreatePartitions)
			id := recreateTopicID(ctx, b, topic)
			livesMu.Lock()
			for _, l := range lives {
				Expect(l.id).NotTo(Equal(id), "a new incarnation reused a topic ID")
			}
			lives = append(lives, &incarnationLife{id: id, createSent: sent})
			livesMu.Unlock()
		}
		create()

		// Producers: idempotent (franz-go's default), unique values, held
		// at the gate (read side per Produce call) while an incarnation
		// is read and deleted.
		var (
			gate     sync.RWMutex
			ackMu    sync.Mutex
			acks     []recreateAck
			failed   atomic.Int64
			failKind sync.Map // error text → *atomic.Int64
		)
		stop, stopProducing := make(chan struct{}), make(chan struct{})
		var wg, producing sync.WaitGroup
		producers := make([]*kgo.Client, recreateProducers)
		for i := range producers {
			cl := NewClient(b, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond),
				kgo.MetadataMinAge(250*time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }))
			producers[i] = cl
			producing.Add(1)
			go func() {
				defer GinkgoRecover()
				defer producing.Done()
				tick := time.NewTicker(5 * time.Millisecond)
				defer tick.Stop()
				var purge atomic.Bool
				for n := 0; ; n++ {
					select {
					case <-stopProducing:
						return
					case <-tick.C:
					}
					if purge.Swap(false) {
						// franz-go never adopts a recreated topic's new
						// ID: it fails the topic until it is purged.
						cl.PurgeTopicsFromProducing(topic)
					}
					value := fmt.Sprintf("p%d-%07d", i, n)
					gate.RLock()
					cl.Produce(ctx, &kgo.Record{Value: []byte(value)}, func(r *kgo.Record, err error) {
						if err != nil {
							failed.Add(1)
							c, _ := failKind.LoadOrStore(recreateErrKind(err), new(atomic.Int64))
							c.(*atomic.Int64).Add(1)
							if errors.Is(err, kerr.UnknownTopicID) {
								purge.Store(true)
							}
							return
						}
						ackMu.Lock()
						acks = append(acks, recreateAck{value: value, partition: r.Partition, offset: r.Offset, at: time.Now()})
						ackMu.Unlock()
					})
					gate.RUnlock()
				}
			}()
		}

		// Group members: franz-go, autocommit. On UNKNOWN_TOPIC_ID (the
		// topic was recreated) the member purges and re-adds the topic.
		var (
			recvMu sync.Mutex
			recvs  []recreateRecv
		)
		for m := 0; m < recreateMembers; m++ {
			cl := NewClient(b, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
				kgo.ClientID(fmt.Sprintf("kaas-specs-recreate-%d", m)),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
				kgo.SessionTimeout(groupSession), kgo.HeartbeatInterval(groupHeartbeat),
				kgo.FetchMaxWait(200*time.Millisecond), kgo.MetadataMinAge(250*time.Millisecond),
				kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }))
			wg.Add(1)
			go func() {
				defer GinkgoRecover()
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
					fs := cl.PollFetches(pctx)
					cancel()
					at := time.Now()
					recreated := false
					fs.EachError(func(_ string, _ int32, err error) {
						recreated = recreated || errors.Is(err, kerr.UnknownTopicID)
					})
					var got []recreateRecv
					fs.EachRecord(func(r *kgo.Record) {
						got = append(got, recreateRecv{member: m, value: string(r.Value), partition: r.Partition, offset: r.Offset, at: at})
					})
					recvMu.Lock()
					recvs = append(recvs, got...)
					recvMu.Unlock()
					if recreated {
						cl.PurgeTopicsFromConsuming(topic)
						cl.AddConsumeTopics(topic)
					}
				}
			}()
		}

		// readAndDelete holds the producers, reads the live incarnation
		// whole, and deletes it (delete is false for the last one).
		readAndDelete := func(delete bool) {
			GinkgoHelper()
			livesMu.Lock()
			l := lives[len(lives)-1]
			livesMu.Unlock()
			gate.Lock()
			defer gate.Unlock()
			for _, cl := range producers {
				fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				Expect(cl.Flush(fctx)).To(Succeed())
				cancel()
			}
			Expect(recreateTopicID(ctx, b, topic)).To(Equal(l.id))
			l.records = recreateReadAll(ctx, b, topic)
			Expect(recreateTopicID(ctx, b, topic)).To(Equal(l.id), "the topic changed while it was read")
			if !delete {
				return
			}
			By(fmt.Sprintf("deleting incarnation %d", len(lives)))
			l.deleteStart = time.Now()
			resp, err := adm.DeleteTopic(ctx, topic)
			Expect(err).NotTo(HaveOccurred())
			Expect(resp.Err).NotTo(HaveOccurred())
			l.deleteDone = time.Now()
		}

		for cycle := 0; cycle < recreateCycles; cycle++ {
			select {
			case <-time.After(recreatePeriod):
			case <-ctx.Done():
				Fail("interrupted")
			}
			readAndDelete(true)
			time.Sleep(recreateAbsent)
			create()
		}
		time.Sleep(recreateLastLife)
		close(stopProducing)
		producing.Wait()
		readAndDelete(false)
		time.Sleep(recreateSlack) // the group reads the last records
		close(stop)
		wg.Wait()

		// --- checks -------------------------------------------------
		byValue := map[string]int{} // value → incarnation index
		total := 0
		for k, l := range lives {
			for p, recs := range l.records {
				max := int64(-1)
				for o, v := range recs {
					max = maxInt64(max, o)
					prev, dup := byValue[v]
					Expect(dup).To(BeFalse(), "value %s is in incarnations %d and %d", v, prev+1, k+1)
					byValue[v] = k
				}
				Expect(int64(len(recs))).To(Equal(max+1), "incarnation %d partition %d: offsets not dense from 0 (%d records, last %d)", k+1, p, len(recs), max)
				if len(recs) > 0 {
					Expect(recs).To(HaveKey(int64(0)), "incarnation %d partition %d does not start at 0", k+1, p)
				}
				total += len(recs)
			}
		}
		for k, l := range lives {
			n := 0
			for _, recs := range l.records {
				n += len(recs)
			}
			Expect(n).To(BeNumerically(">", 0), "incarnation %d has no records", k+1)
		}

		ackMu.Lock()
		perIncAcked := make([]int, len(lives))
		for _, a := range acks {
			k, ok := byValue[a.value]
			Expect(ok).To(BeTrue(), "acknowledged %s (partition %d offset %d) is in no incarnation", a.value, a.partition, a.offset)
			l := lives[k]
			Expect(l.records[a.partition][a.offset]).To(Equal(a.value), "acknowledged %s at %d/%d, incarnation %d has %q there",
				a.value, a.partition, a.offset, k+1, l.records[a.partition][a.offset])
			Expect(a.at).To(BeTemporally(">=", l.createSent), "%s acknowledged before incarnation %d was created", a.value, k+1)
			if !l.deleteStart.IsZero() {
				Expect(a.at).To(BeTemporally("<=", l.deleteStart), "%s of incarnation %d acknowledged after its delete began", a.value, k+1)
			}
			perIncAcked[k]++
		}
		ackMu.Unlock()

		recvMu.Lock()
		defer recvMu.Unlock()
		perIncRecv := make([]map[string]bool, len(lives))
		firstOffsets := make([]map[int32]bool, len(lives)) // offset 0 received per partition
		for k := range lives {
			perIncRecv[k] = map[string]bool{}
			firstOffsets[k] = map[int32]bool{}
		}
		inFlight := 0
		for _, r := range recvs {
			k, ok := byValue[r.value]
			Expect(ok).To(BeTrue(), "member %d read %s at %d/%d: in no incarnation", r.member, r.value, r.partition, r.offset)
			l := lives[k]
			Expect(l.records[r.partition][r.offset]).To(Equal(r.value),
				"member %d read %s at %d/%d, but incarnation %d has %q there: a record under another incarnation's offset",
				r.member, r.value, r.partition, r.offset, k+1, l.records[r.partition][r.offset])
			Expect(r.at).To(BeTemporally(">=", l.createSent))
			if !l.deleteDone.IsZero() {
				Expect(r.at).To(BeTemporally("<=", l.deleteDone.Add(recreateSlack)),
					"member %d read %s of incarnation %d %s after its delete ended", r.member, r.value, k+1, r.at.Sub(l.deleteDone))
				if r.at.After(l.deleteStart) {
					inFlight++
				}
			}
			perIncRecv[k][r.value] = true
			if r.offset == 0 {
				firstOffsets[k][r.partition] = true
			}
		}
		for k, l := range lives {
			if k == 0 {
				continue
			}
			for p, recs := range l.records {
				if len(recs) > 0 {
					Expect(firstOffsets[k]).To(HaveKey(p),
						"the group never read offset 0 of incarnation %d partition %d: it resumed at an old incarnation's offset?", k+1, p)
				}
			}
		}

		summary := fmt.Sprintf("incarnations %d, records %d, acknowledged %d, produce failures %d (%s), group reads %d (%d across a delete)",
			len(lives), total, len(acks), failed.Load(), recreateKinds(&failKind), len(recvs), inFlight)
		for k, l := range lives {
			n := 0
			for _, recs := range l.records {
				n += len(recs)
			}
			summary += fmt.Sprintf("; #%d: %d records, %d acknowledged, %d distinct read by the group", k+1, n, perIncAcked[k], len(perIncRecv[k]))
		}
		AddReportEntry("recreate summary", summary)
	}, SpecTimeout(6*time.Minute))
})

func maxInt64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// recreateTopicID returns the topic's ID from metadata, through a new
// client each time (franz-go keeps the first topic ID it saw for a name).
func recreateTopicID(ctx context.Context, b *Broker, topic string) [16]byte {
	GinkgoHelper()
	cl, err := kgo.NewClient(clientOpts(b)...)
	Expect(err).NotTo(HaveOccurred())
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var id [16]byte
	Eventually(func(g Gomega) {
		md, err := adm.Metadata(ctx, topic)
		g.Expect(err).NotTo(HaveOccurred())
		td, ok := md.Topics[topic]
		g.Expect(ok).To(BeTrue())
		g.Expect(td.Err).NotTo(HaveOccurred())
		g.Expect(td.ID).NotTo(Equal(kadm.TopicID{}))
		id = td.ID
	}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
	return id
}

// recreateReadAll reads every partition of topic from its start to its
// current end (nothing is being written) and returns offset → value.
func recreateReadAll(ctx context.Context, b *Broker, topic string) map[int32]map[int64]string {
	GinkgoHelper()
	acl, err := kgo.NewClient(clientOpts(b)...)
	Expect(err).NotTo(HaveOccurred())
	defer acl.Close()
	ends, err := kadm.NewClient(acl).ListEndOffsets(ctx, topic)
	Expect(err).NotTo(HaveOccurred())
	out := map[int32]map[int64]string{}
	want := map[int32]int64{}
	offsets := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		Expect(o.Err).NotTo(HaveOccurred())
		out[o.Partition] = map[int64]string{}
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
			offsets[o.Partition] = kgo.NewOffset().At(0)
		}
	})
	if len(want) == 0 {
		return out
	}
	cl, err := kgo.NewClient(append(clientOpts(b), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchMaxWait(200*time.Millisecond))...)
	Expect(err).NotTo(HaveOccurred())
	defer cl.Close()
	rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	done := func() bool {
		for p, end := range want {
			if int64(len(out[p])) < end {
				return false
			}
		}
		return true
	}
	for !done() {
		fs := cl.PollFetches(rctx)
		Expect(rctx.Err()).NotTo(HaveOccurred(), "reading %s: %d partitions incomplete", topic, len(want))
		fs.EachError(func(t string, p int32, err error) {
			Expect(err).NotTo(HaveOccurred(), "reading %s/%d", t, p)
		})
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < want[r.Partition] {
				out[r.Partition][r.Offset] = string(r.Value)
			}
		})
	}
	return out
}

func recreateErrKind(err error) string {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	if errors.Is(err, context.Canceled) {
		return "canceled"
	}
	return err.Error()
}

func recreateKinds(m *sync.Map) string {
	var kinds []string
	m.Range(func(k, v any) bool {
		kinds = append(kinds, fmt.Sprintf("%s: %d", k, v.(*atomic.Int64).Load()))
		return true
	})
	sort.Strings(kinds)
	return fmt.Sprint(kinds)
}

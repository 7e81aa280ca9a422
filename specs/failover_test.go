package specs

// Issue 3, specs 1 and 2: a partition's owner dies (SIGKILL) or stalls past
// its lease (SIGSTOP) twenty times under idempotent acks=all load, and no
// acknowledged record is lost, duplicated or moved, consumers never go
// backwards, and nothing a fenced zombie writes is ever acknowledged or read.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	foRounds     = 20
	foTopics     = 2
	foPartitions = 6
)

// foCluster is three brokers on one shared data directory and the topics
// the failover specs load.
type foCluster struct {
	brokers []*Broker
	topics  []string
	parts   []tp              // every partition, in a fixed order
	ids     map[string]string // topic name → topic ID, as the engine spells it
}

func startFoCluster(ctx context.Context) *foCluster {
	GinkgoHelper()
	dirs := SharedDataDirs(3)
	c := &foCluster{}
	for i, d := range dirs {
		c.brokers = append(c.brokers, StartBroker(d, WithBrokerID(i+1)))
	}
	adm := NewAdmin(c.brokers[0])
	for i := range foTopics {
		t := UniqueName(fmt.Sprintf("failover%d", i))
		CreateTopic(ctx, adm, t, foPartitions)
		c.topics = append(c.topics, t)
	}
	c.ids = topicIDStrings(ctx, adm, c.topics...)
	for p := range int32(foPartitions) {
		for _, t := range c.topics {
			c.parts = append(c.parts, tp{t, p})
		}
	}
	return c
}

func (c *foCluster) byID(id int32) *Broker {
	GinkgoHelper()
	for _, b := range c.brokers {
		if int32(b.ID) == id {
			return b
		}
	}
	Fail(fmt.Sprintf("no broker %d", id))
	return nil
}

// agree waits until every broker in bs lists exactly the brokers of bs,
// names the same controller (one of them) and the same owner and leader
// epoch for every partition, and that owner is the one rendezvous hashing
// picks among bs: the assignment has settled on this membership. It
// returns that ownership and the controller.
func (c *foCluster) agree(ctx context.Context, bs []*Broker, within time.Duration) (map[tp]ownership, int32) {
	GinkgoHelper()
	ctrl, owners := brokersAgree(ctx, bs, c.topics, len(c.parts), within,
		rendezvousOwners(c.ids), agreePolling(100*time.Millisecond))
	return owners, ctrl
}

// ---------------------------------------------------------------------------
// What producers were told, and what consumers saw.

// foLoad is an idempotent acks=all producer writing to every partition,
// one goroutine per partition with a bounded number of records in flight.
type foLoad struct {
	cl      *kgo.Client
	acks    *ackLedger
	stop    atomic.Bool
	wg      sync.WaitGroup
	pending sync.WaitGroup
	failed  atomic.Int64
}

func foProducerOpts(seeds []string) []kgo.Opt {
	return []kgo.Opt{
		kgo.SeedBrokers(seeds...),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordRetries(1 << 20),
		kgo.RecordDeliveryTimeout(60 * time.Second),
		kgo.MetadataMinAge(100 * time.Millisecond),
		kgo.MetadataMaxAge(2 * time.Second),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
	}
}

func startFoLoad(c *foCluster, acks *ackLedger) *foLoad {
	GinkgoHelper()
	l := &foLoad{acks: acks}
	l.cl = NewClient(c.brokers[0], append(foProducerOpts(brokerAddrs(c.brokers)),
		kgo.ProducerLinger(2*time.Millisecond), kgo.MaxBufferedRecords(5000))...)
	// On an early end, stop producing before the client closes (the
	// records in flight then fail and free their goroutines).
	DeferCleanup(func() { l.stop.Store(true) })
	for i, k := range c.parts {
		l.wg.Add(1)
		go func() {
			defer GinkgoRecover()
			defer l.wg.Done()
			inflight := make(chan struct{}, 50)
			for seq := 0; !l.stop.Load(); seq++ {
				inflight <- struct{}{}
				if l.stop.Load() {
					return
				}
				l.pending.Add(1)
				v := fmt.Sprintf("L%02d-%07d", i, seq)
				l.cl.Produce(context.Background(), &kgo.Record{Topic: k.topic, Partition: k.partition, Value: []byte(v)},
					func(r *kgo.Record, err error) {
						defer l.pending.Done()
						<-inflight
						if err != nil {
							l.failed.Add(1)
							fmt.Fprintf(GinkgoWriter, "load produce %s to %v failed: %v\n", v, k, err)
							return
						}
						acks.add(k, r.Offset, v)
					})
				time.Sleep(10 * time.Millisecond)
			}
		}()
	}
	return l
}

// startFoLoaded starts a cluster, waits until its assignment settles, and
// puts it under load; the returned ledger records what the load (and
// whatever else the spec adds) was acknowledged.
func startFoLoaded(ctx context.Context) (*foCluster, *ackLedger, *foLoad) {
	GinkgoHelper()
	c := startFoCluster(ctx)
	c.agree(ctx, c.brokers, 30*time.Second)
	acks := newAckLedger()
	return c, acks, startFoLoad(c, acks)
}

// finish stops producing and waits for every record produced to be
// acknowledged or failed.
func (l *foLoad) finish(ctx context.Context) {
	GinkgoHelper()
	l.stop.Store(true)
	l.wg.Wait()
	waitPending(ctx, &l.pending, 90*time.Second)
}

// foSeen is one record a consumer read.
type foSeen struct {
	value string
	epoch int32
}

// foConsumer reads every partition from the start in assign mode for as
// long as the spec runs and records where offsets went backwards, fetch
// errors, and what it read where.
type foConsumer struct {
	name      string
	cl        *kgo.Client
	mu        sync.Mutex
	at        map[tp]map[int64]string
	last      map[tp]int64
	backwards []string
	changed   []string // a record read at an offset already read with another value
	fetchErrs []string
	n         atomic.Int64
	done      chan struct{}
}

func startFoConsumer(ctx context.Context, name string, c *foCluster, seeds []*Broker, opts ...kgo.Opt) *foConsumer {
	GinkgoHelper()
	fc := &foConsumer{name: name, at: map[tp]map[int64]string{}, last: map[tp]int64{}, done: make(chan struct{})}
	fc.cl = NewClient(seeds[0], append([]kgo.Opt{
		kgo.SeedBrokers(brokerAddrs(seeds)...),
		kgo.ConsumePartitions(fromStart(c.topics, foPartitions)),
		kgo.FetchMaxWait(200 * time.Millisecond),
		kgo.MetadataMinAge(100 * time.Millisecond),
		kgo.MetadataMaxAge(2 * time.Second),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
	}, opts...)...)
	cctx, cancel := context.WithCancel(ctx)
	DeferCleanup(func() { cancel(); <-fc.done })
	go func() {
		defer GinkgoRecover()
		defer close(fc.done)
		for cctx.Err() == nil {
			fs := fc.cl.PollFetches(cctx)
			fc.mu.Lock()
			fs.EachError(func(t string, p int32, err error) {
				if cctx.Err() == nil {
					fc.fetchErrs = append(fc.fetchErrs, fmt.Sprintf("%s/%d: %v", t, p, err))
				}
			})
			fs.EachRecord(func(r *kgo.Record) {
				k := tp{r.Topic, r.Partition}
				if last, ok := fc.last[k]; ok && r.Offset <= last {
					fc.backwards = append(fc.backwards, fmt.Sprintf("%v: offset %d after %d", k, r.Offset, last))
				}
				fc.last[k] = r.Offset
				m := fc.at[k]
				if m == nil {
					m = map[int64]string{}
					fc.at[k] = m
				}
				if old, ok := m[r.Offset]; ok && old != string(r.Value) {
					fc.changed = append(fc.changed, fmt.Sprintf("%v offset %d: %s then %s", k, r.Offset, old, r.Value))
				}
				m[r.Offset] = string(r.Value)
				fc.n.Add(1)
			})
			fc.mu.Unlock()
		}
	}()
	return fc
}

// add records one read of value at k, offset.
func (fc *foConsumer) add(k tp, offset int64, value string) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if fc.at[k] == nil {
		fc.at[k] = map[int64]string{}
	}
	fc.at[k][offset] = value
}

// expectSane checks, while the consumer runs, that it never went backwards
// and never read two values at one offset.
func (fc *foConsumer) expectSane() {
	GinkgoHelper()
	fc.mu.Lock()
	defer fc.mu.Unlock()
	Expect(fc.backwards).To(BeEmpty(), "consumer %s went backwards", fc.name)
	Expect(fc.changed).To(BeEmpty(), "consumer %s read two values at one offset", fc.name)
}

// expectNoDataLoss reports the fetch errors the consumer saw and fails on
// a detected truncation (franz-go's data loss check after an epoch change).
func (fc *foConsumer) expectNoDataLoss() {
	GinkgoHelper()
	fc.mu.Lock()
	errs := slices.Clone(fc.fetchErrs)
	fc.mu.Unlock()
	if len(errs) > 0 {
		AddReportEntry("fetch errors seen by consumer "+fc.name, strings.Join(errs[:min(len(errs), 20)], "\n"))
	}
	for _, e := range errs {
		Expect(e).NotTo(ContainSubstring("data loss"), "consumer %s detected data loss", fc.name)
	}
}

// foReadAll consumes every partition from the start, through whichever
// brokers own them now, up to each partition's current end offset.
func foReadAll(ctx context.Context, c *foCluster) map[tp]map[int64]foSeen {
	GinkgoHelper()
	adm := kadm.NewClient(NewClient(c.brokers[0], kgo.SeedBrokers(brokerAddrs(c.brokers)...)))
	var ends kadm.ListedOffsets
	Eventually(func(g Gomega) {
		var err error
		ends, err = adm.ListEndOffsets(ctx, c.topics...)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ends.Error()).NotTo(HaveOccurred())
	}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
	end := map[tp]int64{}
	ends.Each(func(o kadm.ListedOffset) { end[tp{o.Topic, o.Partition}] = o.Offset })
	cl := NewClient(c.brokers[0], kgo.SeedBrokers(brokerAddrs(c.brokers)...), kgo.ConsumePartitions(fromStart(c.topics, foPartitions)),
		kgo.FetchMaxWait(100*time.Millisecond), kgo.MetadataMinAge(100*time.Millisecond))
	out := map[tp]map[int64]foSeen{}
	readFromStart(ctx, cl, end, 2*time.Minute, func(r *kgo.Record) {
		k := tp{r.Topic, r.Partition}
		if out[k] == nil {
			out[k] = map[int64]foSeen{}
		}
		out[k][r.Offset] = foSeen{string(r.Value), r.LeaderEpoch}
	})
	return out
}

// foVerifyLog checks the final log against what producers were told and
// what consumers read during the run: every acknowledged record once, at
// its offset; no value twice; no value in forbidden; and every record a
// live consumer read is the one the final log holds at that offset.
// It returns the number of records in the log.
func foVerifyLog(final map[tp]map[int64]foSeen, acks *ackLedger, forbidden map[string]bool, consumers ...*foConsumer) int {
	GinkgoHelper()
	stored := map[tp]map[int64]string{}
	for k, m := range final {
		stored[k] = map[int64]string{}
		for off, s := range m {
			stored[k][off] = s.value
		}
	}
	check := acks.check(stored)
	var zombies, phantom []string
	for v := range check.copies {
		if forbidden[v] {
			zombies = append(zombies, v)
		}
	}
	for _, fc := range consumers {
		fc.mu.Lock()
		for k, m := range fc.at {
			for off, v := range m {
				if got := final[k][off]; got.value != v {
					phantom = append(phantom, fmt.Sprintf("consumer %s read %s at %v offset %d, the log holds %q", fc.name, v, k, off, got.value))
				}
			}
		}
		fc.mu.Unlock()
	}
	clip := func(s []string) []string { slices.Sort(s); return s[:min(len(s), 20)] }
	AddReportEntry("final log check", fmt.Sprintf("records %d (%d never acknowledged), acknowledged %d, lost %d, at another offset %d, duplicated %d, zombie records %d, consumer reads not in the log %d, two acks at one offset %d",
		check.records, len(check.unacked), acks.acked(), len(check.lost), len(check.moved), len(check.dups), len(zombies), len(phantom), len(check.inconsistent)))
	if len(check.unacked) > 0 {
		// Allowed: a produce that failed (or raced a stop) may or may not
		// have been written, as in Kafka; it is still stored at most once.
		AddReportEntry("records in the log never acknowledged", strings.Join(clip(check.unacked), "\n"))
	}
	Expect(clip(check.lost)).To(BeEmpty(), "acknowledged records lost (%d)", len(check.lost))
	Expect(clip(check.moved)).To(BeEmpty(), "acknowledged records not at their acknowledged offset (%d)", len(check.moved))
	Expect(clip(check.inconsistent)).To(BeEmpty(), "two records acknowledged at one offset")
	Expect(clip(check.dups)).To(BeEmpty(), "records stored more than once (%d)", len(check.dups))
	Expect(clip(zombies)).To(BeEmpty(), "records a fenced zombie was sent are readable (%d)", len(zombies))
	Expect(clip(phantom)).To(BeEmpty(), "consumers read records the log does not hold (%d)", len(phantom))
	return check.records
}

// foRoundClient returns a client seeded with b, and a function that closes it
// (also run at cleanup, once).
func foRoundClient(b *Broker, opts ...kgo.Opt) (*kgo.Client, func()) {
	GinkgoHelper()
	cl, err := kgo.NewClient(append(clientOpts(b), opts...)...)
	Expect(err).NotTo(HaveOccurred())
	var once sync.Once
	closeFn := func() { once.Do(cl.Close) }
	DeferCleanup(closeFn)
	return cl, closeFn
}

// ---------------------------------------------------------------------------
// The failover probe: one record at a time to the hot partition.

type foProbeAck struct {
	k              tp
	issued, ackedT time.Time
}

type foProbe struct {
	cl     *kgo.Client
	acks   *ackLedger
	hot    atomic.Pointer[tp]
	stop   atomic.Bool
	failed atomic.Int64
	done   chan struct{}
	mu     sync.Mutex
	events []foProbeAck
}

func startFoProbe(c *foCluster, acks *ackLedger, hot tp) *foProbe {
	GinkgoHelper()
	p := &foProbe{acks: acks, done: make(chan struct{})}
	p.hot.Store(&hot)
	p.cl = NewClient(c.brokers[0], foProducerOpts(brokerAddrs(c.brokers))...)
	go func() {
		defer GinkgoRecover()
		defer close(p.done)
		for seq := 0; !p.stop.Load(); seq++ {
			k := *p.hot.Load()
			v := fmt.Sprintf("P-%07d", seq)
			issued := time.Now()
			r, err := p.cl.ProduceSync(context.Background(), &kgo.Record{Topic: k.topic, Partition: k.partition, Value: []byte(v)}).First()
			if err != nil {
				p.failed.Add(1)
				fmt.Fprintf(GinkgoWriter, "probe produce %s to %v failed: %v\n", v, k, err)
				time.Sleep(50 * time.Millisecond)
				continue
			}
			now := time.Now()
			acks.add(k, r.Offset, v)
			p.mu.Lock()
			p.events = append(p.events, foProbeAck{k, issued, now})
			p.mu.Unlock()
			time.Sleep(2 * time.Millisecond)
		}
	}()
	DeferCleanup(p.finish)
	return p
}

func (p *foProbe) finish() {
	p.stop.Store(true)
	<-p.done
}

// firstAckAfter waits for the first acknowledgement of a probe record to
// k that was produced after t and returns when it arrived. Such a record
// can only have been acknowledged by whoever owned k after t.
func (p *foProbe) firstAckAfter(ctx context.Context, k tp, t time.Time, within time.Duration) time.Time {
	GinkgoHelper()
	var at time.Time
	Eventually(func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		for i := len(p.events) - 1; i >= 0 && p.events[i].issued.After(t); i-- {
			if e := p.events[i]; e.k == k {
				at = e.ackedT
			}
		}
		return !at.IsZero()
	}).WithContext(ctx).WithTimeout(within).WithPolling(5*time.Millisecond).Should(BeTrue(),
		"no produce to %v acknowledged within %v", k, within)
	return at
}

// foPercentile returns the nearest-rank percentile q (0 < q ≤ 1) of ds.
func foPercentile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*q+0.999999) - 1
	return s[max(0, min(i, len(s)-1))]
}

func foDurations(ds []time.Duration) string {
	var parts []string
	for _, d := range ds {
		parts = append(parts, d.Round(time.Millisecond).String())
	}
	return strings.Join(parts, " ")
}

// ---------------------------------------------------------------------------
// Raw produce requests to one chosen broker.

// foRawBatch builds an uncompressed, non-idempotent RecordBatch v2 holding
// one record with value.
func foRawBatch(value string) []byte {
	var r []byte
	r = append(r, 0)                              // attributes
	r = binary.AppendVarint(r, 0)                 // timestamp delta
	r = binary.AppendVarint(r, 0)                 // offset delta
	r = binary.AppendVarint(r, -1)                // null key
	r = binary.AppendVarint(r, int64(len(value))) // value
	r = append(r, value...)
	r = binary.AppendVarint(r, 0) // no headers
	recs := binary.AppendVarint(nil, int64(len(r)))
	recs = append(recs, r...)
	ts := time.Now().UnixMilli()
	b := make([]byte, 0, 61+len(recs))
	b = binary.BigEndian.AppendUint64(b, 0)                    // base offset
	b = binary.BigEndian.AppendUint32(b, uint32(49+len(recs))) // batch length
	b = binary.BigEndian.AppendUint32(b, 0xffffffff)           // partition leader epoch
	b = append(b, 2)                                           // magic
	b = binary.BigEndian.AppendUint32(b, 0)                    // crc, below
	b = binary.BigEndian.AppendUint16(b, 0)                    // attributes
	b = binary.BigEndian.AppendUint32(b, 0)                    // last offset delta
	b = binary.BigEndian.AppendUint64(b, uint64(ts))           // first timestamp
	b = binary.BigEndian.AppendUint64(b, uint64(ts))           // max timestamp
	b = binary.BigEndian.AppendUint64(b, 0xffffffffffffffff)   // producer ID -1
	b = binary.BigEndian.AppendUint16(b, 0xffff)               // producer epoch -1
	b = binary.BigEndian.AppendUint32(b, 0xffffffff)           // first sequence -1
	b = binary.BigEndian.AppendUint32(b, 1)                    // records
	b = append(b, recs...)
	binary.BigEndian.PutUint32(b[17:21], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// foErrName is the Kafka name of an error code.
func foErrName(code int16) string {
	var ke *kerr.Error
	if errors.As(kerr.ErrorForCode(code), &ke) {
		return ke.Message
	}
	return fmt.Sprint(code)
}

// foRawResult is the answer to one raw produce.
type foRawResult struct {
	value  string
	code   int16 // partition error code
	offset int64
	err    error // the request itself failed (no answer)
}

func (r foRawResult) String() string {
	if r.err != nil {
		return fmt.Sprintf("%s: request failed: %v", r.value, r.err)
	}
	if r.code != 0 {
		return fmt.Sprintf("%s: %s", r.value, foErrName(r.code))
	}
	return fmt.Sprintf("%s: acknowledged at offset %d", r.value, r.offset)
}

// foRequestOnce sends req once, in the background, to the client's only
// seed broker (no retries, no metadata), allowing it a minute, and delivers
// what answer makes of the response or the error on the returned channel.
func foRequestOnce[T any](ctx context.Context, cl *kgo.Client, req kmsg.Request, answer func(kmsg.Response, error) T) <-chan T {
	out := make(chan T, 1)
	go func() {
		rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		out <- answer(cl.SeedBrokers()[0].Request(rctx, req))
	}()
	return out
}

// foRawProduce sends one acks=all produce of value to partition k through
// the client's only seed broker, once (no retries, no metadata), and
// delivers the answer on the returned channel. The request is written at
// once, also to a stopped broker (the kernel buffers it).
func foRawProduce(ctx context.Context, cl *kgo.Client, k tp, value string) <-chan foRawResult {
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = k.topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = k.partition
	rp.Records = foRawBatch(value)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return foRequestOnce(ctx, cl, req, func(r kmsg.Response, err error) foRawResult {
		res := foRawResult{value: value, offset: -1}
		resp, _ := r.(*kmsg.ProduceResponse)
		switch {
		case err != nil:
			res.err = err
		case len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1:
			res.err = fmt.Errorf("malformed produce response: %+v", resp)
		default:
			p := resp.Topics[0].Partitions[0]
			res.code, res.offset = p.ErrorCode, p.BaseOffset
		}
		return res
	})
}

// foFetchResult is the answer to one raw fetch: records by offset.
type foFetchResult struct {
	code int16
	recs map[int64]string
	err  error
}

// foRawFetch fetches partition k from offset through the client's only seed
// broker, once, without waiting for data.
func foRawFetch(ctx context.Context, cl *kgo.Client, k tp, topicID string, offset int64) <-chan foFetchResult {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = 0
	req.MinBytes = 0
	req.MaxBytes = 4 << 20
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = k.topic
	if id, err := uuid.Parse(topicID); err == nil {
		rt.TopicID = id
	}
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = k.partition
	rp.FetchOffset = offset
	rp.PartitionMaxBytes = 4 << 20
	rp.CurrentLeaderEpoch = -1
	rp.LogStartOffset = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return foRequestOnce(ctx, cl, req, func(r kmsg.Response, err error) foFetchResult {
		res := foFetchResult{recs: map[int64]string{}}
		resp, _ := r.(*kmsg.FetchResponse)
		switch {
		case err != nil:
			res.err = err
		case resp.ErrorCode != 0:
			res.code = resp.ErrorCode
		case len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1:
			res.err = fmt.Errorf("malformed fetch response: %+v", resp)
		default:
			rp := &resp.Topics[0].Partitions[0]
			res.code = rp.ErrorCode
			fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
				Offset: offset, Topic: k.topic, Partition: k.partition,
			}, rp, kgo.DefaultDecompressor(), nil)
			if fp.Err != nil && res.code == 0 {
				res.err = fp.Err
			}
			for _, r := range fp.Records {
				res.recs[r.Offset] = string(r.Value)
			}
		}
		return res
	})
}

// foWaitStopped waits until every thread of pid is stopped (SIGSTOP taken),
// so that nothing sent from now on is read before SIGCONT.
func foWaitStopped(ctx context.Context, pid int) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(tasks).NotTo(BeEmpty())
		for _, t := range tasks {
			b, err := os.ReadFile(t)
			g.Expect(err).NotTo(HaveOccurred())
			s := string(b)
			i := strings.LastIndexByte(s, ')')
			g.Expect(i).To(BeNumerically(">", 0))
			fields := strings.Fields(s[i+1:])
			g.Expect(fields).NotTo(BeEmpty())
			g.Expect(fields[0]).To(BeElementOf("T", "t"), "thread %s not stopped", t)
		}
	}).WithContext(ctx).WithTimeout(10 * time.Second).WithPolling(time.Millisecond).Should(Succeed())
}

// ---------------------------------------------------------------------------

// foRegainedAck is a produce sent to a broker right after SIGCONT that it
// acknowledged: legitimate only if it owned the partition again by then,
// at a leader epoch above fencedAt.
type foRegainedAck struct {
	k        tp
	offset   int64
	value    string
	broker   int32
	fencedAt int32
}

var _ = Describe("partition owner failover", func() {
	It("loses nothing when the owner of a hot partition is SIGKILLed 20 times", Label("cluster", "slow"), func(ctx SpecContext) {
		started := time.Now()
		c, acks, load := startFoLoaded(ctx)
		probe := startFoProbe(c, acks, c.parts[0])
		consumers := []*foConsumer{
			startFoConsumer(ctx, "a", c, c.brokers),
			startFoConsumer(ctx, "b", c, []*Broker{c.brokers[2], c.brokers[1]}, kgo.FetchMaxPartitionBytes(4<<10)),
		}
		acks.waitAcked(ctx, 1000, 60*time.Second)

		var (
			failovers     []time.Duration
			moved         []int
			controllerHit int
		)
		for round := range foRounds {
			hot := c.parts[round%len(c.parts)]
			switched := time.Now()
			probe.hot.Store(&hot)
			probe.firstAckAfter(ctx, hot, switched, 60*time.Second)
			owners, ctrl := c.agree(ctx, c.brokers, 30*time.Second)
			victimID := owners[hot].leader
			victim := c.byID(victimID)
			if victimID == ctrl {
				controllerHit++
			}

			By(fmt.Sprintf("round %d: SIGKILL broker %d, owner of %v at epoch %d (controller %d)", round+1, victimID, hot, owners[hot].epoch, ctrl))
			killedAt := time.Now()
			victim.Kill9()
			ackAt := probe.firstAckAfter(ctx, hot, killedAt, 60*time.Second)
			failover := ackAt.Sub(killedAt)
			failovers = append(failovers, failover)
			survivors := without(c.brokers, victim)
			after, _ := c.agree(ctx, survivors, 30*time.Second)
			n := expectOnlyVictimMoved(owners, after, victimID)
			moved = append(moved, n)
			fmt.Fprintf(GinkgoWriter, "round %d: failover of %v %v, %d partitions moved from broker %d\n", round+1, hot, failover, n, victimID)
			for _, fc := range consumers {
				fc.expectSane()
			}

			By(fmt.Sprintf("round %d: restarting broker %d", round+1, victimID))
			victim.Restart()
			rejoined, _ := c.agree(ctx, c.brokers, 30*time.Second)
			expectNoEpochWentBack(after, rejoined)
		}

		By("stopping the load and reading everything back")
		probe.finish()
		load.finish(ctx)
		Expect(load.failed.Load()).To(BeZero(), "load produces failed")
		Expect(probe.failed.Load()).To(BeZero(), "probe produces failed")
		// The live consumers catch up, then stop.
		ends := acks.ends()
		for _, fc := range consumers {
			Eventually(func(g Gomega) {
				fc.mu.Lock()
				defer fc.mu.Unlock()
				for k, end := range ends {
					g.Expect(fc.last[k]+1).To(BeNumerically(">=", end), "consumer %s on %v", fc.name, k)
				}
			}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
			fc.expectSane()
		}
		final := foReadAll(ctx, c)
		total := foVerifyLog(final, acks, nil, consumers...)
		for _, fc := range consumers {
			fc.expectNoDataLoss()
		}

		p50, p99 := foPercentile(failovers, 0.50), foPercentile(failovers, 0.99)
		sumMoved := 0
		for _, n := range moved {
			sumMoved += n
		}
		movedAvg := float64(sumMoved) / float64(len(moved))
		AddReportEntry("failover kill → first ack by the new owner", fmt.Sprintf("p50 %v, p99 %v over %d kills (%d of them the controller): %s",
			p50.Round(time.Millisecond), p99.Round(time.Millisecond), len(failovers), controllerHit, foDurations(failovers)))
		AddReportEntry("partitions moved per kill", fmt.Sprintf("mean %.2f of %d (per kill: %v)", movedAvg, len(c.parts), moved))
		summary := fmt.Sprintf("FAILOVER p50=%v p99=%v kills=%d controller-kills=%d moved-per-kill=%.2f/%d records=%d acked=%d runtime=%v",
			p50.Round(time.Millisecond), p99.Round(time.Millisecond), len(failovers), controllerHit, movedAvg, len(c.parts),
			total, acks.acked(), time.Since(started).Round(time.Second))
		fmt.Fprintln(GinkgoWriter, summary)
		fmt.Fprintf(GinkgoWriter, "failover samples: %s\n", foDurations(failovers))
		fmt.Fprintln(os.Stdout, summary)
		// A generous bound, not the 3 s target: wall-clock limits flake on a
		// loaded CI machine, the figures above are what the issue reports.
		Expect(p99).To(BeNumerically("<", 15*time.Second), "failover p99")
	}, SpecTimeout(12*time.Minute))

	It("never acknowledges or serves what a SIGSTOPped owner writes after it was fenced, 20 times", Label("cluster", "slow"), func(ctx SpecContext) {
		started := time.Now()
		c, acks, load := startFoLoaded(ctx)
		consumers := []*foConsumer{startFoConsumer(ctx, "a", c, c.brokers)}
		acks.waitAcked(ctx, 1000, 60*time.Second)

		zombieSent := map[string]bool{} // every value sent to a fenced zombie
		var (
			takeovers  []time.Duration
			moved      []int
			inflight   []string // answers to produces sent just before SIGSTOP
			rejections = map[string]int{}
			regained   []foRegainedAck
			// what the zombie served to fetches after SIGCONT, checked
			// against the final log like a consumer's reads
			zombieServed  = &foConsumer{name: "raw fetches from the zombie", at: map[tp]map[int64]string{}}
			zombieFetches = map[string]int{}
		)
		for round := range foRounds {
			hot := c.parts[round%len(c.parts)]
			owners, ctrl := c.agree(ctx, c.brokers, 30*time.Second)
			zid := owners[hot].leader
			zombie := c.byID(zid)
			survivors := without(c.brokers, zombie)

			// A client that talks to the zombie alone, its produce
			// connection opened by a produce the zombie still owns.
			zcl, closeZcl := foRoundClient(zombie, kgo.WithLogger(nil), kgo.RequestTimeoutOverhead(60*time.Second))
			warm := <-foRawProduce(ctx, zcl, hot, fmt.Sprintf("W%02d", round))
			Expect(warm.err).NotTo(HaveOccurred(), "produce to the owner before the pause")
			Expect(warm.code).To(BeZero(), "produce to the owner before the pause: %v", warm)
			acks.add(hot, warm.offset, warm.value)

			By(fmt.Sprintf("round %d: SIGSTOP broker %d, owner of %v at epoch %d (controller %d)", round+1, zid, hot, owners[hot].epoch, ctrl))
			// One produce races the stop: the zombie may or may not have
			// read it before it stopped.
			racing := foRawProduce(ctx, zcl, hot, fmt.Sprintf("R%02d", round))
			pausedAt := time.Now()
			zombie.Pause()
			foWaitStopped(ctx, zombie.Pid())
			// These reach a stopped process: it reads them only after
			// SIGCONT, when a higher epoch has fenced it.
			var fenced []<-chan foRawResult
			send := func(v string) {
				zombieSent[v] = true
				fenced = append(fenced, foRawProduce(ctx, zcl, hot, v))
			}
			send(fmt.Sprintf("Z%02d-stopped", round))

			after, _ := c.agree(ctx, survivors, 30*time.Second)
			moved = append(moved, expectOnlyVictimMoved(owners, after, zid))
			newOwner := after[hot]

			// A produce through the new owner is acknowledged (a fresh
			// client: the load's connections to the zombie hang).
			pcl, closePcl := foRoundClient(survivors[0], foProducerOpts(brokerAddrs(survivors))...)
			v := fmt.Sprintf("N%02d", round)
			r, err := pcl.ProduceSync(ctx, &kgo.Record{Topic: hot.topic, Partition: hot.partition, Value: []byte(v)}).First()
			Expect(err).NotTo(HaveOccurred(), "produce through the new owner %d", newOwner.leader)
			takeovers = append(takeovers, time.Since(pausedAt))
			acks.add(hot, r.Offset, v)
			closePcl()

			send(fmt.Sprintf("Z%02d-fenced", round))
			By(fmt.Sprintf("round %d: broker %d took over %v at epoch %d; SIGCONT broker %d", round+1, newOwner.leader, hot, newOwner.epoch, zid))
			zombie.Resume()
			// Sent right after SIGCONT: the zombie reads it within
			// milliseconds, long before a controller round can give the
			// partition back to it (at a still higher epoch). Should this
			// machine stall the spec that long, an ack is then legitimate;
			// it is accepted only if the record is stored at its offset
			// under a leader epoch above the one that fenced the zombie.
			resumed := foRawProduce(ctx, zcl, hot, fmt.Sprintf("Z%02d-resumed", round))
			// And what does it serve, racing those produces and after them?
			reads := []<-chan foFetchResult{foRawFetch(ctx, zcl, hot, c.ids[hot.topic], warm.offset)}

			answer := func(ch <-chan foRawResult) foRawResult {
				var res foRawResult
				Eventually(ch).WithContext(ctx).WithTimeout(70 * time.Second).Should(Receive(&res))
				fmt.Fprintf(GinkgoWriter, "round %d: zombie %d answered %v\n", round+1, zid, res)
				return res
			}
			rejected := func(res foRawResult) {
				GinkgoHelper()
				Expect(res.err).NotTo(HaveOccurred(), "the zombie did not answer")
				Expect(res.code).NotTo(BeZero(), "fenced zombie %d acknowledged %s at offset %d", zid, res.value, res.offset)
				Expect(kerr.IsRetriable(kerr.ErrorForCode(res.code))).To(BeTrue(), "zombie answered %v, not a retriable error", res)
				rejections[foErrName(res.code)]++
			}
			for _, ch := range fenced {
				rejected(answer(ch))
			}
			if res := answer(resumed); res.err == nil && res.code == 0 {
				regained = append(regained, foRegainedAck{hot, res.offset, res.value, zid, newOwner.epoch})
				acks.add(hot, res.offset, res.value)
			} else {
				zombieSent[res.value] = true
				rejected(res)
			}
			reads = append(reads, foRawFetch(ctx, zcl, hot, c.ids[hot.topic], warm.offset))
			for _, ch := range reads {
				var fr foFetchResult
				Eventually(ch).WithContext(ctx).WithTimeout(70 * time.Second).Should(Receive(&fr))
				what := fmt.Sprintf("%d records", len(fr.recs))
				switch {
				case fr.err != nil:
					what = "request failed: " + fr.err.Error()
				case fr.code != 0:
					what = foErrName(fr.code)
				}
				fmt.Fprintf(GinkgoWriter, "round %d: fetch from zombie %d at offset %d: %s\n", round+1, zid, warm.offset, what)
				zombieFetches[what]++
				for off, v := range fr.recs {
					zombieServed.add(hot, off, v)
				}
			}
			var res foRawResult
			Eventually(racing).WithContext(ctx).WithTimeout(70 * time.Second).Should(Receive(&res))
			inflight = append(inflight, res.String())
			switch {
			case res.err == nil && res.code == 0:
				acks.add(hot, res.offset, res.value) // acknowledged before the stop
			case res.err == nil:
				Expect(kerr.IsRetriable(kerr.ErrorForCode(res.code))).To(BeTrue(), "zombie answered %v, not a retriable error", res)
			}
			closeZcl()

			rejoined, _ := c.agree(ctx, c.brokers, 30*time.Second)
			expectNoEpochWentBack(after, rejoined)
			for _, fc := range consumers {
				fc.expectSane()
			}
		}

		By("stopping the load and reading everything back")
		load.finish(ctx)
		Expect(load.failed.Load()).To(BeZero(), "load produces failed")
		final := foReadAll(ctx, c)
		total := foVerifyLog(final, acks, zombieSent, append(consumers, zombieServed)...)
		for _, r := range regained {
			Expect(final[r.k][r.offset].epoch).To(BeNumerically(">", r.fencedAt),
				"%s, acknowledged by broker %d after SIGCONT at %v offset %d, was written under leader epoch %d, not above the epoch %d that fenced it",
				r.value, r.broker, r.k, r.offset, final[r.k][r.offset].epoch, r.fencedAt)
		}
		for _, fc := range consumers {
			fc.expectSane()
			fc.expectNoDataLoss()
		}

		p50, p99 := foPercentile(takeovers, 0.50), foPercentile(takeovers, 0.99)
		AddReportEntry("SIGSTOP → first ack by the new owner (lease included)", fmt.Sprintf("p50 %v, p99 %v: %s",
			p50.Round(time.Millisecond), p99.Round(time.Millisecond), foDurations(takeovers)))
		AddReportEntry("partitions moved per SIGSTOP", fmt.Sprintf("%v", moved))
		AddReportEntry("zombie answers", fmt.Sprintf("%v; acknowledged after regaining the partition: %d", rejections, len(regained)))
		AddReportEntry("answers to produces racing the SIGSTOP", strings.Join(inflight, "\n"))
		AddReportEntry("fetches from the zombie after SIGCONT", fmt.Sprintf("%v", zombieFetches))
		summary := fmt.Sprintf("ZOMBIE takeover p50=%v p99=%v rounds=%d zombie-produces=%d rejected=%v regained=%d records=%d acked=%d runtime=%v",
			p50.Round(time.Millisecond), p99.Round(time.Millisecond), foRounds, len(zombieSent), rejections, len(regained), total, acks.acked(),
			time.Since(started).Round(time.Second))
		fmt.Fprintln(GinkgoWriter, summary)
		fmt.Fprintln(os.Stdout, summary)
	}, SpecTimeout(12*time.Minute))
})

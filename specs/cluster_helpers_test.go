package specs

// Helpers shared by the specs that run several brokers on one volume (the
// cluster, failover, controller, rolling-restart and zones specs): who the
// brokers are, what they answer and agree on, which partitions moved, a
// ledger of what producers were told with the producer that keeps one, and
// reading partitions back from their start.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/engine/cluster"
)

// ---------------------------------------------------------------------------
// Brokers and what they answer

// tp is one partition of one topic.
type tp struct {
	topic     string
	partition int32
}

// ownership is a partition's leader and leader epoch as one broker answers.
type ownership struct {
	leader, epoch int32
}

// clusterMetadata asks exactly broker b (not whichever broker a client
// picks) for the metadata of topics: the broker IDs it lists and each
// partition's leader and epoch (leader -1 where it has none), and the
// controller it names.
func clusterMetadata(ctx context.Context, b *Broker, topics []string) ([]int32, map[tp]ownership, int32, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.WithLogger(nil))
	if err != nil {
		return nil, nil, -1, err
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	resp, err := req.RequestWith(rctx, cl.SeedBrokers()[0])
	if err != nil {
		return nil, nil, -1, err
	}
	var ids []int32
	for _, br := range resp.Brokers {
		ids = append(ids, br.NodeID)
	}
	out := map[tp]ownership{}
	for _, t := range resp.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return ids, nil, -1, fmt.Errorf("topic %v: %w", t.Topic, err)
		}
		for _, p := range t.Partitions {
			o := ownership{leader: p.Leader, epoch: p.LeaderEpoch}
			if kerr.ErrorForCode(p.ErrorCode) != nil {
				o.leader = -1
			}
			out[tp{*t.Topic, p.Partition}] = o
		}
	}
	return ids, out, resp.ControllerID, nil
}

// brokerIDs returns the IDs of bs, in order.
func brokerIDs(bs []*Broker) []int32 {
	var out []int32
	for _, b := range bs {
		out = append(out, int32(b.ID))
	}
	return out
}

// brokerAddrs returns the addresses of bs, in order, to seed a client with.
func brokerAddrs(bs []*Broker) []string {
	var out []string
	for _, b := range bs {
		out = append(out, b.Addr)
	}
	return out
}

// without returns bs without victim: the brokers that survive it.
func without(bs []*Broker, victim *Broker) []*Broker {
	var out []*Broker
	for _, b := range bs {
		if b != victim {
			out = append(out, b)
		}
	}
	return out
}

// distinctFreeAddrs returns n different free 127.0.0.1 addresses.
func distinctFreeAddrs(n int) []string {
	GinkgoHelper()
	var out []string
	for len(out) < n {
		if a := freeAddr(); !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// withListenAddr makes a broker listen on (and advertise) addrs[i], one of
// addresses chosen beforehand so that clients can be seeded with brokers
// not yet started. Its admin address is picked again if it is one of them
// (a port freeAddr returned once can come back).
func withListenAddr(addrs []string, i int) BrokerOpt {
	return func(b *Broker) {
		b.Addr = addrs[i]
		for slices.Contains(addrs, b.AdminAddr) {
			b.AdminAddr = freeAddr()
		}
	}
}

// topicIDStrings returns the topic IDs of topics, as the engine and the
// assignment file spell them.
func topicIDStrings(ctx context.Context, adm *kadm.Client, topics ...string) map[string]string {
	GinkgoHelper()
	md, err := adm.Metadata(ctx, topics...)
	Expect(err).NotTo(HaveOccurred())
	out := map[string]string{}
	for _, t := range topics {
		td, ok := md.Topics[t]
		Expect(ok).To(BeTrue(), "topic %s in metadata", t)
		Expect(td.ID).NotTo(BeZero(), "topic %s has no topic ID in metadata", t)
		out[t] = uuid.UUID(td.ID).String()
	}
	return out
}

// agreement is what brokersAgree waits for beyond its defaults.
type agreement struct {
	topicIDs map[string]string // rendezvousOwners
	polling  time.Duration
}

// agreeOpt adjusts what brokersAgree waits for.
type agreeOpt func(*agreement)

// rendezvousOwners makes brokersAgree also wait until every partition's
// owner is the one rendezvous hashing (cluster.Assign) picks among the
// brokers it is given, with the topic IDs of topicIDStrings: the assignment
// has settled on this membership (brokers list a new member a controller
// round before the assignment catches up).
func rendezvousOwners(topicIDs map[string]string) agreeOpt {
	return func(a *agreement) { a.topicIDs = topicIDs }
}

// agreePolling sets how often brokersAgree asks every broker (50ms unless
// set).
func agreePolling(d time.Duration) agreeOpt {
	return func(a *agreement) { a.polling = d }
}

// brokersAgree waits until every broker in bs lists exactly the brokers of
// bs, names the same controller (one of them), and the same owner (one of
// them) and leader epoch for every one of the partitions of topics. It
// returns the controller and the ownership.
func brokersAgree(ctx context.Context, bs []*Broker, topics []string, partitions int, within time.Duration, opts ...agreeOpt) (int32, map[tp]ownership) {
	GinkgoHelper()
	a := agreement{polling: 50 * time.Millisecond}
	for _, o := range opts {
		o(&a)
	}
	want := brokerIDs(bs)
	var live []cluster.LiveBroker
	for _, id := range want {
		live = append(live, cluster.LiveBroker{ID: id})
	}
	var (
		got  map[tp]ownership
		ctrl int32
	)
	Eventually(func(g Gomega) {
		got, ctrl = nil, -1
		for i, b := range bs {
			ids, owners, c, err := clusterMetadata(ctx, b, topics)
			g.Expect(err).NotTo(HaveOccurred(), "metadata from broker %d", b.ID)
			g.Expect(ids).To(ConsistOf(want), "brokers listed by broker %d", b.ID)
			g.Expect(owners).To(HaveLen(partitions), "partitions listed by broker %d", b.ID)
			for k, o := range owners {
				if a.topicIDs != nil {
					g.Expect(o.leader).To(Equal(cluster.Assign(a.topicIDs[k.topic], k.partition, live, "")),
						"owner of %v as broker %d answers (rendezvous owner among %v)", k, b.ID, want)
				} else {
					g.Expect(want).To(ContainElement(o.leader), "leader of %v as broker %d answers", k, b.ID)
				}
			}
			g.Expect(want).To(ContainElement(c), "controller named by broker %d", b.ID)
			if i == 0 {
				got, ctrl = owners, c
				continue
			}
			g.Expect(c).To(Equal(ctrl), "broker %d names another controller", b.ID)
			g.Expect(owners).To(Equal(got), "broker %d disagrees on owners", b.ID)
		}
	}).WithContext(ctx).WithTimeout(within).WithPolling(a.polling).Should(Succeed())
	return ctrl, got
}

// expectOnlyVictimMoved checks that exactly the partitions victim owned in
// before moved in after, each to another broker under a higher leader
// epoch, and returns how many moved.
func expectOnlyVictimMoved(before, after map[tp]ownership, victim int32) int {
	GinkgoHelper()
	moved := 0
	for k, o := range before {
		n := after[k]
		if o.leader == victim {
			moved++
			Expect(n.leader).NotTo(Equal(victim), "%v still owned by broker %d", k, victim)
			Expect(n.epoch).To(BeNumerically(">", o.epoch), "%v moved without a higher epoch", k)
		} else {
			Expect(n).To(Equal(o), "%v moved although its owner %d lives", k, o.leader)
		}
	}
	return moved
}

// expectNoEpochWentBack checks that no partition's leader epoch in later
// is below the one in earlier.
func expectNoEpochWentBack(earlier, later map[tp]ownership) {
	GinkgoHelper()
	for k, o := range later {
		Expect(o.epoch).To(BeNumerically(">=", earlier[k].epoch), "%v went back in epochs", k)
	}
}

// ---------------------------------------------------------------------------
// Reading partitions back

// fromStart assigns, for kgo.ConsumePartitions, every partition of topics
// (each with partitions partitions) from its start.
func fromStart(topics []string, partitions int32) map[string]map[int32]kgo.Offset {
	assign := map[string]map[int32]kgo.Offset{}
	for _, t := range topics {
		assign[t] = map[int32]kgo.Offset{}
		for p := range partitions {
			assign[t][p] = kgo.NewOffset().AtStart()
		}
	}
	return assign
}

// readFromStart polls cl, a consumer of partitions assigned from their
// start, until it has read every partition k of ends up to ends[k] (the
// offset after the last record wanted), within. It hands every record to
// each, in offset order, and fails the spec at once should a partition's
// offsets go backwards.
func readFromStart(ctx context.Context, cl *kgo.Client, ends map[tp]int64, within time.Duration, each func(*kgo.Record)) {
	GinkgoHelper()
	next := map[tp]int64{}
	Eventually(func(g Gomega) {
		fctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		cl.PollFetches(fctx).EachRecord(func(r *kgo.Record) {
			k := tp{r.Topic, r.Partition}
			Expect(r.Offset).To(BeNumerically(">=", next[k]), "%v went backwards: offset %d after %d", k, r.Offset, next[k]-1)
			next[k] = r.Offset + 1
			each(r)
		})
		for k, end := range ends {
			g.Expect(next[k]).To(BeNumerically(">=", end), "%v read up to %d of %d", k, next[k], end)
		}
	}).WithContext(ctx).WithTimeout(within).WithPolling(10 * time.Millisecond).Should(Succeed())
}

// ---------------------------------------------------------------------------
// What producers were told

// ledgerAck is one acknowledged record.
type ledgerAck struct {
	value  string
	offset int64
	at     time.Time
}

// ackLedger records every acknowledged record: per partition in the order
// the acknowledgements came, and by offset.
type ackLedger struct {
	mu           sync.Mutex
	acks         map[tp][]ledgerAck
	at           map[tp]map[int64]string
	inconsistent []string // two different values acknowledged at one offset
	n            atomic.Int64
}

func newAckLedger() *ackLedger {
	return &ackLedger{acks: map[tp][]ledgerAck{}, at: map[tp]map[int64]string{}}
}

// add records that value was acknowledged at offset of k.
func (l *ackLedger) add(k tp, offset int64, value string) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.at[k]
	if m == nil {
		m = map[int64]string{}
		l.at[k] = m
	}
	if old, ok := m[offset]; ok && old != value {
		l.inconsistent = append(l.inconsistent, fmt.Sprintf("%v offset %d acknowledged for %s and %s", k, offset, old, value))
	}
	m[offset] = value
	l.acks[k] = append(l.acks[k], ledgerAck{value, offset, now})
	l.n.Add(1)
}

// acked returns how many records were acknowledged.
func (l *ackLedger) acked() int64 { return l.n.Load() }

// waitAcked waits until at least n records are acknowledged in all.
func (l *ackLedger) waitAcked(ctx context.Context, n int64, within time.Duration) {
	GinkgoHelper()
	Eventually(l.acked).WithContext(ctx).WithTimeout(within).WithPolling(10*time.Millisecond).
		Should(BeNumerically(">=", n), "acknowledged records")
}

// waitMore waits until at least n more records than now are acknowledged.
func (l *ackLedger) waitMore(ctx context.Context, n int64, within time.Duration) {
	GinkgoHelper()
	l.waitAcked(ctx, l.acked()+n, within)
}

// ends returns, for every partition with an acknowledged record, the
// offset after the highest one acknowledged.
func (l *ackLedger) ends() map[tp]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	ends := map[tp]int64{}
	for k, as := range l.acks {
		for _, a := range as {
			ends[k] = max(ends[k], a.offset+1)
		}
	}
	return ends
}

// longestGap returns the longest time between consecutive acknowledgements
// of one partition that overlaps [from, to] (up to to if the partition has
// none after), and the partition.
func (l *ackLedger) longestGap(from, to time.Time) (time.Duration, tp) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var worst time.Duration
	var at tp
	for k, as := range l.acks {
		prev := time.Time{}
		for _, a := range as {
			if !prev.IsZero() && a.at.After(from) && prev.Before(to) {
				if g := a.at.Sub(prev); g > worst {
					worst, at = g, k
				}
			}
			prev = a.at
		}
		if !prev.IsZero() && prev.Before(to) {
			if g := to.Sub(prev); g > worst {
				worst, at = g, k
			}
		}
	}
	return worst, at
}

// logCheck is how a log read back compares with an ackLedger.
type logCheck struct {
	records      int
	copies       map[string]int // how many times each value is stored
	lost         []string       // acknowledged, and neither at its offset nor anywhere
	moved        []string       // acknowledged at an offset that holds another value
	dups         []string       // values stored more than once
	unacked      []string       // stored, never acknowledged
	inconsistent []string       // two different values acknowledged at one offset
}

// check compares stored, the value a read found at each offset of each
// partition, with what was acknowledged.
func (l *ackLedger) check(stored map[tp]map[int64]string) logCheck {
	c := logCheck{copies: map[string]int{}}
	for _, m := range stored {
		for _, v := range m {
			c.copies[v]++
			c.records++
		}
	}
	for v, n := range c.copies {
		if n > 1 {
			c.dups = append(c.dups, fmt.Sprintf("%s ×%d", v, n))
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	acked := map[string]bool{}
	for k, as := range l.acks {
		for _, a := range as {
			acked[a.value] = true
			got, ok := stored[k][a.offset]
			switch {
			case !ok && c.copies[a.value] == 0:
				c.lost = append(c.lost, fmt.Sprintf("%s acknowledged at %v offset %d", a.value, k, a.offset))
			case got != a.value:
				c.moved = append(c.moved, fmt.Sprintf("%s acknowledged at %v offset %d, which holds %q", a.value, k, a.offset, got))
			}
		}
	}
	for k, m := range stored {
		for off, v := range m {
			if !acked[v] {
				c.unacked = append(c.unacked, fmt.Sprintf("%s at %v offset %d", v, k, off))
			}
		}
	}
	c.inconsistent = slices.Clone(l.inconsistent)
	return c
}

// waitPending waits until every record counted in pending is acknowledged
// or failed.
func waitPending(ctx context.Context, pending *sync.WaitGroup, within time.Duration) {
	GinkgoHelper()
	done := make(chan struct{})
	go func() { pending.Wait(); close(done) }()
	Eventually(done).WithContext(ctx).WithTimeout(within).Should(BeClosed(), "records still unacknowledged")
}

// ---------------------------------------------------------------------------
// An idempotent acks=all producer that keeps a ledger of what was
// acknowledged, and what every client error was.

// clientErrorLog is a kgo.Logger that classifies every error the client
// logs, including those it retries and never surfaces to a produce
// callback: retriable Kafka errors, connection errors, and the rest
// (unexpected). It also counts as unexpected the messages with which
// franz-go resets an idempotent producer (a broken sequence).
type clientErrorLog struct {
	mu         sync.Mutex
	counts     map[string]int // "class: error" -> count
	unexpected []string
}

func newClientErrorLog() *clientErrorLog { return &clientErrorLog{counts: map[string]int{}} }

func (c *clientErrorLog) Level() kgo.LogLevel { return kgo.LogLevelDebug }

func (c *clientErrorLog) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	if level == kgo.LogLevelError {
		fmt.Fprintf(GinkgoWriter, "[kgo %s] %s %v\n", level, msg, keyvals)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if level == kgo.LogLevelError || strings.Contains(msg, "failing the producer ID") ||
		strings.Contains(msg, "unexpected duplicate sequence") {
		c.unexpected = append(c.unexpected, fmt.Sprintf("%s: %s %v", level, msg, keyvals))
	}
	for i := 0; i+1 < len(keyvals); i += 2 {
		if k, _ := keyvals[i].(string); k != "err" {
			continue
		}
		err, ok := keyvals[i+1].(error)
		if !ok || err == nil {
			continue
		}
		class := classifyClientError(err)
		c.counts[class+": "+err.Error()]++
		if class == "unexpected" {
			c.unexpected = append(c.unexpected, fmt.Sprintf("%s (%s) %v", msg, err, keyvals))
		}
	}
}

// summary returns the error counts by class and the unexpected ones.
func (c *clientErrorLog) summary() (byClass map[string]int, unexpected []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	byClass = map[string]int{}
	for k, n := range c.counts {
		class, _, _ := strings.Cut(k, ":")
		byClass[class] += n
	}
	return byClass, slices.Clone(c.unexpected)
}

// distinct returns the distinct errors seen, with counts, most frequent
// first, at most n.
func (c *clientErrorLog) distinct(n int) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for k, v := range c.counts {
		out = append(out, fmt.Sprintf("%6d× %s", v, k))
	}
	sort.Sort(sort.Reverse(sort.StringSlice(out)))
	if len(out) > n {
		out = out[:n]
	}
	return out
}

// classifyClientError says what kind of error a client saw: "retriable"
// (a Kafka error code the protocol marks retriable), "connection" (the
// broker went away or refused), "canceled", or "unexpected".
func classifyClientError(err error) string {
	switch {
	case errors.Is(err, context.Canceled):
		return "canceled"
	case kerr.IsRetriable(err):
		return "retriable"
	case kgo.IsRetryableBrokerErr(err):
		return "connection"
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return "connection"
	}
	// franz-go's own, for a request whose broker died or left the
	// metadata while it waited: it re-routes them.
	if m := err.Error(); strings.Contains(m, "broker") && (strings.Contains(m, "died") || strings.Contains(m, "dead") ||
		strings.Contains(m, "unknown broker") || strings.Contains(m, "no longer exists")) {
		return "connection"
	}
	return "unexpected"
}

// ledgerProducer produces a steady stream of unique values round-robin over
// every partition of its topics, with an idempotent acks=all producer, and
// records each acknowledgement (value, offset, time) in its ackLedger, each
// error a produce callback got, and in errs each error the client logged.
type ledgerProducer struct {
	*ackLedger
	topics     []string
	partitions int32
	errs       *clientErrorLog

	failMu  sync.Mutex
	failed  []string // errors surfaced to produce callbacks
	stop    atomic.Bool
	loop    chan struct{}
	pending sync.WaitGroup
}

// startLedgerProducer starts producing to every partition of topics (each
// with partitions partitions) through seeds (brokers may be down or not yet
// started); opts adjust the client. The client is closed at cleanup; call
// finish before verifying.
func startLedgerProducer(ctx context.Context, seeds []string, topics []string, partitions int32, opts ...kgo.Opt) *ledgerProducer {
	GinkgoHelper()
	l := &ledgerProducer{ackLedger: newAckLedger(), topics: topics, partitions: partitions,
		errs: newClientErrorLog(), loop: make(chan struct{})}
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(seeds...),
		kgo.ClientID("kaas-specs-ledger"),
		kgo.WithLogger(l.errs),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordDeliveryTimeout(90 * time.Second),
		kgo.ProducerLinger(2 * time.Millisecond),
		kgo.MaxBufferedRecords(1000),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.MetadataMinAge(250 * time.Millisecond),
	}, opts...)...)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(cl.Close)
	go func() {
		defer GinkgoRecover()
		defer close(l.loop)
		n := len(topics) * int(partitions)
		for seq := 0; !l.stop.Load() && ctx.Err() == nil; seq++ {
			i := seq % n
			r := &kgo.Record{Topic: topics[i%len(topics)], Partition: int32(i / len(topics)),
				Value: fmt.Appendf(nil, "v%09d", seq)}
			l.pending.Add(1)
			cl.Produce(ctx, r, func(r *kgo.Record, err error) {
				defer l.pending.Done()
				if err != nil {
					l.failMu.Lock()
					l.failed = append(l.failed, fmt.Sprintf("%s/%d %s: %v", r.Topic, r.Partition, r.Value, err))
					l.failMu.Unlock()
					return
				}
				l.add(tp{r.Topic, r.Partition}, r.Offset, string(r.Value))
			})
			if seq%50 == 49 {
				time.Sleep(5 * time.Millisecond)
			}
		}
	}()
	return l
}

// failures returns the errors produce callbacks got.
func (l *ledgerProducer) failures() []string {
	l.failMu.Lock()
	defer l.failMu.Unlock()
	return slices.Clone(l.failed)
}

// finish stops producing and waits until every record produced is
// acknowledged or failed.
func (l *ledgerProducer) finish(ctx context.Context) {
	GinkgoHelper()
	l.stop.Store(true)
	Eventually(l.loop).WithContext(ctx).WithTimeout(30 * time.Second).Should(BeClosed())
	waitPending(ctx, &l.pending, 120*time.Second)
}

// verify reads every partition from the start through seeds, within, and
// checks that every acknowledged record is stored exactly at its
// acknowledged offset, that no value is stored twice, and that offsets
// never go backwards. It returns what it read.
func (l *ledgerProducer) verify(ctx context.Context, seeds []string, within time.Duration) map[tp][]*kgo.Record {
	GinkgoHelper()
	consumer, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumePartitions(fromStart(l.topics, l.partitions)),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.WithLogger(nil))
	Expect(err).NotTo(HaveOccurred())
	defer consumer.Close()
	got := map[tp][]*kgo.Record{}
	stored := map[tp]map[int64]string{}
	readFromStart(ctx, consumer, l.ends(), within, func(r *kgo.Record) {
		k := tp{r.Topic, r.Partition}
		got[k] = append(got[k], r)
		if stored[k] == nil {
			stored[k] = map[int64]string{}
		}
		stored[k][r.Offset] = string(r.Value)
	})
	c := l.check(stored)
	Expect(append(c.lost, c.moved...)).To(BeEmpty(), "acknowledged records not where they were acknowledged")
	Expect(c.dups).To(BeEmpty(), "records stored more than once")
	return got
}

package specs

// Consumer groups: four clients' group consumers resume exactly after their
// last commit; members that keep leaving and rejoining never share a
// partition within a generation; and committed offsets survive the group
// coordinator's SIGKILL without going back.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/IBM/sarama"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const groupPartitions = 6

// groupRun consumes topic as group until it has seen want distinct values
// (or, for kcat, until every partition's end), commits synchronously, leaves
// the group and returns every value it consumed.
type groupRun func(ctx context.Context, b *Broker, group, topic string, want int) []string

// collect reads values from next until want distinct ones arrived, within
// 30 s, and returns all it read.
func collect(ctx context.Context, want int, next func(context.Context) (string, error)) []string {
	GinkgoHelper()
	var got []string
	distinct := map[string]bool{}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for len(distinct) < want {
		v, err := next(cctx)
		Expect(err).NotTo(HaveOccurred(), "consuming after %d of %d distinct values", len(distinct), want)
		got = append(got, v)
		distinct[v] = true
	}
	return got
}

func runFranzGroup(ctx context.Context, b *Broker, group, topic string, want int) []string {
	GinkgoHelper()
	return runFranzGroupWith(ctx, clientOpts(b), group, topic, want)
}

// runFranzGroupWith consumes topic as a franz-go member of group, through a
// client made with opts, until it has want distinct values; it commits
// and leaves.
func runFranzGroupWith(ctx context.Context, opts []kgo.Opt, group, topic string, want int) []string {
	GinkgoHelper()
	cl, err := kgo.NewClient(append(opts,
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.SessionTimeout(groupSession), kgo.HeartbeatInterval(groupHeartbeat),
		kgo.FetchMaxWait(200*time.Millisecond))...)
	Expect(err).NotTo(HaveOccurred())
	defer cl.Close()
	var buf []string
	got := collect(ctx, want, func(ctx context.Context) (string, error) {
		for len(buf) == 0 {
			fs := cl.PollFetches(ctx)
			if err := fs.Err0(); err != nil {
				return "", err
			}
			fs.EachRecord(func(r *kgo.Record) { buf = append(buf, string(r.Value)) })
		}
		v := buf[0]
		buf = buf[1:]
		return v, nil
	})
	got = append(got, buf...)
	Expect(cl.CommitUncommittedOffsets(ctx)).To(Succeed(), "franz-go CommitUncommittedOffsets")
	cl.Close() // leaves the group
	return got
}

// saramaHandler hands every message to got and marks it once handed.
type saramaHandler struct {
	got chan<- string
}

func (saramaHandler) Setup(sarama.ConsumerGroupSession) error { return nil }

// Cleanup runs after every ConsumeClaim returned and before the session's
// offsets are released: the synchronous commit of what was marked.
func (saramaHandler) Cleanup(s sarama.ConsumerGroupSession) error {
	s.Commit()
	return nil
}

func (h saramaHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for {
		select {
		case m, ok := <-c.Messages():
			if !ok {
				return nil
			}
			select {
			case h.got <- string(m.Value):
				s.MarkMessage(m, "")
			case <-s.Context().Done():
				return nil
			}
		case <-s.Context().Done():
			return nil
		}
	}
}

func runSaramaGroup(ctx context.Context, b *Broker, group, topic string, want int) []string {
	GinkgoHelper()
	cfg := sarama.NewConfig()
	cfg.ClientID = "kaas-specs-sarama"
	cfg.Version = sarama.V2_1_0_0
	cfg.Consumer.Return.Errors = true
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	cfg.Consumer.Group.Session.Timeout = groupSession
	cfg.Consumer.Group.Heartbeat.Interval = groupHeartbeat
	cfg.Consumer.MaxWaitTime = 200 * time.Millisecond
	Expect(cfg.Validate()).To(Succeed())
	cg, err := sarama.NewConsumerGroup([]string{b.Addr}, group, cfg)
	Expect(err).NotTo(HaveOccurred())
	defer cg.Close()

	var (
		errMu sync.Mutex
		errs  []string
	)
	go func() {
		for err := range cg.Errors() {
			errMu.Lock()
			errs = append(errs, err.Error())
			errMu.Unlock()
		}
	}()
	got := make(chan string)
	cctx, cancel := context.WithCancel(ctx)
	consumed := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(consumed)
		for cctx.Err() == nil {
			if err := cg.Consume(cctx, []string{topic}, saramaHandler{got: got}); err != nil && cctx.Err() == nil {
				fmt.Fprintf(GinkgoWriter, "[sarama] Consume: %v\n", err)
				time.Sleep(100 * time.Millisecond)
			}
		}
	}()
	vals := collect(ctx, want, func(ctx context.Context) (string, error) {
		select {
		case v := <-got:
			return v, nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	})
	cancel() // ends the session: Cleanup commits
	Eventually(consumed).WithTimeout(30 * time.Second).Should(BeClosed())
	Expect(cg.Close()).To(Succeed())
	errMu.Lock()
	defer errMu.Unlock()
	Expect(errs).To(BeEmpty(), "sarama consumer group errors (commits included)")
	return vals
}

func runKafkaGoGroup(ctx context.Context, b *Broker, group, topic string, want int) []string {
	GinkgoHelper()
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers:           []string{b.Addr},
		GroupID:           group,
		Topic:             topic,
		StartOffset:       kafka.FirstOffset,
		CommitInterval:    0, // CommitMessages commits synchronously
		SessionTimeout:    groupSession,
		HeartbeatInterval: groupHeartbeat,
		RebalanceTimeout:  10 * time.Second,
		JoinGroupBackoff:  200 * time.Millisecond,
		MaxWait:           200 * time.Millisecond,
		ErrorLogger: kafka.LoggerFunc(func(format string, args ...any) {
			fmt.Fprintf(GinkgoWriter, "[kafka-go] "+format+"\n", args...)
		}),
	})
	defer r.Close()
	var msgs []kafka.Message
	vals := collect(ctx, want, func(ctx context.Context) (string, error) {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			return "", err
		}
		msgs = append(msgs, m)
		return string(m.Value), nil
	})
	Expect(r.CommitMessages(ctx, msgs...)).To(Succeed(), "kafka-go CommitMessages")
	Expect(r.Close()).To(Succeed()) // leaves the group
	return vals
}

// runKcatGroup runs librdkafka's balanced consumer (kcat -G) until every
// assigned partition reaches its end (-e); it auto-commits every 100 ms and
// commits what it consumed when it closes.
func runKcatGroup(ctx context.Context, b *Broker, group, topic string, _ int) []string {
	GinkgoHelper()
	// No -o: in -G mode kcat seeks every assigned partition to it,
	// committed offset or not. Where there is none, start at the beginning.
	out := runKcat(ctx, nil, "-b", b.Addr, "-G", group, "-e", "-q", "-f", `%s\n`,
		"-X", "auto.offset.reset=earliest",
		"-X", "enable.auto.commit=true", "-X", "auto.commit.interval.ms=100",
		"-X", "session.timeout.ms=6000", "-X", "heartbeat.interval.ms=500",
		topic)
	return strings.Fields(out)
}

// kaasctlGroup is the part of `kaasctl groups describe -o json` the spec reads.
type kaasctlGroup struct {
	State      string `json:"state"`
	Partitions []struct {
		Topic     string `json:"topic"`
		Partition int32  `json:"partition"`
		Committed int64  `json:"committed"`
		LogEnd    int64  `json:"logEnd"`
		Lag       int64  `json:"lag"`
	} `json:"partitions"`
}

// expectKaasctlLagZero runs the built kaasctl against the broker and checks
// that the group is listed and every partition of topic has lag 0.
func expectKaasctlLagZero(ctx context.Context, b *Broker, group, topic string) {
	GinkgoHelper()
	list, err := Kaasctl(ctx, "groups", "list", "--bootstrap", b.Addr)
	Expect(err).NotTo(HaveOccurred())
	Expect(list).To(ContainSubstring(group), "kaasctl groups list:\n%s", list)
	table, err := Kaasctl(ctx, "groups", "describe", group, "--bootstrap", b.Addr)
	Expect(err).NotTo(HaveOccurred())
	fmt.Fprintf(GinkgoWriter, "kaasctl groups describe %s:\n%s", group, table)
	Expect(table).To(ContainSubstring("LAG"))
	out, err := Kaasctl(ctx, "groups", "describe", group, "--bootstrap", b.Addr, "-o", "json")
	Expect(err).NotTo(HaveOccurred())
	var g kaasctlGroup
	Expect(json.NewDecoder(bytes.NewReader([]byte(out))).Decode(&g)).To(Succeed(), "kaasctl json:\n%s", out)
	Expect(g.Partitions).To(HaveLen(groupPartitions), "kaasctl json:\n%s", out)
	for _, p := range g.Partitions {
		Expect(p.Topic).To(Equal(topic))
		Expect(p.Lag).To(BeZero(), "lag of partition %d (committed %d, log end %d)", p.Partition, p.Committed, p.LogEnd)
	}
}

var _ = Describe("consumer groups", Label("groups"), func() {
	DescribeTable("a group consumer resumes exactly after its last commit",
		func(ctx SpecContext, run groupRun, checkKaasctl bool) {
			b := StartBroker(GinkgoT().TempDir(), withGroupFlags())
			adm := NewAdmin(b)
			topic, group := UniqueName("groups"), UniqueName("group")
			CreateTopic(ctx, adm, topic, groupPartitions)
			produceValues(ctx, b, topic, groupPartitions, 0, 600)

			By("consuming the 600 records as a new group, committing, leaving")
			expectExactlyOnce(run(ctx, b, group, topic, 600), groupValues(0, 600))
			expectCommittedAtEnd(ctx, adm, group, topic)
			if checkKaasctl {
				expectKaasctlLagZero(ctx, b, group, topic)
			}

			produceValues(ctx, b, topic, groupPartitions, 600, 900)
			By("restarting the group: it sees exactly the 300 new records")
			expectExactlyOnce(run(ctx, b, group, topic, 300), groupValues(600, 900))
			expectCommittedAtEnd(ctx, adm, group, topic)
		},
		Entry("franz-go (kgo.ConsumerGroup, CommitUncommittedOffsets)", runFranzGroup, true, SpecTimeout(2*time.Minute)),
		Entry("sarama (ConsumerGroup, MarkMessage + Commit)", runSaramaGroup, false, SpecTimeout(2*time.Minute)),
		Entry("segmentio/kafka-go (Reader with GroupID, CommitMessages)", runKafkaGoGroup, false, SpecTimeout(2*time.Minute)),
		Entry("librdkafka (kcat -G, auto commit, commit on close)", runKcatGroup, false, SpecTimeout(2*time.Minute)),
	)

	It("gives each partition to one member per generation while three members leave and rejoin under load", func(ctx SpecContext) {
		const (
			members = 3
			cycles  = 3
		)
		b := StartBroker(GinkgoT().TempDir(), withGroupFlags())
		adm := NewAdmin(b)
		topic, group := UniqueName("churn"), UniqueName("churn")
		CreateTopic(ctx, adm, topic, groupPartitions)
		prod := startPacedProducer(ctx, []string{b.Addr}, topic, groupPartitions, 10*time.Millisecond)

		rec := newGroupRecorder()
		seeds := []string{b.Addr}
		slots := make([]*groupMember, members)
		for i := range slots {
			slots[i] = startGroupMember(ctx, seeds, group, topic, i, rec, 100*time.Millisecond)
		}
		By("each member leaving and rejoining 3 times over ~20 s, one every 2 s")
		for k := range cycles * members {
			time.Sleep(2 * time.Second)
			i := k % members
			slots[i].leave(ctx)
			time.Sleep(500 * time.Millisecond)
			slots[i] = startGroupMember(ctx, seeds, group, topic, i, rec, 100*time.Millisecond)
		}
		time.Sleep(2 * time.Second)
		prod.finish(ctx)
		ends, err := topicEnds(ctx, adm, topic)
		Expect(err).NotTo(HaveOccurred())

		By("waiting until the group has consumed and committed everything")
		Eventually(func(g Gomega) {
			got, err := committed(ctx, adm, group, topic)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(ends))
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
		leaveAll(ctx, slots)
		Expect(rec.uncovered(group, topic, ends)).To(BeEmpty(), "produced records no member consumed")
		Expect(prod.failures()).To(BeEmpty(), "produce errors")

		events, commits := rec.snapshot()
		gens := checkGenerations(events, commits, group)
		fmt.Fprintf(GinkgoWriter, "churn: %d generations, %d acknowledged partition commits, %d records, commit errors %v\n",
			gens, len(commits), prod.acked(), rec.commitErrs)
		// A rejoin may fall into the rebalance its own leave started.
		Expect(gens).To(BeNumerically(">=", cycles*members), "every leave is a rebalance")
		expectCommittedAtEnd(ctx, adm, group, topic)
	}, SpecTimeout(3*time.Minute))

	It("never loses or rewinds a committed offset while the group coordinator is SIGKILLed three times", Label("cluster"), func(ctx SpecContext) {
		const (
			groups  = 3
			members = 6
			kills   = 3
		)
		dirs := SharedDataDirs(3)
		var brokers []*Broker
		for i, d := range dirs {
			brokers = append(brokers, StartBroker(d, WithBrokerID(i+1), withGroupFlags()))
		}
		seeds := brokerAddrs(brokers)
		adm := kadm.NewClient(NewClient(brokers[0], kgo.SeedBrokers(seeds...)))
		topic := UniqueName("coordkill")
		CreateTopic(ctx, adm, topic, groupPartitions)
		prod := startPacedProducer(ctx, seeds, topic, groupPartitions, 10*time.Millisecond)

		rec := newGroupRecorder()
		var names []string
		var all []*groupMember
		for g := range groups {
			name := UniqueName(fmt.Sprintf("coordkill%d", g))
			names = append(names, name)
			for i := range members {
				all = append(all, startGroupMember(ctx, seeds, name, topic, i, rec, 100*time.Millisecond))
			}
		}
		By("waiting until every group has committed every partition")
		Eventually(func(g Gomega) {
			for _, name := range names {
				g.Expect(rec.acked(name)).To(HaveLen(groupPartitions), "group %s", name)
			}
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())

		poller := startCommitPoller(ctx, adm, rec, names, topic)

		var failovers []time.Duration
		for round := range kills {
			var coords kadm.FindCoordinatorResponses
			Eventually(func(g Gomega) {
				coords = adm.FindGroupCoordinators(ctx, names...)
				for _, name := range names {
					g.Expect(coords[name].Err).NotTo(HaveOccurred(), "FindCoordinator %s", name)
				}
			}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
			var victim *Broker
			var dying []string
			for _, name := range names {
				c := coords[name]
				if victim == nil {
					for _, b := range brokers {
						if int32(b.ID) == c.NodeID {
							victim = b
						}
					}
				}
				if victim != nil && c.NodeID == int32(victim.ID) {
					dying = append(dying, name)
				}
			}
			Expect(victim).NotTo(BeNil(), "no broker coordinates a group: %v", coords)
			By(fmt.Sprintf("round %d: SIGKILL broker %d, coordinator of %v", round+1, victim.ID, dying))
			killedAt := time.Now()
			victim.Kill9()
			exited := time.Now()
			Eventually(func() bool { return firstCommitAfter(rec, dying, exited) != nil }).
				WithContext(ctx).WithTimeout(30*time.Second).Should(BeTrue(), "a group whose coordinator died commits again")
			fo := firstCommitAfter(rec, dying, exited).Sub(killedAt)
			failovers = append(failovers, fo)
			fmt.Fprintf(GinkgoWriter, "round %d: coordinator failover (SIGKILL → first acknowledged OffsetCommit of %v): %v\n", round+1, dying, fo)
			time.Sleep(max(0, 4*time.Second-time.Since(killedAt)))
			victim.Restart()
			if round < kills-1 {
				time.Sleep(max(0, 20*time.Second-time.Since(killedAt)))
			}
		}
		time.Sleep(5 * time.Second)
		prod.finish(ctx)
		ends, err := topicEnds(ctx, adm, topic)
		Expect(err).NotTo(HaveOccurred())
		By("waiting until every group has consumed and committed everything")
		Eventually(func(g Gomega) {
			for _, name := range names {
				got, err := committed(ctx, adm, name, topic)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(got).To(Equal(ends), "group %s", name)
			}
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
		poller.finish()
		leaveAll(ctx, all)

		for _, name := range names {
			Expect(rec.uncovered(name, topic, ends)).To(BeEmpty(), "group %s: produced records no member consumed", name)
			expectCommittedAtEnd(ctx, adm, name, topic)
		}
		Expect(poller.problems()).To(BeEmpty(), "committed offsets went back")
		events, commits := rec.snapshot()
		for _, name := range names {
			checkGenerations(events, commits, name)
		}
		rebalances := rebalanceTimes(events)
		raw := durations(rebalances)
		for i, r := range rebalances {
			rebalances[i].back = poller.coordinatorBack(r.group, r.from, r.to)
		}
		rb := durations(rebalances)
		bound := groupSession + 2*time.Second + 250*time.Millisecond // session + lease + controller round
		fmt.Fprintf(GinkgoWriter, "coordinator failover: %v (max %v); rebalances (revoke/loss → assignment, from the coordinator serving again): %d, p50 %v, max %v (revoke/loss → assignment including the coordinator's outage: max %v); offset polls %d (%d failed); commit errors %v\n",
			failovers, slices.Max(failovers), len(rb), percentile(rb, 50), percentile(rb, 100), percentile(raw, 100), poller.polls.Load(), poller.failed.Load(), rec.commitErrs)
		fmt.Fprintf(GinkgoWriter, "failed offset polls by error: %v\n", poller.errs)
		AddReportEntry("coordinator failover", failovers)
		AddReportEntry("rebalance p50/max", []time.Duration{percentile(rb, 50), percentile(rb, 100)})
		Expect(slowRebalances(rebalances, events, bound)).To(BeEmpty(), "rebalances slower than %v", bound)
		Expect(prod.failures()).To(BeEmpty(), "produce errors")
	}, SpecTimeout(5*time.Minute))
})

// firstCommitAfter returns the time of the first commit of one of groups
// acknowledged after t, or nil.
func firstCommitAfter(rec *groupRecorder, groups []string, t time.Time) *time.Time {
	_, commits := rec.snapshot()
	for _, c := range commits {
		if c.at.After(t) && slices.Contains(groups, c.group) {
			return &c.at
		}
	}
	return nil
}

// commitPoller fetches every group's committed offsets every 200 ms and
// notes every partition whose committed offset went back between polls or
// is below a commit acknowledged before the poll began. It also keeps when
// each group's offsets could not be fetched: its coordinator was not
// serving then.
type commitPoller struct {
	stop   chan struct{}
	done   chan struct{}
	polls  atomic.Int64
	failed atomic.Int64
	mu     sync.Mutex
	probs  []string
	down   map[string][]time.Time // per group, when failed polls began
	errs   map[string]int         // failed polls by error
}

func startCommitPoller(ctx context.Context, adm *kadm.Client, rec *groupRecorder, groups []string, topic string) *commitPoller {
	p := &commitPoller{stop: make(chan struct{}), done: make(chan struct{}), down: map[string][]time.Time{}, errs: map[string]int{}}
	last := map[string]map[int32]int64{}
	go func() {
		defer GinkgoRecover()
		defer close(p.done)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			for _, g := range groups {
				floor := rec.acked(g)
				began := time.Now()
				fctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				got, err := committed(fctx, adm, g, topic)
				cancel()
				p.polls.Add(1)
				if err != nil {
					p.failed.Add(1) // the coordinator may be down: not a regression
					p.mu.Lock()
					p.down[g] = append(p.down[g], began)
					p.errs[err.Error()]++
					p.mu.Unlock()
					continue
				}
				if last[g] == nil {
					last[g] = map[int32]int64{}
				}
				for part, off := range got {
					if prev, ok := last[g][part]; ok && off < prev {
						p.note("group %s partition %d: committed offset %d after %d", g, part, off, prev)
					}
					if f, ok := floor[part]; ok && off < f {
						p.note("group %s partition %d: committed offset %d below %d acknowledged before the poll", g, part, off, f)
					}
					last[g][part] = max(last[g][part], off)
				}
				for part, f := range floor {
					if _, ok := got[part]; !ok {
						p.note("group %s partition %d: no committed offset, %d was acknowledged", g, part, f)
					}
				}
			}
		}
	}()
	return p
}

// coordinatorBack returns when group's coordinator was last seen not
// serving between from and to (the start of the last failed poll there),
// or from if it served throughout: a rebalance cannot complete before its
// group has a coordinator again, so it is timed from then.
func (p *commitPoller) coordinatorBack(group string, from, to time.Time) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	back := from
	for _, t := range p.down[group] {
		if t.After(back) && t.Before(to) {
			back = t
		}
	}
	return back
}

func (p *commitPoller) note(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.probs) < 20 {
		p.probs = append(p.probs, fmt.Sprintf(format, args...))
	}
}

func (p *commitPoller) problems() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.probs)
}

func (p *commitPoller) finish() {
	close(p.stop)
	<-p.done
}

// pacedProducer produces one record to each partition of a topic every
// interval (far less than ledgerProducer, so that many members keep up on
// a small machine) and records each acknowledgement.
type pacedProducer struct {
	*ackLedger
	stop    atomic.Bool
	loop    chan struct{}
	pending sync.WaitGroup
	mu      sync.Mutex
	failed  []string
}

func startPacedProducer(ctx context.Context, seeds []string, topic string, partitions int32, every time.Duration) *pacedProducer {
	GinkgoHelper()
	p := &pacedProducer{ackLedger: newAckLedger(), loop: make(chan struct{})}
	cl, err := kgo.NewClient(append(foProducerOpts(seeds), kgo.WithLogger(nil))...)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(cl.Close)
	go func() {
		defer GinkgoRecover()
		defer close(p.loop)
		t := time.NewTicker(every)
		defer t.Stop()
		for seq := 0; !p.stop.Load() && ctx.Err() == nil; {
			for part := range partitions {
				r := &kgo.Record{Topic: topic, Partition: part, Value: []byte(groupValue(seq))}
				seq++
				p.pending.Add(1)
				cl.Produce(ctx, r, func(r *kgo.Record, err error) {
					defer p.pending.Done()
					if err != nil {
						p.mu.Lock()
						p.failed = append(p.failed, fmt.Sprintf("%s/%d: %v", r.Topic, r.Partition, err))
						p.mu.Unlock()
						return
					}
					p.add(tp{r.Topic, r.Partition}, r.Offset, string(r.Value))
				})
			}
			select {
			case <-t.C:
			case <-ctx.Done():
			}
		}
	}()
	return p
}

// finish stops producing and waits for every record to be acknowledged or failed.
func (p *pacedProducer) finish(ctx context.Context) {
	GinkgoHelper()
	p.stop.Store(true)
	Eventually(p.loop).WithContext(ctx).WithTimeout(10 * time.Second).Should(BeClosed())
	waitPending(ctx, &p.pending, 90*time.Second)
}

func (p *pacedProducer) failures() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.failed)
}

package specs

// A stateful stream job the way goka (Go stream processing) runs one, on
// franz-go, against a three-broker cluster whose cleaners compact its
// group table while a broker that owns a table partition is SIGKILLed and
// the job is restarted from its changelog.
//
// goka's conventions, copied: a processor group G consumes input stream
// topics as a consumer group named G and keeps its state in the group
// table, the topic "G-table", co-partitioned with the input (event of
// input partition p updates the table partition p). Its topic manager
// creates a stream with sarama's ClusterAdmin.CreateTopic, TopicDetail
// {NumPartitions: n, ReplicationFactor: 2, ConfigEntries:
// {cleanup.policy: delete, retention.ms: 3600000}} and a table the same
// way with {cleanup.policy: compact}. A processor instance that is given
// a partition first recovers that partition's table from the start to its
// high watermark (latest value per key), then processes input events: a
// read-modify-write of the key's value, written to the table, and the
// input offset is committed only after the table write is acknowledged.
//
// goka is at-least-once: after a crash the input is replayed from the last
// commit, though the table already holds the writes of the replayed
// events. So that the counts come out exact, the value carries the input
// offset it last applied, and the processor skips an input whose offset is
// at or below it (key k always comes from one input partition).

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

const (
	gokaPartitions = 6
	gokaKeys       = 200
	gokaEvents     = 5000
)

// gokaCreateTopic creates topic as goka's topic manager does: one
// ClusterAdmin.CreateTopic through sarama (at the version goka's default
// config names) with npar partitions, replication factor rfactor and
// config, then waits until the topic's partitions are listed.
func gokaCreateTopic(seeds []string, topic string, npar, rfactor int, config map[string]string) {
	GinkgoHelper()
	By(fmt.Sprintf("creating %s as goka's topic manager does: %d partitions, replication factor %d, %v", topic, npar, rfactor, config))
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_0_0_0
	client, err := sarama.NewClient(seeds, cfg)
	Expect(err).NotTo(HaveOccurred())
	defer client.Close()
	admin, err := sarama.NewClusterAdminFromClient(client)
	Expect(err).NotTo(HaveOccurred())
	detail := &sarama.TopicDetail{NumPartitions: int32(npar), ReplicationFactor: int16(rfactor),
		ConfigEntries: map[string]*string{}}
	for k, v := range config {
		detail.ConfigEntries[k] = &v
	}
	Expect(admin.CreateTopic(topic, detail, false)).To(Succeed(), "CreateTopic %s", topic)
	Eventually(func(g Gomega) {
		g.Expect(client.RefreshMetadata(topic)).To(Succeed())
		ps, err := client.Partitions(topic)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ps).To(HaveLen(npar))
		for _, p := range ps {
			_, err := client.Leader(topic, p)
			g.Expect(err).NotTo(HaveOccurred(), "leader of partition %d", p)
		}
	}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
}

// fnv32a is the hash of sarama's default partitioner, which goka's
// emitters use.
func fnv32a(b []byte) uint32 {
	h := fnv.New32a()
	_, _ = h.Write(b)
	return h.Sum32()
}

// tableValue is one key's value in the group table: the count, and the
// input offset it last applied.
type tableValue struct {
	count, offset int64
}

func (v tableValue) encode() []byte { return fmt.Appendf(nil, "%d@%d", v.count, v.offset) }

func decodeTableValue(b []byte) (tableValue, error) {
	c, o, ok := strings.Cut(string(b), "@")
	count, err1 := strconv.ParseInt(c, 10, 64)
	offset, err2 := strconv.ParseInt(o, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return tableValue{}, fmt.Errorf("table value %q", b)
	}
	return tableValue{count, offset}, nil
}

// tablePartition is one partition of the table as read from its start.
type tablePartition struct {
	values map[string]tableValue // the latest value of each key
	read   int64                 // records read
	hwm    int64                 // the high watermark read up to
}

// readTablePartition reads partition p of table from its start to its
// high watermark (as goka recovers a table partition) through seeds, with
// a client of its own.
func readTablePartition(ctx context.Context, seeds []string, table string, p int32) (tablePartition, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.WithLogger(nil), kgo.FetchMaxWait(200*time.Millisecond),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{table: {p: kgo.NewOffset().AtStart()}}))
	if err != nil {
		return tablePartition{}, err
	}
	defer cl.Close()
	ends, err := topicEnds(ctx, kadm.NewClient(cl), table)
	if err != nil {
		return tablePartition{}, err
	}
	tbl := tablePartition{values: map[string]tableValue{}, hwm: ends[p]}
	next := int64(0)
	deadline := time.Now().Add(60 * time.Second)
	for next < tbl.hwm {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return tbl, fmt.Errorf("table %s/%d read up to %d of %d (%v)", table, p, next, tbl.hwm, ctx.Err())
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		var bad error
		fs.EachRecord(func(r *kgo.Record) {
			v, err := decodeTableValue(r.Value)
			if r.Offset < next {
				err = fmt.Errorf("table %s/%d went backwards: offset %d after %d", table, p, r.Offset, next-1)
			}
			if err != nil {
				bad = err
			}
			next = r.Offset + 1
			tbl.read++
			tbl.values[string(r.Key)] = v
		})
		if bad != nil {
			return tbl, bad
		}
	}
	return tbl, nil
}

// gokaProcessor is one instance of the counting job, as one process of it
// would be: its own group consumer of the input, its own idempotent
// producer of the table, state recovered from the table.
type gokaProcessor struct {
	name                string
	seeds               []string
	group, input, table string

	consumer, producer *kgo.Client
	cancel             context.CancelFunc
	done               chan struct{}
	crash              atomic.Bool // stop committing, and exit after crashBatches more batches
	stopOnce           sync.Once

	mu    sync.Mutex
	state map[int32]map[string]tableValue // recovered partitions

	applied, skipped, writes, commits, recovered atomic.Int64
	errMu                                        sync.Mutex
	errs                                         []string
}

func (p *gokaProcessor) fail(format string, args ...any) {
	msg := fmt.Sprintf(p.name+": "+format, args...)
	fmt.Fprintln(GinkgoWriter, msg)
	p.errMu.Lock()
	p.errs = append(p.errs, msg)
	p.errMu.Unlock()
}

func (p *gokaProcessor) errors() []string {
	p.errMu.Lock()
	defer p.errMu.Unlock()
	return append([]string(nil), p.errs...)
}

// startGokaProcessor starts an instance of the job.
func startGokaProcessor(ctx context.Context, name string, seeds []string, group, input, table string) *gokaProcessor {
	GinkgoHelper()
	p := &gokaProcessor{name: name, seeds: seeds, group: group, input: input, table: table,
		done: make(chan struct{}), state: map[int32]map[string]tableValue{}}
	forget := func(_ context.Context, _ *kgo.Client, gone map[string][]int32) {
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, part := range gone[input] {
			delete(p.state, part)
		}
	}
	logger := kgo.BasicLogger(GinkgoWriter, kgo.LogLevelWarn, func() string { return "[kgo " + name + "] " })
	var err error
	p.consumer, err = kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ClientID(name), kgo.WithLogger(logger),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(input),
		// goka's CopartitioningStrategy: every member gets the same
		// partitions of each input, eagerly.
		kgo.Balancers(kgo.RangeBalancer()),
		// Streams start from the oldest offset here (goka's default is
		// the newest): the input may be produced before the group first
		// joins.
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsRevoked(forget), kgo.OnPartitionsLost(forget),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.MetadataMinAge(250*time.Millisecond))
	Expect(err).NotTo(HaveOccurred())
	p.producer, err = kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ClientID(name), kgo.WithLogger(logger),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordRetries(1<<20), kgo.RecordDeliveryTimeout(60*time.Second),
		kgo.ProducerLinger(2*time.Millisecond), kgo.MetadataMinAge(250*time.Millisecond))
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(p.stop)
	pctx, cancel := context.WithCancel(ctx)
	p.cancel = cancel
	go p.run(pctx)
	return p
}

// run is the instance's poll loop: process a batch, write the table,
// commit the batch's offsets.
func (p *gokaProcessor) run(ctx context.Context) {
	defer GinkgoRecover()
	defer close(p.done)
	uncommitted := 0
	for ctx.Err() == nil {
		fs := p.consumer.PollRecords(ctx, 500)
		fs.EachError(func(t string, part int32, err error) {
			if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				fmt.Fprintf(GinkgoWriter, "%s: fetch %s/%d: %v\n", p.name, t, part, err)
			}
		})
		recs := fs.Records()
		if len(recs) > 0 {
			if err := p.process(ctx, recs); err != nil {
				// goka's processor stops on an error; this one's
				// replacement recovers from the table.
				p.fail("%v", err)
				p.consumer.AllowRebalance()
				return
			}
			switch {
			case p.crash.Load():
				if uncommitted++; uncommitted == crashBatches {
					p.consumer.AllowRebalance()
					return
				}
			case p.consumer.CommitRecords(ctx, recs...) == nil:
				p.commits.Add(1)
			default:
				fmt.Fprintf(GinkgoWriter, "%s: a commit failed (the next commit covers it)\n", p.name)
			}
		}
		p.consumer.AllowRebalance()
	}
}

// process applies recs, recovering the table partition of each input
// partition not yet recovered, and waits until every table write is
// acknowledged.
func (p *gokaProcessor) process(ctx context.Context, recs []*kgo.Record) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var (
		wg     sync.WaitGroup
		errMu  sync.Mutex
		errOut error
	)
	for _, r := range recs {
		st := p.state[r.Partition]
		if st == nil {
			tbl, err := readTablePartition(ctx, p.seeds, p.table, r.Partition)
			if err != nil {
				return fmt.Errorf("recovering table partition %d: %w", r.Partition, err)
			}
			st = tbl.values
			p.state[r.Partition] = st
			p.recovered.Add(1)
			fmt.Fprintf(GinkgoWriter, "%s: recovered table partition %d: %d keys from %d records below %d\n",
				p.name, r.Partition, len(st), tbl.read, tbl.hwm)
		}
		key := string(r.Key)
		v := st[key]
		if r.Offset <= v.offset && v.count > 0 {
			p.skipped.Add(1) // a replay of an event the table holds
			continue
		}
		v = tableValue{count: v.count + 1, offset: r.Offset}
		st[key] = v
		p.applied.Add(1)
		wg.Add(1)
		p.producer.Produce(ctx, &kgo.Record{Topic: p.table, Partition: r.Partition, Key: r.Key, Value: v.encode()},
			func(tr *kgo.Record, err error) {
				defer wg.Done()
				if err != nil {
					errMu.Lock()
					errOut = fmt.Errorf("table write %s/%d %s: %w", tr.Topic, tr.Partition, tr.Key, err)
					errMu.Unlock()
					return
				}
				p.writes.Add(1)
			})
	}
	wg.Wait()
	return errOut
}

// stop ends the loop and closes the clients; the consumer leaves the group
// without committing.
func (p *gokaProcessor) stop() {
	p.stopOnce.Do(func() {
		p.cancel()
		select {
		case <-p.done:
		case <-time.After(90 * time.Second):
			p.fail("poll loop did not end")
		}
		p.consumer.Close()
		p.producer.Close()
	})
}

// crashBatches is how many batches an instance told to crash still writes
// to the table without committing them.
const crashBatches = 20

// crashAfterWrite makes the instance die as a killed process would after
// table writes whose input offsets it has not committed (crashBatches
// batches), so its replacement gets events the table already applied.
func (p *gokaProcessor) crashAfterWrite(ctx context.Context) {
	GinkgoHelper()
	p.crash.Store(true)
	Eventually(p.done).WithContext(ctx).WithTimeout(90*time.Second).Should(BeClosed(), "%s did not reach its crash point", p.name)
	p.stop()
}

func (p *gokaProcessor) summary() string {
	return fmt.Sprintf("%s: %d events applied, %d replays skipped, %d table writes, %d commits, %d partitions recovered",
		p.name, p.applied.Load(), p.skipped.Load(), p.writes.Load(), p.commits.Load(), p.recovered.Load())
}

// gokaEmitter produces n events over keys, round the keys at random, with
// an idempotent acks=all producer partitioning by key as goka's emitter
// does, and counts the acknowledged events of each key: the model.
type gokaEmitter struct {
	mu     sync.Mutex
	counts map[string]int64
	failed []string
	acked  atomic.Int64
	done   chan struct{}
}

func startGokaEmitter(ctx context.Context, seeds []string, input string, n, keys int, every time.Duration) *gokaEmitter {
	GinkgoHelper()
	e := &gokaEmitter{counts: map[string]int64{}, done: make(chan struct{})}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ClientID("goka-emitter"),
		kgo.WithLogger(kgo.BasicLogger(GinkgoWriter, kgo.LogLevelWarn, func() string { return "[kgo emitter] " })),
		kgo.DefaultProduceTopic(input), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(kgo.SaramaCompatHasher(fnv32a))),
		kgo.RecordRetries(1<<20), kgo.RecordDeliveryTimeout(90*time.Second), kgo.MetadataMinAge(250*time.Millisecond))
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(cl.Close)
	go func() {
		defer GinkgoRecover()
		defer close(e.done)
		rng := rand.New(rand.NewPCG(21, 13))
		var wg sync.WaitGroup
		for i := range n {
			if ctx.Err() != nil {
				break
			}
			key := fmt.Sprintf("user-%03d", rng.IntN(keys))
			wg.Add(1)
			cl.Produce(ctx, &kgo.Record{Key: []byte(key), Value: fmt.Appendf(nil, "event-%05d", i)}, func(r *kgo.Record, err error) {
				defer wg.Done()
				e.mu.Lock()
				defer e.mu.Unlock()
				if err != nil {
					e.failed = append(e.failed, fmt.Sprintf("%s %s: %v", r.Key, r.Value, err))
					return
				}
				e.counts[key]++
				e.acked.Add(1)
			})
			if i%10 == 9 {
				time.Sleep(10 * every)
			}
		}
		wg.Wait()
	}()
	return e
}

// cleanedSegments lists the cleaned segment files of every partition of
// topic under the data directory dir.
func cleanedSegments(dir, topic string) []string {
	GinkgoHelper()
	files, err := filepath.Glob(filepath.Join(dir, "topics", topic, "*", "*-e*.c*.log"))
	Expect(err).NotTo(HaveOccurred())
	return files
}

var _ = Describe("A goka-model table processor", Label("compaction", "clients"), func() {
	It("rebuilds its compacted group table, through a broker kill and a processor restart, equal to the model", func(ctx SpecContext) {
		began := time.Now()
		brokers := startTxnBrokers(3, WithBrokerArgs(compactionArgs...), withGroupFlags())
		seeds := brokerAddrs(brokers)
		adm := txnAdmin(brokers)
		group := UniqueName("counter")
		input := UniqueName("counter-input")
		table := group + "-table"
		gokaCreateTopic(seeds, input, gokaPartitions, 2, map[string]string{
			"cleanup.policy": "delete", "retention.ms": "3600000"})
		gokaCreateTopic(seeds, table, gokaPartitions, 2, map[string]string{
			"cleanup.policy": "compact",
			// so that the cleaners have work while the job runs
			"segment.ms": "500", "segment.bytes": "16384", "min.cleanable.dirty.ratio": "0.01"})

		By(fmt.Sprintf("running instance 1 of group %s while %d events over %d keys are emitted", group, gokaEvents, gokaKeys))
		p1 := startGokaProcessor(ctx, "processor-1", seeds, group, input, table)
		emitter := startGokaEmitter(ctx, seeds, input, gokaEvents, gokaKeys, 3*time.Millisecond)
		Eventually(func() int64 { return min(emitter.acked.Load()-1500, p1.writes.Load()-500) }).
			WithContext(ctx).WithTimeout(60*time.Second).Should(BeNumerically(">=", 0), "events emitted and applied")

		var victim *Broker
		Eventually(func(g Gomega) {
			_, owners, _, err := clusterMetadata(ctx, brokers[0], []string{table})
			g.Expect(err).NotTo(HaveOccurred())
			o := owners[tp{table, 0}]
			g.Expect(o.leader).To(BeNumerically(">", 0))
			victim = txnBrokerByID(brokers, o.leader)
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		By(fmt.Sprintf("SIGKILL broker %d, owner of %s/0, at %d events emitted and %d applied", victim.ID, table, emitter.acked.Load(), p1.applied.Load()))
		victim.Kill9()
		waitCtx(ctx, 3*time.Second) // instance 1 writes through the failover
		By(fmt.Sprintf("instance 1 dies after %d batches written to the table and not committed", crashBatches))
		p1.crashAfterWrite(ctx)
		fmt.Fprintln(GinkgoWriter, p1.summary())
		victim.Restart()
		brokersAgree(ctx, brokers, []string{input, table}, 2*gokaPartitions, 60*time.Second)

		By("instance 2 recovers the table and finishes the input")
		p2 := startGokaProcessor(ctx, "processor-2", seeds, group, input, table)
		Eventually(emitter.done).WithContext(ctx).WithTimeout(120 * time.Second).Should(BeClosed())
		Expect(emitter.failed).To(BeEmpty(), "events the emitter could not send")
		Expect(emitter.acked.Load()).To(BeEquivalentTo(gokaEvents))
		ends, err := topicEnds(ctx, adm, input)
		Expect(err).NotTo(HaveOccurred())
		var inputs int64
		for _, e := range ends {
			inputs += e
		}
		Expect(inputs).To(BeEquivalentTo(gokaEvents), "records in the input stream")
		Eventually(func() bool { return groupCopied(ctx, adm, group, input, ends) }).
			WithContext(ctx).WithTimeout(90*time.Second).WithPolling(250*time.Millisecond).Should(BeTrue(),
			"group %s committed the end of %s", group, input)
		p2.stop()
		fmt.Fprintln(GinkgoWriter, p2.summary())
		Expect(p2.errors()).To(BeEmpty(), "errors of instance 2")
		Expect(p2.skipped.Load()).To(BeNumerically(">", 0), "instance 2 replayed no event instance 1 had applied")

		By("rebuilding the table from its compacted changelog, once the cleaners have run over it")
		model := emitter.counts
		var (
			rebuilt        map[string]int64
			written, reads int64
		)
		Eventually(func(g Gomega) {
			rebuilt, written, reads = map[string]int64{}, 0, 0
			for part := range int32(gokaPartitions) {
				tbl, err := readTablePartition(ctx, seeds, table, part)
				g.Expect(err).NotTo(HaveOccurred())
				written += tbl.hwm
				reads += tbl.read
				for k, v := range tbl.values {
					g.Expect(rebuilt).NotTo(HaveKey(k), "key %s in two table partitions", k)
					rebuilt[k] = v.count
				}
			}
			g.Expect(len(cleanedSegments(brokers[0].Dir, table)) > 0 || written > reads).To(BeTrue(),
				"no cleaned segment in the table's partitions and all %d records still there", written)
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(time.Second).Should(Succeed())
		Expect(rebuilt).To(Equal(model), "table rebuilt from the changelog against the model's per-key counts")
		fmt.Fprintf(GinkgoWriter, "table %s: %d records written, %d left after compaction (%d removed), %d cleaned segment files; %d keys; took %v\n",
			table, written, reads, written-reads, len(cleanedSegments(brokers[0].Dir, table)), len(rebuilt), time.Since(began).Round(time.Second))
	}, SpecTimeout(5*time.Minute))
})

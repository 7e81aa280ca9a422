package specs

// Helpers of the idempotence and transaction specs (idempotence_test.go,
// txn_test.go): a cluster of brokers on one volume, librdkafka (kcat) as a
// paced idempotent producer with its delivery reports, a log of every
// InitProducerId answer with its checks, the transaction coordinator of a
// transactional ID, and a consume-transform-produce copier written twice
// (franz-go's GroupTransactSession, sarama's transactional producer) with
// a ledger of how every transaction ended and a reader of the output at
// either isolation level.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ---------------------------------------------------------------------------
// Brokers

// startTxnBrokers starts n brokers (IDs 1..n) on one shared volume, each
// with opts, and returns them in ID order.
func startTxnBrokers(n int, opts ...BrokerOpt) []*Broker {
	GinkgoHelper()
	var bs []*Broker
	for i, d := range SharedDataDirs(n) {
		bs = append(bs, StartBroker(d, append([]BrokerOpt{WithBrokerID(i + 1)}, opts...)...))
	}
	return bs
}

// txnBrokerByID returns the broker of bs with ID id.
func txnBrokerByID(bs []*Broker, id int32) *Broker {
	GinkgoHelper()
	for _, b := range bs {
		if int32(b.ID) == id {
			return b
		}
	}
	Fail(fmt.Sprintf("no broker %d among %v", id, brokerIDs(bs)))
	return nil
}

// txnAdmin returns a kadm client seeded with every broker of bs.
func txnAdmin(bs []*Broker) *kadm.Client {
	GinkgoHelper()
	return kadm.NewClient(NewClient(bs[0], kgo.SeedBrokers(brokerAddrs(bs)...)))
}

// startPacedLedger is startLedgerProducer at a steady pace: every every,
// one record to each partition of topic (idempotent, acks=all), each
// acknowledgement in the ledger, each error the client logs classified.
func startPacedLedger(ctx context.Context, seeds []string, topic string, partitions int32, every time.Duration) *ledgerProducer {
	GinkgoHelper()
	l := &ledgerProducer{ackLedger: newAckLedger(), topics: []string{topic}, partitions: partitions,
		errs: newClientErrorLog(), loop: make(chan struct{})}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(seeds...),
		kgo.ClientID("kaas-specs-paced-ledger"),
		kgo.WithLogger(l.errs),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordDeliveryTimeout(90*time.Second),
		kgo.ProducerLinger(2*time.Millisecond),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.MetadataMinAge(250*time.Millisecond),
	)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(cl.Close)
	DeferCleanup(func() { l.stop.Store(true) }) // before the client closes
	go func() {
		defer GinkgoRecover()
		defer close(l.loop)
		t := time.NewTicker(every)
		defer t.Stop()
		for seq := 0; !l.stop.Load() && ctx.Err() == nil; {
			for p := range partitions {
				r := &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "v%09d", seq)}
				seq++
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
			}
			select {
			case <-t.C:
			case <-ctx.Done():
			}
		}
	}()
	return l
}

// ---------------------------------------------------------------------------
// Transaction coordinators

// txnRetriable reports whether an InitProducerId (or other transaction
// request) error code is one a transactional client retries: the
// coordinator is moving, loading, or still ending the previous
// transaction.
func txnRetriable(code int16) bool {
	switch code {
	case kerr.CoordinatorNotAvailable.Code, kerr.NotCoordinator.Code,
		kerr.CoordinatorLoadInProgress.Code, kerr.ConcurrentTransactions.Code:
		return true
	}
	return false
}

// findTxnCoordinator asks (through cl, any broker) for the transaction
// coordinator of txnID: FindCoordinator with key type 1. It returns the
// coordinator's node ID, or the error code the broker answered, or the
// request's error.
func findTxnCoordinator(ctx context.Context, cl *kgo.Client, txnID string) (int32, int16, error) {
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorType = 1
	req.CoordinatorKey = txnID
	req.CoordinatorKeys = []string{txnID}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	kresp, err := cl.Request(rctx, req)
	if err != nil {
		return -1, 0, err
	}
	resp := kresp.(*kmsg.FindCoordinatorResponse)
	if len(resp.Coordinators) > 0 { // v4
		c := resp.Coordinators[0]
		return c.NodeID, c.ErrorCode, nil
	}
	return resp.NodeID, resp.ErrorCode, nil
}

// txnCoordinatorBroker waits (within) until some broker names txnID's
// transaction coordinator and returns it.
func txnCoordinatorBroker(ctx context.Context, cl *kgo.Client, bs []*Broker, txnID string, within time.Duration) *Broker {
	GinkgoHelper()
	var node int32 = -1
	Eventually(func(g Gomega) {
		n, code, err := findTxnCoordinator(ctx, cl, txnID)
		g.Expect(err).NotTo(HaveOccurred(), "FindCoordinator(transaction, %s)", txnID)
		g.Expect(code).To(BeZero(), "FindCoordinator(transaction, %s): %s", txnID, foErrName(code))
		node = n
	}).WithContext(ctx).WithTimeout(within).WithPolling(100 * time.Millisecond).Should(Succeed())
	return txnBrokerByID(bs, node)
}

// ---------------------------------------------------------------------------
// InitProducerId answers

// pidAnswer is one successful InitProducerId answer.
type pidAnswer struct {
	who    string // "" for an idempotent producer, else the transactional ID
	caller int    // which caller asked (the answers of one caller are in order)
	id     int64
	epoch  int16
	broker int32 // who answered (-1: unknown)
}

// pidLog keeps every successful InitProducerId answer, in the order each
// caller got them, and every error.
type pidLog struct {
	mu         sync.Mutex
	answers    []pidAnswer
	perWho     map[string]int // answers per transactional ID ("" idempotent)
	perBroker  map[int32]int
	errs       map[string]int // "class: error" → count
	unexpected []string
}

func newPIDLog() *pidLog {
	return &pidLog{perWho: map[string]int{}, perBroker: map[int32]int{}, errs: map[string]int{}}
}

func (l *pidLog) add(a pidAnswer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.answers = append(l.answers, a)
	l.perWho[a.who]++
	l.perBroker[a.broker]++
}

// failed records an error: retriable ones (a code txnRetriable accepts, a
// connection error) are counted, anything else is unexpected.
func (l *pidLog) failed(who string, code int16, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	kind := "idempotent"
	if who != "" {
		kind = "transactional " + who
	}
	switch {
	case err != nil:
		class := classifyClientError(err)
		if class == "connection" {
			l.errs["connection (broker down or restarting)"]++
			break
		}
		l.errs[class+": "+err.Error()]++
		if class == "unexpected" && !errors.Is(err, context.DeadlineExceeded) {
			l.unexpected = append(l.unexpected, fmt.Sprintf("%s: %v", kind, err))
		}
	case txnRetriable(code):
		l.errs["retriable: "+foErrName(code)]++
	default:
		l.errs["unexpected: "+foErrName(code)]++
		if len(l.unexpected) < 50 {
			l.unexpected = append(l.unexpected, fmt.Sprintf("%s: %s", kind, foErrName(code)))
		}
	}
}

// counts returns how many answers each transactional ID ("" idempotent) got.
func (l *pidLog) counts() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for k, v := range l.perWho {
		out[k] = v
	}
	return out
}

// check returns every violation of what InitProducerId promises: no
// (producer ID, epoch) pair is ever issued twice; an idempotent producer's
// ID is issued once; a producer ID belongs to one transactional ID (and
// to no idempotent producer); and each transactional ID's answers, in the
// order its one caller got them, strictly increase the epoch or move to a
// producer ID it never had before.
func (l *pidLog) check() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var probs []string
	note := func(format string, args ...any) {
		if len(probs) < 30 {
			probs = append(probs, fmt.Sprintf(format, args...))
		}
	}
	type pair struct {
		id    int64
		epoch int16
	}
	firstPair := map[pair]pidAnswer{}
	owner := map[int64]string{} // producer ID → "" or the transactional ID
	idemSeen := map[int64]bool{}
	last := map[string]pidAnswer{}         // transactional ID → its previous answer
	retired := map[string]map[int64]bool{} // transactional ID → producer IDs it moved away from
	for _, a := range l.answers {
		p := pair{a.id, a.epoch}
		if f, ok := firstPair[p]; ok {
			note("producer ID %d epoch %d issued twice: to %q (broker %d) and to %q (broker %d)", a.id, a.epoch, f.who, f.broker, a.who, a.broker)
		} else {
			firstPair[p] = a
		}
		if o, ok := owner[a.id]; ok && o != a.who {
			note("producer ID %d issued to %q and to %q", a.id, o, a.who)
		}
		owner[a.id] = a.who
		if a.who == "" {
			if idemSeen[a.id] {
				note("idempotent producer ID %d issued twice (latest by broker %d)", a.id, a.broker)
			}
			idemSeen[a.id] = true
			if a.epoch != 0 {
				note("idempotent producer ID %d issued at epoch %d, not 0", a.id, a.epoch)
			}
			continue
		}
		prev, ok := last[a.who]
		last[a.who] = a
		if !ok {
			continue
		}
		switch {
		case a.id == prev.id && a.epoch <= prev.epoch:
			note("%s: epoch %d of producer ID %d after epoch %d (broker %d, then broker %d)", a.who, a.epoch, a.id, prev.epoch, prev.broker, a.broker)
		case a.id != prev.id:
			if retired[a.who] == nil {
				retired[a.who] = map[int64]bool{}
			}
			retired[a.who][prev.id] = true
			if retired[a.who][a.id] {
				note("%s: back to producer ID %d (epoch %d) it had moved away from", a.who, a.id, a.epoch)
			}
		}
	}
	return probs
}

// summary describes the answers and errors for the report.
func (l *pidLog) summary() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var errs []string
	for k, v := range l.errs {
		errs = append(errs, fmt.Sprintf("%d× %s", v, k))
	}
	sort.Strings(errs)
	maxEpoch := map[string]int16{}
	ids := map[string]map[int64]bool{}
	for _, a := range l.answers {
		if a.who == "" {
			continue
		}
		maxEpoch[a.who] = max(maxEpoch[a.who], a.epoch)
		if ids[a.who] == nil {
			ids[a.who] = map[int64]bool{}
		}
		ids[a.who][a.id] = true
	}
	var txns []string
	for who, e := range maxEpoch {
		txns = append(txns, fmt.Sprintf("%s: %d answers, %d producer IDs, highest epoch %d", who, l.perWho[who], len(ids[who]), e))
	}
	sort.Strings(txns)
	return fmt.Sprintf("answers %d (idempotent %d), per broker %v\ntransactional: %s\nerrors: %s",
		len(l.answers), l.perWho[""], l.perBroker, strings.Join(txns, "; "), strings.Join(errs, "; "))
}

// pidCaller is one goroutine calling InitProducerId in a loop.
type pidCaller struct {
	stop atomic.Bool
	done chan struct{}
}

func (c *pidCaller) finish() {
	c.stop.Store(true)
	<-c.done
}

// pidClient returns a franz-go client seeded with seeds, for raw requests
// only (its own retries kept short), closed at cleanup.
func pidClient(seeds []string) *kgo.Client {
	GinkgoHelper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ClientID("kaas-specs-initpid"), kgo.WithLogger(nil),
		kgo.RequestRetries(2), kgo.RetryTimeout(5*time.Second), kgo.MetadataMinAge(100*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(cl.Close)
	// Discover the brokers: Request then spreads over them, not over
	// the seed connections.
	Eventually(func() error {
		_, err := cl.Request(context.Background(), kmsg.NewPtrMetadataRequest())
		return err
	}).WithTimeout(30 * time.Second).Should(Succeed())
	return cl
}

// startIdempotentPIDCaller calls InitProducerId with no transactional ID
// (what an idempotent producer sends first: producer ID and epoch -1) as
// a raw kmsg request every few milliseconds, and logs every answer: every
// other call through the kgo client's Request (which picks any broker),
// the others at each of brokers in turn (Broker(id).Request), so that
// each one issues IDs, just restarted or not.
func startIdempotentPIDCaller(ctx context.Context, seeds []string, brokers []int32, caller int, log *pidLog) *pidCaller {
	GinkgoHelper()
	c := &pidCaller{done: make(chan struct{})}
	cl := pidClient(seeds)
	go func() {
		defer GinkgoRecover()
		defer close(c.done)
		for n := 0; !c.stop.Load() && ctx.Err() == nil; n++ {
			req := kmsg.NewPtrInitProducerIDRequest()
			req.TransactionTimeoutMillis = 60_000
			req.ProducerID, req.ProducerEpoch = -1, -1
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			var (
				kresp kmsg.Response
				err   error
				from  int32 = -1
			)
			if n%2 == 0 {
				shards := cl.RequestSharded(rctx, req)
				if len(shards) == 1 {
					kresp, err, from = shards[0].Resp, shards[0].Err, shards[0].Meta.NodeID
				} else {
					err = fmt.Errorf("%d response shards", len(shards))
				}
			} else {
				from = brokers[(n/2)%len(brokers)]
				kresp, err = cl.Broker(int(from)).Request(rctx, req)
			}
			cancel()
			switch {
			case err != nil:
				if ctx.Err() == nil && !c.stop.Load() {
					log.failed("", 0, err)
				}
				time.Sleep(20 * time.Millisecond)
			case kresp.(*kmsg.InitProducerIDResponse).ErrorCode != 0:
				log.failed("", kresp.(*kmsg.InitProducerIDResponse).ErrorCode, nil)
				time.Sleep(20 * time.Millisecond)
			default:
				resp := kresp.(*kmsg.InitProducerIDResponse)
				if from < 0 {
					from = -1 // a seed connection: the broker is not named
				}
				log.add(pidAnswer{caller: caller, id: resp.ProducerID, epoch: resp.ProducerEpoch, broker: from})
				time.Sleep(10 * time.Millisecond)
			}
		}
	}()
	return c
}

// startTransactionalPIDCaller calls InitProducerId for txnID, one call at
// a time, at the transaction coordinator that FindCoordinator (key type 1)
// names, retrying on the errors a transactional client retries
// (txnRetriable; NOT_COORDINATOR and COORDINATOR_NOT_AVAILABLE, and a
// failed connection, look the coordinator up again), and logs every
// answer.
//
// It always sends producer ID and epoch -1, as a producer starting up does:
// with its current pair (KIP-360) a retried call is answered with the pair
// the lost answer carried, legitimately issuing one pair twice. With -1 every
// answer is a new epoch (or a new producer ID once the epoch is exhausted).
func startTransactionalPIDCaller(ctx context.Context, seeds []string, caller int, txnID string, log *pidLog) *pidCaller {
	GinkgoHelper()
	c := &pidCaller{done: make(chan struct{})}
	cl := pidClient(seeds)
	go func() {
		defer GinkgoRecover()
		defer close(c.done)
		var coord int32 = -1
		backoff := func() { time.Sleep(50 * time.Millisecond) }
		for !c.stop.Load() && ctx.Err() == nil {
			if coord < 0 {
				n, code, err := findTxnCoordinator(ctx, cl, txnID)
				if err != nil || code != 0 {
					if ctx.Err() == nil && !c.stop.Load() {
						log.failed(txnID, code, err)
					}
					backoff()
					continue
				}
				coord = n
			}
			req := kmsg.NewPtrInitProducerIDRequest()
			req.TransactionalID = kmsg.StringPtr(txnID)
			req.TransactionTimeoutMillis = 60_000
			req.ProducerID, req.ProducerEpoch = -1, -1
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			kresp, err := cl.Broker(int(coord)).Request(rctx, req)
			cancel()
			if err != nil {
				if ctx.Err() == nil && !c.stop.Load() {
					log.failed(txnID, 0, err)
				}
				coord = -1
				backoff()
				continue
			}
			resp := kresp.(*kmsg.InitProducerIDResponse)
			if resp.ErrorCode != 0 {
				log.failed(txnID, resp.ErrorCode, nil)
				if resp.ErrorCode != kerr.CoordinatorLoadInProgress.Code && resp.ErrorCode != kerr.ConcurrentTransactions.Code {
					coord = -1
				}
				backoff()
				continue
			}
			log.add(pidAnswer{who: txnID, caller: caller, id: resp.ProducerID, epoch: resp.ProducerEpoch, broker: coord})
			time.Sleep(10 * time.Millisecond)
		}
	}()
	return c
}

// ---------------------------------------------------------------------------
// librdkafka (kcat) as an idempotent producer

// kcatDelivered matches the delivery report kcat prints at verbosity 3
// (-vv) for every message librdkafka reports delivered.
var kcatDelivered = regexp.MustCompile(`Message delivered to partition (-?\d+) \(offset (-?\d+)\)`)

// kcatLine is the i-th line (from 1) a kcatProducer writes.
func kcatLine(i int) string { return fmt.Sprintf("k%07d", i) }

// kcatProducer is kcat -P fed a numbered line every few milliseconds on
// stdin, producing each line as one message to one partition with
// librdkafka's idempotent producer (enable.idempotence=true, acks=all).
//
// What kcat tells about acknowledgements: for every message, librdkafka's
// delivery report callback runs once, and kcat (1.7) prints
// "Message delivered to partition P (offset O)" for a success at -vv
// (verbosity 3), or "Delivery failed for message: ..." for a failure; it
// exits 1 if any delivery failed (or on a fatal client error, which fails
// every message still queued), and 0 otherwise. A report does not say which
// line it is for. librdkafka's idempotent producer keeps a partition's
// messages in order and reports them in order, so the n-th report is the
// n-th line; the spec still checks only what holds whatever the order:
// as many reports as lines, at distinct offsets, and every line stored
// exactly once. Exit status 0 alone would not do: a fatal error raised while
// nothing was queued stops kcat reading stdin, and it exits 0 having
// produced only part of it.
type kcatProducer struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	stop  atomic.Bool
	lines atomic.Int64 // lines written to kcat's stdin

	mu        sync.Mutex
	delivered []int64  // offsets of the delivery reports, in order
	failed    int      // "Delivery failed" reports
	fatal     []string // fatal client errors
	other     []string // other stderr lines (first 200)

	fed    chan struct{} // the feeder closed stdin
	exited chan struct{}
	err    error // kcat's exit
}

// startKcatProducer starts kcat producing to partition of topic through
// seeds, fed one line every every.
func startKcatProducer(ctx context.Context, seeds []string, topic string, partition int32, every time.Duration) *kcatProducer {
	GinkgoHelper()
	args := []string{"-b", strings.Join(seeds, ","), "-P", "-t", topic, "-p", strconv.Itoa(int(partition)), "-vv",
		"-X", "enable.idempotence=true", "-X", "acks=all",
		"-X", "message.timeout.ms=90000", "-X", "linger.ms=5",
		"-X", "retry.backoff.ms=100", "-X", "topic.metadata.refresh.interval.ms=1000",
		"-X", "client.id=kaas-specs-kcat-idempotent"}
	k := &kcatProducer{fed: make(chan struct{}), exited: make(chan struct{})}
	k.cmd = exec.Command(kcatPath(), args...)
	k.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var err error
	k.stdin, err = k.cmd.StdinPipe()
	Expect(err).NotTo(HaveOccurred())
	stderr, err := k.cmd.StderrPipe()
	Expect(err).NotTo(HaveOccurred())
	fmt.Fprintf(GinkgoWriter, "$ kcat %s\n", strings.Join(args, " "))
	Expect(k.cmd.Start()).To(Succeed())
	DeferCleanup(func() {
		// On an early end: stop feeding; kill kcat (by its own pid) if it
		// is still running.
		k.stop.Store(true)
		select {
		case <-k.exited:
		case <-time.After(time.Second):
			_ = k.cmd.Process.Kill()
			<-k.exited
		}
	})

	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			k.mu.Lock()
			switch m := kcatDelivered.FindStringSubmatch(line); {
			case m != nil:
				off, _ := strconv.ParseInt(m[2], 10, 64)
				k.delivered = append(k.delivered, off)
			case strings.Contains(line, "Delivery failed"):
				k.failed++
				k.noteOther(line)
			case strings.Contains(line, "FATAL"):
				k.fatal = append(k.fatal, line)
			default:
				k.noteOther(line)
			}
			k.mu.Unlock()
		}
	}()
	go func() {
		<-read
		k.err = k.cmd.Wait()
		close(k.exited)
	}()
	go func() {
		defer close(k.fed)
		defer k.stdin.Close()
		t := time.NewTicker(every)
		defer t.Stop()
		for i := 1; !k.stop.Load() && ctx.Err() == nil; i++ {
			if _, err := io.WriteString(k.stdin, kcatLine(i)+"\n"); err != nil {
				return // kcat exited
			}
			k.lines.Store(int64(i))
			select {
			case <-t.C:
			case <-k.exited:
				return
			}
		}
	}()
	return k
}

// noteOther keeps a stderr line for the report (k.mu held).
func (k *kcatProducer) noteOther(line string) {
	if len(k.other) < 200 {
		k.other = append(k.other, line)
	}
}

// deliveredCount returns how many delivery reports were successes so far.
func (k *kcatProducer) deliveredCount() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.delivered)
}

// waitMore waits until n more messages than now are reported delivered.
func (k *kcatProducer) waitMore(ctx context.Context, n int, within time.Duration) {
	GinkgoHelper()
	base := k.deliveredCount()
	Eventually(k.deliveredCount).WithContext(ctx).WithTimeout(within).WithPolling(20*time.Millisecond).
		Should(BeNumerically(">=", base+n), "kcat delivery reports (lines written %d)", k.lines.Load())
}

// kcatOutcome is what a kcat producer run ended with.
type kcatOutcome struct {
	lines     int     // lines written to stdin
	delivered []int64 // offsets of successful delivery reports, in order
	failed    int
	fatal     []string
	other     []string
	exitErr   error
}

// finish stops feeding lines, closes stdin and waits (within) for kcat to
// deliver what it has and exit.
func (k *kcatProducer) finish(ctx context.Context, within time.Duration) kcatOutcome {
	GinkgoHelper()
	k.stop.Store(true)
	Eventually(k.fed).WithContext(ctx).WithTimeout(10 * time.Second).Should(BeClosed())
	Eventually(k.exited).WithContext(ctx).WithTimeout(within).Should(BeClosed(),
		"kcat did not exit within %v of its stdin closing (%d of %d lines reported delivered)", within, k.deliveredCount(), k.lines.Load())
	k.mu.Lock()
	defer k.mu.Unlock()
	return kcatOutcome{lines: int(k.lines.Load()), delivered: slices.Clone(k.delivered), failed: k.failed,
		fatal: slices.Clone(k.fatal), other: slices.Clone(k.other), exitErr: k.err}
}

// ---------------------------------------------------------------------------
// The copier's input and its ledger of transactions

// txnTagHeader names the transaction that wrote an output record.
const txnTagHeader = "kaas-txn"

// txnInputValue is the value of the i-th input record.
func txnInputValue(i int) string { return fmt.Sprintf("in%07d", i) }

// preloadInput produces txnInputValue(0..n-1) to topic, record i to
// partition i mod partitions, idempotent acks=all, and waits until all are
// acknowledged.
func preloadInput(ctx context.Context, seeds []string, topic string, partitions int32, n int) {
	GinkgoHelper()
	By(fmt.Sprintf("preloading %d numbered records into %s", n, topic))
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ClientID("kaas-specs-preload"), kgo.WithLogger(nil),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(20_000))
	Expect(err).NotTo(HaveOccurred())
	defer cl.Close()
	const chunk = 10_000
	for from := 0; from < n; from += chunk {
		var rs []*kgo.Record
		for i := from; i < min(from+chunk, n); i++ {
			rs = append(rs, &kgo.Record{Topic: topic, Partition: int32(i) % partitions, Value: []byte(txnInputValue(i))})
		}
		Expect(cl.ProduceSync(ctx, rs...).FirstErr()).To(Succeed(), "preloading records %d..", from)
	}
}

// txnEnd is how one of the copier's transactions ended, as the copier saw
// it.
type txnEnd int

const (
	txnCommitted  txnEnd = iota // End / CommitTxn succeeded
	txnAborted                  // aborted (a rebalance, a produce error), End / AbortTxn succeeded
	txnDeliberate               // aborted on purpose; never committed whatever the abort returned
	txnUnknown                  // ending it failed: committed or aborted, the copier cannot tell
)

// copyLedger is what a copier did: every transaction's tag, how it ended,
// and how many of its records the broker acknowledged.
type copyLedger struct {
	name     string
	mu       sync.Mutex
	n        int               // transactions begun
	ends     map[string]txnEnd // tag → how it ended
	written  map[string]int    // tag → records acknowledged
	records  map[string]int    // tag → records consumed into it
	sessions int               // producers / sessions created
	errs     []string          // errors the copier handled (first 50)
	errN     int

	committedRecs atomic.Int64 // records consumed into committed transactions
	committedTxns atomic.Int64
	started       time.Time
}

func newCopyLedger(name string) *copyLedger {
	return &copyLedger{name: name, ends: map[string]txnEnd{}, written: map[string]int{}, records: map[string]int{}, started: time.Now()}
}

// begin starts the next transaction and returns its tag, and whether it is
// one to abort on purpose (every abortEvery-th).
func (l *copyLedger) begin(abortEvery int) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n++
	return fmt.Sprintf("%s-s%d-t%d", l.name, l.sessions, l.n), abortEvery > 0 && l.n%abortEvery == 0
}

func (l *copyLedger) wrote(tag string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.written[tag]++
}

func (l *copyLedger) end(tag string, how txnEnd, records int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ends[tag] = how
	l.records[tag] = records
	if how == txnCommitted {
		l.committedRecs.Add(int64(records))
		l.committedTxns.Add(1)
	}
}

func (l *copyLedger) errorf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errN++
	msg := fmt.Sprintf(format, args...)
	if len(l.errs) < 50 {
		l.errs = append(l.errs, msg)
	}
	fmt.Fprintf(GinkgoWriter, "[%s copier] %s\n", l.name, msg)
}

func (l *copyLedger) newSession() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sessions++
}

// txnCopyFigures are the figures a copier run reports.
type txnCopyFigures struct {
	Committed, Aborted, Deliberate, Unknown int // transactions by how they ended
	Sessions                                int // sessions / producers created (1 if nothing failed)
	HandledErrors                           int
	Kills                                   int
	CopyTime                                string
	RecordsWrittenInAborts                  int // acknowledged records of aborted transactions
}

func (l *copyLedger) figures(kills int, took time.Duration) txnCopyFigures {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := txnCopyFigures{Sessions: l.sessions, HandledErrors: l.errN, Kills: kills, CopyTime: took.Round(10 * time.Millisecond).String()}
	for tag, e := range l.ends {
		switch e {
		case txnCommitted:
			f.Committed++
		case txnAborted:
			f.Aborted++
			f.RecordsWrittenInAborts += l.written[tag]
		case txnDeliberate:
			f.Deliberate++
			f.RecordsWrittenInAborts += l.written[tag]
		case txnUnknown:
			f.Unknown++
		}
	}
	return f
}

// ---------------------------------------------------------------------------
// Reading the output at an isolation level

// txnOutRecord is one data record read from the output.
type txnOutRecord struct {
	partition int32
	offset    int64
	value     string
	tag       string
}

// waitNoOpenTxns waits (within) until every partition of topic has its last
// stable offset at its high watermark: no transaction is open on it.
func waitNoOpenTxns(ctx context.Context, adm *kadm.Client, topic string, within time.Duration) map[int32]int64 {
	GinkgoHelper()
	var hwm map[int32]int64
	Eventually(func(g Gomega) {
		ends, err := adm.ListEndOffsets(ctx, topic)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ends.Error()).NotTo(HaveOccurred())
		lso, err := adm.ListCommittedOffsets(ctx, topic) // isolation level read_committed: the LSO
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(lso.Error()).NotTo(HaveOccurred())
		hwm = map[int32]int64{}
		ends.Each(func(o kadm.ListedOffset) { hwm[o.Partition] = o.Offset })
		stable := map[int32]int64{}
		lso.Each(func(o kadm.ListedOffset) { stable[o.Partition] = o.Offset })
		g.Expect(stable).To(Equal(hwm), "last stable offsets (read_committed ListOffsets) against high watermarks: a transaction is still open")
	}).WithContext(ctx).WithTimeout(within).WithPolling(200 * time.Millisecond).Should(Succeed())
	return hwm
}

// readTxnOutput reads every partition of topic from the start up to ends
// (offset after the last record) at the isolation level asked for, keeping
// control records only to see how far it has read (the last offset of a
// transactional log is a marker), and returns the data records.
func readTxnOutput(ctx context.Context, seeds []string, topic string, ends map[int32]int64, committed bool, within time.Duration) []txnOutRecord {
	GinkgoHelper()
	level := kgo.ReadUncommitted()
	if committed {
		level = kgo.ReadCommitted()
	}
	offs := map[int32]kgo.Offset{}
	for p := range ends {
		offs[p] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ClientID("kaas-specs-txn-reader"), kgo.WithLogger(nil),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}),
		kgo.FetchIsolationLevel(level), kgo.KeepControlRecords(), kgo.FetchMaxWait(100*time.Millisecond))
	Expect(err).NotTo(HaveOccurred())
	defer cl.Close()
	var out []txnOutRecord
	next := map[int32]int64{}
	Eventually(func(g Gomega) {
		fctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		fs := cl.PollFetches(fctx)
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				fmt.Fprintf(GinkgoWriter, "reading %s/%d: %v\n", t, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			Expect(r.Offset).To(BeNumerically(">=", next[r.Partition]), "%s/%d went backwards", topic, r.Partition)
			next[r.Partition] = r.Offset + 1
			if r.Attrs.IsControl() {
				return
			}
			rec := txnOutRecord{partition: r.Partition, offset: r.Offset, value: string(r.Value)}
			for _, h := range r.Headers {
				if h.Key == txnTagHeader {
					rec.tag = string(h.Value)
				}
			}
			out = append(out, rec)
		})
		for p, end := range ends {
			g.Expect(next[p]).To(BeNumerically(">=", end), "%s/%d read up to %d of %d", topic, p, next[p], end)
		}
	}).WithContext(ctx).WithTimeout(within).WithPolling(10 * time.Millisecond).Should(Succeed())
	return out
}

// checkTxnCopy checks the output of a copier of n input records against
// its ledger: read_committed holds every input value exactly once and
// only records of transactions that committed (or may have: an End that
// failed), every transaction whole or not at all; read_uncommitted holds
// more (the aborted transactions' records), every record of an aborted
// transaction that the broker acknowledged among them.
func checkTxnCopy(l *copyLedger, n int, committed, uncommitted []txnOutRecord) {
	GinkgoHelper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var probs []string
	note := func(format string, args ...any) {
		if len(probs) < 30 {
			probs = append(probs, fmt.Sprintf(format, args...))
		}
	}
	want := map[string]bool{}
	for i := range n {
		want[txnInputValue(i)] = true
	}
	count := map[string]int{}
	perTag := map[string]int{}
	for _, r := range committed {
		count[r.value]++
		perTag[r.tag]++
		if !want[r.value] {
			note("read_committed: %q at partition %d offset %d is no input record", r.value, r.partition, r.offset)
		}
		switch e, ok := l.ends[r.tag]; {
		case !ok:
			note("read_committed: %q at partition %d offset %d was written by unknown transaction %q", r.value, r.partition, r.offset, r.tag)
		case e == txnAborted || e == txnDeliberate:
			note("read_committed: %q at partition %d offset %d was written by aborted transaction %s", r.value, r.partition, r.offset, r.tag)
		}
	}
	var missing, dups []string
	for i := range n {
		switch c := count[txnInputValue(i)]; {
		case c == 0:
			missing = append(missing, txnInputValue(i))
		case c > 1:
			dups = append(dups, fmt.Sprintf("%s ×%d", txnInputValue(i), c))
		}
	}
	for tag, e := range l.ends {
		got, w := perTag[tag], l.written[tag]
		switch {
		case e == txnCommitted && got != l.records[tag]:
			note("committed transaction %s: %d records read_committed, %d copied into it (%d acknowledged)", tag, got, l.records[tag], w)
		case e == txnUnknown && got != 0 && got != w:
			note("transaction %s (its end failed): %d records read_committed, %d acknowledged: not all or nothing", tag, got, w)
		}
	}
	uncPerTag := map[string]int{}
	for _, r := range uncommitted {
		uncPerTag[r.tag]++
		if !want[r.value] {
			note("read_uncommitted: %q at partition %d offset %d is no input record", r.value, r.partition, r.offset)
		}
	}
	for tag, e := range l.ends {
		if (e == txnAborted || e == txnDeliberate) && uncPerTag[tag] != l.written[tag] {
			note("aborted transaction %s: %d records read_uncommitted, %d acknowledged", tag, uncPerTag[tag], l.written[tag])
		}
	}
	sort.Strings(missing)
	sort.Strings(dups)
	Expect(missing).To(BeEmpty(), "%s: input records missing from the read_committed output (%d of %d)", l.name, len(missing), n)
	Expect(dups).To(BeEmpty(), "%s: input records more than once in the read_committed output (%d)", l.name, len(dups))
	Expect(probs).To(BeEmpty(), "%s: the output against the copier's transactions", l.name)
	Expect(len(committed)).To(Equal(n), "%s: read_committed records", l.name)
	Expect(len(uncommitted)).To(BeNumerically(">", n), "%s: read_uncommitted sees the aborted transactions' records too", l.name)
}

// groupCopied reports whether group has committed, for every partition of
// topic, its end offset (ends): the copier copied everything in committed
// transactions.
func groupCopied(ctx context.Context, adm *kadm.Client, group, topic string, ends map[int32]int64) bool {
	got, err := committed(ctx, adm, group, topic)
	if err != nil {
		return false
	}
	for p, e := range ends {
		if got[p] != e {
			return false
		}
	}
	return true
}

// ---------------------------------------------------------------------------
// The franz-go copier: a GroupTransactSession

// ringLogger is a kgo.Logger that hands everything to a clientErrorLog and
// keeps the last lines at info level or above, to report if the spec
// fails.
type ringLogger struct {
	*clientErrorLog
	mu    sync.Mutex
	lines []string
	next  int
}

func newRingLogger(n int) *ringLogger {
	return &ringLogger{clientErrorLog: newClientErrorLog(), lines: make([]string, 0, n)}
}

func (r *ringLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	r.clientErrorLog.Log(level, msg, keyvals...)
	if level > kgo.LogLevelInfo {
		return
	}
	line := fmt.Sprintf("%s %s %s %v", time.Now().Format("15:04:05.000"), level, msg, keyvals)
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.lines) < cap(r.lines) {
		r.lines = append(r.lines, line)
	} else {
		r.lines[r.next] = line
		r.next = (r.next + 1) % len(r.lines)
	}
}

// last returns the lines kept, oldest first.
func (r *ringLogger) last() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append(slices.Clone(r.lines[r.next:]), r.lines[:r.next]...)
}

// reportTxnStateOnFailure adds, should the spec fail, how the brokers
// describe group and txnID at that moment.
func reportTxnStateOnFailure(ctx context.Context, adm *kadm.Client, group, txnID string) {
	DeferCleanup(func() {
		if !CurrentSpecReport().Failed() {
			return
		}
		dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		g, gerr := adm.DescribeGroups(dctx, group)
		t, terr := adm.DescribeTransactions(dctx, txnID)
		AddReportEntry("group and transaction at the failure", fmt.Sprintf("group %s: %+v (err %v)\ntransaction %s: %+v (err %v)", group, g, gerr, txnID, t, terr))
	})
}

// franzCopier copies input to output (same partition, same value, a tag
// header naming the transaction) in transactions of at most batch
// records, with kgo.GroupTransactSession: read_committed, a transactional
// ID, a consumer group. Every abortEvery-th transaction is aborted on
// purpose, after its records are flushed (so that they are in the log).
// A transaction whose produce failed is aborted and the session carries on
// (End rewinds to the committed offsets); an End or Begin that fails ends
// the session (franz-go's documentation: no error End returns is
// retriable), and a new one with the same transactional ID resumes from the
// group's committed offsets once InitProducerId has fenced the old one (see
// fence).
type franzCopier struct {
	*copyLedger
	clientLog *ringLogger // what the sessions' clients logged: classified, and the last lines
	stop      atomic.Bool
	done      chan struct{}
}

func startFranzCopier(ctx context.Context, seeds []string, in, out, group, txnID string, batch, abortEvery int) *franzCopier {
	GinkgoHelper()
	c := &franzCopier{copyLedger: newCopyLedger("franz-go"), clientLog: newRingLogger(300), done: make(chan struct{})}
	DeferCleanup(func() {
		if CurrentSpecReport().Failed() {
			AddReportEntry("franz-go copier: its clients' last log lines", strings.Join(c.clientLog.last(), "\n"))
			c.mu.Lock()
			AddReportEntry("franz-go copier: errors it handled", c.errs)
			c.mu.Unlock()
		}
	})
	newSession := func() *kgo.GroupTransactSession {
		c.newSession()
		s, err := kgo.NewGroupTransactSession(
			kgo.SeedBrokers(seeds...),
			kgo.ClientID("kaas-specs-franz-copier"),
			kgo.WithLogger(c.clientLog), // errors printed, the rest counted (a kill makes thousands of warnings)
			kgo.TransactionalID(txnID),
			kgo.TransactionTimeout(60*time.Second),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.ConsumerGroup(group),
			kgo.ConsumeTopics(in),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			// RequireStable is on for every group consumer (KIP-447).
			kgo.SessionTimeout(groupSession),
			kgo.HeartbeatInterval(groupHeartbeat),
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.FetchMaxWait(200*time.Millisecond),
			kgo.MetadataMinAge(250*time.Millisecond),
			kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
		)
		Expect(err).NotTo(HaveOccurred())
		return s
	}
	go func() {
		defer GinkgoRecover()
		defer close(c.done)
		for first := true; !c.stop.Load() && ctx.Err() == nil; first = false {
			if !first {
				c.fence(ctx, seeds, txnID)
			}
			s := newSession()
			c.runSession(ctx, s, out, batch, abortEvery)
			s.Close()
		}
	}()
	return c
}

// fence does what a restarting producer's initTransactions does before it
// consumes: InitProducerId for txnID, at its coordinator, until answered.
// That fences the previous session and has the coordinator abort its open
// transaction, whose pending offset commits would otherwise keep the
// group's offsets unstable (OffsetFetch with RequireStable answers
// UNSTABLE_OFFSET_COMMIT) until the transaction timed out: a
// GroupTransactSession fetches offsets before it first produces, and only
// then initializes its producer ID.
func (c *franzCopier) fence(ctx context.Context, seeds []string, txnID string) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ClientID("kaas-specs-franz-copier-fence"), kgo.WithLogger(nil))
	Expect(err).NotTo(HaveOccurred())
	defer cl.Close()
	deadline := time.Now().Add(60 * time.Second)
	for ctx.Err() == nil {
		Expect(time.Now().Before(deadline)).To(BeTrue(), "InitProducerId for %s not answered within 60s", txnID)
		node, code, err := findTxnCoordinator(ctx, cl, txnID)
		if err == nil && code == 0 {
			req := kmsg.NewPtrInitProducerIDRequest()
			req.TransactionalID = kmsg.StringPtr(txnID)
			req.TransactionTimeoutMillis = 60_000
			req.ProducerID, req.ProducerEpoch = -1, -1
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			var kresp kmsg.Response
			kresp, err = cl.Broker(int(node)).Request(rctx, req)
			cancel()
			if err == nil {
				if code = kresp.(*kmsg.InitProducerIDResponse).ErrorCode; code == 0 {
					return
				}
			}
		}
		if code != 0 && !txnRetriable(code) {
			c.errorf("fencing %s: InitProducerId: %s", txnID, foErrName(code))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// runSession copies with one session until told to stop or until ending a
// transaction fails.
func (c *franzCopier) runSession(ctx context.Context, s *kgo.GroupTransactSession, out string, batch, abortEvery int) {
	var next time.Time // the earliest start of the next transaction (txnFranzCopyPace)
	for !c.stop.Load() && ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, 250*time.Millisecond)
		fs := s.PollRecords(pctx, batch)
		cancel()
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) && !errors.Is(err, kgo.ErrClientClosed) {
				c.errorf("fetch %s/%d: %v", t, p, err)
			}
		})
		recs := fs.Records()
		if len(recs) == 0 {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(next)):
		}
		next = time.Now().Add(txnFranzCopyPace)
		if err := s.Begin(); err != nil {
			c.errorf("Begin: %v", err)
			return
		}
		tag, deliberate := c.begin(abortEvery)
		e := kgo.AbortingFirstErrPromise(s.Client())
		for _, r := range recs {
			promise := e.Promise() // one per record: it counts them
			s.Produce(ctx, &kgo.Record{Topic: out, Partition: r.Partition, Key: r.Key, Value: r.Value,
				Headers: []kgo.RecordHeader{{Key: txnTagHeader, Value: []byte(tag)}}},
				func(r *kgo.Record, err error) {
					if err == nil {
						c.wrote(tag)
					}
					promise(r, err)
				})
		}
		if deliberate {
			// Into the log first, so that there is something for
			// read_committed readers not to see.
			if err := s.Client().Flush(ctx); err != nil {
				c.errorf("%s: flush before the deliberate abort: %v", tag, err)
			}
		}
		committed, err := s.End(ctx, kgo.TransactionEndTry(!deliberate && e.Err() == nil))
		switch {
		case deliberate:
			c.end(tag, txnDeliberate, len(recs))
			if committed {
				c.errorf("%s: End(TryAbort) reported a commit", tag)
			}
		case err != nil:
			c.end(tag, txnUnknown, len(recs))
		case committed:
			c.end(tag, txnCommitted, len(recs))
		default:
			c.end(tag, txnAborted, len(recs))
			c.errorf("%s: aborted (produce error: %v)", tag, e.Err())
		}
		if err != nil {
			c.errorf("%s: End: %v; starting a new session", tag, err)
			return
		}
	}
}

// finish stops the copier after the transaction in progress and waits for
// its session to close (leaving the group).
func (c *franzCopier) finish(ctx context.Context) {
	GinkgoHelper()
	c.stop.Store(true)
	Eventually(c.done).WithContext(ctx).WithTimeout(90 * time.Second).Should(BeClosed())
}

// ---------------------------------------------------------------------------
// The sarama copier: a consumer group and a transactional producer

// saramaCopier copies like franzCopier, with sarama: a ConsumerGroup
// (read_committed) whose claims collect batches of at most batch records of
// their partition, and one transactional AsyncProducer (TransactionalID,
// Idempotent) that copies each batch in one transaction (BeginTxn, the
// records, AddMessageToTxnWithGroupMetadata for the batch's last record,
// CommitTxn), claims taking turns. Every abortEvery-th transaction is
// aborted on purpose (AbortTxn) and the batch copied again. Errors are
// handled as sarama's exactly-once example does: an abortable error aborts
// and the batch is copied again; a fatal one replaces the producer (whose
// InitProducerId fences the old one). A commit that fails leaves the
// outcome unknown: the group's committed offset (asked with RequireStable,
// once the transaction is decided) says whether the batch was copied.
type saramaCopier struct {
	*copyLedger
	seeds             []string
	out, group, txnID string
	batch, abort      int
	adm               *kadm.Client
	// ctx is the spec's: a group session's context ends with the session
	// (a coordinator failover ends it), and a commit's outcome must still
	// be learnt after that.
	ctx context.Context

	mu   sync.Mutex // one transaction at a time
	prod sarama.AsyncProducer
}

func saramaTxnConfig(txnID string) *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.ClientID = "kaas-specs-sarama-copier"
	cfg.Version = sarama.V2_5_0_0 // TxnOffsetCommit v3 (KIP-447 group metadata)
	cfg.Net.MaxOpenRequests = 1
	cfg.Metadata.RefreshFrequency = 2 * time.Second
	cfg.Producer.Idempotent = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Producer.Return.Successes = true
	cfg.Producer.Return.Errors = true
	cfg.Producer.Retry.Max = 50
	cfg.Producer.Retry.Backoff = 100 * time.Millisecond
	cfg.Producer.Transaction.ID = txnID
	cfg.Producer.Transaction.Timeout = 60 * time.Second
	cfg.Producer.Transaction.Retry.Max = 100
	cfg.Producer.Transaction.Retry.Backoff = 100 * time.Millisecond
	return cfg
}

// newProducer replaces the copier's producer (c.mu held or not yet shared).
func (c *saramaCopier) newProducer() {
	GinkgoHelper()
	if c.prod != nil {
		_ = c.prod.Close()
	}
	c.copyLedger.newSession()
	var p sarama.AsyncProducer
	Eventually(func() error {
		var err error
		p, err = sarama.NewAsyncProducer(c.seeds, saramaTxnConfig(c.txnID))
		return err
	}).WithTimeout(60*time.Second).WithPolling(500*time.Millisecond).Should(Succeed(), "sarama NewAsyncProducer (InitProducerId for %s)", c.txnID)
	go func() {
		for m := range p.Successes() {
			if tag, ok := m.Metadata.(string); ok {
				c.wrote(tag)
			}
		}
	}()
	go func() {
		for e := range p.Errors() {
			c.errorf("produce: %v", e.Err)
		}
	}()
	c.prod = p
}

// copyBatch copies one claim's batch in a transaction, again until one
// commits (or the session ends: its claims are consumed again from the
// committed offsets).
func (c *saramaCopier) copyBatch(sess sarama.ConsumerGroupSession, batch []*sarama.ConsumerMessage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	last := batch[len(batch)-1]
	meta := &sarama.ConsumerGroupMetadata{GroupID: c.group, GenerationID: sess.GenerationID(), MemberID: sess.MemberID()}
	for attempt := 1; sess.Context().Err() == nil; attempt++ {
		Expect(attempt).To(BeNumerically("<=", 50), "sarama copier: 50 attempts at one batch of %s/%d", last.Topic, last.Partition)
		if attempt > 1 {
			time.Sleep(100 * time.Millisecond)
		}
		if err := c.prod.BeginTxn(); err != nil {
			c.errorf("BeginTxn: %v", err)
			c.recoverFrom(err)
			continue
		}
		tag, deliberate := c.begin(c.abort)
		for _, m := range batch {
			c.prod.Input() <- &sarama.ProducerMessage{Topic: c.out, Partition: m.Partition,
				Key: sarama.ByteEncoder(m.Key), Value: sarama.ByteEncoder(m.Value),
				Headers:  []sarama.RecordHeader{{Key: []byte(txnTagHeader), Value: []byte(tag)}},
				Metadata: tag}
		}
		if err := c.prod.AddMessageToTxnWithGroupMetadata(last, meta, nil); err != nil {
			c.errorf("%s: AddMessageToTxn: %v", tag, err)
			c.end(tag, c.abortAfter(err, txnAborted), len(batch))
			continue
		}
		if deliberate {
			err := c.prod.AbortTxn() // flushes the records first: they are in the log
			c.end(tag, txnDeliberate, len(batch))
			if err != nil {
				c.errorf("%s: deliberate AbortTxn: %v", tag, err)
				c.recoverFrom(err)
			}
			continue
		}
		err := c.prod.CommitTxn()
		if err == nil {
			c.end(tag, txnCommitted, len(batch))
			return
		}
		c.errorf("%s: CommitTxn: %v", tag, err)
		c.abortAfter(err, txnUnknown)
		if c.batchCommitted(c.ctx, last) {
			c.end(tag, txnCommitted, len(batch))
			return
		}
		c.end(tag, txnUnknown, len(batch))
	}
}

// abortAfter handles a failed step of a transaction: it aborts it (or
// replaces the producer if it cannot) and returns how the transaction
// ended: aborted if the abort succeeded, else how.
func (c *saramaCopier) abortAfter(err error, how txnEnd) txnEnd {
	if c.prod.TxnStatus()&sarama.ProducerTxnFlagFatalError != 0 {
		c.newProducer()
		return how
	}
	if aerr := c.prod.AbortTxn(); aerr != nil {
		c.errorf("AbortTxn after %v: %v", err, aerr)
		c.newProducer()
		return how
	}
	if how == txnUnknown {
		return how // the commit may have been decided before the abort
	}
	return txnAborted
}

// recoverFrom gets the producer ready for a new transaction after err.
func (c *saramaCopier) recoverFrom(err error) {
	st := c.prod.TxnStatus()
	switch {
	case st&sarama.ProducerTxnFlagFatalError != 0:
		c.newProducer()
	case st&(sarama.ProducerTxnFlagAbortableError|sarama.ProducerTxnFlagInTransaction) != 0:
		if aerr := c.prod.AbortTxn(); aerr != nil {
			c.errorf("AbortTxn after %v: %v", err, aerr)
			c.newProducer()
		}
	}
}

// batchCommitted asks the group's coordinator, with RequireStable (it
// answers UNSTABLE_OFFSET_COMMIT while a transaction is pending), whether
// the committed offset of last's partition is past last.
func (c *saramaCopier) batchCommitted(ctx context.Context, last *sarama.ConsumerMessage) bool {
	GinkgoHelper()
	var at int64 = -1
	Eventually(func(g Gomega) {
		resps, err := c.adm.FetchOffsets(kadm.RequireStable(ctx), c.group)
		g.Expect(err).NotTo(HaveOccurred())
		at = -1
		if r, ok := resps.Lookup(last.Topic, last.Partition); ok {
			g.Expect(r.Err).NotTo(HaveOccurred())
			at = r.At
		}
	}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	return at > last.Offset
}

func (c *saramaCopier) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (c *saramaCopier) Cleanup(sarama.ConsumerGroupSession) error { return nil }

// ConsumeClaim collects up to c.batch records, or what arrived before the
// partition went quiet for 100 ms, and copies them in one transaction.
func (c *saramaCopier) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	defer GinkgoRecover()
	var batch []*sarama.ConsumerMessage
	quiet := time.NewTimer(time.Hour)
	defer quiet.Stop()
	flush := func() {
		if len(batch) > 0 {
			c.copyBatch(sess, batch)
			batch = nil
		}
	}
	for {
		select {
		case m, ok := <-claim.Messages():
			if !ok {
				flush()
				return nil
			}
			batch = append(batch, m)
			if len(batch) >= c.batch {
				flush()
			}
			quiet.Reset(100 * time.Millisecond)
		case <-quiet.C:
			flush()
		case <-sess.Context().Done():
			return nil // what was not committed is consumed again by the next session
		}
	}
}

// runSaramaCopier runs the sarama copier until copied reports true, calling
// during (if not nil) with its ledger once it has begun, and returns the
// ledger.
func runSaramaCopier(ctx context.Context, seeds []string, in, out, group, txnID string, batch, abortEvery int,
	during func(*copyLedger), copied func() bool, within time.Duration) *copyLedger {
	GinkgoHelper()
	admCl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.WithLogger(nil))
	Expect(err).NotTo(HaveOccurred())
	defer admCl.Close()
	c := &saramaCopier{copyLedger: newCopyLedger("sarama"), seeds: seeds, out: out, group: group, txnID: txnID,
		batch: batch, abort: abortEvery, adm: kadm.NewClient(admCl), ctx: ctx}
	c.newProducer()
	defer func() { _ = c.prod.Close() }()

	cfg := sarama.NewConfig()
	cfg.ClientID = "kaas-specs-sarama-copier"
	cfg.Version = sarama.V2_5_0_0
	cfg.Consumer.Return.Errors = true
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = false // offsets are committed in the transactions only
	cfg.Consumer.IsolationLevel = sarama.ReadCommitted
	cfg.Consumer.Group.Session.Timeout = groupSession
	cfg.Consumer.Group.Heartbeat.Interval = groupHeartbeat
	cfg.Consumer.MaxWaitTime = 200 * time.Millisecond
	Expect(cfg.Validate()).To(Succeed())
	cg, err := sarama.NewConsumerGroup(seeds, group, cfg)
	Expect(err).NotTo(HaveOccurred())
	defer cg.Close()
	go func() {
		for err := range cg.Errors() {
			c.errorf("consumer group: %v", err)
		}
	}()
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	consumed := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(consumed)
		for cctx.Err() == nil {
			if err := cg.Consume(cctx, []string{in}, c); err != nil && cctx.Err() == nil {
				c.errorf("Consume: %v", err)
				time.Sleep(100 * time.Millisecond)
			}
		}
	}()
	if during != nil {
		during(c.copyLedger)
	}
	Eventually(copied).WithContext(ctx).WithTimeout(within).WithPolling(250*time.Millisecond).Should(BeTrue(),
		"the sarama copier's group did not commit every input partition's end within %v", within)
	cancel()
	Eventually(consumed).WithTimeout(60 * time.Second).Should(BeClosed())
	Expect(cg.Close()).To(Succeed())
	return c.copyLedger
}

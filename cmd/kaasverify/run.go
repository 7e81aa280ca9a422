package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/cmd/kaasverify/check"
)

// partition is one partition the run writes to.
type partition struct {
	topic string
	part  int32
	key   []byte // "<topic>/<partition>", shared by every record sent there
}

// Headers of compacted mode's records.
const (
	// hdrTP names the partition a record was sent to (its key names it
	// otherwise).
	hdrTP = "kaasverify-tp"
	// hdrID is a tombstone's id (its value is null).
	hdrID = "kaasverify-id"
)

// loader is one "run": its clients write to hist.
type loader struct {
	cfg    config
	topics []string
	parts  []partition
	keys   [][]byte         // compacted mode: "k0" ... "k<keys-1>"
	index  map[string][]int // topic -> partition -> index in parts
	hist   *check.Writer
	logf   func(string, ...any)

	acked, failed, indeterminate, polls atomic.Int64
	// position is the first consumer's next offset per partition: what
	// the committer commits.
	position []atomic.Int64

	errMu sync.Mutex
	errs  []error

	commitWarn sync.Once
}

func (l *loader) toolErr(err error) {
	l.errMu.Lock()
	defer l.errMu.Unlock()
	l.errs = append(l.errs, err)
}

func (l *loader) err() error {
	l.errMu.Lock()
	defer l.errMu.Unlock()
	return errors.Join(l.errs...)
}

// runLoad is "kaasverify run".
func runLoad(ctx context.Context, cfg config, stdout, stderr io.Writer) int {
	logf := func(format string, a ...any) { fmt.Fprintf(stderr, "kaasverify: "+format+"\n", a...) }
	flags := os.O_CREATE | os.O_WRONLY | os.O_APPEND
	if !cfg.HistoryAppend {
		flags |= os.O_TRUNC
	}
	f, err := os.OpenFile(cfg.History, flags, 0o644)
	if err != nil {
		logf("opening history: %v", err)
		return exitToolError
	}
	l := &loader{cfg: cfg, topics: cfg.topicNames(), hist: check.NewWriter(f), logf: logf}
	if cfg.Compacted {
		for i := range cfg.Keys {
			l.keys = append(l.keys, []byte("k"+strconv.Itoa(i)))
		}
	}
	start := time.Now()
	l.load(ctx)
	if err := l.hist.Flush(); err != nil {
		l.toolErr(err)
	}
	if err := f.Close(); err != nil {
		l.toolErr(fmt.Errorf("closing history: %w", err))
	}
	// Check what is in the file, so that "run" and "check" agree and
	// lines appended by other processes count.
	rep, err := check.CheckFile(cfg.History)
	if err != nil {
		logf("%v", err)
		return exitToolError
	}
	fmt.Fprintf(stdout, "kaasverify run %s: %d topics, %d partitions, %d producers, %d consumers, %s; history %s\n",
		cfg.RunID, len(l.topics), len(l.parts), cfg.Producers, cfg.Consumers, time.Since(start).Round(time.Millisecond), cfg.History)
	return finish(rep, l.err(), cfg.Report, false, stdout, stderr)
}

// load runs every phase; failures are collected with toolErr.
func (l *loader) load(ctx context.Context) {
	cfg := l.cfg
	admCl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...), kgo.MetadataMinAge(250*time.Millisecond))
	if err != nil {
		l.toolErr(fmt.Errorf("admin client: %w", err))
		return
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)

	if err := l.setup(ctx, adm); err != nil {
		l.toolErr(err)
		return
	}
	if cfg.Compacted {
		l.markTopics(ctx, adm)
	}
	l.logf("run %s: producing to %d partitions of %s", cfg.RunID, len(l.parts), strings.Join(l.topics, ", "))

	// stop ends the produce phase; the clients themselves use background
	// contexts, so that stopping never cancels a record in flight (which
	// would make its outcome unknowable).
	stop, cancelStop := context.WithCancel(ctx)
	defer cancelStop()
	if cfg.Duration > 0 {
		var cancelDur context.CancelFunc
		stop, cancelDur = context.WithTimeout(stop, cfg.Duration)
		defer cancelDur()
	}
	side, cancelSide := context.WithCancel(context.Background())
	defer cancelSide()

	var sideWG, prodWG sync.WaitGroup
	for i := range cfg.Consumers {
		sideWG.Go(func() { l.consume(side, i) })
	}
	sideWG.Go(func() { l.every(side, cfg.HWMEvery, func(ctx context.Context) { l.observeHWM(ctx, adm) }) })
	sideWG.Go(func() { l.every(side, cfg.PIDsEvery, func(ctx context.Context) { l.initProducerID(ctx, admCl) }) })
	if cfg.CommitsEvery > 0 {
		sideWG.Go(func() { l.every(side, cfg.CommitsEvery, func(ctx context.Context) { l.commit(ctx, adm) }) })
	}
	if cfg.Progress > 0 {
		sideWG.Go(func() {
			t := time.NewTicker(cfg.Progress)
			defer t.Stop()
			for {
				select {
				case <-side.Done():
					return
				case <-t.C:
					l.logf("acked %d, failed %d, indeterminate %d, polled %d", l.acked.Load(), l.failed.Load(), l.indeterminate.Load(), l.polls.Load())
				}
			}
		})
	}
	for i := range cfg.Producers {
		n := int64(-1)
		if cfg.Records > 0 {
			n = cfg.Records / int64(cfg.Producers)
			if int64(i) < cfg.Records%int64(cfg.Producers) {
				n++
			}
		}
		prodWG.Go(func() {
			if err := l.produce(stop, i, n); err != nil {
				l.toolErr(err)
			}
		})
	}
	prodWG.Wait()
	cancelSide()
	sideWG.Wait()
	l.logf("stopped producing: acked %d, failed %d, indeterminate %d; polled %d", l.acked.Load(), l.failed.Load(), l.indeterminate.Load(), l.polls.Load())

	// Last observations, then the final read.
	end, cancelEnd := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelEnd()
	l.initProducerID(end, admCl)
	if cfg.CommitsEvery > 0 {
		l.commit(end, adm)
	}
	l.observeHWM(end, adm)
	if err := l.finalRead(adm); err != nil {
		l.toolErr(err)
	}
}

// setup creates the topics if asked and waits until every partition
// lists its offsets, then fixes the partition list.
func (l *loader) setup(ctx context.Context, adm *kadm.Client) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if l.cfg.Create {
		resps, err := adm.CreateTopics(ctx, int32(l.cfg.Partitions), -1, l.cfg.createConfigs(), l.topics...)
		if err != nil {
			return fmt.Errorf("creating topics: %w", err)
		}
		for _, t := range l.topics {
			if r, ok := resps[t]; ok && r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
				return fmt.Errorf("creating topic %s: %w (%s)", t, r.Err, r.ErrMessage)
			}
		}
	}
	var lastErr error
	for {
		listed, err := adm.ListEndOffsets(ctx, l.topics...)
		if err == nil {
			err = listed.Error()
		}
		if err == nil {
			l.parts, l.index = nil, map[string][]int{}
			for _, t := range l.topics {
				ps := listed[t]
				for p := range int32(len(ps)) {
					if _, ok := ps[p]; !ok {
						err = fmt.Errorf("topic %s lists %d partitions but not partition %d", t, len(ps), p)
						break
					}
					l.index[t] = append(l.index[t], len(l.parts))
					l.parts = append(l.parts, partition{topic: t, part: p, key: fmt.Appendf(nil, "%s/%d", t, p)})
				}
				if len(ps) == 0 && err == nil {
					err = fmt.Errorf("topic %s has no partitions", t)
				}
			}
		}
		if err == nil {
			l.position = make([]atomic.Int64, len(l.parts))
			return nil
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("topics %s not ready: %w", strings.Join(l.topics, ", "), lastErr)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// markTopics records each topic's cleanup policy, as the broker describes
// it or else as the run asked for it: the checks judge compacted topics
// by C1–C3 instead of L1.
func (l *loader) markTopics(ctx context.Context, adm *kadm.Client) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	described, err := adm.DescribeTopicConfigs(ctx, l.topics...)
	if err != nil {
		l.logf("describing topic configs: %v (taking cleanup.policy=%s as asked)", err, l.cfg.cleanupPolicy())
	}
	for _, t := range l.topics {
		e := check.NewEvent(check.KindTopic)
		e.Topic, e.Cleanup = t, l.cfg.cleanupPolicy()
		if rc, err := described.On(t, nil); err == nil && rc.Err == nil {
			for _, c := range rc.Configs {
				if c.Key == "cleanup.policy" && c.Value != nil {
					e.Cleanup = *c.Value
				}
			}
		}
		if !check.Compacted(e.Cleanup) {
			l.logf("topic %s has cleanup.policy=%s: its keyed records are checked by L1, not C1–C3", t, e.Cleanup)
		}
		l.hist.Record(e)
	}
}

// every runs fn now, every d (if d > 0) until ctx ends, each call
// bounded by a timeout.
func (l *loader) every(ctx context.Context, d time.Duration, fn func(context.Context)) {
	call := func() {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		fn(cctx)
	}
	call()
	if d <= 0 {
		return
	}
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			call()
		}
	}
}

// classify says what a produce error tells about the record: only errors
// that a broker returns for the content of the batch itself (so no
// earlier attempt of it can have been written) are definite failures.
func classify(err error) check.Outcome {
	for _, def := range []error{kerr.MessageTooLarge, kerr.RecordListTooLarge, kerr.InvalidRecord, kerr.InvalidTopicException} {
		if errors.Is(err, def) {
			return check.Fail
		}
	}
	return check.Info
}

// producerOpts are the options of every producer client.
func (l *loader) producerOpts() []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(l.cfg.Brokers...),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(l.cfg.Linger),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.MaxBufferedRecords(l.cfg.MaxBuffered),
		kgo.RecordDeliveryTimeout(l.cfg.DeliveryTimeout),
		kgo.MetadataMinAge(250 * time.Millisecond),
	}
	if !l.cfg.Idempotent {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	return opts
}

// produce runs producer i until stop ends or it has sent n records (n < 0:
// no limit), paced at its share of --rate, then waits for the outcomes of
// what it sent.
func (l *loader) produce(stop context.Context, i int, n int64) error {
	cl, err := kgo.NewClient(l.producerOpts()...)
	if err != nil {
		return fmt.Errorf("producer client: %w", err)
	}
	defer cl.Close()
	proc := "p" + strconv.Itoa(i)
	prefix := fmt.Sprintf("%s.p%d.", l.cfg.RunID, i)
	size := l.cfg.ValueSize
	dots := bytes.Repeat([]byte{'.'}, size)
	var pending sync.WaitGroup
	// One promise for all records: the value carries what it needs.
	promise := func(r *kgo.Record, err error) {
		defer pending.Done()
		e := check.NewEvent(check.KindSend)
		e.Process, e.Topic, e.Partition = proc, r.Topic, r.Partition
		e.Value = valueID(r.Value)
		if l.cfg.Compacted {
			if r.Value == nil {
				e.Value = string(header(r, hdrID))
			}
			e.Key, e.Tombstone = string(r.Key), r.Value == nil
		}
		if err == nil {
			e.Outcome, e.Offset = check.OK, r.Offset
			l.acked.Add(1)
		} else {
			e.Outcome, e.Error = classify(err), err.Error()
			if e.Outcome == check.Fail {
				l.failed.Add(1)
			} else {
				l.indeterminate.Add(1)
			}
		}
		l.hist.Record(e)
	}

	rate := l.cfg.Rate / float64(l.cfg.Producers)
	var timer *time.Timer
	rng := rand.New(rand.NewPCG(rand.Uint64(), uint64(i)))
	begin := time.Now()
	work := context.Background()
produce:
	for seq := int64(0); n < 0 || seq < n; seq++ {
		if rate > 0 {
			// Sleep at least 1ms at a time and catch up after: the rate
			// holds on average without a timer per record.
			if d := time.Until(begin.Add(time.Duration(float64(seq) / rate * float64(time.Second)))); d > 0 {
				d = max(d, time.Millisecond)
				if timer == nil {
					timer = time.NewTimer(d)
				} else {
					timer.Reset(d)
				}
				select {
				case <-stop.Done():
					break produce
				case <-timer.C:
				}
			}
		}
		if stop.Err() != nil {
			break
		}
		p := &l.parts[(i+int(seq))%len(l.parts)]
		v := make([]byte, 0, max(size, len(prefix)+20))
		v = strconv.AppendInt(append(v, prefix...), seq, 10)
		r := &kgo.Record{Topic: p.topic, Partition: p.part, Key: p.key, Value: v}
		if l.cfg.Compacted {
			// A random key; the partition is named in a header instead.
			r.Key = l.keys[rng.IntN(len(l.keys))]
			r.Headers = []kgo.RecordHeader{{Key: hdrTP, Value: p.key}}
			// Every m-th send to each partition (seq/len(parts) counts
			// this producer's sends to p) deletes a random key.
			if m := int64(l.cfg.TombstoneEvery); m > 0 && seq/int64(len(l.parts))%m == m-1 {
				r.Headers = append(r.Headers, kgo.RecordHeader{Key: hdrID, Value: v})
				r.Value = nil
			}
		}
		if r.Value != nil && len(v)+1 < size {
			v = append(v, ' ')
			r.Value = append(v, dots[:size-len(v)]...)
		}
		pending.Add(1)
		cl.Produce(work, r, promise)
	}
	if timer != nil {
		timer.Stop()
	}

	dctx, cancel := context.WithTimeout(context.Background(), l.cfg.DrainTimeout)
	defer cancel()
	if err := cl.Flush(dctx); err != nil {
		l.logf("%s: %d records still in flight after %s: recording them as indeterminate", proc, cl.BufferedProduceRecords(), l.cfg.DrainTimeout)
	} else if l.cfg.Idempotent {
		// The producer ID this client was issued takes part in L9.
		pctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if id, epoch, err := cl.ProducerID(pctx); err == nil && id >= 0 {
			e := check.NewEvent(check.KindPID)
			e.Process, e.ProducerID, e.Epoch = proc, id, epoch
			l.hist.Record(e)
		}
		cancel()
	}
	// Closing fails (ErrClientClosed) whatever is still buffered.
	cl.Close()
	pending.Wait()
	return nil
}

// valueID is the id part of a value the tool wrote: up to the first space.
func valueID(v []byte) string {
	if i := bytes.IndexByte(v, ' '); i >= 0 {
		v = v[:i]
	}
	return string(v)
}

// header returns the value of r's first header named key, or nil.
func header(r *kgo.Record, key string) []byte {
	for _, h := range r.Headers {
		if h.Key == key {
			return h.Value
		}
	}
	return nil
}

// readEvent is the event (poll or final) that records r read by proc.
func (l *loader) readEvent(kind check.Kind, proc string, r *kgo.Record) check.Event {
	e := check.NewEvent(kind)
	e.Process, e.Topic, e.Partition, e.Offset = proc, r.Topic, r.Partition, r.Offset
	e.Value = l.readValue(r)
	if l.cfg.Compacted {
		e.Key, e.Tombstone = string(r.Key), r.Value == nil
	}
	return e
}

// readValue is the value a consumer records for r: its id, marked when the
// padding is damaged or r sits in another partition than its key (in
// compacted mode, its header) names. A tombstone's id is in a header;
// one without is marked "!noid".
func (l *loader) readValue(r *kgo.Record) string {
	at := r.Key
	if l.cfg.Compacted {
		at = header(r, hdrTP)
		if r.Value == nil {
			s := string(header(r, hdrID))
			if s == "" {
				s = "!noid"
			}
			return s + misplaced(at, r)
		}
	}
	v := r.Value
	id, pad := v, []byte(nil)
	if i := bytes.IndexByte(v, ' '); i >= 0 {
		id, pad = v[:i], v[i+1:]
	}
	s := string(id)
	ours := len(id) > len(l.cfg.RunID) && string(id[:len(l.cfg.RunID)]) == l.cfg.RunID && id[len(l.cfg.RunID)] == '.'
	if bytes.IndexFunc(pad, func(c rune) bool { return c != '.' }) >= 0 || ours && pad != nil && len(v) != l.cfg.ValueSize {
		s += "!corrupt"
	}
	return s + misplaced(at, r)
}

// misplaced is the mark of a record whose partition name at (nil: none)
// does not name the partition r was read from.
func misplaced(at []byte, r *kgo.Record) string {
	if at != nil && !keyNames(at, r.Topic, r.Partition) {
		return "!misplaced"
	}
	return ""
}

// keyNames reports whether key is "<topic>/<partition>".
func keyNames(key []byte, topic string, part int32) bool {
	i := bytes.LastIndexByte(key, '/')
	if i < 0 || string(key[:i]) != topic {
		return false
	}
	n, err := strconv.ParseInt(string(key[i+1:]), 10, 32)
	return err == nil && int32(n) == part
}

// assignFrom returns a ConsumePartitions assignment of the partitions
// with indexes idx, each from offset at(i).
func (l *loader) assignFrom(idx []int, at func(int) kgo.Offset) map[string]map[int32]kgo.Offset {
	m := map[string]map[int32]kgo.Offset{}
	for _, i := range idx {
		p := l.parts[i]
		if m[p.topic] == nil {
			m[p.topic] = map[int32]kgo.Offset{}
		}
		m[p.topic][p.part] = at(i)
	}
	return m
}

func (l *loader) allIndexes() []int {
	idx := make([]int, len(l.parts))
	for i := range idx {
		idx[i] = i
	}
	return idx
}

func (l *loader) indexOf(topic string, part int32) (int, bool) {
	ps := l.index[topic]
	if part < 0 || int(part) >= len(ps) {
		return 0, false
	}
	return ps[part], true
}

// consume runs assign-mode consumer i over every partition from its start
// until ctx ends, recording each record it is handed as a poll.
func (l *loader) consume(ctx context.Context, i int) {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(l.cfg.Brokers...),
		kgo.ConsumePartitions(l.assignFrom(l.allIndexes(), func(int) kgo.Offset { return kgo.NewOffset().AtStart() })),
		kgo.FetchMaxWait(500*time.Millisecond),
		kgo.MetadataMinAge(250*time.Millisecond),
	)
	if err != nil {
		l.toolErr(fmt.Errorf("consumer client: %w", err))
		return
	}
	defer cl.Close()
	proc := "c" + strconv.Itoa(i)
	for {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return
		}
		fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
			for _, r := range fp.Records {
				e := l.readEvent(check.KindPoll, proc, r)
				e.HWM = fp.HighWatermark
				l.hist.Record(e)
			}
			l.polls.Add(int64(len(fp.Records)))
			if i == 0 && len(fp.Records) > 0 {
				if idx, ok := l.indexOf(fp.Topic, fp.Partition); ok {
					l.position[idx].Store(fp.Records[len(fp.Records)-1].Offset + 1)
				}
			}
		})
	}
}

// observeHWM lists every partition's high watermark and last stable offset
// (as observer "lo"); partitions that answer with an error are skipped.
func (l *loader) observeHWM(ctx context.Context, adm *kadm.Client) {
	ends, _ := adm.ListEndOffsets(ctx, l.topics...) // partial answers are fine
	lsos, _ := adm.ListCommittedOffsets(ctx, l.topics...)
	for _, p := range l.parts {
		e := check.NewEvent(check.KindHWM)
		e.Process, e.Topic, e.Partition = "lo", p.topic, p.part
		if o, ok := ends.Lookup(p.topic, p.part); ok && o.Err == nil {
			e.HWM = o.Offset
		}
		if o, ok := lsos.Lookup(p.topic, p.part); ok && o.Err == nil {
			e.LSO = o.Offset
		}
		if e.HWM >= 0 || e.LSO >= 0 {
			l.hist.Record(e)
		}
	}
}

// initProducerID sends one raw InitProducerId for an idempotent producer
// and records the ID and epoch issued (L9).
func (l *loader) initProducerID(ctx context.Context, cl *kgo.Client) {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionTimeoutMillis = 60000
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || resp.ErrorCode != 0 {
		return // not issued: nothing to record
	}
	e := check.NewEvent(check.KindPID)
	e.Process, e.ProducerID, e.Epoch = "pids", resp.ProducerID, resp.ProducerEpoch
	l.hist.Record(e)
}

// commit commits the first consumer's positions to the run's group, then
// reads the group's offsets back (L8). The read is sent after the commit
// is acknowledged, as check.KindCommitted requires.
func (l *loader) commit(ctx context.Context, adm *kadm.Client) {
	group := "kaasverify-" + l.cfg.RunID
	offs := kadm.Offsets{}
	for i, p := range l.parts {
		if at := l.position[i].Load(); at > 0 {
			offs.AddOffset(p.topic, p.part, at, -1)
		}
	}
	if len(offs) == 0 {
		return
	}
	record := func(kind check.Kind, rs kadm.OffsetResponses) {
		var sorted []kadm.OffsetResponse
		rs.Each(func(o kadm.OffsetResponse) {
			if o.Err == nil && o.At >= 0 {
				sorted = append(sorted, o)
			}
		})
		slices.SortFunc(sorted, func(a, b kadm.OffsetResponse) int {
			return strings.Compare(a.Topic, b.Topic)*2 + cmpInt(a.Partition, b.Partition)
		})
		for _, o := range sorted {
			e := check.NewEvent(kind)
			e.Process, e.Group, e.Topic, e.Partition, e.Offset = "committer", group, o.Topic, o.Partition, o.At
			l.hist.Record(e)
		}
	}
	committed, err := adm.CommitOffsets(ctx, group, offs)
	if err == nil {
		err = committed.Error()
	}
	if err != nil {
		l.commitWarn.Do(func() { l.logf("offset commit to group %s failed (L8 may go unexercised): %v", group, err) })
	}
	record(check.KindCommit, committed)
	fetched, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return
	}
	record(check.KindCommitted, fetched)
}

func cmpInt(a, b int32) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// finalRead reads every partition from its log start to its high
// watermark, as listed once producers stopped, recording each record as a
// final event and each partition read completely as its bounds (an hwm
// event of check.FinalProcess). It retries until --final-timeout:
// brokers may still be failing over.
func (l *loader) finalRead(adm *kadm.Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.FinalTimeout)
	defer cancel()
	type span struct{ start, end int64 }
	bounds := make([]span, len(l.parts))
	listed := make([]bool, len(l.parts))
	left := len(l.parts)
	for left > 0 {
		starts, _ := adm.ListStartOffsets(ctx, l.topics...) // partial answers are fine
		ends, _ := adm.ListEndOffsets(ctx, l.topics...)
		for i, p := range l.parts {
			if listed[i] {
				continue
			}
			s, ok1 := starts.Lookup(p.topic, p.part)
			e, ok2 := ends.Lookup(p.topic, p.part)
			if ok1 && ok2 && s.Err == nil && e.Err == nil && s.Offset >= 0 && e.Offset >= 0 {
				bounds[i], listed[i] = span{s.Offset, e.Offset}, true
				left--
			}
		}
		if left == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("final read: offsets of %d partitions could not be listed within %s", left, l.cfg.FinalTimeout)
		case <-time.After(250 * time.Millisecond):
		}
	}

	next := make([]int64, len(l.parts))
	done := func(i int) {
		e := check.NewEvent(check.KindHWM)
		p := l.parts[i]
		e.Process, e.Topic, e.Partition, e.Start, e.HWM = check.FinalProcess, p.topic, p.part, bounds[i].start, bounds[i].end
		l.hist.Record(e)
	}
	var pending []int
	for i, b := range bounds {
		next[i] = b.start
		if b.end > b.start {
			pending = append(pending, i)
		} else {
			done(i)
		}
	}
	if len(pending) == 0 {
		return nil
	}
	// A compacted partition may end in batches whose records compaction
	// removed: the final read asks the log (emptyTail) when it stalls.
	var ids map[string][16]byte
	if l.cfg.Compacted {
		ids = map[string][16]byte{}
		td, _ := adm.ListTopics(ctx, l.topics...)
		for t, d := range td {
			ids[t] = d.ID
		}
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(l.cfg.Brokers...),
		kgo.ConsumePartitions(l.assignFrom(pending, func(i int) kgo.Offset { return kgo.NewOffset().At(bounds[i].start) })),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.MetadataMinAge(250*time.Millisecond),
	)
	if err != nil {
		return fmt.Errorf("final read client: %w", err)
	}
	defer cl.Close()
	left = len(pending)
	finished := func(i int) {
		done(i)
		left--
		cl.PauseFetchPartitions(map[string][]int32{l.parts[i].topic: {l.parts[i].part}})
	}
	for left > 0 {
		pctx, cancelPoll := ctx, context.CancelFunc(func() {})
		if ids != nil {
			pctx, cancelPoll = context.WithTimeout(ctx, time.Second)
		}
		fetches := cl.PollFetches(pctx)
		cancelPoll()
		if ctx.Err() != nil {
			var missing []string
			for _, i := range pending {
				if next[i] < bounds[i].end {
					missing = append(missing, fmt.Sprintf("%s/%d (%d of [%d, %d))", l.parts[i].topic, l.parts[i].part, next[i], bounds[i].start, bounds[i].end))
				}
			}
			return fmt.Errorf("final read incomplete after %s: %s", l.cfg.FinalTimeout, strings.Join(missing, ", "))
		}
		fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
			i, ok := l.indexOf(fp.Topic, fp.Partition)
			if !ok || next[i] >= bounds[i].end {
				return
			}
			for _, r := range fp.Records {
				// Skip what was read already (a client reset) and what
				// lies past the listed end.
				if r.Offset < next[i] || r.Offset >= bounds[i].end {
					continue
				}
				l.hist.Record(l.readEvent(check.KindFinal, check.FinalProcess, r))
				next[i] = r.Offset + 1
			}
			if next[i] >= bounds[i].end {
				finished(i)
			}
		})
		if ids == nil || fetches.NumRecords() > 0 {
			continue
		}
		// A quiet second: ask each unfinished partition whether records
		// remain before its end.
		for _, i := range pending {
			if next[i] >= bounds[i].end {
				continue
			}
			p := l.parts[i]
			if empty, err := emptyTail(ctx, cl, p, ids[p.topic], next[i], bounds[i].end); err != nil {
				l.logf("final read: probing %s/%d from %d: %v", p.topic, p.part, next[i], err)
			} else if empty {
				next[i] = bounds[i].end
				finished(i)
			}
		}
	}
	return nil
}

// emptyTail reports whether partition p (of topic id) holds no record in
// [at, end), fetching from its leader batch after batch. A compacted
// partition may end in batches whose records compaction removed (a
// tombstone past delete.retention.ms, say, whose batch stays for its
// producer's state): a consumer steps over them with no record to show,
// so the final read would wait for records that never come.
func emptyTail(ctx context.Context, cl *kgo.Client, p partition, id [16]byte, at, end int64) (bool, error) {
	const maxBytes = 1 << 20
	for range 64 { // at most 64 MiB of empty batches per call
		if at >= end {
			return true, nil
		}
		leader, _, err := cl.PartitionLeader(p.topic, p.part)
		if err != nil {
			return false, err
		}
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.SessionEpoch = -1, 0, 1, maxBytes, -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = p.topic, id
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.CurrentLeaderEpoch, rp.LogStartOffset, rp.PartitionMaxBytes = p.part, at, -1, -1, maxBytes
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl.Broker(int(leader)))
		if err != nil {
			return false, err
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return false, err
		}
		var got *kmsg.FetchResponseTopicPartition
		for ti := range resp.Topics {
			t := &resp.Topics[ti]
			for pi := range t.Partitions {
				if (t.Topic == p.topic || t.TopicID == id) && t.Partitions[pi].Partition == p.part {
					got = &t.Partitions[pi]
				}
			}
		}
		if got == nil {
			return false, errors.New("the fetch response lacks the partition")
		}
		fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Offset: at, Topic: p.topic, Partition: p.part}, got, kgo.DefaultDecompressor(), nil)
		if fp.Err != nil {
			return false, fp.Err
		}
		for _, r := range fp.Records {
			if r.Offset < end {
				return false, nil // the consumer has yet to hand it over
			}
		}
		if next <= at {
			return false, nil // nothing fetched: ask again later
		}
		at = next
	}
	return false, nil
}

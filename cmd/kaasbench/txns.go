package main

// `kaasbench txns`: transactional produce throughput. N producers (one
// franz-go client each, its own transactional ID) loop transactions of K
// records for a duration: BeginTransaction, K records spread over a few
// partitions, Flush, EndTransaction(commit). The tool reports committed
// transactions/s, records/s, and the latency of EndTransaction (the EndTxn
// request: the coordinator's durable decision; markers follow in the
// background) and of the whole transaction. Afterwards a read_committed
// consumer reads everything the run wrote and must find exactly the records
// of the committed transactions.
//
//	kaasbench txns --brokers 127.0.0.1:9092 [--producers 4] [--records-per-txn 100]
//	               [--partitions-per-txn 4] [--duration 10s] [--kfake] [--json]

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// txnsConfig is the command line of `kaasbench txns`.
type txnsConfig struct {
	Brokers          []string      `json:"brokers,omitempty"`
	Kfake            bool          `json:"kfake"`
	Producers        int           `json:"producers"`
	RecordsPerTxn    int           `json:"records_per_txn"`
	PartitionsPerTxn int           `json:"partitions_per_txn"`
	RecordSize       int           `json:"record_size"`
	Partitions       int           `json:"partitions"`
	Topic            string        `json:"topic"`
	Duration         time.Duration `json:"duration_ns"`
	Timeout          time.Duration `json:"timeout_ns"`
	Verify           bool          `json:"verify"`
	JSON             bool          `json:"-"`
}

// txnsResult is what one target measured.
type txnsResult struct {
	Name          string         `json:"name"`
	Committed     int64          `json:"committed"` // transactions
	Aborted       int64          `json:"aborted"`   // transactions aborted after a produce error
	Records       int64          `json:"records"`   // records in committed transactions
	Errors        int64          `json:"errors"`
	FirstError    string         `json:"first_error,omitempty"`
	Seconds       float64        `json:"seconds"`
	TxnsPerSec    float64        `json:"txns_per_sec"`
	RecordsPerSec float64        `json:"records_per_sec"`
	MBPerSec      float64        `json:"mb_per_sec"`
	EndTxn        latencySummary `json:"end_txn_latency"` // EndTransaction(commit) calls
	Txn           latencySummary `json:"txn_latency"`     // BeginTransaction to the end of EndTransaction
	// Verified: a read_committed consumer read exactly Records records
	// back (set only with --verify).
	Verified     bool  `json:"verified"`
	ReadBack     int64 `json:"read_back"`
	OpenAtTheEnd bool  `json:"open_at_the_end,omitempty"` // a partition's LSO stayed below its high watermark
}

func parseTxnsFlags(args []string, stderr io.Writer) (txnsConfig, error) {
	fs := flag.NewFlagSet("kaasbench txns", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		cfg        txnsConfig
		brokers    string
		recordSize = byteSize(100)
	)
	fs.StringVar(&brokers, "brokers", "", "comma-separated kaas seed brokers, host:port")
	fs.BoolVar(&cfg.Kfake, "kfake", false, "also run against an in-process kfake broker")
	fs.IntVar(&cfg.Producers, "producers", 4, "transactional producers (clients), each with its own transactional ID")
	fs.IntVar(&cfg.RecordsPerTxn, "records-per-txn", 100, "records in each transaction")
	fs.IntVar(&cfg.PartitionsPerTxn, "partitions-per-txn", 4, "partitions each transaction writes to (round-robin over its records)")
	fs.Var(&recordSize, "record-size", "record value size")
	fs.IntVar(&cfg.Partitions, "partitions", 16, "partitions of the topic when creating it")
	fs.StringVar(&cfg.Topic, "topic", "", "topic, created if missing (default kaasbench-<random>)")
	fs.DurationVar(&cfg.Duration, "duration", 10*time.Second, "how long to run transactions")
	fs.DurationVar(&cfg.Timeout, "timeout", 2*time.Minute, "hard cap on each target's run")
	fs.BoolVar(&cfg.Verify, "verify", true, "read everything back read_committed and check the count")
	fs.BoolVar(&cfg.JSON, "json", false, "print results as JSON")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: kaasbench txns [--brokers 127.0.0.1:9092] [--kfake] [flags]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	cfg.Brokers = splitBrokers(brokers)
	cfg.RecordSize = int(recordSize)
	if cfg.Topic == "" {
		cfg.Topic = randomTopic()
	}
	var errs []error
	if len(cfg.Brokers) == 0 && !cfg.Kfake {
		errs = append(errs, errors.New("nothing to do: give --brokers and/or --kfake"))
	}
	if cfg.Producers < 1 {
		errs = append(errs, errors.New("--producers must be >= 1"))
	}
	if cfg.RecordsPerTxn < 1 {
		errs = append(errs, errors.New("--records-per-txn must be >= 1"))
	}
	if cfg.Partitions < 1 {
		errs = append(errs, errors.New("--partitions must be >= 1"))
	}
	if cfg.PartitionsPerTxn < 1 || cfg.PartitionsPerTxn > cfg.Partitions {
		errs = append(errs, errors.New("--partitions-per-txn must be within [1, --partitions]"))
	}
	if cfg.RecordSize > 1<<20 {
		errs = append(errs, errors.New("--record-size must be <= 1MiB"))
	}
	if cfg.Duration <= 0 || cfg.Timeout <= 0 {
		errs = append(errs, errors.New("--duration and --timeout must be > 0"))
	}
	return cfg, errors.Join(errs...)
}

// runTxns is `kaasbench txns`; it returns the exit code.
func runTxns(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseTxnsFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "kaasbench txns:", err)
		return 2
	}
	logf := func(format string, a ...any) { fmt.Fprintf(stderr, "kaasbench txns: "+format+"\n", a...) }
	var (
		results  []*txnsResult
		failures []string
	)
	one := func(name string, seeds []string) {
		logf("%s: %d producers, transactions of %d records over %d partitions, %d B values, for %s",
			name, cfg.Producers, cfg.RecordsPerTxn, cfg.PartitionsPerTxn, cfg.RecordSize, cfg.Duration)
		r, err := txnLoad(ctx, cfg, name, seeds, logf)
		if r != nil {
			results = append(results, r)
			if r.Errors > 0 {
				failures = append(failures, fmt.Sprintf("%s: %d failed transactions (first: %s)", name, r.Errors, r.FirstError))
			}
			if r.Committed == 0 {
				failures = append(failures, name+": no transaction committed")
			}
			if cfg.Verify && !r.Verified {
				failures = append(failures, fmt.Sprintf("%s: read_committed read %d records back, %d were committed", name, r.ReadBack, r.Records))
			}
			if r.OpenAtTheEnd {
				failures = append(failures, name+": a transaction was still open after every producer closed (LSO below the high watermark)")
			}
		}
		if err != nil {
			failures = append(failures, fmt.Sprintf("%s: %v", name, err))
		}
	}
	if len(cfg.Brokers) > 0 {
		one("kaas "+strings.Join(cfg.Brokers, ","), cfg.Brokers)
	}
	if cfg.Kfake && ctx.Err() == nil {
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DefaultNumPartitions(cfg.Partitions))
		if err != nil {
			failures = append(failures, "kfake: "+err.Error())
		} else {
			one("kfake", c.ListenAddrs())
			c.Close()
		}
	}
	if cfg.JSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(struct {
			Config   txnsConfig    `json:"config"`
			Results  []*txnsResult `json:"results"`
			OK       bool          `json:"ok"`
			Failures []string      `json:"failures,omitempty"`
		}{cfg, results, len(failures) == 0, failures})
	} else {
		fmt.Fprint(stdout, txnsTable(results).render())
	}
	if len(failures) > 0 {
		for _, f := range failures {
			fmt.Fprintln(stderr, "kaasbench txns: FAIL:", f)
		}
		if !cfg.JSON {
			fmt.Fprintf(stdout, "\nresult: FAILED (%d problems, see stderr)\n", len(failures))
		}
		return 1
	}
	if !cfg.JSON {
		fmt.Fprintln(stdout, "\nresult: OK")
	}
	return 0
}

// errTxnAborted is a transaction aborted because one of its records failed.
var errTxnAborted = errors.New("transaction aborted")

// txnProducer is one transactional client and what it measured.
type txnProducer struct {
	cfg    txnsConfig
	seeds  []string
	txnID  string
	cl     *kgo.Client
	next   int // the first partition of the next transaction
	endLat *histogram
	txnLat *histogram
}

func (p *txnProducer) open() error {
	if p.cl != nil {
		p.cl.Close()
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(p.seeds...),
		kgo.ClientID("kaasbench-txns"),
		kgo.TransactionalID(p.txnID),
		kgo.TransactionTimeout(time.Minute),
		kgo.DefaultProduceTopic(p.cfg.Topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordDeliveryTimeout(p.cfg.Timeout),
	)
	p.cl = cl
	return err
}

// txn runs one transaction of the configured size and reports whether it
// committed; an error wrapping errTxnAborted means it was aborted because a
// record failed, any other that it failed.
func (p *txnProducer) txn(ctx context.Context, payload []byte, record bool) (committed bool, err error) {
	start := time.Now()
	if err := p.cl.BeginTransaction(); err != nil {
		return false, fmt.Errorf("begin transaction: %w", err)
	}
	var (
		failed   atomic.Int64
		firstErr atomic.Pointer[error]
	)
	for i := range p.cfg.RecordsPerTxn {
		part := int32((p.next + i%p.cfg.PartitionsPerTxn) % p.cfg.Partitions)
		p.cl.Produce(ctx, &kgo.Record{Partition: part, Value: payload}, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, &err)
			}
		})
	}
	p.next = (p.next + p.cfg.PartitionsPerTxn) % p.cfg.Partitions
	if err := p.cl.Flush(ctx); err != nil {
		return false, fmt.Errorf("flush: %w", err)
	}
	commit := failed.Load() == 0
	endAt := time.Now()
	if err := p.cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		return false, fmt.Errorf("end transaction (commit %t): %w", commit, err)
	}
	if record && commit {
		p.endLat.RecordDuration(time.Since(endAt))
		p.txnLat.RecordDuration(time.Since(start))
	}
	if !commit {
		return false, fmt.Errorf("%w: %d records failed, first: %w", errTxnAborted, failed.Load(), *firstErr.Load())
	}
	return true, nil
}

// txnLoad runs every producer's transaction loop against seeds, then
// verifies what was committed.
func txnLoad(ctx context.Context, cfg txnsConfig, name string, seeds []string, logf func(string, ...any)) (*txnsResult, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	if _, err := ensureTopic(ctx, seeds, cfg.Topic, cfg.Partitions); err != nil {
		return nil, err
	}
	admCl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return nil, err
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	start, err := endOffsets(ctx, adm, cfg.Topic)
	if err != nil {
		return nil, fmt.Errorf("start offsets: %w", err)
	}

	payload := make([]byte, cfg.RecordSize)
	if _, err := rand.Read(payload); err != nil {
		return nil, err
	}
	prefix := randomTopic() // fresh transactional IDs per run
	ps := make([]*txnProducer, cfg.Producers)
	defer func() {
		for _, p := range ps {
			if p != nil && p.cl != nil {
				p.cl.Close()
			}
		}
	}()
	r := &txnsResult{Name: name}
	var (
		committed, aborted, failed, records atomic.Int64
		firstErr                            atomic.Pointer[string]
		wg                                  sync.WaitGroup
	)
	fail := func(err error) {
		failed.Add(1)
		s := err.Error()
		firstErr.CompareAndSwap(nil, &s)
	}
	// One warm-up transaction per producer, outside the measured window:
	// InitProducerId, FindCoordinator, and the connections. Its records
	// are committed and verified like the others.
	for i := range ps {
		p := &txnProducer{cfg: cfg, seeds: seeds, txnID: fmt.Sprintf("%s-%d", prefix, i), next: i * cfg.PartitionsPerTxn % cfg.Partitions,
			endLat: newHistogram(), txnLat: newHistogram()}
		ps[i] = p
		if err := p.open(); err != nil {
			return nil, fmt.Errorf("producer %d: %w", i, err)
		}
		if _, err := p.txn(ctx, payload, false); err != nil {
			return nil, fmt.Errorf("warm-up transaction of producer %d: %w", i, err)
		}
		records.Add(int64(cfg.RecordsPerTxn))
	}
	began := time.Now()
	deadline := began.Add(cfg.Duration)
	for i, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) && ctx.Err() == nil {
				ok, err := p.txn(ctx, payload, true)
				switch {
				case ok:
					committed.Add(1)
					records.Add(int64(cfg.RecordsPerTxn))
				case errors.Is(err, errTxnAborted):
					aborted.Add(1)
					fail(err)
				case err != nil:
					if ctx.Err() != nil {
						return
					}
					fail(err)
					// The client may be in a failed state: a new one
					// (same transactional ID) fences it and goes on.
					if err := p.open(); err != nil {
						fail(fmt.Errorf("producer %d: %w", i, err))
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(began)
	endLat, txnLat := newHistogram(), newHistogram()
	for _, p := range ps {
		endLat.Merge(p.endLat)
		txnLat.Merge(p.txnLat)
		p.cl.Close()
		p.cl = nil
	}
	r.Committed, r.Aborted, r.Errors, r.Records = committed.Load(), aborted.Load(), failed.Load(), records.Load()
	r.Seconds = elapsed.Seconds()
	r.TxnsPerSec = float64(r.Committed) / r.Seconds
	measured := r.Committed * int64(cfg.RecordsPerTxn) // the warm-up ones are not timed
	r.RecordsPerSec = float64(measured) / r.Seconds
	r.MBPerSec = float64(measured) * float64(cfg.RecordSize) / 1e6 / r.Seconds
	r.EndTxn, r.Txn = summarize(endLat), summarize(txnLat)
	if e := firstErr.Load(); e != nil {
		r.FirstError = *e
	}
	if err := ctx.Err(); err != nil {
		return r, err
	}
	if cfg.Verify {
		logf("%s: reading back read_committed", name)
		n, open, err := readCommitted(ctx, adm, seeds, cfg.Topic, start)
		r.ReadBack, r.OpenAtTheEnd = n, open
		r.Verified = err == nil && !open && n == r.Records
		if err != nil {
			return r, fmt.Errorf("read back: %w", err)
		}
	}
	return r, nil
}

// readCommitted reads topic from start to its end with isolation level
// read_committed and counts the data records. It first waits (up to 10 s)
// for every partition's last stable offset to reach its high watermark;
// open reports that one did not.
func readCommitted(ctx context.Context, adm *kadm.Client, seeds []string, topic string, start map[int32]int64) (n int64, open bool, err error) {
	var end map[int32]int64
	for wait := time.Now().Add(10 * time.Second); ; {
		hwm, err := endOffsets(ctx, adm, topic)
		if err != nil {
			return 0, false, err
		}
		lsos, err := adm.ListCommittedOffsets(ctx, topic)
		if err != nil {
			return 0, false, err
		}
		if err := lsos.Error(); err != nil {
			return 0, false, err
		}
		open = false
		end = map[int32]int64{}
		lsos.Each(func(o kadm.ListedOffset) {
			end[o.Partition] = o.Offset
			open = open || o.Offset < hwm[o.Partition]
		})
		if !open || time.Now().After(wait) {
			break
		}
		select {
		case <-ctx.Done():
			return 0, open, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	offs := map[int32]kgo.Offset{}
	next := map[int32]int64{}
	for p, e := range end {
		if e > start[p] {
			offs[p] = kgo.NewOffset().At(start[p])
			next[p] = start[p]
		}
	}
	if len(offs) == 0 {
		return 0, open, nil
	}
	// Control records are kept only to know how far the reader got: the
	// last offset below the LSO is a transaction marker.
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		return 0, open, err
	}
	defer cl.Close()
	done := func() bool {
		for p := range offs {
			if next[p] < end[p] {
				return false
			}
		}
		return true
	}
	for !done() {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return n, open, err
		}
		var ferr error
		fs.EachError(func(_ string, p int32, err error) { ferr = fmt.Errorf("partition %d: %w", p, err) })
		if ferr != nil {
			return n, open, ferr
		}
		fs.EachRecord(func(r *kgo.Record) {
			next[r.Partition] = r.Offset + 1
			if !r.Attrs.IsControl() && r.Offset < end[r.Partition] {
				n++
			}
		})
	}
	return n, open, nil
}

// txnsTable lays out the results side by side, with a ratio column when
// kaas and kfake both ran.
func txnsTable(rs []*txnsResult) table {
	t := table{header: []string{"metric"}}
	for _, r := range rs {
		t.header = append(t.header, r.Name)
	}
	withRatio := len(rs) == 2
	if withRatio {
		t.header = append(t.header, "kaas/kfake")
	}
	rows := []struct {
		label string
		prec  int
		get   func(*txnsResult) float64
	}{
		{"transactions committed", 0, func(r *txnsResult) float64 { return float64(r.Committed) }},
		{"transactions aborted", 0, func(r *txnsResult) float64 { return float64(r.Aborted) }},
		{"transaction errors", 0, func(r *txnsResult) float64 { return float64(r.Errors) }},
		{"committed transactions/s", 1, func(r *txnsResult) float64 { return r.TxnsPerSec }},
		{"records/s (committed)", 0, func(r *txnsResult) float64 { return r.RecordsPerSec }},
		{"MB/s (committed)", 2, func(r *txnsResult) float64 { return r.MBPerSec }},
		{"EndTxn latency p50 ms", 3, func(r *txnsResult) float64 { return r.EndTxn.P50Ms }},
		{"EndTxn latency p99 ms", 3, func(r *txnsResult) float64 { return r.EndTxn.P99Ms }},
		{"EndTxn latency max ms", 3, func(r *txnsResult) float64 { return r.EndTxn.MaxMs }},
		{"transaction latency p50 ms", 3, func(r *txnsResult) float64 { return r.Txn.P50Ms }},
		{"transaction latency p99 ms", 3, func(r *txnsResult) float64 { return r.Txn.P99Ms }},
		{"read back (read_committed)", 0, func(r *txnsResult) float64 { return float64(r.ReadBack) }},
	}
	for _, m := range rows {
		row := []string{m.label}
		for _, r := range rs {
			row = append(row, fmtNum(m.get(r), m.prec))
		}
		if withRatio {
			row = append(row, fmtRatio(m.get(rs[0]), m.get(rs[1])))
		}
		t.rows = append(t.rows, row)
	}
	return t
}

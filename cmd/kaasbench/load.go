package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// targetResult is everything measured against one broker target.
type targetResult struct {
	Name       string         `json:"name"`
	Brokers    []string       `json:"brokers"`
	Topic      string         `json:"topic"`
	Partitions int            `json:"partitions"`
	Produce    *produceResult `json:"produce,omitempty"`
	Consume    *consumeResult `json:"consume,omitempty"`
	// Failures lists everything that makes this target's run unsuccessful
	// (produce errors, count mismatch, runtime errors).
	Failures []string `json:"failures,omitempty"`
}

type produceResult struct {
	Attempted     int64          `json:"attempted"`
	Records       int64          `json:"records"` // acknowledged without error
	Errors        int64          `json:"errors"`
	FirstError    string         `json:"first_error,omitempty"`
	Bytes         int64          `json:"bytes"` // value bytes acknowledged
	Seconds       float64        `json:"seconds"`
	RecordsPerSec float64        `json:"records_per_sec"`
	MBPerSec      float64        `json:"mb_per_sec"`
	Latency       latencySummary `json:"latency"`
	CPU           phaseCPU       `json:"cpu"`
}

// phaseCPU is the CPU time a phase cost this process (the clients) and,
// with --broker-pid, the broker; 0 when not measured.
type phaseCPU struct {
	ClientSeconds float64 `json:"client_seconds,omitempty"`
	BrokerSeconds float64 `json:"broker_seconds,omitempty"`
}

// cpuSpan starts measuring CPU time; the function it returns ends it.
func cpuSpan(brokerPID int) func() phaseCPU {
	c0, cok := processCPU()
	b0, bok := brokerCPU(brokerPID)
	return func() phaseCPU {
		var p phaseCPU
		if c1, ok := processCPU(); ok && cok {
			p.ClientSeconds = (c1 - c0).Seconds()
		}
		if b1, ok := brokerCPU(brokerPID); ok && bok {
			p.BrokerSeconds = (b1 - b0).Seconds()
		}
		return p
	}
}

type latencySummary struct {
	Count  uint64  `json:"count"`
	MeanMs float64 `json:"mean_ms"`
	P50Ms  float64 `json:"p50_ms"`
	P90Ms  float64 `json:"p90_ms"`
	P99Ms  float64 `json:"p99_ms"`
	P999Ms float64 `json:"p99_9_ms"`
	MaxMs  float64 `json:"max_ms"`
}

func summarize(h *histogram) latencySummary {
	ms := func(ns int64) float64 { return float64(ns) / 1e6 }
	return latencySummary{
		Count:  h.Count(),
		MeanMs: h.Mean() / 1e6,
		P50Ms:  ms(h.Quantile(50)),
		P90Ms:  ms(h.Quantile(90)),
		P99Ms:  ms(h.Quantile(99)),
		P999Ms: ms(h.Quantile(99.9)),
		MaxMs:  ms(h.Max()),
	}
}

type consumeResult struct {
	Records       int64    `json:"records"`
	Bytes         int64    `json:"bytes"`
	Expected      int64    `json:"expected"`    // records acknowledged by the produce phase
	LogRecords    int64    `json:"log_records"` // sum of end-start offsets over partitions
	Seconds       float64  `json:"seconds"`
	RecordsPerSec float64  `json:"records_per_sec"`
	MBPerSec      float64  `json:"mb_per_sec"`
	Verified      bool     `json:"verified"`
	CPU           phaseCPU `json:"cpu"`
}

func (t *targetResult) failf(format string, args ...any) {
	t.Failures = append(t.Failures, fmt.Sprintf(format, args...))
}

// runKfake starts an in-process kfake cluster (one broker on 127.0.0.1,
// default partition count = cfg.Partitions) and runs the load against it.
func runKfake(ctx context.Context, cfg config, logf func(string, ...any)) (*targetResult, error) {
	c, err := kfake.NewCluster(
		kfake.NumBrokers(1),
		kfake.DefaultNumPartitions(cfg.Partitions),
	)
	if err != nil {
		return nil, fmt.Errorf("starting kfake: %w", err)
	}
	defer c.Close()
	// The fake cluster is always fresh, so always create the topic there.
	kcfg := cfg
	kcfg.CreateTopic = true
	kcfg.Security = security{} // kfake serves plaintext only
	return runTarget(ctx, kcfg, "kfake", c.ListenAddrs(), logf)
}

// runTarget runs the whole load (create topic, produce, catch-up consume,
// verify) against one set of seed brokers. A non-nil error means the run could
// not complete; data problems (produce errors, count mismatch) are reported
// in the result's Failures instead.
func runTarget(ctx context.Context, cfg config, name string, seeds []string, logf func(string, ...any)) (*targetResult, error) {
	res := &targetResult{Name: name, Brokers: seeds, Topic: cfg.Topic, Partitions: cfg.Partitions}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()

	admCl, err := kgo.NewClient(append(cfg.Security.clientOpts(), kgo.SeedBrokers(seeds...))...)
	if err != nil {
		return res, err
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)

	if cfg.CreateTopic {
		resps, err := adm.CreateTopics(ctx, int32(cfg.Partitions), -1, nil, cfg.Topic)
		if err != nil {
			return res, fmt.Errorf("create topic %s: %w", cfg.Topic, err)
		}
		if r, ok := resps[cfg.Topic]; ok && r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
			return res, fmt.Errorf("create topic %s: %w (%s)", cfg.Topic, r.Err, r.ErrMessage)
		}
	}

	start, err := waitTopic(ctx, adm, cfg.Topic)
	if err != nil {
		return res, err
	}
	if len(start) != cfg.Partitions {
		logf("%s: topic %s has %d partitions (asked for %d); using %d", name, cfg.Topic, len(start), cfg.Partitions, len(start))
		res.Partitions = len(start)
	}

	logf("%s: producing %d records of %d bytes with %d producers", name, cfg.Records, cfg.RecordSize, cfg.Producers)
	span := cpuSpan(cfg.BrokerPID)
	pr, err := produce(ctx, cfg, seeds)
	if pr != nil {
		pr.CPU = span()
		res.Produce = pr
		if pr.Errors > 0 {
			res.failf("%d produce errors (first: %s)", pr.Errors, pr.FirstError)
		}
	}
	if err != nil {
		return res, err
	}

	if !cfg.Consume {
		return res, nil
	}
	end, err := waitEndOffsets(ctx, adm, cfg.Topic, start, pr.Records)
	if err != nil {
		return res, err
	}
	logf("%s: consuming from the start", name)
	span = cpuSpan(cfg.BrokerPID)
	cr, err := consume(ctx, cfg, seeds, start, end)
	if cr != nil {
		cr.CPU = span()
		cr.Expected = pr.Records
		cr.Verified = cr.Records == pr.Records && cr.Bytes == pr.Bytes
		res.Consume = cr
		if !cr.Verified {
			res.failf("COUNT MISMATCH: consumed %d records (%d bytes), produced %d records (%d bytes); log holds %d",
				cr.Records, cr.Bytes, pr.Records, pr.Bytes, cr.LogRecords)
		}
	}
	return res, err
}

// waitTopic waits until the topic's partitions all report end offsets
// (metadata propagated, leaders elected) and returns those offsets: the
// offsets our run starts producing at.
func waitTopic(ctx context.Context, adm *kadm.Client, topic string) (map[int32]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	var lastErr error
	for {
		offs, err := endOffsets(ctx, adm, topic)
		if err == nil && len(offs) > 0 {
			return offs, nil
		}
		if err == nil {
			err = errors.New("no partitions")
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("topic %s not ready: %w", topic, lastErr)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func endOffsets(ctx context.Context, adm *kadm.Client, topic string) (map[int32]int64, error) {
	listed, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	if err := listed.Error(); err != nil {
		return nil, err
	}
	offs := make(map[int32]int64)
	listed.Each(func(o kadm.ListedOffset) {
		if o.Topic == topic {
			offs[o.Partition] = o.Offset
		}
	})
	return offs, nil
}

// waitEndOffsets returns the end offsets after producing. With acks=none the
// broker may still be appending, so it polls briefly until the log holds at
// least want new records (or gives up and returns what it has).
func waitEndOffsets(ctx context.Context, adm *kadm.Client, topic string, start map[int32]int64, want int64) (map[int32]int64, error) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		end, err := endOffsets(ctx, adm, topic)
		if err != nil {
			return nil, fmt.Errorf("listing end offsets: %w", err)
		}
		if logDelta(start, end) >= want || time.Now().After(deadline) {
			return end, nil
		}
		select {
		case <-ctx.Done():
			return end, nil
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func logDelta(start, end map[int32]int64) int64 {
	var n int64
	for p, e := range end {
		if d := e - start[p]; d > 0 {
			n += d
		}
	}
	return n
}

func producerOpts(cfg config, seeds []string) []kgo.Opt {
	opts := append(cfg.Security.clientOpts(),
		kgo.SeedBrokers(seeds...),
		kgo.DefaultProduceTopic(cfg.Topic),
		kgo.ProducerLinger(cfg.Linger),
		kgo.ProducerBatchMaxBytes(int32(cfg.BatchMaxBytes)),
		kgo.ProducerBatchCompression(compressionCodecs[cfg.Compression]),
		kgo.RecordDeliveryTimeout(cfg.Timeout),
		kgo.MaxBufferedRecords(cfg.MaxBuffered),
	)
	switch cfg.Acks {
	case "all":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case "leader":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()))
	case "none":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()))
	}
	if !cfg.Idempotent {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	return opts
}

// produce runs cfg.Producers clients, each producing its share of
// cfg.Records (or until cfg.Duration passes), and measures per-record latency
// from the Produce call to the promise callback.
func produce(ctx context.Context, cfg config, seeds []string) (*produceResult, error) {
	var payload, corpus []byte
	if cfg.Compressible {
		corpus = newTextCorpus()
	} else {
		payload = make([]byte, cfg.RecordSize)
		if _, err := rand.Read(payload); err != nil {
			return nil, err
		}
	}

	clients := make([]*kgo.Client, cfg.Producers)
	for i := range clients {
		cl, err := kgo.NewClient(producerOpts(cfg, seeds)...)
		if err != nil {
			for _, c := range clients[:i] {
				c.Close()
			}
			return nil, fmt.Errorf("producer client: %w", err)
		}
		clients[i] = cl
	}
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()

	var (
		ok, failed, attempted atomic.Int64
		firstErr              atomic.Pointer[error]
		hists                 = make([]*histogram, cfg.Producers)
		flushErrs             = make([]error, cfg.Producers)
		wg                    sync.WaitGroup
	)
	startAt := time.Now()
	var deadline time.Time
	if cfg.Duration > 0 {
		deadline = startAt.Add(cfg.Duration)
	}
	for i, cl := range clients {
		n := cfg.Records / int64(cfg.Producers)
		if int64(i) < cfg.Records%int64(cfg.Producers) {
			n++
		}
		h := newHistogram()
		hists[i] = h
		values := newValueSource(payload, corpus, cfg.RecordSize, i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var sent int64
			for ; sent < n; sent++ {
				t0 := time.Now()
				if !deadline.IsZero() && t0.After(deadline) || ctx.Err() != nil {
					break
				}
				cl.Produce(ctx, &kgo.Record{Value: values.next()}, func(_ *kgo.Record, err error) {
					if err != nil {
						failed.Add(1)
						firstErr.CompareAndSwap(nil, &err)
						return
					}
					h.RecordDuration(time.Since(t0))
					ok.Add(1)
				})
			}
			attempted.Add(sent)
			flushErrs[i] = cl.Flush(ctx)
		}()
	}
	wg.Wait()
	elapsed := time.Since(startAt)

	// If a flush was cut short, closing the clients fails whatever is still
	// buffered; count every record that never got a successful promise.
	for _, c := range clients {
		c.Close()
	}
	clients = nil

	all := newHistogram()
	for _, h := range hists {
		all.Merge(h)
	}
	r := &produceResult{
		Attempted: attempted.Load(),
		Records:   ok.Load(),
		Errors:    failed.Load(),
		Seconds:   elapsed.Seconds(),
		Latency:   summarize(all),
	}
	if unresolved := r.Attempted - r.Records - r.Errors; unresolved > 0 {
		r.Errors += unresolved
	}
	if e := firstErr.Load(); e != nil {
		r.FirstError = (*e).Error()
	}
	r.Bytes = r.Records * int64(cfg.RecordSize)
	r.RecordsPerSec = float64(r.Records) / r.Seconds
	r.MBPerSec = mbps(r.Bytes, r.Seconds)
	if err := errors.Join(flushErrs...); err != nil {
		if r.FirstError == "" {
			r.FirstError = err.Error()
		}
		return r, fmt.Errorf("flushing producers: %w", err)
	}
	return r, nil
}

// consume reads every partition from its start offset up to its end offset
// with a single client and counts records and value bytes.
func consume(ctx context.Context, cfg config, seeds []string, start, end map[int32]int64) (*consumeResult, error) {
	r := &consumeResult{LogRecords: logDelta(start, end)}
	parts := make(map[int32]kgo.Offset)
	for p, e := range end {
		if e > start[p] {
			parts[p] = kgo.NewOffset().At(start[p])
		}
	}
	if len(parts) == 0 {
		return r, nil
	}
	cl, err := kgo.NewClient(append(cfg.Security.clientOpts(),
		kgo.SeedBrokers(seeds...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{cfg.Topic: parts}),
	)...)
	if err != nil {
		return r, err
	}
	defer cl.Close()

	// pending tracks partitions not yet read up to their end offset; parts
	// itself belongs to the client now.
	pending := make(map[int32]int64, len(parts))
	for p := range parts {
		pending[p] = end[p]
	}
	startAt := time.Now()
	for len(pending) > 0 {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			r.Seconds = time.Since(startAt).Seconds()
			return r, fmt.Errorf("consume stopped with %d/%d partitions incomplete: %w", len(pending), len(parts), err)
		}
		var fatal error
		fetches.EachError(func(t string, p int32, err error) {
			if !kerr.IsRetriable(err) {
				fatal = errors.Join(fatal, fmt.Errorf("%s[%d]: %w", t, p, err))
			}
		})
		if fatal != nil {
			return r, fmt.Errorf("consume: %w", fatal)
		}
		fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
			e, ok := pending[fp.Partition]
			if !ok {
				return
			}
			for _, rec := range fp.Records {
				if rec.Offset >= e {
					continue
				}
				r.Records++
				r.Bytes += int64(len(rec.Value))
				if rec.Offset == e-1 {
					delete(pending, fp.Partition)
				}
			}
		})
	}
	r.Seconds = time.Since(startAt).Seconds()
	r.RecordsPerSec = float64(r.Records) / r.Seconds
	r.MBPerSec = mbps(r.Bytes, r.Seconds)
	return r, nil
}

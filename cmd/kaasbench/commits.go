package main

// `kaasbench commits`: durable OffsetCommit throughput. N connections (one
// franz-go client each) loop simple commits (generation -1, no member: what
// a consumer with manual assignment sends) of increasing offsets, for
// distinct groups or all for one group, and the tool reports commits/s and
// per-commit latency. kgo.Client.Request routes each commit to its group's
// coordinator (FindCoordinator, and again on NOT_COORDINATOR).
//
//	kaasbench commits --brokers 127.0.0.1:9092 [--conns 64] [--duration 10s]
//	                  [--groups distinct|one] [--partitions-per-commit 1] [--kfake] [--json]

import (
	"context"
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
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// commitsConfig is the command line of `kaasbench commits`.
type commitsConfig struct {
	Brokers    []string      `json:"brokers,omitempty"`
	Kfake      bool          `json:"kfake"`
	Conns      int           `json:"conns"`
	Duration   time.Duration `json:"duration_ns"`
	Groups     string        `json:"groups"` // distinct or one
	Partitions int           `json:"partitions_per_commit"`
	Topic      string        `json:"topic"`
	Timeout    time.Duration `json:"timeout_ns"`
	JSON       bool          `json:"-"`
}

// commitsResult is what one target measured.
type commitsResult struct {
	Name             string         `json:"name"`
	Commits          int64          `json:"commits"`           // requests with every partition acknowledged
	PartitionCommits int64          `json:"partition_commits"` // partitions acknowledged
	Errors           int64          `json:"errors"`
	FirstError       string         `json:"first_error,omitempty"`
	Seconds          float64        `json:"seconds"`
	CommitsPerSec    float64        `json:"commits_per_sec"`
	Latency          latencySummary `json:"latency"`
}

func parseCommitsFlags(args []string, stderr io.Writer) (commitsConfig, error) {
	fs := flag.NewFlagSet("kaasbench commits", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		cfg     commitsConfig
		brokers string
	)
	fs.StringVar(&brokers, "brokers", "", "comma-separated kaas seed brokers, host:port")
	fs.BoolVar(&cfg.Kfake, "kfake", false, "also run against an in-process kfake broker")
	fs.IntVar(&cfg.Conns, "conns", 64, "connections (clients), each looping one commit at a time")
	fs.DurationVar(&cfg.Duration, "duration", 10*time.Second, "how long to commit")
	fs.StringVar(&cfg.Groups, "groups", "distinct", "distinct: one group per connection; one: every connection commits for one group")
	fs.IntVar(&cfg.Partitions, "partitions-per-commit", 1, "partitions in each OffsetCommit (the topic gets this many)")
	fs.StringVar(&cfg.Topic, "topic", "", "topic the offsets are for, created if missing (default kaasbench-<random>)")
	fs.DurationVar(&cfg.Timeout, "timeout", 2*time.Minute, "hard cap on each target's run")
	fs.BoolVar(&cfg.JSON, "json", false, "print results as JSON")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: kaasbench commits [--brokers 127.0.0.1:9092] [--kfake] [flags]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	cfg.Brokers = splitBrokers(brokers)
	if cfg.Topic == "" {
		cfg.Topic = randomTopic()
	}
	var errs []error
	if len(cfg.Brokers) == 0 && !cfg.Kfake {
		errs = append(errs, errors.New("nothing to do: give --brokers and/or --kfake"))
	}
	if cfg.Conns < 1 {
		errs = append(errs, errors.New("--conns must be >= 1"))
	}
	if cfg.Partitions < 1 {
		errs = append(errs, errors.New("--partitions-per-commit must be >= 1"))
	}
	if cfg.Groups != "distinct" && cfg.Groups != "one" {
		errs = append(errs, fmt.Errorf("--groups must be distinct or one, not %q", cfg.Groups))
	}
	if cfg.Duration <= 0 || cfg.Timeout <= 0 {
		errs = append(errs, errors.New("--duration and --timeout must be > 0"))
	}
	return cfg, errors.Join(errs...)
}

// runCommits is `kaasbench commits`; it returns the exit code.
func runCommits(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseCommitsFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "kaasbench commits:", err)
		return 2
	}
	logf := func(format string, a ...any) { fmt.Fprintf(stderr, "kaasbench commits: "+format+"\n", a...) }
	var (
		results  []*commitsResult
		failures []string
	)
	one := func(name string, seeds []string) {
		logf("%s: %d connections, %s groups, %d partitions per commit, for %s", name, cfg.Conns, cfg.Groups, cfg.Partitions, cfg.Duration)
		r, err := commitLoad(ctx, cfg, name, seeds)
		if r != nil {
			results = append(results, r)
			if r.Errors > 0 {
				failures = append(failures, fmt.Sprintf("%s: %d failed commits (first: %s)", name, r.Errors, r.FirstError))
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
		c, err := kfake.NewCluster(kfake.NumBrokers(1))
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
			Config   commitsConfig    `json:"config"`
			Results  []*commitsResult `json:"results"`
			OK       bool             `json:"ok"`
			Failures []string         `json:"failures,omitempty"`
		}{cfg, results, len(failures) == 0, failures})
	} else {
		fmt.Fprint(stdout, commitsTable(results).render())
	}
	if len(failures) > 0 {
		for _, f := range failures {
			fmt.Fprintln(stderr, "kaasbench commits: FAIL:", f)
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

// commitLoad runs the commit loop of every connection against seeds.
func commitLoad(ctx context.Context, cfg commitsConfig, name string, seeds []string) (*commitsResult, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	topicID, err := ensureTopic(ctx, seeds, cfg.Topic, cfg.Partitions)
	if err != nil {
		return nil, err
	}
	clients := make([]*kgo.Client, cfg.Conns)
	defer func() {
		for _, cl := range clients {
			if cl != nil {
				cl.Close()
			}
		}
	}()
	prefix := randomTopic() // a fresh group name per run
	for i := range clients {
		cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ClientID(fmt.Sprintf("kaasbench-commits-%d", i)))
		if err != nil {
			return nil, fmt.Errorf("client %d: %w", i, err)
		}
		clients[i] = cl
	}
	var (
		hist      = newHistogram()
		ok, parts atomic.Int64
		failed    atomic.Int64
		firstErr  atomic.Pointer[string]
		wg        sync.WaitGroup
	)
	fail := func(err error) {
		failed.Add(1)
		s := err.Error()
		firstErr.CompareAndSwap(nil, &s)
	}
	group := func(i int) string {
		if cfg.Groups == "one" {
			return prefix
		}
		return fmt.Sprintf("%s-%d", prefix, i)
	}
	// One warm-up commit per connection: finds the coordinator and opens
	// the connection to it outside the measured window.
	for i, cl := range clients {
		if err := commitOnce(ctx, cl, group(i), cfg.Topic, topicID, cfg.Partitions, 0); err != nil {
			return nil, fmt.Errorf("warm-up commit of connection %d: %w", i, err)
		}
	}
	start := time.Now()
	deadline := start.Add(cfg.Duration)
	for i, cl := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for off := int64(1); time.Now().Before(deadline) && ctx.Err() == nil; off++ {
				t0 := time.Now()
				if err := commitOnce(ctx, cl, group(i), cfg.Topic, topicID, cfg.Partitions, off); err != nil {
					if ctx.Err() == nil {
						fail(err)
					}
					continue
				}
				hist.RecordDuration(time.Since(t0))
				ok.Add(1)
				parts.Add(int64(cfg.Partitions))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	r := &commitsResult{Name: name, Commits: ok.Load(), PartitionCommits: parts.Load(), Errors: failed.Load(),
		Seconds: elapsed.Seconds(), Latency: summarize(hist)}
	r.CommitsPerSec = float64(r.Commits) / r.Seconds
	if e := firstErr.Load(); e != nil {
		r.FirstError = *e
	}
	return r, ctx.Err()
}

// commitOnce commits offset for partitions 0..n-1 of topic as group, with
// generation -1 and no member ID, and waits for the answer. The request
// names the topic both ways: by name up to v9, by ID from v10.
func commitOnce(ctx context.Context, cl *kgo.Client, group, topic string, topicID [16]byte, n int, offset int64) error {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group = group
	req.Generation = -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	rt.TopicID = topicID
	for p := range int32(n) {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition = p
		rp.Offset = offset
		rp.LeaderEpoch = -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	kresp, err := cl.Request(ctx, req)
	if err != nil {
		return fmt.Errorf("OffsetCommit %s: %w", group, err)
	}
	resp := kresp.(*kmsg.OffsetCommitResponse)
	acked := 0
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("OffsetCommit %s %s/%d: %w", group, t.Topic, p.Partition, err)
			}
			acked++
		}
	}
	if acked != n {
		return fmt.Errorf("OffsetCommit %s: %d partitions acknowledged of %d", group, acked, n)
	}
	return nil
}

// ensureTopic creates topic with partitions partitions unless it exists,
// waits until it is in the metadata and returns its topic ID.
func ensureTopic(ctx context.Context, seeds []string, topic string, partitions int) ([16]byte, error) {
	var id [16]byte
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return id, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	resps, err := adm.CreateTopics(ctx, int32(partitions), -1, nil, topic)
	if err != nil {
		return id, fmt.Errorf("create topic %s: %w", topic, err)
	}
	if r, ok := resps[topic]; ok && r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
		return id, fmt.Errorf("create topic %s: %w (%s)", topic, r.Err, r.ErrMessage)
	}
	if _, err := waitTopic(ctx, adm, topic); err != nil {
		return id, err
	}
	td, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return id, fmt.Errorf("metadata of %s: %w", topic, err)
	}
	if d, ok := td[topic]; ok && d.Err == nil {
		id = d.ID
	}
	if got := len(td[topic].Partitions); got < partitions {
		return id, fmt.Errorf("topic %s has %d partitions, --partitions-per-commit needs %d", topic, got, partitions)
	}
	return id, nil
}

// commitsTable lays out the results side by side, with a ratio column when
// kaas and kfake both ran.
func commitsTable(rs []*commitsResult) table {
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
		get   func(*commitsResult) float64
	}{
		{"commits (acked)", 0, func(r *commitsResult) float64 { return float64(r.Commits) }},
		{"partition commits (acked)", 0, func(r *commitsResult) float64 { return float64(r.PartitionCommits) }},
		{"commit errors", 0, func(r *commitsResult) float64 { return float64(r.Errors) }},
		{"commits/s", 0, func(r *commitsResult) float64 { return r.CommitsPerSec }},
		{"commit latency p50 ms", 3, func(r *commitsResult) float64 { return r.Latency.P50Ms }},
		{"commit latency p90 ms", 3, func(r *commitsResult) float64 { return r.Latency.P90Ms }},
		{"commit latency p99 ms", 3, func(r *commitsResult) float64 { return r.Latency.P99Ms }},
		{"commit latency max ms", 3, func(r *commitsResult) float64 { return r.Latency.MaxMs }},
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

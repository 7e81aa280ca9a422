package main

// `kaasbench scale`: many partitions on a few brokers (issue 20). Against
// running kaas brokers it
//
//  1. creates --topics × --partitions in ONE CreateTopics request and times
//     it until every partition has a leader in Metadata as every broker
//     answers it (each broker polled every --poll);
//  2. idles --idle and reads, per broker: CPU % over the window
//     (/proc/PID/stat), RSS (/proc/PID/status), open fds (/proc/PID/fd) per
//     partition it owns (leaders in Metadata naming it), its heartbeat
//     file's size, and the size of assignment.json;
//  3. sends --metadata-requests Metadata requests for all topics, one at a
//     time, round robin over the brokers: p50 and p99 latency;
//  4. produces one record (acks=all) to every partition and counts failures;
//  5. with --kill ID: SIGKILLs that broker and, from that moment, both
//     waits until every partition has a leader on a survivor in Metadata
//     and produces one record (acks=all) to every partition, retrying as
//     clients do: the takeover is done when the last one is acknowledged;
//
// and with --kfake runs steps 1, 3 and 4 against an in-process kfake of as
// many brokers. The first table is the shape of issue 20's targets table.
//
//	kaasbench scale --brokers 127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094 \
//	    --admin 127.0.0.1:9644,127.0.0.1:9645,127.0.0.1:9646 --pids P1,P2,P3 \
//	    --data DIR --topics 100 --partitions 100 [--kill 2] [--kfake] [--json | --markdown]
//
// --brokers, --admin and --pids are in the same order. Broker IDs come from
// --ids, else from each admin address's /status, else from matching the
// addresses in Metadata. Without --pids nothing is read from /proc and
// --kill is refused; without --data (or --cluster-dir) no file sizes.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/engine/cluster"
)

// scaleConfig is the command line of `kaasbench scale`.
type scaleConfig struct {
	Brokers          []string      `json:"brokers,omitempty"`
	Admin            []string      `json:"admin,omitempty"`
	PIDs             []int         `json:"pids,omitempty"`
	IDs              []int32       `json:"ids,omitempty"`
	Data             string        `json:"data,omitempty"`
	ClusterDir       string        `json:"cluster_dir,omitempty"`
	Topics           int           `json:"topics"`
	Partitions       int           `json:"partitions"`
	TopicPrefix      string        `json:"topic_prefix"`
	Idle             time.Duration `json:"idle_ns"`
	MetadataRequests int           `json:"metadata_requests"`
	Poll             time.Duration `json:"poll_ns"`
	Kill             int32         `json:"kill,omitempty"`
	Kfake            bool          `json:"kfake"`
	CreateTimeout    time.Duration `json:"create_timeout_ns"`
	TakeoverTimeout  time.Duration `json:"takeover_timeout_ns"`
	ProduceTimeout   time.Duration `json:"produce_timeout_ns"`
	JSON             bool          `json:"-"`
	Markdown         bool          `json:"-"`
}

// total is the number of partitions the run creates.
func (c scaleConfig) total() int { return c.Topics * c.Partitions }

// topicNames are the run's topics, in order.
func (c scaleConfig) topicNames() []string {
	names := make([]string, c.Topics)
	for i := range names {
		names[i] = fmt.Sprintf("%s%05d", c.TopicPrefix, i)
	}
	return names
}

func parseScaleFlags(args []string, stderr io.Writer) (scaleConfig, error) {
	fs := flag.NewFlagSet("kaasbench scale", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		cfg                       scaleConfig
		brokers, admin, pids, ids string
		kill                      int
	)
	fs.StringVar(&brokers, "brokers", "", "comma-separated Kafka addresses of the kaas brokers, host:port")
	fs.StringVar(&admin, "admin", "", "comma-separated admin addresses, in the order of --brokers (readiness, broker IDs, open partitions)")
	fs.StringVar(&pids, "pids", "", "comma-separated process IDs, in the order of --brokers (CPU, RSS, fds; --kill)")
	fs.StringVar(&ids, "ids", "", "comma-separated broker IDs, in the order of --brokers (default: from --admin, else from Metadata)")
	fs.StringVar(&cfg.Data, "data", "", "the brokers' shared data directory (heartbeat and assignment file sizes)")
	fs.StringVar(&cfg.ClusterDir, "cluster-dir", "", "the cluster directory (default <data>/__cluster)")
	fs.IntVar(&cfg.Topics, "topics", 100, "topics to create")
	fs.IntVar(&cfg.Partitions, "partitions", 100, "partitions per topic")
	fs.StringVar(&cfg.TopicPrefix, "topic-prefix", "", "topic name prefix (default scale-<random>-)")
	fs.DurationVar(&cfg.Idle, "idle", 30*time.Second, "idle window CPU is measured over")
	fs.IntVar(&cfg.MetadataRequests, "metadata-requests", 50, "Metadata requests for all topics, one at a time")
	fs.DurationVar(&cfg.Poll, "poll", 20*time.Millisecond, "least pause between Metadata polls of one broker while waiting for leaders (else 4 times the last poll's latency, up to 200ms)")
	fs.IntVar(&kill, "kill", 0, "SIGKILL this broker ID after the produce and time the takeover (needs --pids)")
	fs.BoolVar(&cfg.Kfake, "kfake", false, "also create, query and produce against an in-process kfake of as many brokers (3 without --brokers)")
	fs.DurationVar(&cfg.CreateTimeout, "create-timeout", 10*time.Minute, "CreateTopics request timeout, and how long to wait for every leader after it was sent")
	fs.DurationVar(&cfg.TakeoverTimeout, "takeover-timeout", 2*time.Minute, "after --kill, how long to wait for every partition to have a leader on a survivor")
	fs.DurationVar(&cfg.ProduceTimeout, "produce-timeout", time.Minute, "how long each produce to every partition may take")
	fs.BoolVar(&cfg.JSON, "json", false, "print results as JSON")
	fs.BoolVar(&cfg.Markdown, "markdown", false, "print the tables as Markdown")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: kaasbench scale --brokers A,B,C [--admin A',B',C'] [--pids P1,P2,P3] [--data DIR] [--topics 100] [--partitions 100] [--kill ID] [--kfake] [flags]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	var errs []error
	cfg.Brokers = splitBrokers(brokers)
	cfg.Admin = splitBrokers(admin)
	var err error
	if cfg.PIDs, err = parseInts[int](pids); err != nil {
		errs = append(errs, fmt.Errorf("--pids: %w", err))
	}
	if cfg.IDs, err = parseInts[int32](ids); err != nil {
		errs = append(errs, fmt.Errorf("--ids: %w", err))
	}
	cfg.Kill = int32(kill)
	if cfg.TopicPrefix == "" {
		cfg.TopicPrefix = "scale-" + strings.TrimPrefix(randomTopic(), "kaasbench-") + "-"
	}
	if cfg.ClusterDir == "" && cfg.Data != "" {
		cfg.ClusterDir = cfg.Data + "/__cluster"
	}
	n := len(cfg.Brokers)
	for _, l := range []struct {
		name string
		got  int
	}{{"--admin", len(cfg.Admin)}, {"--pids", len(cfg.PIDs)}, {"--ids", len(cfg.IDs)}} {
		if l.got != 0 && l.got != n {
			errs = append(errs, fmt.Errorf("%s names %d brokers, --brokers %d", l.name, l.got, n))
		}
	}
	if n == 0 && !cfg.Kfake {
		errs = append(errs, errors.New("nothing to do: give --brokers and/or --kfake"))
	}
	if cfg.Kill != 0 && (len(cfg.PIDs) == 0 || n < 2) {
		errs = append(errs, errors.New("--kill needs --pids and at least two --brokers"))
	}
	if cfg.Topics < 1 || cfg.Partitions < 1 || cfg.total() > 10_000_000 {
		errs = append(errs, errors.New("--topics and --partitions must be >= 1, and their product at most 10,000,000"))
	}
	if cfg.MetadataRequests < 0 || cfg.Idle < 0 || cfg.Poll <= 0 {
		errs = append(errs, errors.New("--metadata-requests and --idle must be >= 0, --poll > 0"))
	}
	if cfg.CreateTimeout <= 0 || cfg.TakeoverTimeout <= 0 || cfg.ProduceTimeout <= 0 {
		errs = append(errs, errors.New("--create-timeout, --takeover-timeout and --produce-timeout must be > 0"))
	}
	if cfg.JSON && cfg.Markdown {
		errs = append(errs, errors.New("--json and --markdown exclude each other"))
	}
	return cfg, errors.Join(errs...)
}

// parseInts parses a comma-separated list of integers.
func parseInts[T int | int32](list string) ([]T, error) {
	var out []T
	for _, s := range splitBrokers(list) {
		v, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("%q is not a number", s)
		}
		out = append(out, T(v))
	}
	return out, nil
}

// scaleResult is everything measured against one target.
type scaleResult struct {
	Name       string          `json:"name"`
	Brokers    int             `json:"brokers"`
	Partitions int             `json:"partitions"`
	Create     *createResult   `json:"create,omitempty"`
	Idle       *idleResult     `json:"idle,omitempty"`
	Metadata   *metadataResult `json:"metadata,omitempty"`
	Produce    *produceRound   `json:"produce,omitempty"`
	Kill       *killResult     `json:"kill,omitempty"`
	Failures   []string        `json:"failures,omitempty"`
}

func (r *scaleResult) fail(format string, a ...any) {
	r.Failures = append(r.Failures, fmt.Sprintf(format, a...))
}

// createResult is step 1.
type createResult struct {
	// AnswerSeconds: CreateTopics sent → answered.
	AnswerSeconds float64 `json:"answer_seconds"`
	TopicErrors   int     `json:"topic_errors"`
	FirstError    string  `json:"first_error,omitempty"`
	// Leaders is the wait for every partition's leader; its Seconds count
	// from the CreateTopics request.
	Leaders leaderWait `json:"leaders"`
}

// leaderWait is a wait until every broker's Metadata names a leader for
// every partition.
type leaderWait struct {
	Complete bool    `json:"complete"`
	Seconds  float64 `json:"seconds"` // the last broker's; with Complete false, the wait's length
	// Served is, at the end, the fewest partitions with an acceptable
	// leader in any broker's Metadata.
	Served    int          `json:"served"`
	PerBroker []brokerWait `json:"per_broker"`
}

// brokerWait is one broker's view in a leaderWait.
type brokerWait struct {
	ID       int32   `json:"id"`
	Complete bool    `json:"complete"`
	Seconds  float64 `json:"seconds"`
	Served   int     `json:"served"` // in its last Metadata answer
	Polls    int     `json:"polls"`  // Metadata requests sent to it
	Error    string  `json:"error,omitempty"`
	// CPUPercent is its CPU over the wait (with a pid), the polls' share
	// included.
	CPUPercent *float64 `json:"cpu_percent,omitempty"`
}

// brokerSample is what was read of one broker at one moment; a nil field
// was not measured.
type brokerSample struct {
	ID             int32    `json:"id"`
	Addr           string   `json:"addr"`
	PID            int      `json:"pid,omitempty"`
	Owned          int      `json:"owned"` // leaders in Metadata naming it
	PartitionsOpen *int64   `json:"partitions_open,omitempty"`
	CPUPercent     *float64 `json:"cpu_percent,omitempty"`
	RSSBytes       *int64   `json:"rss_bytes,omitempty"`
	FDs            *int     `json:"fds,omitempty"`
	HeartbeatBytes *int64   `json:"heartbeat_bytes,omitempty"`
}

// fdsPerOwned is fds ÷ owned partitions; ok is false when either is missing.
func (b brokerSample) fdsPerOwned() (float64, bool) {
	if b.FDs == nil || b.Owned == 0 {
		return 0, false
	}
	return float64(*b.FDs) / float64(b.Owned), true
}

// idleResult is step 2.
type idleResult struct {
	Seconds         float64        `json:"seconds"`
	Brokers         []brokerSample `json:"brokers"`
	AssignmentBytes *int64         `json:"assignment_bytes,omitempty"`
}

// metadataResult is step 3.
type metadataResult struct {
	Requests   int            `json:"requests"`
	Errors     int            `json:"errors"`
	FirstError string         `json:"first_error,omitempty"`
	Partitions int            `json:"partitions"` // of the run's topics, in the last answer
	Latency    latencySummary `json:"latency"`
}

// produceRound is one record to every partition.
type produceRound struct {
	Partitions int     `json:"partitions"`
	Acked      int     `json:"acked"`
	Failed     int     `json:"failed"`
	Seconds    float64 `json:"seconds"`
	// Errors counts failed partitions by error.
	Errors map[string]int `json:"errors,omitempty"`
	// lastAck is when the last record was acknowledged.
	lastAck time.Time
}

// killResult is step 5.
type killResult struct {
	ID  int32 `json:"id"`
	PID int   `json:"pid"`
	// Leaders counts from the SIGKILL; a leader must be a survivor.
	Leaders leaderWait    `json:"leaders"`
	Produce *produceRound `json:"produce,omitempty"`
	// AckedSeconds: SIGKILL → every partition's record acknowledged
	// (Acked false: not every one was), by a producer that starts at the
	// kill and retries as clients do, so each partition counts from when
	// it serves again, not from when the last one does.
	Acked        bool    `json:"acked"`
	AckedSeconds float64 `json:"acked_seconds,omitempty"`
	// Survivors are read after the produce.
	Survivors []brokerSample `json:"survivors"`
	// Problems are the survivors' reconcile rows with an error, by error,
	// read when a partition stayed without a leader.
	Problems map[string]int `json:"problems,omitempty"`
}

// scaleBroker is one broker under test and the client that talks to it
// alone.
type scaleBroker struct {
	ID    int32
	Addr  string
	Admin string
	PID   int
	cl    *kgo.Client
}

// metadata asks this broker for every topic.
func (b *scaleBroker) metadata(ctx context.Context) (*kmsg.MetadataResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest() // no topics: all of them
	resp, err := req.RequestWith(ctx, b.cl.SeedBrokers()[0])
	if err != nil {
		return nil, fmt.Errorf("metadata from broker %d (%s): %w", b.ID, b.Addr, err)
	}
	return resp, nil
}

// countLeaders counts, in a Metadata answer, the partitions of topics with
// a leader that ok accepts (nil: any), and how many each leader has.
func countLeaders(resp *kmsg.MetadataResponse, topics map[string]bool, ok func(int32) bool) (served int, owned map[int32]int) {
	owned = map[int32]int{}
	for _, t := range resp.Topics {
		if t.Topic == nil || !topics[*t.Topic] || t.ErrorCode != 0 {
			continue
		}
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 || p.Leader < 0 || (ok != nil && !ok(p.Leader)) {
				continue
			}
			served++
			owned[p.Leader]++
		}
	}
	return served, owned
}

// waitLeaders polls every broker's Metadata, poll apart, until it names an
// accepted leader for all total partitions of topics or ctx ends. Seconds
// count from start. logf (if not nil) hears every 10 s how far each is.
func waitLeaders(ctx context.Context, bs []*scaleBroker, topics map[string]bool, total int, ok func(int32) bool,
	start time.Time, poll time.Duration, logf func(string, ...any)) leaderWait {
	per := make([]brokerWait, len(bs))
	var wg sync.WaitGroup
	for i, b := range bs {
		wg.Go(func() {
			w := brokerWait{ID: b.ID}
			cpu0, cpuOK := brokerCPU(b.PID)
			t0 := time.Now()
			nextLog := start.Add(10 * time.Second)
			for {
				t1 := time.Now()
				resp, err := b.metadata(ctx)
				took := time.Since(t1)
				w.Polls++
				if err == nil {
					w.Served, _ = countLeaders(resp, topics, ok)
					w.Error = ""
				} else if ctx.Err() == nil {
					w.Error = err.Error()
				}
				if w.Served >= total {
					w.Complete = true
					break
				}
				if logf != nil && time.Now().After(nextLog) {
					logf("broker %d: %s of %s partitions with a leader after %.0fs %s", b.ID, fmtCount(w.Served), fmtCount(total),
						time.Since(start).Seconds(), w.Error)
					nextLog = nextLog.Add(10 * time.Second)
				}
				// At least poll between requests, and four times what the
				// last one took (up to 200 ms, the resolution kept): a
				// Metadata of 100,000 partitions costs the broker enough
				// that polling it back to back would slow what is being
				// measured.
				if !sleepCtx(ctx, max(poll, min(4*took, 200*time.Millisecond))) {
					break
				}
			}
			w.Seconds = time.Since(start).Seconds()
			if cpu1, ok := brokerCPU(b.PID); ok && cpuOK && w.Seconds > 0 {
				w.CPUPercent = new(100 * (cpu1 - cpu0).Seconds() / time.Since(t0).Seconds())
			}
			per[i] = w
		})
	}
	wg.Wait()
	return summarizeWait(per)
}

// sleepCtx sleeps for d; false if ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// summarizeWait folds the brokers' waits: complete when all are, the
// last one's time, the fewest served.
func summarizeWait(per []brokerWait) leaderWait {
	w := leaderWait{Complete: len(per) > 0, PerBroker: per}
	for i, b := range per {
		w.Complete = w.Complete && b.Complete
		w.Seconds = max(w.Seconds, b.Seconds)
		if i == 0 || b.Served < w.Served {
			w.Served = b.Served
		}
	}
	return w
}

// runScale is `kaasbench scale`; it returns the exit code.
func runScale(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseScaleFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "kaasbench scale:", err)
		return 2
	}
	logf := func(format string, a ...any) { fmt.Fprintf(stderr, "kaasbench scale: "+format+"\n", a...) }
	rep := scaleReport{Config: cfg, Command: "kaasbench scale " + strings.Join(args, " ")}
	if len(cfg.Brokers) > 0 {
		rep.Kaas = scaleKaas(ctx, cfg, logf)
	}
	if cfg.Kfake && ctx.Err() == nil {
		rep.Kfake = scaleKfake(ctx, cfg, logf)
	}
	for _, r := range []*scaleResult{rep.Kaas, rep.Kfake} {
		if r != nil {
			for _, f := range r.Failures {
				rep.Failures = append(rep.Failures, r.Name+": "+f)
			}
		}
	}
	if err := ctx.Err(); err != nil {
		rep.Failures = append(rep.Failures, "kaasbench scale: interrupted: "+err.Error())
	}
	rep.OK = len(rep.Failures) == 0
	return printReport(stdout, stderr, cfg.JSON, rep, rep.Failures, func() {
		render := table.render
		if cfg.Markdown {
			render = table.markdown
		}
		fmt.Fprintf(stdout, "command: %s\n\n", rep.Command)
		fmt.Fprint(stdout, render(scaleTargetsTable(cfg, rep.Kaas, rep.Kfake)))
		if rep.Kaas != nil && rep.Kaas.Idle != nil {
			fmt.Fprintf(stdout, "\nbrokers after the %s idle window\n\n", cfg.Idle)
			fmt.Fprint(stdout, render(brokerTable(rep.Kaas.Idle.Brokers, true)))
		}
		if rep.Kaas != nil && rep.Kaas.Kill != nil {
			fmt.Fprintf(stdout, "\nsurvivors after the kill of broker %d\n\n", rep.Kaas.Kill.ID)
			fmt.Fprint(stdout, render(brokerTable(rep.Kaas.Kill.Survivors, false)))
		}
		fmt.Fprintln(stdout)
		fmt.Fprint(stdout, render(scaleStepsTable(rep.Kaas, rep.Kfake)))
	})
}

// scaleReport is the JSON output.
type scaleReport struct {
	Command  string       `json:"command"`
	Config   scaleConfig  `json:"config"`
	Kaas     *scaleResult `json:"kaas,omitempty"`
	Kfake    *scaleResult `json:"kfake,omitempty"`
	OK       bool         `json:"ok"`
	Failures []string     `json:"failures,omitempty"`
}

// scaleKaas runs every step against the kaas brokers of cfg.
func scaleKaas(ctx context.Context, cfg scaleConfig, logf func(string, ...any)) *scaleResult {
	res := &scaleResult{Name: "kaas", Brokers: len(cfg.Brokers), Partitions: cfg.total()}
	if err := waitReady(ctx, cfg.Admin, time.Minute); err != nil {
		res.fail("%v", err)
		return res
	}
	bs, err := connectBrokers(ctx, cfg)
	if err != nil {
		res.fail("%v", err)
		return res
	}
	defer closeBrokers(bs)
	logf("kaas: brokers %s", describeBrokers(bs))
	if !runCreate(ctx, cfg, res, bs, logf) {
		return res
	}
	res.Idle = measureIdle(ctx, cfg, bs, logf)
	runMetadataAndProduce(ctx, cfg, res, bs, logf)
	if cfg.Kill != 0 && ctx.Err() == nil {
		res.Kill = runKill(ctx, cfg, res, bs, logf)
	}
	return res
}

// scaleKfake runs steps 1, 3 and 4 against an in-process kfake.
func scaleKfake(ctx context.Context, cfg scaleConfig, logf func(string, ...any)) *scaleResult {
	n := max(len(cfg.Brokers), 3)
	res := &scaleResult{Name: "kfake", Brokers: n, Partitions: cfg.total()}
	c, err := kfake.NewCluster(kfake.NumBrokers(n))
	if err != nil {
		res.fail("starting kfake: %v", err)
		return res
	}
	defer c.Close()
	kcfg := cfg
	kcfg.Brokers, kcfg.Admin, kcfg.PIDs, kcfg.IDs = c.ListenAddrs(), nil, nil, nil
	bs, err := connectBrokers(ctx, kcfg)
	if err != nil {
		res.fail("%v", err)
		return res
	}
	defer closeBrokers(bs)
	if runCreate(ctx, kcfg, res, bs, logf) {
		runMetadataAndProduce(ctx, kcfg, res, bs, logf)
	}
	return res
}

func runMetadataAndProduce(ctx context.Context, cfg scaleConfig, res *scaleResult, bs []*scaleBroker, logf func(string, ...any)) {
	topics := topicSet(cfg)
	if cfg.MetadataRequests > 0 && ctx.Err() == nil {
		logf("%s: %d Metadata requests for all topics", res.Name, cfg.MetadataRequests)
		res.Metadata = measureMetadata(ctx, bs, topics, cfg.MetadataRequests)
		if res.Metadata.Errors > 0 {
			res.fail("%d of %d Metadata requests failed (first: %s)", res.Metadata.Errors, res.Metadata.Requests, res.Metadata.FirstError)
		}
	}
	if ctx.Err() != nil {
		return
	}
	logf("%s: one record (acks=all) to each of %d partitions", res.Name, cfg.total())
	res.Produce = produceAll(ctx, brokerAddrs(bs), cfg, cfg.ProduceTimeout)
	if res.Produce.Failed > 0 {
		res.fail("produce: %d of %d partitions failed: %s", res.Produce.Failed, res.Produce.Partitions, fmtErrorCounts(res.Produce.Errors))
	}
}

// waitReady waits until every admin address answers /readyz with 200.
func waitReady(ctx context.Context, admin []string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, a := range admin {
		for {
			_, err := adminGet(ctx, a, "/readyz")
			if err == nil {
				break
			}
			if !sleepCtx(ctx, 100*time.Millisecond) {
				return fmt.Errorf("broker at admin %s not ready: %w", a, err)
			}
		}
	}
	return nil
}

var adminClient = &http.Client{Timeout: 2 * time.Minute}

// adminGet fetches http://addr<path> and fails on any status but 200.
func adminGet(ctx context.Context, addr, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := adminClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s%s: %s: %s", addr, path, resp.Status, strings.TrimSpace(string(b)))
	}
	return b, nil
}

// adminStatus is what kaasbench reads of a broker's /status.
type adminStatus struct {
	BrokerID       int32 `json:"brokerID"`
	PartitionsOpen int64 `json:"partitionsOpen"`
}

func readAdminStatus(ctx context.Context, addr string) (adminStatus, error) {
	var st adminStatus
	b, err := adminGet(ctx, addr, "/status")
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal(b, &st)
}

// connectBrokers makes one client per broker and learns the broker IDs.
func connectBrokers(ctx context.Context, cfg scaleConfig) ([]*scaleBroker, error) {
	bs := make([]*scaleBroker, len(cfg.Brokers))
	for i, addr := range cfg.Brokers {
		b := &scaleBroker{Addr: addr, ID: -1}
		if i < len(cfg.Admin) {
			b.Admin = cfg.Admin[i]
		}
		if i < len(cfg.PIDs) {
			b.PID = cfg.PIDs[i]
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID("kaasbench-scale"))
		if err != nil {
			closeBrokers(bs)
			return nil, err
		}
		b.cl = cl
		bs[i] = b
	}
	fail := func(err error) ([]*scaleBroker, error) {
		closeBrokers(bs)
		return nil, err
	}
	switch {
	case len(cfg.IDs) > 0:
		for i, b := range bs {
			b.ID = cfg.IDs[i]
		}
	case len(cfg.Admin) > 0:
		for _, b := range bs {
			st, err := readAdminStatus(ctx, b.Admin)
			if err != nil {
				return fail(fmt.Errorf("broker ID of %s: %w", b.Addr, err))
			}
			b.ID = st.BrokerID
		}
	default:
		resp, err := bs[0].metadata(ctx)
		if err != nil {
			return fail(err)
		}
		for _, b := range bs {
			id, ok := brokerIDByAddr(resp, b.Addr)
			if !ok {
				return fail(fmt.Errorf("no broker in Metadata advertises %s: give --ids or --admin", b.Addr))
			}
			b.ID = id
		}
	}
	return bs, nil
}

// brokerIDByAddr finds the broker advertising addr in a Metadata answer.
func brokerIDByAddr(resp *kmsg.MetadataResponse, addr string) (int32, bool) {
	for _, b := range resp.Brokers {
		if fmt.Sprintf("%s:%d", b.Host, b.Port) == addr {
			return b.NodeID, true
		}
	}
	return 0, false
}

func closeBrokers(bs []*scaleBroker) {
	for _, b := range bs {
		if b != nil && b.cl != nil {
			b.cl.Close()
		}
	}
}

func brokerAddrs(bs []*scaleBroker) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = b.Addr
	}
	return out
}

func describeBrokers(bs []*scaleBroker) string {
	var parts []string
	for _, b := range bs {
		s := fmt.Sprintf("%d=%s", b.ID, b.Addr)
		if b.PID > 0 {
			s += fmt.Sprintf(" (pid %d)", b.PID)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

func topicSet(cfg scaleConfig) map[string]bool {
	m := map[string]bool{}
	for _, t := range cfg.topicNames() {
		m[t] = true
	}
	return m
}

// runCreate is step 1; it reports whether every topic was created.
func runCreate(ctx context.Context, cfg scaleConfig, res *scaleResult, bs []*scaleBroker, logf func(string, ...any)) bool {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = int32(min(cfg.CreateTimeout.Milliseconds(), 1<<31-1))
	for _, name := range cfg.topicNames() {
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic = name
		t.NumPartitions = int32(cfg.Partitions)
		t.ReplicationFactor = 1
		req.Topics = append(req.Topics, t)
	}
	logf("%s: creating %d topics x %d partitions (%s) in one CreateTopics request", res.Name, cfg.Topics, cfg.Partitions, fmtCount(cfg.total()))
	cr := &createResult{}
	res.Create = cr
	start := time.Now()
	waitCtx, stopWait := context.WithTimeout(ctx, cfg.CreateTimeout)
	defer stopWait()
	waited := make(chan leaderWait, 1)
	go func() {
		waited <- waitLeaders(waitCtx, bs, topicSet(cfg), cfg.total(), nil, start, cfg.Poll, logf)
	}()
	reqCtx, cancel := context.WithTimeout(ctx, cfg.CreateTimeout+30*time.Second)
	defer cancel()
	kresp, err := bs[0].cl.Request(reqCtx, req)
	cr.AnswerSeconds = time.Since(start).Seconds()
	if err != nil {
		stopWait()
		cr.Leaders = <-waited
		res.fail("CreateTopics: %v", err)
		return false
	}
	for _, t := range kresp.(*kmsg.CreateTopicsResponse).Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			cr.TopicErrors++
			if cr.FirstError == "" {
				cr.FirstError = t.Topic + ": " + err.Error()
				if t.ErrorMessage != nil {
					cr.FirstError += ": " + *t.ErrorMessage
				}
			}
		}
	}
	if cr.TopicErrors > 0 {
		stopWait() // the partitions of failed topics never come
	}
	logf("%s: CreateTopics answered after %.1fs (%d topic errors)", res.Name, cr.AnswerSeconds, cr.TopicErrors)
	cr.Leaders = <-waited
	if cr.TopicErrors > 0 {
		res.fail("CreateTopics: %d of %d topics failed (first: %s)", cr.TopicErrors, cfg.Topics, cr.FirstError)
		return false
	}
	if !cr.Leaders.Complete {
		res.fail("after %.0fs, only %d of %d partitions have a leader in every broker's Metadata", cr.Leaders.Seconds, cr.Leaders.Served, cfg.total())
	} else {
		logf("%s: every partition has a leader in every broker's Metadata after %.1fs", res.Name, cr.Leaders.Seconds)
	}
	return true
}

// sampleBroker reads what /proc, the admin address and the cluster
// directory tell of b now.
func sampleBroker(ctx context.Context, cfg scaleConfig, b *scaleBroker) brokerSample {
	s := brokerSample{ID: b.ID, Addr: b.Addr, PID: b.PID}
	if b.PID > 0 {
		if v, err := procRSS(b.PID); err == nil {
			s.RSSBytes = new(v)
		}
		if v, err := countFDs(b.PID); err == nil {
			s.FDs = new(v)
		}
	}
	if cfg.ClusterDir != "" {
		if fi, err := os.Stat(cluster.HeartbeatPath(cfg.ClusterDir, b.ID)); err == nil {
			s.HeartbeatBytes = new(fi.Size())
		}
	}
	if b.Admin != "" {
		if st, err := readAdminStatus(ctx, b.Admin); err == nil {
			s.PartitionsOpen = new(st.PartitionsOpen)
		}
	}
	return s
}

// measureIdle is step 2.
func measureIdle(ctx context.Context, cfg scaleConfig, bs []*scaleBroker, logf func(string, ...any)) *idleResult {
	logf("kaas: idle for %s", cfg.Idle)
	cpu0 := make([]time.Duration, len(bs))
	have0 := make([]bool, len(bs))
	for i, b := range bs {
		cpu0[i], have0[i] = brokerCPU(b.PID)
	}
	start := time.Now()
	sleepCtx(ctx, cfg.Idle)
	wall := time.Since(start)
	ir := &idleResult{Seconds: wall.Seconds()}
	for i, b := range bs {
		cpu1, ok := brokerCPU(b.PID)
		s := sampleBroker(ctx, cfg, b)
		if ok && have0[i] && wall > 0 {
			s.CPUPercent = new(100 * (cpu1 - cpu0[i]).Seconds() / wall.Seconds())
		}
		ir.Brokers = append(ir.Brokers, s)
	}
	if cfg.ClusterDir != "" {
		if fi, err := os.Stat(cluster.AssignmentPath(cfg.ClusterDir)); err == nil {
			ir.AssignmentBytes = new(fi.Size())
		}
	}
	// Owned partitions, after the files and fds were read.
	if resp, err := bs[0].metadata(ctx); err == nil {
		_, owned := countLeaders(resp, topicSet(cfg), nil)
		for i := range ir.Brokers {
			ir.Brokers[i].Owned = owned[ir.Brokers[i].ID]
		}
	}
	return ir
}

// measureMetadata is step 3: n requests for all topics, one at a time,
// round robin over bs.
func measureMetadata(ctx context.Context, bs []*scaleBroker, topics map[string]bool, n int) *metadataResult {
	h := newHistogram()
	mr := &metadataResult{}
	for i := 0; i < n && ctx.Err() == nil; i++ {
		b := bs[i%len(bs)]
		t0 := time.Now()
		resp, err := b.metadata(ctx)
		d := time.Since(t0)
		mr.Requests++
		if err != nil {
			mr.Errors++
			if mr.FirstError == "" {
				mr.FirstError = err.Error()
			}
			continue
		}
		h.RecordDuration(d)
		mr.Partitions = 0
		for _, t := range resp.Topics {
			if t.Topic != nil && topics[*t.Topic] {
				mr.Partitions += len(t.Partitions)
			}
		}
	}
	mr.Latency = summarize(h)
	return mr
}

// produceAll is steps 4 and 5's produce: one record to every partition
// with acks=all, not idempotent (a fresh client; only whether each
// partition takes a record is measured), within timeout.
func produceAll(ctx context.Context, seeds []string, cfg scaleConfig, timeout time.Duration, opts ...kgo.Opt) *produceRound {
	pr := &produceRound{Partitions: cfg.total()}
	start := time.Now()
	defer func() { pr.Seconds = time.Since(start).Seconds() }()
	fail := func(n int, err error) {
		if pr.Errors == nil {
			pr.Errors = map[string]int{}
		}
		pr.Errors[err.Error()] += n
		pr.Failed += n
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(seeds...),
		kgo.ClientID("kaasbench-scale"),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DisableIdempotentWrite(),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.MaxBufferedRecords(cfg.total() + 1),
		kgo.ManualFlushing(),
		kgo.RecordDeliveryTimeout(timeout),
		kgo.ProduceRequestTimeout(min(timeout, 30*time.Second)),
	}, opts...)...)
	if err != nil {
		fail(pr.Partitions, err)
		return pr
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout+10*time.Second)
	defer cancel()
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	value := []byte("kaasbench scale")
	for _, topic := range cfg.topicNames() {
		for p := range int32(cfg.Partitions) {
			wg.Add(1)
			cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: p, Value: value}, func(_ *kgo.Record, err error) {
				mu.Lock()
				if err != nil {
					fail(1, err)
				} else {
					pr.Acked++
					pr.lastAck = time.Now()
				}
				mu.Unlock()
				wg.Done()
			})
		}
	}
	_ = cl.Flush(ctx) // a failed flush leaves its records to fail through their promises
	wg.Wait()
	return pr
}

// runKill is step 5.
func runKill(ctx context.Context, cfg scaleConfig, res *scaleResult, bs []*scaleBroker, logf func(string, ...any)) *killResult {
	var victim *scaleBroker
	var survivors []*scaleBroker
	for _, b := range bs {
		if b.ID == cfg.Kill {
			victim = b
		} else {
			survivors = append(survivors, b)
		}
	}
	kr := &killResult{ID: cfg.Kill}
	if victim == nil || victim.PID <= 0 {
		res.fail("--kill %d: no such broker with a pid among %s", cfg.Kill, describeBrokers(bs))
		return kr
	}
	kr.PID = victim.PID
	proc, err := os.FindProcess(victim.PID)
	if err == nil {
		err = proc.Kill() // SIGKILL
	}
	start := time.Now()
	if err != nil {
		res.fail("kill broker %d (pid %d): %v", victim.ID, victim.PID, err)
		return kr
	}
	logf("kaas: SIGKILLed broker %d (pid %d); waiting for every partition to have a leader on a survivor", victim.ID, victim.PID)
	alive := map[int32]bool{}
	for _, b := range survivors {
		alive[b.ID] = true
	}
	isAlive := func(id int32) bool { return alive[id] }
	// A producer to every partition from the kill on, as applications keep
	// producing through a takeover: it retries what the dead broker led,
	// refreshing metadata at most every 250 ms (the Java client waits
	// retry.backoff.ms, 100 ms; franz-go's default, 5 s, would add up to
	// 5 s to the figure), until the survivor that took the partition over
	// acks.
	produced := make(chan *produceRound, 1)
	go func() {
		produced <- produceAll(ctx, brokerAddrs(survivors), cfg, cfg.TakeoverTimeout+cfg.ProduceTimeout,
			kgo.MetadataMinAge(250*time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }))
	}()
	waitCtx, cancel := context.WithTimeout(ctx, cfg.TakeoverTimeout)
	kr.Leaders = waitLeaders(waitCtx, survivors, topicSet(cfg), cfg.total(), isAlive, start, cfg.Poll, logf)
	cancel()
	if kr.Leaders.Complete {
		logf("kaas: every partition has a leader on a survivor %.1fs after the kill", kr.Leaders.Seconds)
	} else {
		res.fail("kill of broker %d: after %.0fs, %d of %d partitions still have no leader on a survivor",
			victim.ID, cfg.TakeoverTimeout.Seconds(), cfg.total()-kr.Leaders.Served, cfg.total())
	}
	kr.Produce = <-produced
	if kr.Produce.Failed == 0 {
		kr.Acked, kr.AckedSeconds = true, kr.Produce.lastAck.Sub(start).Seconds()
		logf("kaas: every partition acknowledged a record %.1fs after the kill", kr.AckedSeconds)
	} else {
		res.fail("after the kill of broker %d: produce to %d of %d partitions failed: %s", victim.ID,
			kr.Produce.Failed, kr.Produce.Partitions, fmtErrorCounts(kr.Produce.Errors))
	}
	var owned map[int32]int
	if resp, err := survivors[0].metadata(ctx); err == nil {
		_, owned = countLeaders(resp, topicSet(cfg), isAlive)
	}
	for _, b := range survivors {
		s := sampleBroker(ctx, cfg, b)
		s.Owned = owned[b.ID]
		kr.Survivors = append(kr.Survivors, s)
	}
	if !kr.Leaders.Complete {
		kr.Problems = reconcileProblems(ctx, survivors)
	}
	return kr
}

// reconcileProblems counts the survivors' reconcile rows with an error, by
// error (problemKey), from their admin addresses.
func reconcileProblems(ctx context.Context, bs []*scaleBroker) map[string]int {
	out := map[string]int{}
	for _, b := range bs {
		if b.Admin == "" {
			continue
		}
		raw, err := adminGet(ctx, b.Admin, "/reconcile-status")
		if err != nil {
			out[fmt.Sprintf("broker %d: reconcile-status: %v", b.ID, err)]++
			continue
		}
		var rows []struct {
			LastError string `json:"lastError"`
		}
		if err := json.Unmarshal(raw, &rows); err != nil {
			out[fmt.Sprintf("broker %d: reconcile-status: %v", b.ID, err)]++
			continue
		}
		for _, r := range rows {
			if r.LastError != "" {
				out[fmt.Sprintf("broker %d: %s", b.ID, problemKey(r.LastError))]++
			}
		}
	}
	return out
}

// problemKey shortens an error to what groups alike ones: the text after
// its last ": " (the cause, without the object it happened to), with
// digits folded to N, at most 120 bytes.
func problemKey(msg string) string {
	msg = strings.TrimSpace(msg)
	if i := strings.LastIndex(msg, ": "); i >= 0 && i+2 < len(msg) {
		msg = msg[i+2:]
	}
	var b strings.Builder
	prevDigit := false
	for _, r := range msg {
		d := r >= '0' && r <= '9'
		if d && !prevDigit {
			b.WriteByte('N')
		} else if !d {
			b.WriteRune(r)
		}
		prevDigit = d
	}
	s := b.String()
	if len(s) > 120 {
		s = s[:120]
	}
	return s
}

// fmtErrorCounts is "err (n), err (n)", most frequent first, at most five.
func fmtErrorCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if m[a] != m[b] {
			return m[b] - m[a]
		}
		return strings.Compare(a, b)
	})
	var parts []string
	for i, k := range keys {
		if i == 5 {
			parts = append(parts, fmt.Sprintf("and %d more", len(keys)-5))
			break
		}
		parts = append(parts, fmt.Sprintf("%s (%d)", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

package main

// `kaasbench compaction`: what the log cleaner costs and what it gives back
// (issue 21, design §13.7). It starts its own kaas-broker on a temporary
// data directory, creates one compacted topic (1 partition, small
// segments) and produces keyed records at a fixed rate over --keys keys
// for --duration, split in two halves:
//
//  1. half 1: the broker runs with --log-cleaner-enable=false, so the log
//     only grows;
//  2. between the halves the broker is stopped (SIGTERM) and started again
//     on the same data directory with the cleaner at its defaults
//     (kaas-broker has no switch at run time): the whole of half 1 is now
//     dirty, so the cleaner starts on it right away;
//  3. half 2: the same load, with the cleaner running;
//  4. settle: no more produce; the tool waits until the cleaner has been
//     idle for its backoff plus 2 s (at most --settle).
//
// Each half has its own producer client, started once the partition has a
// leader; its latency histogram covers that half only. The cleaner's
// figures come from the broker's /metrics (kaas_log_cleaner_*), read at
// the end of half 2 and after the settle; disk figures from the partition
// directory (sum of file sizes and of allocated blocks) at the end of each
// half and after the settle.
//
//	go build -o . ./cmd/kaas-broker ./cmd/kaasbench
//	./kaasbench compaction --broker ./kaas-broker --duration 60s --rate 4000

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// compactionConfig is the command line of `kaasbench compaction`.
type compactionConfig struct {
	Broker       string        `json:"broker"`
	Dir          string        `json:"dir"`
	Keep         bool          `json:"keep"`
	Keys         int           `json:"keys"`
	ValueSize    int           `json:"value_size"`
	Rate         int           `json:"rate"`
	Duration     time.Duration `json:"duration_ns"`
	SegmentBytes int64         `json:"segment_bytes"`
	Linger       time.Duration `json:"linger_ns"`
	Settle       time.Duration `json:"settle_ns"`
	CleanerFlags []string      `json:"cleaner_flags,omitempty"`
	CleanerIdle  time.Duration `json:"cleaner_idle_ns"`
	StartTimeout time.Duration `json:"start_timeout_ns"`
	JSON         bool          `json:"-"`
	topic        string
}

func parseCompactionFlags(args []string, stderr io.Writer) (compactionConfig, error) {
	cfg := compactionConfig{topic: "kaasbench-compact"}
	fs := flag.NewFlagSet("kaasbench compaction", flag.ContinueOnError)
	fs.SetOutput(stderr)
	valueSize, segment := byteSize(1024), byteSize(8<<20)
	var cleanerFlags string
	fs.StringVar(&cfg.Broker, "broker", "", "kaas-broker binary (default: kaas-broker next to kaasbench, else on PATH)")
	fs.StringVar(&cfg.Dir, "dir", "", "parent of the temporary data directory (default the system's temp dir)")
	fs.BoolVar(&cfg.Keep, "keep", false, "keep the data directory and the broker logs")
	fs.IntVar(&cfg.Keys, "keys", 100_000, "distinct keys, drawn uniformly at random (fixed seed)")
	fs.Var(&valueSize, "value-size", "value bytes per record (random, incompressible)")
	fs.IntVar(&cfg.Rate, "rate", 4000, "records per second produced, the same in both halves")
	fs.DurationVar(&cfg.Duration, "duration", 60*time.Second, "produce time of both halves together")
	fs.Var(&segment, "segment-bytes", "the topic's segment.bytes")
	fs.DurationVar(&cfg.Linger, "linger", 5*time.Millisecond, "producer linger")
	fs.DurationVar(&cfg.Settle, "settle", 60*time.Second, "after half 2, longest wait for the cleaner to go idle")
	fs.StringVar(&cleanerFlags, "cleaner-flags", "", "extra kaas-broker flags for half 2, space-separated (e.g. --log-cleaner-io-max-bytes-per-second=10485760)")
	fs.DurationVar(&cfg.StartTimeout, "start-timeout", 60*time.Second, "longest wait for the broker to be ready and the partition to have a leader")
	fs.BoolVar(&cfg.JSON, "json", false, "print results as JSON")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	cfg.ValueSize, cfg.SegmentBytes = int(valueSize), int64(segment)
	cfg.CleanerFlags = strings.Fields(cleanerFlags)
	cfg.CleanerIdle = cleanerBackoff(cfg.CleanerFlags) + 2*time.Second
	var errs []error
	if cfg.Keys < 1 || cfg.Rate < 1 || cfg.ValueSize < 1 {
		errs = append(errs, errors.New("--keys, --rate and --value-size must be >= 1"))
	}
	if cfg.Duration < 2*time.Second {
		errs = append(errs, errors.New("--duration must be at least 2s"))
	}
	if cfg.SegmentBytes < 1<<20 {
		errs = append(errs, errors.New("--segment-bytes must be at least 1MiB"))
	}
	if cfg.Broker == "" {
		b, err := findBroker()
		if err != nil {
			errs = append(errs, err)
		}
		cfg.Broker = b
	}
	return cfg, errors.Join(errs...)
}

// cleanerBackoff is the --log-cleaner-backoff among flags, else the
// broker's default (15 s).
func cleanerBackoff(flags []string) time.Duration {
	if v, ok := brokerFlag(flags, "log-cleaner-backoff"); ok {
		if d, err := time.ParseDuration(v); err == nil {
			return d
		}
	}
	return 15 * time.Second
}

// cleanerEnabled says whether half 2 runs the cleaner: unless flags turn
// it off again (a control run: the restart alone).
func cleanerEnabled(flags []string) bool {
	v, ok := brokerFlag(flags, "log-cleaner-enable")
	if !ok {
		return true
	}
	b, err := strconv.ParseBool(v)
	return err != nil || b
}

// brokerFlag is the last value flags give the flag name, as the broker's
// flag package reads -name=v, --name=v, --name v, and --name alone as
// true.
func brokerFlag(flags []string, name string) (string, bool) {
	var val string
	var found bool
	for i, f := range flags {
		f = strings.TrimLeft(f, "-")
		if v, ok := strings.CutPrefix(f, name+"="); ok {
			val, found = v, true
		} else if f == name {
			val, found = "true", true
			if i+1 < len(flags) && !strings.HasPrefix(flags[i+1], "-") {
				val = flags[i+1]
			}
		}
	}
	return val, found
}

// findBroker looks for kaas-broker next to this executable, then on PATH.
func findBroker() (string, error) {
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "kaas-broker")
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, nil
		}
	}
	if p, err := exec.LookPath("kaas-broker"); err == nil {
		return p, nil
	}
	return "", errors.New("no kaas-broker next to kaasbench nor on PATH: go build ./cmd/kaas-broker and pass --broker ./kaas-broker")
}

// compactionHalf is one half of the run.
type compactionHalf struct {
	Cleaner       bool           `json:"cleaner"`
	Records       int64          `json:"records"`
	Seconds       float64        `json:"seconds"`
	RecordsPerSec float64        `json:"records_per_sec"`
	Errors        int64          `json:"errors"`
	Latency       latencySummary `json:"latency"`
	Disk          dirUsage       `json:"disk_at_end"`
	EndOffset     int64          `json:"end_offset"`
}

// cleanerMetrics are the kaas_log_cleaner_* counters of one broker process.
type cleanerMetrics struct {
	BytesRead      float64 `json:"bytes_read"`
	BytesWritten   float64 `json:"bytes_written"`
	BusySeconds    float64 `json:"busy_seconds"`
	PassesOK       float64 `json:"passes_ok"`
	PassesError    float64 `json:"passes_error"`
	RecordsRemoved float64 `json:"records_removed"`
}

// cleanerFromMetrics reads the cleaner's counters from a /metrics page.
func cleanerFromMetrics(page string) cleanerMetrics {
	return cleanerMetrics{
		BytesRead:      promSum(page, "kaas_log_cleaner_bytes_total", `direction="read"`),
		BytesWritten:   promSum(page, "kaas_log_cleaner_bytes_total", `direction="written"`),
		BusySeconds:    promSum(page, "kaas_log_cleaner_busy_seconds_total", ""),
		PassesOK:       promSum(page, "kaas_log_cleaner_passes_total", `result="ok"`),
		PassesError:    promSum(page, "kaas_log_cleaner_passes_total", `result="error"`),
		RecordsRemoved: promSum(page, "kaas_log_cleaner_records_removed_total", ""),
	}
}

// promSum sums the samples of the Prometheus text page whose metric name is
// name and whose label set contains label (all of them if label is "").
func promSum(page, name, label string) float64 {
	var sum float64
	for line := range strings.Lines(page) {
		line = strings.TrimSpace(line)
		rest, ok := strings.CutPrefix(line, name)
		if !ok || line == "" || line[0] == '#' {
			continue
		}
		var labels string
		switch {
		case strings.HasPrefix(rest, "{"):
			end := strings.IndexByte(rest, '}')
			if end < 0 {
				continue
			}
			labels, rest = rest[1:end], rest[end+1:]
		case strings.HasPrefix(rest, " "):
		default:
			continue // a longer name with this prefix
		}
		if label != "" && !hasLabel(labels, label) {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		if v, err := strconv.ParseFloat(f[0], 64); err == nil {
			sum += v
		}
	}
	return sum
}

// hasLabel says whether the comma-separated label set holds label exactly.
func hasLabel(labels, label string) bool {
	for l := range strings.SplitSeq(labels, ",") {
		if strings.TrimSpace(l) == label {
			return true
		}
	}
	return false
}

// dirUsage is the size of a directory tree.
type dirUsage struct {
	Files     int   `json:"files"`
	Segments  int   `json:"segments"`
	Bytes     int64 `json:"bytes"`
	Allocated int64 `json:"allocated_bytes"`
}

// measureDir sums the sizes and allocated blocks of the regular files
// under dir; segments counts the *.log files.
func measureDir(dir string) (dirUsage, error) {
	var u dirUsage
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while walking: a retired segment
			}
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		} else if err != nil {
			return err
		}
		u.Files++
		if strings.HasSuffix(p, ".log") {
			u.Segments++
		}
		u.Bytes += info.Size()
		u.Allocated += allocatedBytes(info)
		return nil
	})
	return u, err
}

// findPartitionDir finds the directory holding the topic's partition 0
// segments: the one directory under data that holds *.log files and has
// a path element named as the topic.
func findPartitionDir(data, topic string) (string, error) {
	var found []string
	err := filepath.WalkDir(data, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".log") {
			return nil
		}
		if rel, err := filepath.Rel(data, p); err != nil || !slices.Contains(strings.Split(filepath.ToSlash(rel), "/"), topic) {
			return nil
		}
		dir := filepath.Dir(p)
		if len(found) == 0 || found[len(found)-1] != dir {
			found = append(found, dir)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	if len(found) != 1 {
		return "", fmt.Errorf("want one directory of %s segments under %s, found %q", topic, data, found)
	}
	return found[0], nil
}

// dueRecords is how many records a fixed-rate producer should have sent
// after elapsed, at rate per second, capped at total.
func dueRecords(elapsed time.Duration, rate int, total int64) int64 {
	if elapsed <= 0 {
		return 0
	}
	n := int64(elapsed.Seconds() * float64(rate))
	return min(n, total)
}

// keyName is the key of key number i.
func keyName(i int) string { return "key-" + strconv.Itoa(i) }

// compactionResult is the JSON report.
type compactionResult struct {
	Config        compactionConfig `json:"config"`
	Topic         string           `json:"topic"`
	PartitionDir  string           `json:"partition_dir"`
	Halves        []compactionHalf `json:"halves"`
	DistinctKeys  int              `json:"distinct_keys"`
	CleanerHalf2  cleanerMetrics   `json:"cleaner_at_end_of_half_2"`
	CleanerSettle cleanerMetrics   `json:"cleaner_after_settle"`
	SettleSeconds float64          `json:"settle_seconds"`
	DiskSettled   dirUsage         `json:"disk_after_settle"`
	Failures      []string         `json:"failures,omitempty"`
}

func (r *compactionResult) fail(format string, a ...any) {
	r.Failures = append(r.Failures, fmt.Sprintf(format, a...))
}

// compactionBroker is one kaas-broker process of the run.
type compactionBroker struct {
	cmd   *exec.Cmd
	done  chan struct{}
	err   error
	admin string
}

// freePort asks the system for a free loopback port.
func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func startCompactionBroker(ctx context.Context, cfg compactionConfig, data, listen, admin, logPath string, extra []string) (*compactionBroker, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	args := append([]string{"--data", data, "--id", "1", "--listen", listen, "--admin", admin}, extra...)
	cmd := exec.Command(cfg.Broker, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	b := &compactionBroker{cmd: cmd, done: make(chan struct{}), admin: admin}
	go func() { b.err = cmd.Wait(); close(b.done) }()
	if err := waitReady(ctx, []string{admin}, cfg.StartTimeout); err != nil {
		b.stop()
		return nil, fmt.Errorf("%w (broker log %s)", err, logPath)
	}
	return b, nil
}

// stop sends SIGTERM and waits for the process, SIGKILL after 30 s.
func (b *compactionBroker) stop() error {
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.done:
	case <-time.After(30 * time.Second):
		_ = b.cmd.Process.Kill()
		<-b.done
		return errors.New("broker did not stop within 30s of SIGTERM: killed")
	}
	var exit *exec.ExitError
	if errors.As(b.err, &exit) && !exit.Exited() {
		return nil // ended by the signal
	}
	return b.err
}

func (b *compactionBroker) cleaner(ctx context.Context) (cleanerMetrics, error) {
	page, err := adminGet(ctx, b.admin, "/metrics")
	if err != nil {
		return cleanerMetrics{}, err
	}
	return cleanerFromMetrics(string(page)), nil
}

// keySource draws keys uniformly at random with a fixed seed and
// remembers which were drawn.
type keySource struct {
	rnd  *rand.Rand
	seen []bool
	n    int
}

func newKeySource(keys int) *keySource {
	return &keySource{rnd: rand.New(rand.NewPCG(21, 137)), seen: make([]bool, keys)}
}

func (k *keySource) next() string {
	i := k.rnd.IntN(len(k.seen))
	if !k.seen[i] {
		k.seen[i] = true
		k.n++
	}
	return keyName(i)
}

// produceHalf produces cfg.Rate records per second for d to the topic
// and measures each record's latency from Produce to its acknowledgement.
func produceHalf(ctx context.Context, cfg compactionConfig, seed string, keys *keySource, d time.Duration) (compactionHalf, error) {
	var h compactionHalf
	cl, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.DefaultProduceTopic(cfg.topic),
		kgo.ProducerLinger(cfg.Linger), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RecordDeliveryTimeout(time.Minute))
	if err != nil {
		return h, err
	}
	defer cl.Close()
	value := make([]byte, cfg.ValueSize)
	for i := range value {
		value[i] = byte(rand.Uint32())
	}
	hist := newHistogram()
	var mu sync.Mutex
	var firstErr error
	total := int64(d.Seconds() * float64(cfg.Rate))
	var sent int64
	start := time.Now()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for sent < total && ctx.Err() == nil {
		due := dueRecords(time.Since(start), cfg.Rate, total)
		for ; sent < due; sent++ {
			t0 := time.Now()
			cl.Produce(ctx, &kgo.Record{Key: []byte(keys.next()), Value: value}, func(_ *kgo.Record, err error) {
				if err != nil {
					mu.Lock()
					h.Errors++
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				hist.RecordDuration(time.Since(t0))
			})
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return h, err
	}
	h.Seconds = time.Since(start).Seconds()
	h.Records = int64(hist.Count())
	h.RecordsPerSec = float64(h.Records) / h.Seconds
	h.Latency = summarize(hist)
	if firstErr != nil {
		return h, fmt.Errorf("%d produce errors, the first: %w", h.Errors, firstErr)
	}
	return h, ctx.Err()
}

func runCompaction(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseCompactionFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "kaasbench compaction:", err)
		return 2
	}
	logf := func(format string, a ...any) { fmt.Fprintf(stderr, "kaasbench compaction: "+format+"\n", a...) }
	res := compactionBench(ctx, cfg, logf)
	return printReport(stdout, stderr, cfg.JSON, res, res.Failures, func() {
		fmt.Fprint(stdout, compactionTables(res))
	})
}

func compactionBench(ctx context.Context, cfg compactionConfig, logf func(string, ...any)) *compactionResult {
	res := &compactionResult{Config: cfg, Topic: cfg.topic}
	dir, err := os.MkdirTemp(cfg.Dir, "kaasbench-compaction-")
	if err != nil {
		res.fail("%v", err)
		return res
	}
	if cfg.Keep {
		logf("data and broker logs kept in %s", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	data := filepath.Join(dir, "data")
	listen, err1 := freePort()
	admin, err2 := freePort()
	if err := errors.Join(err1, err2); err != nil {
		res.fail("%v", err)
		return res
	}
	keys := newKeySource(cfg.Keys)
	half := cfg.Duration / 2
	var b *compactionBroker
	defer func() {
		if b != nil {
			_ = b.stop()
		}
	}()
	for i, cleaner := range []bool{false, true} {
		extra := []string{"--log-cleaner-enable=" + strconv.FormatBool(cleaner)}
		if cleaner {
			extra = append(extra, cfg.CleanerFlags...)
		}
		logf("half %d: starting %s %s", i+1, cfg.Broker, strings.Join(extra, " "))
		if b, err = startCompactionBroker(ctx, cfg, data, listen, admin, filepath.Join(dir, fmt.Sprintf("broker-%d.log", i+1)), extra); err != nil {
			res.fail("half %d: %v", i+1, err)
			return res
		}
		if err := prepareTopic(ctx, cfg, listen, i == 0); err != nil {
			res.fail("half %d: %v", i+1, err)
			return res
		}
		logf("half %d: producing %d records/s for %s", i+1, cfg.Rate, half)
		h, err := produceHalf(ctx, cfg, listen, keys, half)
		h.Cleaner = cleaner && cleanerEnabled(cfg.CleanerFlags)
		if err != nil {
			res.fail("half %d: %v", i+1, err)
		}
		if res.PartitionDir == "" {
			if res.PartitionDir, err = findPartitionDir(data, cfg.topic); err != nil {
				res.fail("%v", err)
				return res
			}
		}
		if h.Disk, err = measureDir(res.PartitionDir); err != nil {
			res.fail("%v", err)
		}
		h.EndOffset, _ = topicEnd(ctx, listen, cfg.topic)
		res.Halves = append(res.Halves, h)
		if i == 0 {
			logf("half 1: stopping the broker")
			if err := b.stop(); err != nil {
				res.fail("stopping the broker after half 1: %v", err)
			}
			b = nil
		}
	}
	res.DistinctKeys = keys.n
	if res.CleanerHalf2, err = b.cleaner(ctx); err != nil {
		res.fail("%v", err)
	}
	logf("settle: waiting until the cleaner has been idle for %s (at most %s)", cfg.CleanerIdle, cfg.Settle)
	t0 := time.Now()
	if res.CleanerSettle, err = waitCleanerIdle(ctx, b, cfg.CleanerIdle, cfg.Settle); err != nil {
		res.fail("settle: %v", err)
	}
	res.SettleSeconds = time.Since(t0).Seconds()
	if res.DiskSettled, err = measureDir(res.PartitionDir); err != nil {
		res.fail("%v", err)
	}
	if res.CleanerSettle.PassesError > 0 {
		res.fail("%v cleaner passes ended in error", res.CleanerSettle.PassesError)
	}
	if res.CleanerSettle.PassesOK == 0 && cleanerEnabled(cfg.CleanerFlags) {
		res.fail("the cleaner made no pass")
	}
	return res
}

// prepareTopic creates the topic (first) or waits until its partition
// has a leader again (after the restart).
func prepareTopic(ctx context.Context, cfg compactionConfig, seed string, create bool) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seed))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if create {
		seg := strconv.FormatInt(cfg.SegmentBytes, 10)
		configs := map[string]*string{"cleanup.policy": kadm.StringPtr("compact"), "segment.bytes": &seg}
		r, err := adm.CreateTopic(ctx, 1, -1, configs, cfg.topic)
		if err == nil {
			err = r.Err
		}
		if err != nil {
			return fmt.Errorf("creating %s: %w", cfg.topic, err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()
	_, err = waitTopic(wctx, adm, cfg.topic)
	return err
}

// topicEnd is the end offset of the topic's partition 0.
func topicEnd(ctx context.Context, seed, topic string) (int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seed))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	offs, err := endOffsets(ctx, kadm.NewClient(cl), topic)
	return offs[0], err
}

// waitCleanerIdle polls the cleaner's counters every second until its busy
// seconds have not moved for idle, or max passes.
func waitCleanerIdle(ctx context.Context, b *compactionBroker, idle, maxWait time.Duration) (cleanerMetrics, error) {
	deadline := time.Now().Add(maxWait)
	last, err := b.cleaner(ctx)
	if err != nil {
		return last, err
	}
	since := time.Now()
	for time.Now().Before(deadline) {
		if !sleepCtx(ctx, time.Second) {
			return last, ctx.Err()
		}
		m, err := b.cleaner(ctx)
		if err != nil {
			return last, err
		}
		if m != last {
			last, since = m, time.Now()
		} else if time.Since(since) >= idle {
			return last, nil
		}
	}
	return last, fmt.Errorf("the cleaner was still busy after %s", maxWait)
}

const mib = 1 << 20

// compactionTables renders the report.
func compactionTables(r *compactionResult) string {
	var b strings.Builder
	c := r.Config
	fmt.Fprintf(&b, "kaasbench compaction: topic %s, 1 partition, cleanup.policy=compact, segment.bytes=%s, min.cleanable.dirty.ratio 0.5 (default)\n",
		r.Topic, fmtSize(c.SegmentBytes))
	fmt.Fprintf(&b, "  %d records/s of %d B random values over %d keys (uniform, %d drawn), acks=all, idempotent, linger %s, uncompressed\n",
		c.Rate, c.ValueSize, c.Keys, r.DistinctKeys, c.Linger)
	settings := "defaults"
	if len(c.CleanerFlags) > 0 {
		settings = "defaults but " + strings.Join(c.CleanerFlags, " ")
	}
	second := "cleaner on (" + settings + ")"
	if !cleanerEnabled(c.CleanerFlags) {
		second = "cleaner still off (" + strings.Join(c.CleanerFlags, " ") + "; a control: the restart alone)"
	}
	fmt.Fprintf(&b, "  half 1: cleaner off (--log-cleaner-enable=false); broker restarted (SIGTERM, same data); half 2: %s\n\n", second)

	t := table{header: []string{"produce", "records", "rec/s", "errors", "p50 ms", "p90 ms", "p99 ms", "p99.9 ms", "max ms"}}
	for i, h := range r.Halves {
		name := fmt.Sprintf("half %d, cleaner off", i+1)
		if h.Cleaner {
			name = fmt.Sprintf("half %d, cleaner on", i+1)
		}
		l := h.Latency
		t.rows = append(t.rows, []string{name, strconv.FormatInt(h.Records, 10), fmtNum(h.RecordsPerSec, 0), strconv.FormatInt(h.Errors, 10),
			fmtNum(l.P50Ms, 2), fmtNum(l.P90Ms, 2), fmtNum(l.P99Ms, 2), fmtNum(l.P999Ms, 2), fmtNum(l.MaxMs, 2)})
	}
	b.WriteString(t.render())
	b.WriteString("\n")

	t = table{header: []string{"cleaner", "passes", "read MiB", "written MiB", "busy s", "MiB/s busy", "wall s", "MiB/s wall", "records removed"}}
	var half2 float64
	if len(r.Halves) == 2 {
		half2 = r.Halves[1].Seconds
	}
	for _, row := range []struct {
		name string
		m    cleanerMetrics
		wall float64
	}{{"during half 2", r.CleanerHalf2, half2}, {"half 2 + settle", r.CleanerSettle, half2 + r.SettleSeconds}} {
		m := row.m
		t.rows = append(t.rows, []string{row.name, fmtNum(m.PassesOK, 0), fmtNum(m.BytesRead/mib, 1), fmtNum(m.BytesWritten/mib, 1),
			fmtNum(m.BusySeconds, 1), perSec(m.BytesRead/mib, m.BusySeconds), fmtNum(row.wall, 1), perSec(m.BytesRead/mib, row.wall),
			fmtNum(m.RecordsRemoved, 0)})
	}
	b.WriteString(t.render())
	b.WriteString("\n")

	t = table{header: []string{"partition directory", "end offset", "segments", "files", "size MiB", "allocated MiB"}}
	addDisk := func(name string, end int64, u dirUsage) {
		t.rows = append(t.rows, []string{name, strconv.FormatInt(end, 10), strconv.Itoa(u.Segments), strconv.Itoa(u.Files),
			fmtNum(float64(u.Bytes)/mib, 1), fmtNum(float64(u.Allocated)/mib, 1)})
	}
	var end int64
	for i, h := range r.Halves {
		addDisk(fmt.Sprintf("end of half %d", i+1), h.EndOffset, h.Disk)
		end = h.EndOffset
	}
	addDisk(fmt.Sprintf("after settle (%.0f s)", r.SettleSeconds), end, r.DiskSettled)
	b.WriteString(t.render())
	if len(r.Halves) > 0 && r.Halves[0].EndOffset > 0 && end > 0 {
		perRec := float64(r.Halves[0].Disk.Bytes) / float64(r.Halves[0].EndOffset)
		uncleaned := perRec * float64(end)
		fmt.Fprintf(&b, "\nwithout cleaning (half 1's %.0f B/record x %d records): %.1f MiB; after settle %.1f MiB: %.1f MiB reclaimed (%.0f%%); cleaner read-written %.1f MiB\n",
			perRec, end, uncleaned/mib, float64(r.DiskSettled.Bytes)/mib, (uncleaned-float64(r.DiskSettled.Bytes))/mib,
			100*(1-float64(r.DiskSettled.Bytes)/uncleaned), (r.CleanerSettle.BytesRead-r.CleanerSettle.BytesWritten)/mib)
	}
	return b.String()
}

// perSec formats v/secs with one decimal, "-" without seconds.
func perSec(v, secs float64) string {
	if secs <= 0 {
		return "-"
	}
	return fmtNum(v/secs, 1)
}

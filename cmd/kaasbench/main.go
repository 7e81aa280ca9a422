// Command kaasbench is kaas's load tool: it produces a fixed number of
// records to a Kafka-protocol broker with franz-go, consumes them back, and
// reports throughput, per-record produce latency percentiles and a count
// check. In the same run it can repeat the identical load against franz-go's
// in-process fake broker (kfake) and measure the raw fsync'd sequential write
// bandwidth of a disk, printing everything side by side with ratios.
//
// Usage:
//
//	kaasbench [flags]
//	kaasbench commits [flags]   durable OffsetCommit throughput (commits.go)
//	kaasbench txns [flags]      transactional produce throughput (txns.go)
//	kaasbench scale [flags]     many partitions on a few brokers: create, idle
//	                            cost, Metadata, produce, kill -9 (scale.go)
//	kaasbench --listeners ...   the same load on several listeners (listeners.go)
//	kaasbench compaction [flags]
//	                            the log cleaner's throughput, its effect on
//	                            produce latency, disk reclaimed; starts its
//	                            own kaas-broker (compaction.go)
//
//	# kaas on loopback, compared with kfake and the disk kaas writes to
//	kaasbench --brokers 127.0.0.1:9092 --kfake --disk /var/lib/kaas
//
//	# no broker: only kfake and the disk
//	go run ./cmd/kaasbench --kfake --disk /tmp --records 50000
//
//	# acks=leader, no consume phase, JSON output, at most 10s of producing
//	kaasbench --brokers 127.0.0.1:9092 --acks leader --consume=false --duration 10s --json
//
// Targets (at least one is required):
//
//	--brokers host:port[,host:port]  kaas seed brokers ("kaas <addr>" column)
//	--kfake                          also run against an in-process kfake
//	                                 cluster (1 broker on 127.0.0.1, same
//	                                 topic and partition count)
//	--disk DIR                       also measure fsync'd sequential write
//	                                 bandwidth in DIR: 1 MiB then 64 KiB
//	                                 chunks, fsync after each, for ~2 s or
//	                                 256 MiB per chunk size; the file is removed
//
//	--listeners NAME://HOST:PORT,...
//	                                 instead of --brokers: listeners of one
//	                                 broker, measured side by side in
//	                                 interleaved --rounds, with --connect N
//	                                 connections each (listeners.go)
//
// Security (security.go): --tls, --tls-ca-file, --tls-cert-file,
// --tls-key-file, --sasl-mechanism, --sasl-user, --sasl-password.
//
// Load:
//
//	--topic NAME           topic (default kaasbench-<random>)
//	--create-topic         create it with kadm (default true; an existing
//	                       topic is fine)
//	--partitions N         partitions when creating (default 16)
//	--producers N          separate producer clients (default 4)
//	--record-size SIZE     value bytes per record (default 1024)
//	--records N            total records over all producers (default 200000)
//	--acks all|leader|none (default all)
//	--idempotent           idempotent producer (default: true iff acks=all)
//	--linger D             producer linger (default 5ms)
//	--batch-max-bytes SIZE (default 1MiB; sizes accept B, KB, KiB, MB, MiB, GB, GiB)
//	--compression none|gzip|snappy|lz4|zstd
//	                       producer batch compression (default none)
//	--compressible         values are distinct, compressible text: a unique
//	                       prefix "p<producer>-<seq> " then the next stretch
//	                       of a fixed 4 MiB corpus of words (about 3x with
//	                       gzip; no stretch repeats within a batch). Without
//	                       it every record carries the same random value,
//	                       which no codec can shrink (default false)
//	--max-buffered-records N
//	                       per-producer cap on records produced but not yet
//	                       acknowledged (default 10000, franz-go's default)
//	--consume              after producing, read everything this run wrote
//	                       from its start offsets with one client and check
//	                       the count (default true)
//	--duration D           optional cap on the produce phase
//	--timeout D            hard cap on each target's whole run (default 5m)
//	--json                 print results as JSON instead of tables
//
// Produce latency is measured per record from the Produce call to its
// promise callback and kept in a fixed-size log-linear histogram (<1%
// quantile error). Producers run closed-loop as fast as they can, so latency
// includes time queued in the client: with N records buffered per producer it
// is roughly N/throughput. Lower --max-buffered-records to see latency closer
// to the broker's own. MB/s is 10^6 bytes of (uncompressed) record values per
// second. By default values are random bytes and batches are uncompressed.
//
// The tool always stops by itself (bounded by --records, --duration and
// --timeout). It exits non-zero on any produce error, on a consumed count
// that differs from the acknowledged produced count, or on any other failure.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"
)

// config is the parsed command line.
type config struct {
	Brokers       []string      `json:"brokers,omitempty"`
	Kfake         bool          `json:"kfake"`
	Disk          string        `json:"disk,omitempty"`
	Topic         string        `json:"topic"`
	CreateTopic   bool          `json:"create_topic"`
	Partitions    int           `json:"partitions"`
	Producers     int           `json:"producers"`
	RecordSize    int           `json:"record_size"`
	Records       int64         `json:"records"`
	Acks          string        `json:"acks"`
	Idempotent    bool          `json:"idempotent"`
	Linger        time.Duration `json:"linger_ns"`
	BatchMaxBytes int           `json:"batch_max_bytes"`
	Compression   string        `json:"compression"`
	Compressible  bool          `json:"compressible"`
	MaxBuffered   int           `json:"max_buffered_records"`
	Consume       bool          `json:"consume"`
	Duration      time.Duration `json:"duration_ns,omitempty"`
	Timeout       time.Duration `json:"timeout_ns"`
	JSON          bool          `json:"-"`

	Security        security        `json:"security"`
	Listeners       []benchListener `json:"listeners,omitempty"`
	Rounds          int             `json:"rounds,omitempty"`
	Connect         int             `json:"connect,omitempty"`
	ConnectParallel int             `json:"connect_parallel,omitempty"`
	BrokerPID       int             `json:"broker_pid,omitempty"`
}

// byteSize is a flag.Value for sizes like 1024, 64KiB, 1MiB, 1MB.
type byteSize int64

func (b *byteSize) String() string { return fmtSize(int64(*b)) }

func (b *byteSize) Set(s string) error {
	v, err := parseSize(s)
	if err != nil {
		return err
	}
	*b = byteSize(v)
	return nil
}

var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	// Longest suffixes first so "KiB" is not read as "B".
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9},
	{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30},
	{"b", 1},
}

// parseSize parses a non-negative byte count with an optional unit: B, KB/MB/GB
// (powers of 10), KiB/MiB/GiB or K/M/G (powers of 2); case-insensitive.
func parseSize(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("invalid size %q", s)
	}
	if n > (1<<62)/mult {
		return 0, fmt.Errorf("size %q too large", s)
	}
	return n * mult, nil
}

// fmtSize formats a byte count with the largest exact binary unit.
func fmtSize(n int64) string {
	switch {
	case n != 0 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n != 0 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n != 0 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

func randomTopic() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "kaasbench-" + hex.EncodeToString(b[:])
}

// parseFlags parses args into a validated config.
func parseFlags(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("kaasbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		cfg        config
		brokers    string
		listenSpec string
		recordSize = byteSize(1024)
		batchMax   = byteSize(1 << 20)
		idem       bool
	)
	fs.StringVar(&brokers, "brokers", "", "comma-separated kaas seed brokers, host:port")
	fs.BoolVar(&cfg.Kfake, "kfake", false, "also run the load against an in-process kfake broker")
	fs.StringVar(&cfg.Disk, "disk", "", "also measure fsync'd sequential write bandwidth in this directory")
	fs.StringVar(&cfg.Topic, "topic", "", "topic (default kaasbench-<random>)")
	fs.BoolVar(&cfg.CreateTopic, "create-topic", true, "create the topic with kadm (an existing topic is fine)")
	fs.IntVar(&cfg.Partitions, "partitions", 16, "partitions when creating the topic")
	fs.IntVar(&cfg.Producers, "producers", 4, "number of producer clients")
	fs.Var(&recordSize, "record-size", "record value size")
	fs.Int64Var(&cfg.Records, "records", 200000, "total records to produce")
	fs.StringVar(&cfg.Acks, "acks", "all", "required acks: all, leader or none")
	fs.BoolVar(&idem, "idempotent", false, "idempotent producer (default true iff --acks=all)")
	fs.DurationVar(&cfg.Linger, "linger", 5*time.Millisecond, "producer linger")
	fs.Var(&batchMax, "batch-max-bytes", "producer max batch size")
	fs.StringVar(&cfg.Compression, "compression", "none", "producer batch compression: none, gzip, snappy, lz4 or zstd")
	fs.BoolVar(&cfg.Compressible, "compressible", false,
		"values are distinct text (\"p<producer>-<seq> \" + the next stretch of a fixed 4 MiB word corpus) that compresses about 3x, instead of one shared random value")
	fs.IntVar(&cfg.MaxBuffered, "max-buffered-records", 10000, "per-producer cap on records buffered awaiting acks")
	fs.BoolVar(&cfg.Consume, "consume", true, "consume everything back after producing and verify the count")
	fs.DurationVar(&cfg.Duration, "duration", 0, "optional cap on the produce phase (0 = none)")
	fs.DurationVar(&cfg.Timeout, "timeout", 5*time.Minute, "hard cap on each target's run")
	fs.BoolVar(&cfg.JSON, "json", false, "print results as JSON")
	cfg.Security.register(fs)
	fs.StringVar(&listenSpec, "listeners", "", "instead of --brokers: NAME://HOST:PORT,... listeners of one broker (NAME a security protocol) to run the same load against, side by side")
	fs.IntVar(&cfg.Rounds, "rounds", 1, "with --listeners: rounds, each running every listener in turn; tables give the medians")
	fs.IntVar(&cfg.Connect, "connect", 0, "with --listeners: also open this many connections per listener and round (handshake + ApiVersions + SASL login each)")
	fs.IntVar(&cfg.ConnectParallel, "connect-parallel", 4, "connections opened at a time by --connect")
	fs.IntVar(&cfg.BrokerPID, "broker-pid", 0, "with --connect: the broker's process id, to read its CPU time per connection (Linux)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: kaasbench [--brokers 127.0.0.1:9092 | --listeners PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093] [--kfake] [--disk DIR] [flags]")
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
	cfg.RecordSize = int(recordSize)
	cfg.BatchMaxBytes = int(batchMax)

	switch strings.ToLower(cfg.Acks) {
	case "all", "-1":
		cfg.Acks = "all"
	case "leader", "1":
		cfg.Acks = "leader"
	case "none", "0":
		cfg.Acks = "none"
	default:
		return cfg, fmt.Errorf("--acks must be all, leader or none, not %q", cfg.Acks)
	}
	var errs []error
	if c, err := parseCompression(cfg.Compression); err != nil {
		errs = append(errs, err)
	} else {
		cfg.Compression = c
	}
	cfg.Idempotent = cfg.Acks == "all"
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "idempotent" {
			cfg.Idempotent = idem
		}
	})

	if err := cfg.Security.prepare(); err != nil {
		errs = append(errs, err)
	} else if listenSpec != "" {
		if cfg.Listeners, err = parseBenchListeners(listenSpec, cfg.Security); err != nil {
			errs = append(errs, err)
		}
	}
	if listenSpec != "" && (len(cfg.Brokers) > 0 || cfg.Kfake || cfg.Disk != "") {
		errs = append(errs, errors.New("--listeners goes without --brokers, --kfake and --disk"))
	}
	if listenSpec == "" && (cfg.Connect > 0 || cfg.Rounds != 1) {
		errs = append(errs, errors.New("--rounds and --connect need --listeners"))
	}
	if cfg.Rounds < 1 || cfg.Connect < 0 || cfg.ConnectParallel < 1 {
		errs = append(errs, errors.New("--rounds and --connect-parallel must be >= 1, --connect >= 0"))
	}
	if len(cfg.Brokers) == 0 && !cfg.Kfake && cfg.Disk == "" && listenSpec == "" {
		errs = append(errs, errors.New("nothing to do: give --brokers, --listeners, --kfake and/or --disk"))
	}
	if cfg.Idempotent && cfg.Acks != "all" {
		errs = append(errs, errors.New("--idempotent requires --acks=all"))
	}
	if cfg.MaxBuffered < 1 {
		errs = append(errs, errors.New("--max-buffered-records must be >= 1"))
	}
	if cfg.Partitions < 1 {
		errs = append(errs, errors.New("--partitions must be >= 1"))
	}
	if cfg.Producers < 1 {
		errs = append(errs, errors.New("--producers must be >= 1"))
	}
	if cfg.Records < 1 {
		errs = append(errs, errors.New("--records must be >= 1"))
	}
	if cfg.RecordSize > 64<<20 {
		errs = append(errs, errors.New("--record-size must be <= 64MiB"))
	}
	if cfg.BatchMaxBytes < 1<<10 || cfg.BatchMaxBytes > 1<<30 {
		errs = append(errs, errors.New("--batch-max-bytes must be within [1KiB, 1GiB]"))
	}
	if cfg.Linger < 0 || cfg.Duration < 0 || cfg.Timeout <= 0 {
		errs = append(errs, errors.New("--linger and --duration must be >= 0, --timeout > 0"))
	}
	return cfg, errors.Join(errs...)
}

func printConfig(w io.Writer, cfg config) {
	var targets []string
	if len(cfg.Brokers) > 0 {
		targets = append(targets, "kaas "+strings.Join(cfg.Brokers, ",")+" ("+cfg.Security.describe()+")")
	}
	for _, l := range cfg.Listeners {
		targets = append(targets, fmt.Sprintf("%s %s (%s)", l.Name, l.Addr, l.sec.describe()))
	}
	if cfg.Kfake {
		targets = append(targets, "kfake (in-process, 1 broker, 127.0.0.1)")
	}
	if cfg.Disk != "" {
		targets = append(targets, "disk "+cfg.Disk)
	}
	dur := "none"
	if cfg.Duration > 0 {
		dur = cfg.Duration.String()
	}
	fmt.Fprintln(w, "kaasbench configuration")
	t := table{header: []string{"setting", "value"}, left: 2}
	add := func(k, v string) { t.rows = append(t.rows, []string{k, v}) }
	add("targets", strings.Join(targets, "; "))
	if len(cfg.Listeners) > 0 {
		add("rounds", fmt.Sprintf("%d, every listener in turn in each, the order rotating by one each round", cfg.Rounds))
		if cfg.Connect > 0 {
			add("connect", fmt.Sprintf("%d connections per listener and round, %d at a time", cfg.Connect, cfg.ConnectParallel))
		}
	}
	if len(cfg.Brokers) > 0 || cfg.Kfake || len(cfg.Listeners) > 0 {
		add("topic", fmt.Sprintf("%s (%d partitions, create=%t)", cfg.Topic, cfg.Partitions, cfg.CreateTopic))
		add("records", fmt.Sprintf("%d x %d B = %.1f MB", cfg.Records, cfg.RecordSize, float64(cfg.Records)*float64(cfg.RecordSize)/1e6))
		add("producers", fmt.Sprintf("%d clients, acks=%s, idempotent=%t, linger=%s, batch-max-bytes=%s, max-buffered-records=%d, compression=%s",
			cfg.Producers, cfg.Acks, cfg.Idempotent, cfg.Linger, fmtSize(int64(cfg.BatchMaxBytes)), cfg.MaxBuffered, cfg.Compression))
		values := "one shared random value (incompressible)"
		if cfg.Compressible {
			values = "distinct compressible text (unique prefix + word corpus)"
		}
		add("values", values)
		add("consume", fmt.Sprintf("%t (1 client, from this run's start offsets, count verified)", cfg.Consume))
		add("limits", fmt.Sprintf("produce duration cap %s, per-target timeout %s", dur, cfg.Timeout))
	}
	if cfg.Disk != "" {
		var sizes []string
		for _, s := range diskChunkSizes {
			sizes = append(sizes, fmtSize(int64(s)))
		}
		add("disk", fmt.Sprintf("%s chunks, fsync after each, up to %s or %s per size",
			strings.Join(sizes, " and "), diskMaxTime, fmtSize(diskMaxBytes)))
	}
	// Drop the header rule for the config block: it is a key/value list.
	out := t.render()
	out = out[strings.Index(out, "\n")+1:]
	out = out[strings.Index(out, "\n")+1:]
	for _, l := range strings.SplitAfter(out, "\n") {
		if l != "" {
			fmt.Fprint(w, "  "+l)
		}
	}
	fmt.Fprintln(w)
}

// report is the JSON output.
type report struct {
	Config  config             `json:"config"`
	Kaas    *targetResult      `json:"kaas,omitempty"`
	Kfake   *targetResult      `json:"kfake,omitempty"`
	Disk    *diskResult        `json:"disk,omitempty"`
	Ratios  map[string]float64 `json:"ratios,omitempty"`
	OK      bool               `json:"ok"`
	Failure []string           `json:"failures,omitempty"`
}

// ratios computes kaas/kfake and produce/disk ratios for the JSON report.
func ratios(kaas, kfake *targetResult, disk *diskResult) map[string]float64 {
	m := make(map[string]float64)
	put := func(k string, a, b float64) {
		if b != 0 {
			m[k] = a / b
		}
	}
	if kaas != nil && kfake != nil {
		if kaas.Produce != nil && kfake.Produce != nil {
			put("kaas/kfake produce_mb_per_sec", kaas.Produce.MBPerSec, kfake.Produce.MBPerSec)
			put("kaas/kfake produce_records_per_sec", kaas.Produce.RecordsPerSec, kfake.Produce.RecordsPerSec)
			put("kaas/kfake produce_p50_ms", kaas.Produce.Latency.P50Ms, kfake.Produce.Latency.P50Ms)
			put("kaas/kfake produce_p99_ms", kaas.Produce.Latency.P99Ms, kfake.Produce.Latency.P99Ms)
		}
		if kaas.Consume != nil && kfake.Consume != nil {
			put("kaas/kfake consume_mb_per_sec", kaas.Consume.MBPerSec, kfake.Consume.MBPerSec)
		}
	}
	if ref, ok := disk.reference(); ok {
		for _, t := range []*targetResult{kaas, kfake} {
			if t != nil && t.Produce != nil {
				name := "kaas"
				if t == kfake {
					name = "kfake"
				}
				put(name+" produce_mb_per_sec/disk_fsync_mb_per_sec", t.Produce.MBPerSec, ref.MBPerSec)
			}
		}
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

// run is the whole tool; it returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "commits" {
		return runCommits(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "txns" {
		return runTxns(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "scale" {
		return runScale(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "compaction" {
		return runCompaction(ctx, args[1:], stdout, stderr)
	}
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "kaasbench:", err)
		return 2
	}
	logf := func(format string, a ...any) { fmt.Fprintf(stderr, "kaasbench: "+format+"\n", a...) }
	if !cfg.JSON {
		printConfig(stdout, cfg)
	}
	if len(cfg.Listeners) > 0 {
		return runListeners(ctx, cfg, stdout, stderr)
	}

	rep := report{Config: cfg}
	fail := func(target string, msgs ...string) {
		for _, m := range msgs {
			rep.Failure = append(rep.Failure, target+": "+m)
		}
	}
	runOne := func(name string, fn func() (*targetResult, error)) *targetResult {
		res, err := fn()
		if res != nil {
			fail(name, res.Failures...)
		}
		if err != nil {
			fail(name, err.Error())
		}
		return res
	}
	if len(cfg.Brokers) > 0 {
		name := "kaas " + strings.Join(cfg.Brokers, ",")
		rep.Kaas = runOne("kaas", func() (*targetResult, error) {
			return runTarget(ctx, cfg, name, cfg.Brokers, logf)
		})
	}
	if cfg.Kfake && ctx.Err() == nil {
		rep.Kfake = runOne("kfake", func() (*targetResult, error) { return runKfake(ctx, cfg, logf) })
	}
	if cfg.Disk != "" && ctx.Err() == nil {
		logf("disk: measuring fsync'd sequential writes in %s", cfg.Disk)
		d, err := measureDisk(ctx, cfg.Disk, diskChunkSizes, diskMaxBytes, diskMaxTime)
		if err != nil {
			fail("disk", err.Error())
		}
		if d != nil && len(d.Runs) > 0 {
			rep.Disk = d
		}
	}
	if err := ctx.Err(); err != nil {
		fail("kaasbench", "interrupted: "+err.Error())
	}
	rep.OK = len(rep.Failure) == 0
	rep.Ratios = ratios(rep.Kaas, rep.Kfake, rep.Disk)

	return printReport(stdout, stderr, cfg.JSON, rep, rep.Failure, func() {
		fmt.Fprint(stdout, buildTable(rep.Kaas, rep.Kfake, rep.Disk).render())
	})
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// splitBrokers parses a comma-separated --brokers list.
func splitBrokers(list string) []string {
	var out []string
	for _, b := range strings.Split(list, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

// printReport writes rep as JSON, or the tables tables prints, and then
// the failures; it returns the exit code: 0 if nothing failed.
func printReport(stdout, stderr io.Writer, asJSON bool, rep any, failures []string, tables func()) int {
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintln(stderr, "kaasbench:", err)
			return 1
		}
	} else {
		tables()
		if len(failures) == 0 {
			fmt.Fprintln(stdout, "\nresult: OK")
		}
	}
	if len(failures) == 0 {
		return 0
	}
	fmt.Fprintln(stderr, "")
	for _, f := range failures {
		fmt.Fprintln(stderr, "kaasbench: FAIL:", f)
	}
	if !asJSON {
		fmt.Fprintf(stdout, "\nresult: FAILED (%d problems, see stderr)\n", len(failures))
	}
	return 1
}

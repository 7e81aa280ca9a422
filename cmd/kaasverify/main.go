// Command kaasverify is kaas's load-and-check tool for chaos tests. "run"
// produces unique, self-describing records to every partition of one or more
// topics while assign-mode consumers read them back, records everything it
// learns in a history (JSON lines, see package check), and when it stops
// reads every partition from log start to its high watermark and checks
// the history: nothing acknowledged lost, nothing duplicated, no offset
// with two values, no failed write visible, consumers never going back or
// skipping, high watermarks never going down, producer IDs never reissued
// (L1–L9 of the kaas fault model; C1–C3 replace L1 on compacted topics).
// "check" re-checks a history, which may have been extended by other tools
// (fault events, say).
//
// Usage:
//
//	kaasverify run --brokers 127.0.0.1:9092,127.0.0.1:9093 --topic T --create \
//	    --topics 2 --partitions 6 --producers 8 --rate 5000 --value-size 100 \
//	    --consumers 4 --duration 600s --history h.jsonl --report report.json
//	kaasverify run --brokers 127.0.0.1:9092 --topic C --create --compacted \
//	    --keys 50 --tombstone-every 10 --topic-config segment.ms=100 \
//	    --topic-config min.cleanable.dirty.ratio=0.01 --duration 300s --history h.jsonl
//	kaasverify check --history h.jsonl [--report report.json] [--json]
//
// run stops producing when --duration elapses, --records are sent or on
// SIGINT/SIGTERM; it then waits up to --drain-timeout for in-flight
// produce outcomes, does the final read (retrying until --final-timeout
// while brokers may still be failing over), checks the history and prints
// a summary. Exit status: 0 no violations, 1 violations, 2 tool error
// (bad flags, unreachable cluster, incomplete final read).
//
// Each record's value is "<run>.p<producer>.<seq>" padded with '.' to
// --value-size after a space; its key is "<topic>/<partition>", the
// partition the tool sent it to. History events carry the value up to the
// space; a value read back with damaged padding or from another partition
// than its key names is recorded with a "!corrupt" or "!misplaced" suffix,
// so that it contradicts its acknowledgement (L1, L3).
//
// With --compacted each record's key is instead "k<n>", n drawn at random
// from --keys, and every --tombstone-every-th send of a producer to a
// partition is a tombstone (null value) for a random key. Every record carries a header
// "kaasverify-tp" naming its partition; a tombstone carries its id in a
// header "kaasverify-id". The history records each record's key and
// tombstone flag and, first, a "topic" event per topic with the cleanup
// policy the broker describes (or the one asked for): compacted topics
// are checked by C1–C3 (the latest acknowledged write of every key
// survives, a tombstoned key never comes back, the log is sparse but
// stable) instead of L1. --topic-config key=value (repeatable) sets the
// configs --create creates the topics with.
//
// The history is written as the run goes (whole lines per write, so a
// fault injector may append its own "fault" lines to the same file with
// O_APPEND). It is truncated at start unless --history-append is given.
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
	"strings"
	"syscall"
	"time"

	"github.com/kaas-dev/kaas/cmd/kaasverify/check"
)

// Exit codes.
const (
	exitOK         = 0
	exitViolations = 1
	exitToolError  = 2
)

// config is the parsed "run" command line.
type config struct {
	Brokers         []string      `json:"brokers"`
	Topic           string        `json:"topic"`
	Topics          int           `json:"topics"`
	Partitions      int           `json:"partitions"`
	Create          bool          `json:"create"`
	Producers       int           `json:"producers"`
	Rate            float64       `json:"rate"`
	ValueSize       int           `json:"value_size"`
	Records         int64         `json:"records"`
	Duration        time.Duration `json:"duration_ns"`
	Consumers       int           `json:"consumers"`
	History         string        `json:"history"`
	HistoryAppend   bool          `json:"history_append"`
	Report          string        `json:"report,omitempty"`
	PIDsEvery       time.Duration `json:"pids_every_ns"`
	HWMEvery        time.Duration `json:"hwm_every_ns"`
	CommitsEvery    time.Duration `json:"commits_every_ns"`
	Idempotent      bool          `json:"idempotent"`
	Linger          time.Duration `json:"linger_ns"`
	MaxBuffered     int           `json:"max_buffered_records"`
	DeliveryTimeout time.Duration `json:"delivery_timeout_ns"`
	DrainTimeout    time.Duration `json:"drain_timeout_ns"`
	FinalTimeout    time.Duration `json:"final_timeout_ns"`
	Progress        time.Duration `json:"progress_ns"`
	RunID           string        `json:"run_id"`
	// Compacted mode: keyed records and tombstones on compacted topics.
	Compacted      bool              `json:"compacted"`
	Keys           int               `json:"keys"`
	TombstoneEvery int               `json:"tombstone_every"`
	TopicConfig    map[string]string `json:"topic_config,omitempty"`
}

// cleanupPolicy is the cleanup.policy the run asks for when it creates
// its topics ("" when it leaves the broker's default).
func (c config) cleanupPolicy() string {
	if p, ok := c.TopicConfig["cleanup.policy"]; ok {
		return p
	}
	if c.Compacted {
		return "compact"
	}
	return ""
}

// createConfigs is the topic configs the run creates its topics with.
func (c config) createConfigs() map[string]*string {
	m := map[string]*string{}
	for k, v := range c.TopicConfig {
		m[k] = &v
	}
	if p := c.cleanupPolicy(); p != "" {
		m["cleanup.policy"] = &p
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

// topicNames returns the topics of the run: Topic itself, or Topic-0 ...
// Topic-(N-1) with --topics N > 1.
func (c config) topicNames() []string {
	if c.Topics <= 1 {
		return []string{c.Topic}
	}
	out := make([]string, c.Topics)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", c.Topic, i)
	}
	return out
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func parseRunFlags(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("kaasverify run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		cfg     config
		brokers string
	)
	fs.StringVar(&brokers, "brokers", "", "comma-separated kaas seed brokers, host:port (required)")
	fs.StringVar(&cfg.Topic, "topic", "", "topic, or topic name prefix with --topics > 1 (default kaasverify-<random>)")
	fs.IntVar(&cfg.Topics, "topics", 1, "number of topics (named <topic>-0 ... when > 1)")
	fs.IntVar(&cfg.Partitions, "partitions", 6, "partitions per topic when creating")
	fs.BoolVar(&cfg.Create, "create", false, "create the topics (existing ones are fine)")
	fs.IntVar(&cfg.Producers, "producers", 2, "producer clients")
	fs.Float64Var(&cfg.Rate, "rate", 1000, "records per second over all producers (0 = as fast as possible)")
	fs.IntVar(&cfg.ValueSize, "value-size", 100, "value bytes per record (at least the value's id)")
	fs.Int64Var(&cfg.Records, "records", 0, "stop after this many records in all (0 = no limit)")
	fs.DurationVar(&cfg.Duration, "duration", 0, "stop producing after this long (0 = until --records or SIGINT/SIGTERM)")
	fs.IntVar(&cfg.Consumers, "consumers", 1, "assign-mode consumers, each reading every partition from its start")
	fs.StringVar(&cfg.History, "history", "", "history file, JSON lines (required)")
	fs.BoolVar(&cfg.HistoryAppend, "history-append", false, "append to the history file instead of truncating it")
	fs.StringVar(&cfg.Report, "report", "", "write the report as JSON to this file")
	fs.DurationVar(&cfg.PIDsEvery, "pids-every", 5*time.Second, "send a raw InitProducerId this often (0 = only at start and end)")
	fs.DurationVar(&cfg.HWMEvery, "hwm-every", time.Second, "list high watermarks and last stable offsets this often (0 = only at start and end)")
	fs.DurationVar(&cfg.CommitsEvery, "commits-every", 0, "commit the first consumer's positions to a group and read them back this often (0 = never)")
	fs.BoolVar(&cfg.Idempotent, "idempotent", true, "idempotent producers")
	fs.DurationVar(&cfg.Linger, "linger", 5*time.Millisecond, "producer linger")
	fs.IntVar(&cfg.MaxBuffered, "max-buffered-records", 10000, "per-producer cap on records awaiting acknowledgement")
	fs.DurationVar(&cfg.DeliveryTimeout, "delivery-timeout", 30*time.Second, "give up on a record (indeterminate) after this long")
	fs.DurationVar(&cfg.DrainTimeout, "drain-timeout", 60*time.Second, "on stop, wait this long for in-flight produce outcomes")
	fs.DurationVar(&cfg.FinalTimeout, "final-timeout", 2*time.Minute, "deadline for the final read")
	fs.DurationVar(&cfg.Progress, "progress", 10*time.Second, "print progress to stderr this often (0 = never)")
	fs.BoolVar(&cfg.Compacted, "compacted", false, "compacted mode: keyed records (key k<n> of --keys) and tombstones, checked by C1–C3 instead of L1; --create makes the topics cleanup.policy=compact")
	fs.IntVar(&cfg.Keys, "keys", 100, "compacted mode: keys per partition, each record's key drawn at random")
	fs.IntVar(&cfg.TombstoneEvery, "tombstone-every", 10, "compacted mode: every M-th send of a producer to a partition is a tombstone (null value) for a random key (0 = none)")
	fs.Func("topic-config", "with --create, a topic config `key=value` to create the topics with (repeatable), say segment.ms=100", func(kv string) error {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("want key=value, got %q", kv)
		}
		if cfg.TopicConfig == nil {
			cfg.TopicConfig = map[string]string{}
		}
		cfg.TopicConfig[k] = v
		return nil
	})
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: kaasverify run --brokers host:port,... --history FILE [flags]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	for _, b := range strings.Split(brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			cfg.Brokers = append(cfg.Brokers, b)
		}
	}
	cfg.RunID = randomHex(3)
	if cfg.Topic == "" {
		cfg.Topic = "kaasverify-" + cfg.RunID
	}

	var errs []error
	add := func(bad bool, msg string) {
		if bad {
			errs = append(errs, errors.New(msg))
		}
	}
	add(len(cfg.Brokers) == 0, "--brokers is required")
	add(cfg.History == "", "--history is required")
	add(cfg.Topics < 1, "--topics must be >= 1")
	add(cfg.Partitions < 1, "--partitions must be >= 1")
	add(cfg.Producers < 1, "--producers must be >= 1")
	add(cfg.Consumers < 0, "--consumers must be >= 0")
	add(cfg.Rate < 0, "--rate must be >= 0")
	add(cfg.Records < 0, "--records must be >= 0")
	add(cfg.ValueSize < 0 || cfg.ValueSize > 16<<20, "--value-size must be within [0, 16MiB]")
	add(cfg.MaxBuffered < 1, "--max-buffered-records must be >= 1")
	add(cfg.Keys < 1, "--keys must be >= 1")
	add(cfg.TombstoneEvery < 0, "--tombstone-every must be >= 0")
	add(cfg.TombstoneEvery == 1, "--tombstone-every 1 would send nothing but tombstones")
	add(cfg.Duration < 0 || cfg.PIDsEvery < 0 || cfg.HWMEvery < 0 || cfg.CommitsEvery < 0 || cfg.Linger < 0 || cfg.Progress < 0,
		"durations must be >= 0")
	add(cfg.DeliveryTimeout <= 0 || cfg.DrainTimeout <= 0 || cfg.FinalTimeout <= 0,
		"--delivery-timeout, --drain-timeout and --final-timeout must be > 0")
	return cfg, errors.Join(errs...)
}

// run is the whole tool; it returns the process exit code. ctx ends the
// produce phase (a signal); the drain and final read run on regardless.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	usage := func() {
		fmt.Fprintln(stderr, "usage: kaasverify run --brokers host:port,... --history FILE [flags]   (run -h for flags)")
		fmt.Fprintln(stderr, "       kaasverify check --history FILE [--report FILE] [--json]")
	}
	if len(args) == 0 {
		usage()
		return exitToolError
	}
	switch args[0] {
	case "run":
		cfg, err := parseRunFlags(args[1:], stderr)
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		if err != nil {
			fmt.Fprintln(stderr, "kaasverify:", err)
			return exitToolError
		}
		return runLoad(ctx, cfg, stdout, stderr)
	case "check":
		return runCheck(args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		usage()
		return exitOK
	}
	fmt.Fprintf(stderr, "kaasverify: unknown command %q\n", args[0])
	usage()
	return exitToolError
}

// runCheck is "kaasverify check".
func runCheck(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("kaasverify check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	history := fs.String("history", "", "history file, JSON lines (required)")
	reportPath := fs.String("report", "", "write the report as JSON to this file")
	asJSON := fs.Bool("json", false, "print the report as JSON instead of the summary")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitToolError
	}
	if *history == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "kaasverify check: --history FILE is required, and nothing else")
		return exitToolError
	}
	rep, err := check.CheckFile(*history)
	if err != nil {
		fmt.Fprintln(stderr, "kaasverify:", err)
		return exitToolError
	}
	return finish(rep, nil, *reportPath, *asJSON, stdout, stderr)
}

// finish writes the report and returns the exit code: violations win over
// a tool error, which wins over success.
func finish(rep check.Report, toolErr error, reportPath string, asJSON bool, stdout, stderr io.Writer) int {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		toolErr = errors.Join(toolErr, fmt.Errorf("encoding report: %w", err))
	}
	if reportPath != "" && err == nil {
		if werr := os.WriteFile(reportPath, append(b, '\n'), 0o644); werr != nil {
			toolErr = errors.Join(toolErr, fmt.Errorf("writing report: %w", werr))
		}
	}
	if asJSON {
		fmt.Fprintf(stdout, "%s\n", b)
	} else {
		fmt.Fprint(stdout, rep.String())
	}
	switch {
	case !rep.OK():
		if toolErr != nil {
			fmt.Fprintln(stderr, "kaasverify: also:", toolErr)
		}
		return exitViolations
	case toolErr != nil:
		fmt.Fprintln(stderr, "kaasverify:", toolErr)
		return exitToolError
	}
	return exitOK
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

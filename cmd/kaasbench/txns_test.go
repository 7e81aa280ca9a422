package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"
)

func TestParseTxnsFlags(t *testing.T) {
	cfg, err := parseTxnsFlags([]string{"--kfake"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Producers != 4 || cfg.RecordsPerTxn != 100 || cfg.PartitionsPerTxn != 4 || cfg.Partitions != 16 ||
		cfg.RecordSize != 100 || cfg.Duration != 10*time.Second || !cfg.Verify || !strings.HasPrefix(cfg.Topic, "kaasbench-") {
		t.Fatalf("defaults: %+v", cfg)
	}
	cfg, err = parseTxnsFlags(strings.Fields("--brokers a:1,b:2 --record-size 1KiB --partitions 2 --partitions-per-txn 2"), io.Discard)
	if err != nil || len(cfg.Brokers) != 2 || cfg.RecordSize != 1024 || cfg.PartitionsPerTxn != 2 {
		t.Fatalf("%+v, %v", cfg, err)
	}
	for args, want := range map[string]string{
		"":                                "nothing to do",
		"--kfake --producers 0":           "--producers",
		"--kfake --records-per-txn 0":     "--records-per-txn",
		"--kfake --partitions-per-txn 17": "--partitions-per-txn",
		"--kfake --partitions 0":          "--partitions",
		"--kfake --duration 0s":           "--duration",
		"--kfake --record-size 2MiB":      "--record-size",
		"--kfake extra":                   "unexpected arguments",
		"--kfake --timeout 0s":            "--timeout",
	} {
		_, err := parseTxnsFlags(strings.Fields(args), io.Discard)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err %v, want containing %q", args, err, want)
		}
	}
}

// TestTxnsAgainstKfake runs the transaction loop briefly against kfake and
// checks the counts (no timings): every committed record read back
// read_committed, latencies recorded for every measured transaction.
func TestTxnsAgainstKfake(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"txns", "--kfake", "--producers", "2", "--records-per-txn", "20",
		"--partitions", "4", "--partitions-per-txn", "3", "--duration", "300ms", "--json"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	var rep struct {
		OK      bool
		Results []txnsResult
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("%v\n%s", err, stdout.String())
	}
	if !rep.OK || len(rep.Results) != 1 {
		t.Fatalf("report: %s", stdout.String())
	}
	r := rep.Results[0]
	// Two warm-up transactions (one per producer) are committed and read
	// back, not timed.
	if r.Committed == 0 || r.Errors != 0 || r.Aborted != 0 || r.Records != (r.Committed+2)*20 ||
		!r.Verified || r.ReadBack != r.Records || r.OpenAtTheEnd ||
		r.EndTxn.Count != uint64(r.Committed) || r.Txn.Count != uint64(r.Committed) ||
		r.TxnsPerSec <= 0 || r.RecordsPerSec <= 0 || r.EndTxn.MaxMs < r.EndTxn.P50Ms || r.Txn.P50Ms < r.EndTxn.P50Ms {
		t.Fatalf("result %+v", r)
	}
}

// TestTxnsTable checks the text output and the failure exit on an
// unusable target.
func TestTxnsTable(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"txns", "--kfake", "--producers", "1", "--duration", "200ms"}, &stdout, &stderr)
	out := stdout.String()
	if code != 0 || !strings.Contains(out, "committed transactions/s") || !strings.Contains(out, "EndTxn latency p99 ms") ||
		!strings.Contains(out, "result: OK") {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr.String())
	}
	stdout.Reset()
	stderr.Reset()
	code = run(context.Background(), []string{"txns", "--brokers", "127.0.0.1:1", "--producers", "1", "--duration", "100ms",
		"--timeout", "2s"}, &stdout, &stderr)
	if code == 0 || !strings.Contains(stderr.String(), "FAIL") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
}

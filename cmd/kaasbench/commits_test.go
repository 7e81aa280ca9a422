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

func TestParseCommitsFlags(t *testing.T) {
	cfg, err := parseCommitsFlags([]string{"--kfake"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Conns != 64 || cfg.Partitions != 1 || cfg.Groups != "distinct" || cfg.Duration != 10*time.Second ||
		!strings.HasPrefix(cfg.Topic, "kaasbench-") {
		t.Fatalf("defaults: %+v", cfg)
	}
	for args, want := range map[string]string{
		"":                                  "nothing to do",
		"--kfake --groups some":             "--groups",
		"--kfake --conns 0":                 "--conns",
		"--kfake --partitions-per-commit 0": "--partitions-per-commit",
		"--kfake --duration 0s":             "--duration",
	} {
		_, err := parseCommitsFlags(strings.Fields(args), io.Discard)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err %v, want containing %q", args, err, want)
		}
	}
}

// TestCommitsAgainstKfake runs the commit loop briefly against kfake, for
// distinct groups and for one group, and checks counts (no timings).
func TestCommitsAgainstKfake(t *testing.T) {
	for _, groups := range []string{"distinct", "one"} {
		t.Run(groups, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), []string{"commits", "--kfake", "--conns", "4", "--duration", "300ms",
				"--groups", groups, "--partitions-per-commit", "3", "--json"}, &stdout, &stderr)
			if code != 0 {
				t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
			}
			var rep struct {
				OK      bool
				Results []commitsResult
			}
			if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
				t.Fatalf("%v\n%s", err, stdout.String())
			}
			if !rep.OK || len(rep.Results) != 1 {
				t.Fatalf("report: %s", stdout.String())
			}
			r := rep.Results[0]
			if r.Commits == 0 || r.PartitionCommits != 3*r.Commits || r.Errors != 0 || r.Latency.Count != uint64(r.Commits) ||
				r.CommitsPerSec <= 0 || r.Latency.MaxMs < r.Latency.P50Ms {
				t.Fatalf("result %+v", r)
			}
		})
	}
}

// TestCommitsTable checks the text output and the failure exit on an
// unusable target.
func TestCommitsTable(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"commits", "--kfake", "--conns", "2", "--duration", "200ms"}, &stdout, &stderr)
	out := stdout.String()
	if code != 0 || !strings.Contains(out, "commits/s") || !strings.Contains(out, "commit latency p99 ms") ||
		!strings.Contains(out, "result: OK") {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr.String())
	}
	stdout.Reset()
	stderr.Reset()
	code = run(context.Background(), []string{"commits", "--brokers", "127.0.0.1:1", "--conns", "1", "--duration", "100ms",
		"--timeout", "2s"}, &stdout, &stderr)
	if code == 0 || !strings.Contains(stderr.String(), "FAIL") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
}

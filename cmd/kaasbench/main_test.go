package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

func TestParseSize(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{"1024", 1024, false},
		{"1MiB", 1 << 20, false},
		{"64KiB", 64 << 10, false},
		{"64kib", 64 << 10, false},
		{"1MB", 1e6, false},
		{"2k", 2048, false},
		{"10B", 10, false},
		{"1GiB", 1 << 30, false},
		{"", 0, true},
		{"-1", 0, true},
		{"1.5MiB", 0, true},
		{"MiB", 0, true},
	}
	for _, tt := range tests {
		got, err := parseSize(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("parseSize(%q) = %d, %v; want %d, err=%v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
	for _, n := range []int64{0, 100, 1 << 10, 1 << 20, 3 << 30, 1500} {
		if got, err := parseSize(fmtSize(n)); err != nil || got != n {
			t.Errorf("round trip %d via %q = %d, %v", n, fmtSize(n), got, err)
		}
	}
}

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		check   func(config) bool
		wantErr string
	}{
		{name: "nothing to do", args: nil, wantErr: "nothing to do"},
		{name: "defaults", args: []string{"--kfake"}, check: func(c config) bool {
			return c.Acks == "all" && c.Idempotent && c.Partitions == 16 && c.Producers == 4 &&
				c.RecordSize == 1024 && c.Records == 200000 && c.Linger == 5*time.Millisecond &&
				c.BatchMaxBytes == 1<<20 && c.Consume && c.CreateTopic && strings.HasPrefix(c.Topic, "kaasbench-")
		}},
		{name: "acks leader disables idempotence", args: []string{"--kfake", "--acks", "leader"}, check: func(c config) bool {
			return c.Acks == "leader" && !c.Idempotent
		}},
		{name: "explicit non-idempotent acks all", args: []string{"--kfake", "--idempotent=false"}, check: func(c config) bool {
			return c.Acks == "all" && !c.Idempotent
		}},
		{name: "idempotent needs acks all", args: []string{"--kfake", "--acks=none", "--idempotent"}, wantErr: "requires --acks=all"},
		{name: "bad acks", args: []string{"--kfake", "--acks=2"}, wantErr: "--acks"},
		{name: "brokers list", args: []string{"--brokers", "127.0.0.1:9092, 127.0.0.1:9093", "--topic", "t", "--batch-max-bytes", "64KiB"}, check: func(c config) bool {
			return len(c.Brokers) == 2 && c.Brokers[1] == "127.0.0.1:9093" && c.Topic == "t" && c.BatchMaxBytes == 64<<10
		}},
		{name: "bad records", args: []string{"--kfake", "--records", "0"}, wantErr: "--records"},
		{name: "compression default none, values random", args: []string{"--kfake"}, check: func(c config) bool {
			return c.Compression == "none" && !c.Compressible
		}},
		{name: "compression gzip", args: []string{"--kfake", "--compression", "gzip"}, check: func(c config) bool {
			return c.Compression == "gzip"
		}},
		{name: "compression snappy", args: []string{"--kfake", "--compression=snappy"}, check: func(c config) bool {
			return c.Compression == "snappy"
		}},
		{name: "compression lz4 upper case", args: []string{"--kfake", "--compression", "LZ4"}, check: func(c config) bool {
			return c.Compression == "lz4"
		}},
		{name: "compression zstd compressible", args: []string{"--kfake", "--compression", "zstd", "--compressible"}, check: func(c config) bool {
			return c.Compression == "zstd" && c.Compressible
		}},
		{name: "compression none explicit", args: []string{"--kfake", "--compression", "none"}, check: func(c config) bool {
			return c.Compression == "none"
		}},
		{name: "bad compression", args: []string{"--kfake", "--compression", "brotli"}, wantErr: "--compression must be"},
		{name: "empty compression", args: []string{"--kfake", "--compression", ""}, wantErr: "--compression must be"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parseFlags(tt.args, io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(cfg) {
				t.Fatalf("unexpected config %+v", cfg)
			}
		})
	}
}

func smallConfig(t *testing.T, extra ...string) config {
	t.Helper()
	args := append([]string{"--kfake", "--records", "2000", "--producers", "3", "--partitions", "4",
		"--record-size", "100", "--timeout", "30s"}, extra...)
	cfg, err := parseFlags(args, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestLoadAgainstKfake runs the load function end to end against kfake with
// a small record count and checks counts only (no timing assertions).
func TestLoadAgainstKfake(t *testing.T) {
	tests := []struct {
		name  string
		extra []string
	}{
		{name: "acks all idempotent"},
		{name: "acks leader", extra: []string{"--acks", "leader"}},
		{name: "acks none", extra: []string{"--acks", "none", "--linger", "0s"}},
		{name: "zstd compressible", extra: []string{"--compression", "zstd", "--compressible"}},
		{name: "gzip random values", extra: []string{"--compression", "gzip"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := smallConfig(t, tt.extra...)
			res, err := runKfake(context.Background(), cfg, t.Logf)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Failures) > 0 {
				t.Fatalf("failures: %q", res.Failures)
			}
			p, c := res.Produce, res.Consume
			if p == nil || c == nil {
				t.Fatalf("missing phases: %+v", res)
			}
			if p.Attempted != 2000 || p.Records != 2000 || p.Errors != 0 || p.Bytes != 2000*100 {
				t.Fatalf("produce %+v", p)
			}
			if p.Latency.Count != 2000 || p.Latency.MaxMs < p.Latency.P50Ms {
				t.Fatalf("latency %+v", p.Latency)
			}
			if c.Records != 2000 || c.Bytes != 2000*100 || c.Expected != 2000 || c.LogRecords != 2000 || !c.Verified {
				t.Fatalf("consume %+v", c)
			}
			if res.Partitions != 4 {
				t.Fatalf("partitions %d", res.Partitions)
			}
		})
	}
}

// TestRunJSON runs the whole command (kfake + a tiny disk test) and checks
// the JSON report and exit code.
func TestRunJSON(t *testing.T) {
	oldMax, oldTime := diskMaxBytes, diskMaxTime
	diskMaxBytes, diskMaxTime = 1<<20, time.Second
	t.Cleanup(func() { diskMaxBytes, diskMaxTime = oldMax, oldTime })

	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"--kfake", "--disk", dir, "--records", "2000", "--partitions", "2",
		"--record-size", "64", "--json", "--consume"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	var rep struct {
		OK    bool
		Kfake targetResult
		Disk  diskResult
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("%v\n%s", err, stdout.String())
	}
	if !rep.OK || rep.Kfake.Produce.Records != 2000 || rep.Kfake.Consume.Records != 2000 {
		t.Fatalf("report: %s", stdout.String())
	}
	if len(rep.Disk.Runs) != 2 || rep.Disk.Runs[0].Bytes == 0 || rep.Disk.Runs[0].Fsyncs == 0 {
		t.Fatalf("disk: %+v", rep.Disk)
	}
	if ents, err := os.ReadDir(dir); err != nil || len(ents) != 0 {
		t.Fatalf("disk test left files: %v %v", ents, err)
	}
}

// TestRunTable checks the text output shape and the non-zero exit for an
// unusable target.
func TestRunTable(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"--kfake", "--records", "500", "--partitions", "2"}, &stdout, &stderr)
	out := stdout.String()
	if code != 0 || !strings.Contains(out, "kaasbench configuration") || !strings.Contains(out, "consume count check") ||
		!strings.Contains(out, "result: OK") {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr.String())
	}

	stdout.Reset()
	stderr.Reset()
	// A closed loopback port: the run must fail and exit non-zero.
	code = run(context.Background(), []string{"--brokers", "127.0.0.1:1", "--records", "10", "--timeout", "2s"}, &stdout, &stderr)
	if code == 0 || !strings.Contains(stderr.String(), "FAIL") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
}

package main

import (
	"strings"
	"testing"
)

func TestRender(t *testing.T) {
	tests := []struct {
		name string
		tb   table
		want string
	}{
		{name: "empty", tb: table{}, want: ""},
		{
			name: "right aligned values",
			tb: table{
				header: []string{"metric", "a", "bb"},
				rows:   [][]string{{"x", "1", "22"}, {"longer", "333", "4"}},
			},
			want: "" +
				"metric    a  bb\n" +
				"---------------\n" +
				"x         1  22\n" +
				"longer  333   4\n",
		},
		{
			name: "short rows padded and blank cells trimmed",
			tb: table{
				header: []string{"m", "v"},
				rows:   [][]string{{"row"}, {"r", "10"}},
			},
			want: "" +
				"m     v\n" +
				"-------\n" +
				"row\n" +
				"r    10\n",
		},
		{
			name: "two left columns",
			tb: table{
				header: []string{"k", "value", "n"},
				rows:   [][]string{{"a", "x", "1"}, {"bb", "yyyy", "22"}},
				left:   2,
			},
			want: "" +
				"k   value   n\n" +
				"-------------\n" +
				"a   x       1\n" +
				"bb  yyyy   22\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.tb.render(); got != tt.want {
				t.Fatalf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestFmtRatio(t *testing.T) {
	tests := []struct {
		a, b float64
		want string
	}{
		{1, 2, "0.50x"},
		{3, 1, "3.00x"},
		{0, 5, "0.00x"},
		{5, 0, "-"},
		{0, 0, "-"},
	}
	for _, tt := range tests {
		if got := fmtRatio(tt.a, tt.b); got != tt.want {
			t.Errorf("fmtRatio(%v, %v) = %q, want %q", tt.a, tt.b, got, tt.want)
		}
	}
}

func sampleTarget(name string, mbps, p99 float64, consumed int64, verified bool) *targetResult {
	return &targetResult{
		Name: name,
		Produce: &produceResult{
			Records: 1000, RecordsPerSec: mbps * 1000, MBPerSec: mbps,
			Latency: latencySummary{Count: 1000, P50Ms: 1, P90Ms: 2, P99Ms: p99, P999Ms: 4, MaxMs: 5},
		},
		Consume: &consumeResult{Records: consumed, Expected: 1000, MBPerSec: 2 * mbps, RecordsPerSec: 2000 * mbps, Verified: verified},
	}
}

func TestBuildTable(t *testing.T) {
	kaas := sampleTarget("kaas 127.0.0.1:9092", 100, 3, 1000, true)
	kfake := sampleTarget("kfake", 50, 6, 1000, true)
	bad := sampleTarget("kfake", 50, 6, 999, false)
	disk := &diskResult{Dir: "/tmp", Runs: []diskRun{{ChunkBytes: 1 << 20, MBPerSec: 400}, {ChunkBytes: 64 << 10, MBPerSec: 200}}}

	// cell finds the value in row label, column header.
	cell := func(tb table, label, col string) (string, bool) {
		ci := -1
		for i, h := range tb.header {
			if h == col {
				ci = i
			}
		}
		for _, r := range tb.rows {
			if r[0] == label && ci >= 0 {
				return r[ci], true
			}
		}
		return "", false
	}
	type check struct{ label, col, want string }
	tests := []struct {
		name              string
		kaas, kfake       *targetResult
		disk              *diskResult
		header            []string
		checks            []check
		absentRowPrefixes []string
	}{
		{
			name: "all targets", kaas: kaas, kfake: kfake, disk: disk,
			header: []string{"metric", "kaas 127.0.0.1:9092", "kfake", "disk", "kaas/kfake"},
			checks: []check{
				{"produce MB/s", "kaas 127.0.0.1:9092", "100.0"},
				{"produce MB/s", "kfake", "50.0"},
				{"produce MB/s", "kaas/kfake", "2.00x"},
				{"produce MB/s", "disk", ""},
				{"produce latency p99 ms", "kaas/kfake", "0.50x"},
				{"produce records (acked)", "kaas/kfake", ""},
				{"consume MB/s", "kaas/kfake", "2.00x"},
				{"consume count check", "kfake", "ok"},
				{"disk fsync MB/s (1MiB chunks)", "disk", "400.0"},
				{"disk fsync MB/s (64KiB chunks)", "disk", "200.0"},
				{"produce MB/s / disk fsync (1MiB)", "kaas 127.0.0.1:9092", "0.25x"},
				{"produce MB/s / disk fsync (1MiB)", "kfake", "0.12x"},
			},
		},
		{
			name: "kfake only", kfake: kfake,
			header:            []string{"metric", "kfake"},
			checks:            []check{{"produce latency p50 ms", "kfake", "1.000"}},
			absentRowPrefixes: []string{"disk", "produce MB/s /"},
		},
		{
			name: "disk only", disk: disk,
			header:            []string{"metric", "disk"},
			checks:            []check{{"disk fsync MB/s (1MiB chunks)", "disk", "400.0"}},
			absentRowPrefixes: []string{"produce", "consume"},
		},
		{
			name: "mismatch is loud", kaas: kaas, kfake: bad,
			header: []string{"metric", "kaas 127.0.0.1:9092", "kfake", "kaas/kfake"},
			checks: []check{
				{"consume count check", "kfake", "MISMATCH 999!=1000"},
				{"consume count check", "kaas 127.0.0.1:9092", "ok"},
			},
		},
		{
			name: "missing consume phase", kaas: &targetResult{Name: "kaas x", Produce: kaas.Produce}, kfake: &targetResult{Name: "kfake", Produce: kfake.Produce},
			header: []string{"metric", "kaas x", "kfake", "kaas/kfake"},
			checks: []check{
				{"consume MB/s", "kaas x", ""},
				{"consume MB/s", "kaas/kfake", "-"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb := buildTable(tt.kaas, tt.kfake, tt.disk)
			if strings.Join(tb.header, "|") != strings.Join(tt.header, "|") {
				t.Fatalf("header %q, want %q", tb.header, tt.header)
			}
			for _, r := range tb.rows {
				if len(r) != len(tb.header) {
					t.Fatalf("row %q has %d cells, header %d", r, len(r), len(tb.header))
				}
				for _, p := range tt.absentRowPrefixes {
					if strings.HasPrefix(r[0], p) {
						t.Errorf("unexpected row %q", r[0])
					}
				}
			}
			for _, c := range tt.checks {
				got, ok := cell(tb, c.label, c.col)
				if !ok {
					t.Errorf("no cell %q/%q", c.label, c.col)
				} else if got != c.want {
					t.Errorf("%q/%q = %q, want %q", c.label, c.col, got, c.want)
				}
			}
			if out := tb.render(); !strings.HasPrefix(out, "metric") {
				t.Errorf("render: %q", out)
			}
		})
	}
}

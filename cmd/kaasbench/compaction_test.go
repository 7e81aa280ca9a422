package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const cleanerPage = `# HELP kaas_log_cleaner_bytes_total Bytes the log cleaner read.
# TYPE kaas_log_cleaner_bytes_total counter
kaas_log_cleaner_bytes_total{direction="read"} 2.097152e+07
kaas_log_cleaner_bytes_total{direction="written"} 9.5e+06
kaas_log_cleaner_busy_seconds_total 0.25
kaas_log_cleaner_busy_seconds_total_extra 99
kaas_log_cleaner_passes_total{result="error"} 1
kaas_log_cleaner_passes_total{result="ok"} 2
kaas_log_cleaner_records_removed_total{reason="superseded"} 11000
kaas_log_cleaner_records_removed_total{reason="tombstone"} 6
kaas_log_cleaner_records_removed_total{reason="aborted",topic="a,b"} 1
`

func TestPromSum(t *testing.T) {
	for _, tc := range []struct {
		name, label string
		want        float64
	}{
		{"kaas_log_cleaner_bytes_total", `direction="read"`, 20971520},
		{"kaas_log_cleaner_bytes_total", `direction="written"`, 9.5e6},
		{"kaas_log_cleaner_bytes_total", "", 20971520 + 9.5e6},
		{"kaas_log_cleaner_busy_seconds_total", "", 0.25}, // not the _extra family
		{"kaas_log_cleaner_passes_total", `result="ok"`, 2},
		{"kaas_log_cleaner_records_removed_total", "", 11007},
		{"kaas_log_cleaner_records_removed_total", `reason="aborted"`, 1},
		{"kaas_log_cleaner_records_removed_total", `reason="super"`, 0},
		{"kaas_missing_total", "", 0},
	} {
		if got := promSum(cleanerPage, tc.name, tc.label); got != tc.want {
			t.Errorf("promSum(%s, %q) = %v, want %v", tc.name, tc.label, got, tc.want)
		}
	}
	want := cleanerMetrics{BytesRead: 20971520, BytesWritten: 9.5e6, BusySeconds: 0.25, PassesOK: 2, PassesError: 1, RecordsRemoved: 11007}
	if got := cleanerFromMetrics(cleanerPage); got != want {
		t.Errorf("cleanerFromMetrics = %+v, want %+v", got, want)
	}
}

func TestCleanerBackoff(t *testing.T) {
	for _, tc := range []struct {
		flags []string
		want  time.Duration
	}{
		{nil, 15 * time.Second},
		{[]string{"--log-cleaner-backoff=1s"}, time.Second},
		{[]string{"-log-cleaner-backoff", "250ms"}, 250 * time.Millisecond},
		{[]string{"--log-cleaner-threads=2", "--log-cleaner-backoff=x"}, 15 * time.Second},
		{[]string{"--log-cleaner-backoff"}, 15 * time.Second},
		{[]string{"--log-cleaner-backoff=1s", "--log-cleaner-backoff=2s"}, 2 * time.Second},
	} {
		if got := cleanerBackoff(tc.flags); got != tc.want {
			t.Errorf("cleanerBackoff(%q) = %s, want %s", tc.flags, got, tc.want)
		}
	}
}

func TestCleanerEnabled(t *testing.T) {
	for _, tc := range []struct {
		flags []string
		want  bool
	}{
		{nil, true},
		{[]string{"--log-cleaner-threads=2"}, true},
		{[]string{"--log-cleaner-enable=false"}, false},
		{[]string{"-log-cleaner-enable=0"}, false},
		{[]string{"--log-cleaner-enable=false", "--log-cleaner-enable"}, true},
		{[]string{"--log-cleaner-enable=true"}, true},
	} {
		if got := cleanerEnabled(tc.flags); got != tc.want {
			t.Errorf("cleanerEnabled(%q) = %t, want %t", tc.flags, got, tc.want)
		}
	}
}

func TestDueRecords(t *testing.T) {
	for _, tc := range []struct {
		elapsed time.Duration
		rate    int
		total   int64
		want    int64
	}{
		{0, 1000, 100, 0},
		{-time.Second, 1000, 100, 0},
		{time.Millisecond, 1000, 100, 1},
		{1500 * time.Microsecond, 1000, 100, 1},
		{50 * time.Millisecond, 1000, 100, 50},
		{time.Second, 1000, 100, 100},
		{time.Hour, 4000, 120000, 120000},
	} {
		if got := dueRecords(tc.elapsed, tc.rate, tc.total); got != tc.want {
			t.Errorf("dueRecords(%s, %d, %d) = %d, want %d", tc.elapsed, tc.rate, tc.total, got, tc.want)
		}
	}
}

func writeFile(t *testing.T, p string, n int) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, make([]byte, n), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestMeasureAndFindPartitionDir(t *testing.T) {
	// The data directory's own path names the topic: only paths below it count.
	data := filepath.Join(t.TempDir(), "kaasbench-compact-x", "data")
	part := filepath.Join(data, "topics", "kaasbench-compact", "0")
	writeFile(t, filepath.Join(data, "__cluster", "groups", "0", "00000000000000000000-e1.log"), 10)
	writeFile(t, filepath.Join(part, "00000000000000000000-e1.log"), 4096)
	writeFile(t, filepath.Join(part, "00000000000000000000-e1.index"), 100)
	writeFile(t, filepath.Join(part, "00000000000000000042-e1.log"), 5000)

	got, err := findPartitionDir(data, "kaasbench-compact")
	if err != nil || got != part {
		t.Fatalf("findPartitionDir = %q, %v; want %q", got, err, part)
	}
	if _, err := findPartitionDir(data, "other"); err == nil {
		t.Error("findPartitionDir of a topic without segments: no error")
	}
	u, err := measureDir(part)
	if err != nil {
		t.Fatal(err)
	}
	if u.Files != 3 || u.Segments != 2 || u.Bytes != 4096+100+5000 || u.Allocated < 0 {
		t.Errorf("measureDir = %+v", u)
	}
}

func TestParseCompactionFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"--broker", "/bin/true"}, ""},
		{[]string{"--broker", "/bin/true", "--duration", "1s"}, "--duration"},
		{[]string{"--broker", "/bin/true", "--segment-bytes", "64KiB"}, "--segment-bytes"},
		{[]string{"--broker", "/bin/true", "--keys", "0"}, "--keys"},
		{[]string{"--broker", "/bin/true", "extra"}, "unexpected"},
	} {
		cfg, err := parseCompactionFlags(tc.args, io.Discard)
		if tc.err == "" {
			if err != nil {
				t.Errorf("%q: %v", tc.args, err)
			}
			if cfg.Keys != 100_000 || cfg.ValueSize != 1024 || cfg.SegmentBytes != 8<<20 || cfg.CleanerIdle != 17*time.Second {
				t.Errorf("%q: defaults %+v", tc.args, cfg)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%q: error %v, want one naming %s", tc.args, err, tc.err)
		}
	}
}

func TestCompactionTables(t *testing.T) {
	r := &compactionResult{
		Config: compactionConfig{Rate: 2000, ValueSize: 1024, Keys: 5000, SegmentBytes: 2 << 20},
		Topic:  "t",
		Halves: []compactionHalf{
			{Records: 10000, Seconds: 5, EndOffset: 10000, Disk: dirUsage{Bytes: 10 << 20}},
			{Cleaner: true, Records: 10000, Seconds: 5, EndOffset: 20000, Disk: dirUsage{Bytes: 9 << 20}},
		},
		CleanerHalf2:  cleanerMetrics{BytesRead: 20 << 20, BusySeconds: 0.5, PassesOK: 2},
		CleanerSettle: cleanerMetrics{BytesRead: 20 << 20, BytesWritten: 9 << 20, BusySeconds: 0.5, PassesOK: 2},
		SettleSeconds: 5,
		DiskSettled:   dirUsage{Bytes: 8 << 20},
	}
	out := compactionTables(r)
	for _, want := range []string{
		"half 1, cleaner off", "half 2, cleaner on", "cleaner on (defaults)",
		"40.0", // MiB/s busy: 20 MiB / 0.5 s
		"2.0",  // MiB/s over half 2 + settle: 20 MiB / 10 s
		"without cleaning (half 1's 1049 B/record x 20000 records): 20.0 MiB; after settle 8.0 MiB: 12.0 MiB reclaimed (60%); cleaner read-written 11.0 MiB",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("tables lack %q:\n%s", want, out)
		}
	}
}

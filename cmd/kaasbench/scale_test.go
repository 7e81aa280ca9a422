package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestParseScaleFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
		check   func(t *testing.T, c scaleConfig)
	}{
		{name: "defaults", args: []string{"--brokers", "a:1,b:2,c:3", "--data", "/d"}, check: func(t *testing.T, c scaleConfig) {
			if c.Topics != 100 || c.Partitions != 100 || c.total() != 10_000 || c.Idle != 30*time.Second ||
				c.MetadataRequests != 50 || c.Poll != 20*time.Millisecond || c.Kill != 0 {
				t.Fatalf("%+v", c)
			}
			if c.ClusterDir != "/d/__cluster" || !strings.HasPrefix(c.TopicPrefix, "scale-") {
				t.Fatalf("cluster dir %q, prefix %q", c.ClusterDir, c.TopicPrefix)
			}
		}},
		{name: "lists in broker order", args: []string{"--brokers", "a:1,b:2", "--admin", "a:9,b:9", "--pids", "10, 20", "--ids", "1,2",
			"--kill", "2", "--cluster-dir", "/c", "--data", "/d", "--topic-prefix", "t-", "--topics", "2", "--partitions", "3"},
			check: func(t *testing.T, c scaleConfig) {
				if fmt.Sprintf("%v %v %v %d %s", c.PIDs, c.IDs, c.Admin, c.Kill, c.ClusterDir) != "[10 20] [1 2] [a:9 b:9] 2 /c" {
					t.Fatalf("%+v", c)
				}
				if got := strings.Join(c.topicNames(), ","); got != "t-00000,t-00001" {
					t.Fatalf("topics %s", got)
				}
			}},
		{name: "kfake alone", args: []string{"--kfake"}},
		{name: "nothing", args: nil, wantErr: "nothing to do"},
		{name: "pids of other brokers", args: []string{"--brokers", "a:1,b:2", "--pids", "1"}, wantErr: "--pids names 1 brokers, --brokers 2"},
		{name: "pid not a number", args: []string{"--brokers", "a:1", "--pids", "x"}, wantErr: `--pids: "x" is not a number`},
		{name: "kill without pids", args: []string{"--brokers", "a:1,b:2", "--kill", "1"}, wantErr: "--kill needs --pids"},
		{name: "kill of the only broker", args: []string{"--brokers", "a:1", "--pids", "1", "--kill", "1"}, wantErr: "at least two --brokers"},
		{name: "no partitions", args: []string{"--kfake", "--partitions", "0"}, wantErr: "--partitions must be >= 1"},
		{name: "json and markdown", args: []string{"--kfake", "--json", "--markdown"}, wantErr: "exclude each other"},
		{name: "no timeout", args: []string{"--kfake", "--takeover-timeout", "0s"}, wantErr: "must be > 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseScaleFlags(tt.args, io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.check != nil {
				tt.check(t, c)
			}
		})
	}
}

// metadataAnswer builds a Metadata answer: topic → leader per partition
// (-1: LEADER_NOT_AVAILABLE).
func metadataAnswer(topics map[string][]int32, topicErr ...string) *kmsg.MetadataResponse {
	resp := kmsg.NewPtrMetadataResponse()
	for name, leaders := range topics {
		rt := kmsg.NewMetadataResponseTopic()
		rt.Topic = new(name)
		for i, l := range leaders {
			p := kmsg.NewMetadataResponseTopicPartition()
			p.Partition, p.Leader = int32(i), l
			if l < 0 {
				p.ErrorCode = 5
			}
			rt.Partitions = append(rt.Partitions, p)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	for _, name := range topicErr {
		rt := kmsg.NewMetadataResponseTopic()
		rt.Topic, rt.ErrorCode = new(name), 3
		rt.Partitions = []kmsg.MetadataResponseTopicPartition{{Leader: 1}}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func TestCountLeaders(t *testing.T) {
	ours := map[string]bool{"a": true, "b": true, "gone": true}
	resp := metadataAnswer(map[string][]int32{
		"a":     {1, 2, 3, -1},
		"b":     {2, 2},
		"other": {1, 1, 1},
	}, "gone")
	tests := []struct {
		name       string
		ok         func(int32) bool
		wantServed int
		wantOwned  string
	}{
		{name: "any leader", wantServed: 5, wantOwned: "map[1:1 2:3 3:1]"},
		{name: "survivors only", ok: func(id int32) bool { return id != 2 }, wantServed: 2, wantOwned: "map[1:1 3:1]"},
		{name: "nobody", ok: func(int32) bool { return false }, wantServed: 0, wantOwned: "map[]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			served, owned := countLeaders(resp, ours, tt.ok)
			if served != tt.wantServed || fmt.Sprint(owned) != tt.wantOwned {
				t.Fatalf("served %d owned %v, want %d %s", served, owned, tt.wantServed, tt.wantOwned)
			}
		})
	}
}

func TestBrokerIDByAddr(t *testing.T) {
	resp := kmsg.NewPtrMetadataResponse()
	for i, port := range []int32{9092, 9093} {
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = int32(i+1), "127.0.0.1", port
		resp.Brokers = append(resp.Brokers, b)
	}
	tests := []struct {
		addr string
		id   int32
		ok   bool
	}{{"127.0.0.1:9093", 2, true}, {"127.0.0.1:9092", 1, true}, {"localhost:9092", 0, false}}
	for _, tt := range tests {
		if id, ok := brokerIDByAddr(resp, tt.addr); id != tt.id || ok != tt.ok {
			t.Errorf("%s: %d %v, want %d %v", tt.addr, id, ok, tt.id, tt.ok)
		}
	}
}

func TestSummarizeWait(t *testing.T) {
	tests := []struct {
		name string
		per  []brokerWait
		want leaderWait
	}{
		{name: "none", want: leaderWait{}},
		{name: "all complete: the last", per: []brokerWait{{ID: 1, Complete: true, Seconds: 2, Served: 10}, {ID: 2, Complete: true, Seconds: 3, Served: 10}},
			want: leaderWait{Complete: true, Seconds: 3, Served: 10}},
		{name: "one short: the fewest served", per: []brokerWait{{ID: 1, Complete: true, Seconds: 2, Served: 10}, {ID: 2, Seconds: 120, Served: 7}},
			want: leaderWait{Seconds: 120, Served: 7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := summarizeWait(tt.per)
			got.PerBroker = nil
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestProblemKey(t *testing.T) {
	tests := []struct{ in, want string }{
		{"open t-00012/7: open /d/t-00012/7/00000000000000000000.log: too many open files", "too many open files"},
		{"waiting: partition budget: t/0 is not opened: this broker holds 5000 partitions open", "this broker holds N partitions open"},
		{"epoch 12 fenced by 13", "epoch N fenced by N"},
		{"  trailing: ", "trailing:"},
		{strings.Repeat("x", 200), strings.Repeat("x", 120)},
	}
	for _, tt := range tests {
		if got := problemKey(tt.in); got != tt.want {
			t.Errorf("problemKey(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestFmtErrorCounts(t *testing.T) {
	tests := []struct {
		m    map[string]int
		want string
	}{
		{nil, ""},
		{map[string]int{"b": 1, "a": 1, "c": 5}, "c (5), a (1), b (1)"},
		{map[string]int{"a": 1, "b": 2, "c": 3, "d": 4, "e": 5, "f": 6, "g": 7}, "g (7), f (6), e (5), d (4), c (3), and 2 more"},
	}
	for _, tt := range tests {
		if got := fmtErrorCounts(tt.m); got != tt.want {
			t.Errorf("%v: %q, want %q", tt.m, got, tt.want)
		}
	}
}

func TestScaleFormats(t *testing.T) {
	tests := []struct{ got, want string }{
		{fmtCount(0), "0"}, {fmtCount(999), "999"}, {fmtCount(1000), "1,000"}, {fmtCount(100000), "100,000"},
		{fmtCount(-1234567), "-1,234,567"},
		{fmtKB(512), "512 B"}, {fmtKB(3210), "3.2 KB"}, {fmtKB(178_400), "178 KB"}, {fmtKB(8_300_000), "8.3 MB"},
		{fmtSecs(0.123), "0.12 s"}, {fmtSecs(55.61), "55.6 s"},
		{fmtMiB(389120 << 10), "380"},
	}
	for i, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%d: %q, want %q", i, tt.got, tt.want)
		}
	}
}

func TestParseProcStatusRSS(t *testing.T) {
	tests := []struct {
		file string
		want int64
		ok   bool
	}{
		{"status-broker", 389120 << 10, true},
		{"status-kthread", 0, false},
		{"status-bad-unit", 0, false},
	}
	for _, tt := range tests {
		b, err := os.ReadFile(filepath.Join("testdata", "proc", tt.file))
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := parseProcStatusRSS(string(b)); got != tt.want || ok != tt.ok {
			t.Errorf("%s: %d %v, want %d %v", tt.file, got, ok, tt.want, tt.ok)
		}
	}
}

func TestParseProcStatFiles(t *testing.T) {
	tests := []struct {
		file string
		want time.Duration
	}{
		{"stat-broker", (2310 + 845) * 10 * time.Millisecond},
		{"stat-paren-name", (150 + 25) * 10 * time.Millisecond},
	}
	for _, tt := range tests {
		b, err := os.ReadFile(filepath.Join("testdata", "proc", tt.file))
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := parseProcStatCPU(string(b)); !ok || got != tt.want {
			t.Errorf("%s: %v %v, want %v", tt.file, got, ok, tt.want)
		}
	}
}

func TestCountDirEntries(t *testing.T) {
	for _, n := range []int{0, 1, 2, 5} { // 2 names at a time
		dir := t.TempDir()
		for i := range n {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprint(i)), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := countDirEntries(dir, 2); err != nil || got != n {
			t.Errorf("%d files: %d %v", n, got, err)
		}
	}
	if _, err := countDirEntries(filepath.Join(t.TempDir(), "missing"), 2); err == nil {
		t.Error("a missing directory counted")
	}
}

// TestMetadataPercentiles: the latencies step reports nearest-rank
// quantiles of its requests (through the histogram, exact below 256 ns
// and within 1% above).
func TestMetadataPercentiles(t *testing.T) {
	tests := []struct {
		name     string
		ms       []int
		p50, p99 float64
	}{
		{name: "one", ms: []int{7}, p50: 7, p99: 7},
		{name: "fifty", ms: seq(1, 50), p50: 25, p99: 50},
		{name: "hundred", ms: seq(1, 100), p50: 50, p99: 99},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHistogram()
			for _, v := range tt.ms {
				h.RecordDuration(time.Duration(v) * time.Millisecond)
			}
			s := summarize(h)
			if !near(s.P50Ms, tt.p50) || !near(s.P99Ms, tt.p99) {
				t.Fatalf("p50 %.3f p99 %.3f, want %.0f %.0f", s.P50Ms, s.P99Ms, tt.p50, tt.p99)
			}
		})
	}
}

func seq(a, b int) []int {
	var out []int
	for i := a; i <= b; i++ {
		out = append(out, i)
	}
	return out
}

func near(got, want float64) bool { return got >= want && got <= want*1.01 }

// scaleResultFixture is a 10,000-partition kaas run with a failed
// takeover, and a kfake run.
func scaleResultFixture() (scaleConfig, *scaleResult, *scaleResult) {
	cfg := scaleConfig{Brokers: []string{"a:1", "b:2", "c:3"}, Topics: 100, Partitions: 100, Idle: 30 * time.Second}
	b := func(id int32, owned int, cpu float64, hb int64, fds int) brokerSample {
		return brokerSample{ID: id, Addr: fmt.Sprintf("127.0.0.1:%d", 9091+id), PID: 100 + int(id), Owned: owned,
			PartitionsOpen: new(int64(owned)), CPUPercent: new(cpu), RSSBytes: new(int64(300 << 20)), FDs: new(fds), HeartbeatBytes: new(hb)}
	}
	kaas := &scaleResult{Name: "kaas", Brokers: 3, Partitions: 10_000,
		Create: &createResult{AnswerSeconds: 55.61, Leaders: leaderWait{Complete: true, Seconds: 56.2, Served: 10_000,
			PerBroker: []brokerWait{{ID: 1, Complete: true, Seconds: 56.2, Polls: 1500, CPUPercent: new(61.4)}, {ID: 2, Complete: true, Seconds: 55.9, Polls: 1490}}}},
		Idle: &idleResult{Seconds: 30, AssignmentBytes: new(int64(825_000)), Brokers: []brokerSample{
			b(1, 3334, 8.04, 178_000, 13_400), b(2, 3333, 12.96, 178_100, 13_300), {ID: 3, Addr: "127.0.0.1:9094", Owned: 3333}}},
		Metadata: &metadataResult{Requests: 50, Latency: latencySummary{Count: 50, P50Ms: 41.25, P99Ms: 90.5, MaxMs: 91}},
		Produce:  &produceRound{Partitions: 10_000, Acked: 10_000, Seconds: 4.2},
		Kill: &killResult{ID: 2, PID: 102, Leaders: leaderWait{Seconds: 120, Served: 9_274},
			Produce:  &produceRound{Partitions: 10_000, Acked: 9_274, Failed: 726, Errors: map[string]int{"NOT_LEADER": 726}},
			Problems: map[string]int{"broker 1: too many open files": 700, "broker 3: too many open files": 26}},
	}
	kfake := &scaleResult{Name: "kfake", Brokers: 3, Partitions: 10_000,
		Create:   &createResult{AnswerSeconds: 0.2, Leaders: leaderWait{Complete: true, Seconds: 0.25, Served: 10_000}},
		Metadata: &metadataResult{Requests: 50, Latency: latencySummary{Count: 50, P50Ms: 3.04, P99Ms: 5}},
		Produce:  &produceRound{Partitions: 10_000, Acked: 9_999, Failed: 1, Seconds: 0.5},
	}
	return cfg, kaas, kfake
}

func TestScaleTargetsTable(t *testing.T) {
	cfg, kaas, kfake := scaleResultFixture()
	tests := []struct {
		name        string
		kaas, kfake *scaleResult
		header      string
		rows        map[string][]string // label prefix → cells after the label
	}{
		{name: "kaas and kfake", kaas: kaas, kfake: kfake, header: "measure|kaas (3 brokers)|kfake (3 brokers)|target", rows: map[string][]string{
			"10,000 partitions: CreateTopics": {"56.2 s (CreateTopics answered at 55.6 s)", "0.25 s (CreateTopics answered at 0.20 s)", "≤ 10 s"},
			"idle CPU per broker":             {"8.0 / 13.0 / - %", "", "≤ 3 %"},
			"heartbeat file size":             {"178 KB / 178 KB / -", "", "≤ 16 KB, independent of partitions"},
			"open fds per owned partition":    {"4.02 / 3.99 / -", "", "≤ 1.5"},
			"kill -9 of 1 of 3 brokers":       {"726 never served (after 120 s)", "", "≤ 10 s"},
			"10,000 partitions on 3 brokers":  {"created, all serving, 10,000/10,000 acked (in 4.20 s)", "created, all serving, 9,999/10,000 acked (in 0.50 s)", "works; figures reported"},
			"Metadata for all 10,000":         {"41.2 ms (p99 90.5 ms, 50 requests)", "3.0 ms (p99 5.0 ms, 50 requests)", "reported; ≤ 200 ms"},
			"RSS per broker":                  {"300 / 300 / - MiB", "", "reported"},
			"assignment.json size":            {"825 KB", "", ""},
		}},
		{name: "kfake alone", kfake: kfake, header: "measure|kfake (3 brokers)|target", rows: map[string][]string{
			"10,000 partitions: CreateTopics": {"0.25 s (CreateTopics answered at 0.20 s)", "≤ 10 s"},
			"idle CPU per broker":             {"", "≤ 3 %"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb := scaleTargetsTable(cfg, tt.kaas, tt.kfake)
			if got := strings.Join(tb.header, "|"); got != tt.header {
				t.Fatalf("header %s, want %s", got, tt.header)
			}
			if len(tb.rows) != 9 {
				t.Fatalf("%d rows", len(tb.rows))
			}
			for prefix, want := range tt.rows {
				found := false
				for _, r := range tb.rows {
					if strings.HasPrefix(r[0], prefix) {
						found = true
						if got := strings.Join(r[1:], "|"); got != strings.Join(want, "|") {
							t.Errorf("%s: %q, want %q", prefix, got, strings.Join(want, "|"))
						}
					}
				}
				if !found {
					t.Errorf("no row %q", prefix)
				}
			}
		})
	}
}

func TestKillCell(t *testing.T) {
	tests := []struct {
		name string
		k    *killResult
		want string
	}{
		{name: "not asked", want: ""},
		{name: "no pid", k: &killResult{}, want: "not run"},
		{name: "acked", k: &killResult{PID: 1, Leaders: leaderWait{Complete: true, Seconds: 4.5}, Acked: true, AckedSeconds: 5.25}, want: "5.25 s (leaders at 4.50 s)"},
		{name: "leaders, produce failed", k: &killResult{PID: 1, Leaders: leaderWait{Complete: true, Seconds: 4.5}, Produce: &produceRound{Failed: 3}}, want: "leaders at 4.50 s; 3 produces failed"},
		{name: "never served", k: &killResult{PID: 1, Leaders: leaderWait{Seconds: 120, Served: 9000}}, want: "1,000 never served (after 120 s)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := killCell(&scaleResult{Partitions: 10_000, Kill: tt.k}); got != tt.want {
				t.Fatalf("%q, want %q", got, tt.want)
			}
		})
	}
}

func TestBrokerAndStepsTables(t *testing.T) {
	_, kaas, kfake := scaleResultFixture()
	got := brokerTable(kaas.Idle.Brokers, true).render()
	want := "" +
		"broker  address         pid  owned   open  CPU %  RSS MiB     fds  fds/owned  heartbeat\n" +
		"---------------------------------------------------------------------------------------\n" +
		"1       127.0.0.1:9092  101  3,334  3,334    8.0      300  13,400       4.02     178 KB\n" +
		"2       127.0.0.1:9093  102  3,333  3,333   13.0      300  13,300       3.99     178 KB\n" +
		"3       127.0.0.1:9094    -  3,333      -      -        -       -          -          -\n"
	if got != want {
		t.Fatalf("broker table\n%s\nwant\n%s", got, want)
	}
	steps := scaleStepsTable(kaas, kfake)
	var labels []string
	for _, r := range steps.rows {
		labels = append(labels, r[0])
	}
	// Every step ran for kaas but the acked-again one; both problems listed.
	wantLabels := []string{
		"CreateTopics answered after (s)",
		"every leader in each broker's Metadata after (s)",
		"  Metadata polls sent to each broker meanwhile",
		"  each broker's CPU % meanwhile (polls included)",
		"produce to every partition: acked / failed",
		"produce to every partition took (s)",
		"Metadata for all: requests / errors",
		"Metadata for all: p50 / p99 / max ms",
		"kill: every leader on a survivor after (s)",
		"kill: producing to every partition from the kill on: acked / failed",
		"kill: reconcile error: broker 1: too many open files",
		"kill: reconcile error: broker 3: too many open files",
	}
	if strings.Join(labels, "\n") != strings.Join(wantLabels, "\n") {
		t.Fatalf("steps rows\n%s", strings.Join(labels, "\n"))
	}
	if r := steps.rows[1]; r[1] != "56.20 (1: 56.20, 2: 55.90)" || r[2] != "0.25" {
		t.Fatalf("leaders row %q", r)
	}
	if r := steps.rows[2]; r[1] != "1: 1,500, 2: 1,490" || r[2] != "" {
		t.Fatalf("polls row %q", r)
	}
	if r := steps.rows[3]; r[1] != "1: 61" {
		t.Fatalf("cpu row %q", r)
	}
	if r := steps.rows[8]; r[1] != "incomplete after 120.0 (fewest served 9,274)" {
		t.Fatalf("kill row %q", r)
	}
}

func TestMarkdown(t *testing.T) {
	tests := []struct {
		name string
		tb   table
		want string
	}{
		{name: "empty", want: ""},
		{name: "first column left, pipes escaped", tb: table{header: []string{"m", "v"}, rows: [][]string{{"a|b", "1"}, {"c"}}},
			want: "| m | v |\n|---|---:|\n| a\\|b | 1 |\n| c |  |\n"},
		{name: "all left", tb: table{header: []string{"m", "v", "t"}, left: 3, rows: [][]string{{"x", "y", "z"}}},
			want: "| m | v | t |\n|---|---|---|\n| x | y | z |\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.tb.markdown(); got != tt.want {
				t.Fatalf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

// TestScaleAgainstKfake runs `kaasbench scale` end to end twice on a
// small scale: with --kfake, and with a kfake cluster standing in for
// kaas brokers (IDs from Metadata, no /proc, no idle window). Counts only.
func TestScaleAgainstKfake(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	tests := []struct {
		name string
		args []string
		get  func(scaleReport) *scaleResult
	}{
		{name: "kfake", args: []string{"--kfake"}, get: func(r scaleReport) *scaleResult { return r.Kfake }},
		{name: "brokers", args: []string{"--brokers", strings.Join(c.ListenAddrs(), ","), "--idle", "0s"},
			get: func(r scaleReport) *scaleResult { return r.Kaas }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append([]string{"scale", "--topics", "3", "--partitions", "4", "--metadata-requests", "6", "--json"}, tt.args...)
			if code := run(context.Background(), args, &stdout, &stderr); code != 0 {
				t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
			}
			var rep scaleReport
			if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
				t.Fatal(err)
			}
			r := tt.get(rep)
			if !rep.OK || r == nil || r.Create == nil || !r.Create.Leaders.Complete || r.Create.Leaders.Served != 12 {
				t.Fatalf("%+v", rep)
			}
			if r.Metadata == nil || r.Metadata.Requests != 6 || r.Metadata.Errors != 0 || r.Metadata.Partitions != 12 {
				t.Fatalf("metadata %+v", r.Metadata)
			}
			if r.Produce == nil || r.Produce.Acked != 12 || r.Produce.Failed != 0 {
				t.Fatalf("produce %+v", r.Produce)
			}
		})
	}
}

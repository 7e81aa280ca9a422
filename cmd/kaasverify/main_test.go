package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kaas-dev/kaas/cmd/kaasverify/check"
)

func TestParseRunFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		check   func(config) bool
		wantErr string
	}{
		{name: "required", args: nil, wantErr: "--brokers is required"},
		{name: "history required", args: []string{"--brokers", "127.0.0.1:9092"}, wantErr: "--history is required"},
		{name: "defaults", args: []string{"--brokers", "127.0.0.1:9092, 127.0.0.1:9093", "--history", "h"}, check: func(c config) bool {
			return len(c.Brokers) == 2 && c.Brokers[1] == "127.0.0.1:9093" && strings.HasPrefix(c.Topic, "kaasverify-") &&
				c.Producers == 2 && c.Consumers == 1 && c.Rate == 1000 && c.Idempotent && !c.Create && c.Records == 0 &&
				len(c.topicNames()) == 1
		}},
		{name: "topics", args: []string{"--brokers", "b:1", "--history", "h", "--topic", "t", "--topics", "3"}, check: func(c config) bool {
			n := c.topicNames()
			return len(n) == 3 && n[0] == "t-0" && n[2] == "t-2"
		}},
		{name: "bad", args: []string{"--brokers", "b:1", "--history", "h", "--producers", "0", "--rate", "-1"}, wantErr: "--producers"},
		{name: "stray", args: []string{"--brokers", "b:1", "--history", "h", "x"}, wantErr: "unexpected"},
		{name: "not compacted", args: []string{"--brokers", "b:1", "--history", "h"}, check: func(c config) bool {
			return !c.Compacted && c.cleanupPolicy() == "" && c.createConfigs() == nil
		}},
		{name: "compacted", args: []string{"--brokers", "b:1", "--history", "h", "--compacted", "--keys", "7", "--tombstone-every", "3",
			"--topic-config", "segment.ms=100", "--topic-config", "min.cleanable.dirty.ratio=0.01"}, check: func(c config) bool {
			m := c.createConfigs()
			return c.Compacted && c.Keys == 7 && c.TombstoneEvery == 3 && len(m) == 3 && *m["cleanup.policy"] == "compact" &&
				*m["segment.ms"] == "100" && *m["min.cleanable.dirty.ratio"] == "0.01"
		}},
		{name: "compact,delete", args: []string{"--brokers", "b:1", "--history", "h", "--compacted", "--topic-config", "cleanup.policy=compact,delete"}, check: func(c config) bool {
			return c.Keys == 100 && c.TombstoneEvery == 10 && *c.createConfigs()["cleanup.policy"] == "compact,delete"
		}},
		{name: "bad topic config", args: []string{"--brokers", "b:1", "--history", "h", "--topic-config", "segment.ms"}, wantErr: "key=value"},
		{name: "bad keys", args: []string{"--brokers", "b:1", "--history", "h", "--compacted", "--keys", "0"}, wantErr: "--keys"},
		{name: "all tombstones", args: []string{"--brokers", "b:1", "--history", "h", "--compacted", "--tombstone-every", "1"}, wantErr: "--tombstone-every"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parseRunFlags(tt.args, io.Discard)
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

func TestReadValue(t *testing.T) {
	l := &loader{cfg: config{RunID: "abc", ValueSize: 16}}
	rec := func(key, val string, part int32) *kgo.Record {
		return &kgo.Record{Topic: "t", Partition: part, Key: []byte(key), Value: []byte(val)}
	}
	tests := []struct {
		r    *kgo.Record
		want string
	}{
		{rec("t/1", "abc.p0.7 .......", 1), "abc.p0.7"},
		{rec("t/1", "abc.p0.7 ...x...", 1), "abc.p0.7!corrupt"},
		{rec("t/1", "abc.p0.7 ....", 1), "abc.p0.7!corrupt"},                  // truncated
		{rec("t/1", "other.p0.7 ....", 1), "other.p0.7"},                      // another run's size
		{rec("t/2", "abc.p0.7 .......", 1), "abc.p0.7!misplaced"},             // key names partition 2
		{rec("u/1", "abc.p0.7 .......", 1), "abc.p0.7!misplaced"},             // key names topic u
		{&kgo.Record{Topic: "t", Value: []byte("plain")}, "plain"},            // no key, no padding
		{rec("t/x", "abc.p1.70000000000", 0), "abc.p1.70000000000!misplaced"}, // bad key
	}
	for _, tt := range tests {
		if got := l.readValue(tt.r); got != tt.want {
			t.Errorf("readValue(%q, %q) = %q, want %q", tt.r.Key, tt.r.Value, got, tt.want)
		}
	}
}

func TestReadValueCompacted(t *testing.T) {
	l := &loader{cfg: config{RunID: "abc", ValueSize: 16, Compacted: true}}
	rec := func(val string, headers ...string) *kgo.Record {
		r := &kgo.Record{Topic: "t", Partition: 1, Key: []byte("k3")}
		if val != "<null>" {
			r.Value = []byte(val)
		}
		for i := 0; i+1 < len(headers); i += 2 {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: headers[i], Value: []byte(headers[i+1])})
		}
		return r
	}
	tests := []struct {
		r         *kgo.Record
		want      string
		tombstone bool
	}{
		{rec("abc.p0.7 .......", hdrTP, "t/1"), "abc.p0.7", false},
		{rec("abc.p0.7 ...x...", hdrTP, "t/1"), "abc.p0.7!corrupt", false},
		{rec("abc.p0.7 .......", hdrTP, "t/2"), "abc.p0.7!misplaced", false},
		{rec("abc.p0.7 ......."), "abc.p0.7", false}, // no header: the key names no partition
		{rec("<null>", hdrTP, "t/1", hdrID, "abc.p0.9"), "abc.p0.9", true},
		{rec("<null>", hdrTP, "u/1", hdrID, "abc.p0.9"), "abc.p0.9!misplaced", true},
		{rec("<null>", hdrTP, "t/1"), "!noid", true},
	}
	for _, tt := range tests {
		e := l.readEvent(check.KindFinal, check.FinalProcess, tt.r)
		if e.Value != tt.want || e.Key != "k3" || e.Tombstone != tt.tombstone {
			t.Errorf("readEvent(%q, %v) = value %q key %q tombstone %v, want %q k3 %v", tt.r.Value, tt.r.Headers, e.Value, e.Key, e.Tombstone, tt.want, tt.tombstone)
		}
	}
}

func TestClassify(t *testing.T) {
	if classify(fmt.Errorf("x: %w", kerr.MessageTooLarge)) != check.Fail {
		t.Error("MESSAGE_TOO_LARGE is definite")
	}
	for _, err := range []error{kgo.ErrRecordTimeout, kgo.ErrRecordRetries, kerr.NotLeaderForPartition, kgo.ErrClientClosed, errors.New("EOF")} {
		if classify(err) != check.Info {
			t.Errorf("%v classified definite", err)
		}
	}
}

// runKfake runs "kaasverify run" in process against a 3-broker kfake
// cluster on 127.0.0.1, with 2 producers and a record limit, so that it
// ends by itself.
func runKfake(t *testing.T, dir string, extra ...string) (int, string) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	args := append([]string{"run", "--brokers", strings.Join(c.ListenAddrs(), ","), "--topic", "v", "--topics", "2",
		"--partitions", "3", "--create", "--producers", "2", "--records", "3000", "--rate", "0", "--value-size", "64",
		"--consumers", "2", "--history", filepath.Join(dir, "history.jsonl"), "--report", filepath.Join(dir, "report.json"),
		"--pids-every", "0", "--hwm-every", "0", "--commits-every", "1h", "--progress", "0"}, extra...)
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr)
	return code, stdout.String() + stderr.String()
}

type reportJSON struct {
	OK     bool           `json:"ok"`
	Counts check.Counts   `json:"counts"`
	Checks []check.Result `json:"checks"`
}

func readReport(t *testing.T, path string) reportJSON {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r reportJSON
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	return r
}

func (r reportJSON) check(id string) check.Result {
	for _, c := range r.Checks {
		if c.ID == id {
			return c
		}
	}
	return check.Result{}
}

func TestRunAgainstKfake(t *testing.T) {
	dir := t.TempDir()
	code, out := runKfake(t, dir)
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, out)
	}
	if !strings.Contains(out, "result: OK") {
		t.Fatalf("no OK summary:\n%s", out)
	}
	rep := readReport(t, filepath.Join(dir, "report.json"))
	c := rep.Counts
	if !rep.OK || c.Sends != 3000 || c.Acked != 3000 || c.FinalRecords != 3000 || c.FinalPartitions != 6 {
		t.Fatalf("report: %+v\n%s", rep, out)
	}
	// Raw InitProducerId at start and end, and each producer's own.
	if l1, l9 := rep.check(check.L1), rep.check(check.L9); l1.Checked != 3000 || l9.Checked < 4 {
		t.Fatalf("L1 checked %d, L9 checked %d", l1.Checked, l9.Checked)
	}
	if l7 := rep.check(check.L7); l7.Checked == 0 {
		t.Fatal("L7 not exercised")
	}
	t.Logf("polls %d, commits %d, read back %d\n%s", c.Polls, c.Commits, c.Committed, out)

	// Tamper: drop one final record; "check" must report exactly that
	// acknowledged record lost.
	hist := filepath.Join(dir, "history.jsonl")
	b, err := os.ReadFile(hist)
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	var dropped check.Event
	for _, line := range strings.SplitAfter(string(b), "\n") {
		if dropped.Kind == "" && strings.HasPrefix(line, `{"kind":"final"`) {
			if err := json.Unmarshal([]byte(line), &dropped); err != nil {
				t.Fatal(err)
			}
			continue
		}
		kept = append(kept, line)
	}
	tampered := filepath.Join(dir, "tampered.jsonl")
	if err := os.WriteFile(tampered, []byte(strings.Join(kept, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code = run(context.Background(), []string{"check", "--history", tampered, "--report", filepath.Join(dir, "tampered.json")}, &stdout, &stderr)
	if code != exitViolations {
		t.Fatalf("tampered history: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	rep = readReport(t, filepath.Join(dir, "tampered.json"))
	l1 := rep.check(check.L1)
	if rep.OK || l1.Violations != 1 || !strings.Contains(l1.Examples[0], fmt.Sprintf("%q acknowledged", dropped.Value)) {
		t.Fatalf("tampered report: %+v", rep)
	}
	if !strings.Contains(stdout.String(), "L1 lost-write") || !strings.Contains(stdout.String(), "VIOLATED") {
		t.Fatalf("summary:\n%s", stdout.String())
	}

	// The untouched history checks OK again, as JSON.
	stdout.Reset()
	if code := run(context.Background(), []string{"check", "--history", hist, "--json"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("check of the original history: exit %d\n%s", code, stderr.String())
	}
	var again reportJSON
	if err := json.Unmarshal(stdout.Bytes(), &again); err != nil || !again.OK || again.Counts.Acked != 3000 {
		t.Fatalf("%v %+v", err, again)
	}
}

// TestRunCompactedAgainstKfake runs compacted mode end to end (kfake does
// not compact, which C1–C3 allow), then shows the checker biting on the
// history with a key's latest value dropped from the final read.
func TestRunCompactedAgainstKfake(t *testing.T) {
	dir := t.TempDir()
	code, out := runKfake(t, dir, "--compacted", "--keys", "20", "--tombstone-every", "5", "--topic-config", "segment.ms=100")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, out)
	}
	rep := readReport(t, filepath.Join(dir, "report.json"))
	c := rep.Counts
	if !rep.OK || c.Sends != 3000 || c.Acked != 3000 || c.FinalRecords != 3000 || c.CompactedTopics != 2 || c.Tombstones != 600 || c.Keys != 6*20 {
		t.Fatalf("report: %+v\n%s", rep, out)
	}
	if l1, c1, c2, c3 := rep.check(check.L1), rep.check(check.C1), rep.check(check.C2), rep.check(check.C3); l1.Checked != 0 || c1.Checked != 6*20 || c2.Checked == 0 || c3.Checked < 6000 {
		t.Fatalf("L1 %+v, C1 %+v, C2 %+v, C3 %+v", l1, c1, c2, c3)
	}
	hist := filepath.Join(dir, "history.jsonl")
	evs, err := check.ReadFile(hist)
	if err != nil {
		t.Fatal(err)
	}
	var topics, tombs int
	for _, e := range evs {
		switch {
		case e.Kind == check.KindTopic && e.Cleanup == "compact":
			topics++
		case e.Kind == check.KindFinal && e.Tombstone:
			tombs++
		case e.Kind == check.KindFinal && (e.Key == "" || strings.Contains(e.Value, "!")):
			t.Fatalf("final record %+v", e)
		}
	}
	if topics != 2 || tombs != 600 {
		t.Fatalf("%d topic events, %d tombstones read", topics, tombs)
	}

	// Tamper: drop a key's last record in the final read, a value read
	// after an older one; it is the key's latest write (nothing was
	// compacted), so C1 must say so.
	type kp struct {
		tp  string
		key string
	}
	lastOf, seen := map[kp]int{}, map[kp]int{}
	for i, e := range evs {
		if e.Kind == check.KindFinal {
			k := kp{fmt.Sprintf("%s/%d", e.Topic, e.Partition), e.Key}
			lastOf[k] = i
			seen[k]++
		}
	}
	last := -1
	for k, i := range lastOf {
		if seen[k] > 1 && !evs[i].Tombstone && i > last {
			last = i
		}
	}
	dropped := evs[last]
	evs = append(evs[:last], evs[last+1:]...)
	var buf bytes.Buffer
	w := check.NewWriter(&buf)
	for _, e := range evs {
		w.Record(e)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	tampered := filepath.Join(dir, "tampered.jsonl")
	if err := os.WriteFile(tampered, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	if code := run(context.Background(), []string{"check", "--history", tampered, "--report", filepath.Join(dir, "tampered.json")}, &stdout, io.Discard); code != exitViolations {
		t.Fatalf("tampered history: exit %d\n%s", code, stdout.String())
	}
	rep = readReport(t, filepath.Join(dir, "tampered.json"))
	c1 := rep.check(check.C1)
	if rep.OK || c1.Violations != 1 || !strings.Contains(c1.Examples[0], fmt.Sprintf("key %q: latest write, value %q", dropped.Key, dropped.Value)) {
		t.Fatalf("tampered report: %+v", rep)
	}
	if l1 := rep.check(check.L1); l1.Violations != 0 {
		t.Fatalf("L1 judged a compacted topic: %+v", l1)
	}
}

// TestEmptyTail: the final read's probe steps over offsets without
// records (here a transaction's commit marker) and stops at a record.
func TestEmptyTail(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "x"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.TransactionalID("tx"), kgo.DefaultProduceTopic("x"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, kgo.StringRecord("v")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup("x", 0)
	td, err := adm.ListTopics(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	p, id := partition{topic: "x", part: 0}, [16]byte(td["x"].ID)
	if end.Offset != 2 {
		t.Fatalf("end offset %d, want 2 (the record and the commit marker)", end.Offset)
	}
	for _, tt := range []struct {
		at   int64
		want bool
	}{{0, false}, {1, true}, {2, true}} {
		got, err := emptyTail(ctx, cl, p, id, tt.at, end.Offset)
		if err != nil || got != tt.want {
			t.Errorf("emptyTail from %d = %v, %v; want %v", tt.at, got, err, tt.want)
		}
	}
}

func TestCommandErrors(t *testing.T) {
	for _, args := range [][]string{nil, {"nope"}, {"run"}, {"check"}, {"check", "--history", filepath.Join(t.TempDir(), "missing")}} {
		if code := run(context.Background(), args, io.Discard, io.Discard); code != exitToolError {
			t.Errorf("%q: exit %d, want %d", args, code, exitToolError)
		}
	}
}

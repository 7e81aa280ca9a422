package check

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// Event constructors for compact histories, all on topic "t".

func send(proc, val string, part int32, out Outcome, off int64) Event {
	e := NewEvent(KindSend)
	e.Process, e.Value, e.Topic, e.Partition, e.Outcome, e.Offset = proc, val, "t", part, out, off
	if out != OK {
		e.Offset, e.Error = -1, "some error"
	}
	return e
}

func ok(val string, part int32, off int64) Event { return send("p0", val, part, OK, off) }

func poll(cons, val string, part int32, off, hwm int64) Event {
	e := NewEvent(KindPoll)
	e.Process, e.Value, e.Topic, e.Partition, e.Offset, e.HWM = cons, val, "t", part, off, hwm
	return e
}

func final(val string, part int32, off int64) Event {
	e := NewEvent(KindFinal)
	e.Process, e.Value, e.Topic, e.Partition, e.Offset = FinalProcess, val, "t", part, off
	return e
}

func finalBounds(part int32, start, hwm int64) Event {
	e := NewEvent(KindHWM)
	e.Process, e.Topic, e.Partition, e.Start, e.HWM = FinalProcess, "t", part, start, hwm
	return e
}

func hwm(obs string, part int32, h, lso int64) Event {
	e := NewEvent(KindHWM)
	e.Process, e.Topic, e.Partition, e.HWM, e.LSO = obs, "t", part, h, lso
	return e
}

func pid(id int64, epoch int16) Event {
	e := NewEvent(KindPID)
	e.Process, e.ProducerID, e.Epoch = "pids", id, epoch
	return e
}

func commit(kind Kind, part int32, off int64) Event {
	e := NewEvent(kind)
	e.Process, e.Group, e.Topic, e.Partition, e.Offset = "committer", "g", "t", part, off
	return e
}

func fault(kind, target string) Event {
	e := NewEvent(KindFault)
	e.Fault, e.Target = kind, target
	return e
}

func cat(parts ...[]Event) []Event {
	var out []Event
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// healthy is a clean history: three acks on two partitions, one read by a
// consumer, all in the final read.
func healthy() []Event {
	return []Event{
		ok("a", 0, 0), ok("b", 0, 1), ok("c", 1, 0),
		poll("c0", "a", 0, 0, 2), poll("c0", "b", 0, 1, 2),
		finalBounds(0, 0, 2), final("a", 0, 0), final("b", 0, 1),
		finalBounds(1, 0, 1), final("c", 1, 0),
	}
}

// TestChecksBite shows, for every check, a history it passes and one it
// fails.
func TestChecksBite(t *testing.T) {
	tests := []bite{
		{"L1 pass", L1, healthy(), 0, ""},
		{"L1 record missing", L1, cat(healthy()[:8], []Event{finalBounds(1, 0, 1)}), 1, `"c" acknowledged to p0 at t/1@0: the final read has no record there`},
		{"L1 hwm below ack", L1, cat(healthy()[:8], []Event{finalBounds(1, 0, 0)}), 1, "ends at high watermark 0"},
		{"L1 moved", L1, []Event{ok("a", 0, 0), final("x", 0, 0), final("a", 0, 1)}, 1, `has "x" there (value seen at t/0@1)`},
		{"L1 below log start not checked", L1, []Event{ok("a", 0, 0), finalBounds(0, 1, 1)}, 0, ""},
		{"L2 pass", L2, healthy(), 0, ""},
		{"L2 duplicate", L2, cat(healthy(), []Event{final("a", 0, 2)}), 1, `"a" at 2 offsets: t/0@0, t/0@2`},
		{"L2 duplicate in polls", L2, []Event{ok("a", 0, 0), poll("c0", "a", 0, 0, 2), poll("c1", "a", 0, 1, 2)}, 1, `"a" at 2 offsets`},
		{"L3 pass", L3, healthy(), 0, ""},
		{"L3 ack vs final", L3, []Event{ok("a", 0, 0), final("b", 0, 0)}, 1, `t/0@0 holds "a" (ack by p0) and "b" (final read)`},
		{"L3 two acks", L3, []Event{ok("a", 0, 0), send("p1", "b", 0, OK, 0)}, 1, `(ack by p1)`},
		{"L3 poll vs poll", L3, []Event{poll("c0", "a", 0, 0, 1), poll("c1", "b", 0, 0, 1)}, 1, `(poll by c1)`},
		{"L4 pass", L4, cat(healthy(), []Event{send("p0", "f", 0, Fail, -1)}), 0, ""},
		{"L4 failed in final", L4, cat(healthy(), []Event{send("p0", "f", 0, Fail, -1), final("f", 0, 2)}), 1, `failed "f" is in the final read at t/0@2`},
		{"L4 failed polled", L4, cat([]Event{send("p0", "f", 0, Fail, -1), poll("c0", "f", 0, 0, 1)}), 1, `failed "f" was polled at t/0@0`},
		{"L4 failed then retried ok", L4, []Event{send("p0", "f", 0, Fail, -1), ok("f", 0, 0), final("f", 0, 0)}, 0, ""},
		{"L5 pass", L5, cat(healthy(), []Event{send("p0", "i", 0, Info, -1), final("i", 0, 2)}), 0, ""},
		{"L5 indeterminate twice", L5, cat(healthy(), []Event{send("p0", "i", 0, Info, -1), final("i", 0, 2), final("i", 0, 3)}), 1, `indeterminate "i" appears 2 times`},
		{"L6 pass", L6, healthy(), 0, ""},
		{"L6 gap matching the final read", L6, []Event{poll("c0", "a", 0, 0, 9), poll("c0", "b", 0, 5, 9), final("a", 0, 0), final("b", 0, 5)}, 0, ""},
		{"L6 nonmonotonic", L6, []Event{poll("c0", "a", 0, 0, 2), poll("c0", "b", 0, 1, 2), poll("c0", "a", 0, 0, 2)}, 1, "nonmonotonic poll: c0 read t/0@0 after offset 1"},
		{"L6 repeated offset", L6, []Event{poll("c0", "a", 0, 0, 2), poll("c0", "a", 0, 0, 2)}, 1, "nonmonotonic"},
		{"L6 skip", L6, []Event{poll("c0", "a", 0, 0, 3), poll("c0", "c", 0, 2, 3), final("a", 0, 0), final("b", 0, 1), final("c", 0, 2)}, 1, "poll skip: c0 read t/0/2 after 0, but the final read has offset 1"},
		{"L6 other consumers independent", L6, []Event{poll("c0", "a", 0, 0, 2), poll("c1", "a", 0, 0, 2), poll("c0", "b", 0, 1, 2)}, 0, ""},
		{"L7 pass", L7, []Event{hwm("lo", 0, 1, 1), poll("c0", "a", 0, 0, 3), hwm("lo", 0, 3, 3), finalBounds(0, 0, 3)}, 0, ""},
		{"L7 poll hwm decreases", L7, []Event{poll("c0", "a", 0, 0, 5), poll("c0", "b", 0, 1, 4)}, 1, "c0 saw t/0's high watermark go from 5 to 4"},
		{"L7 listed lso decreases", L7, []Event{hwm("lo", 0, 5, 5), hwm("lo", 0, 5, 3)}, 1, "last stable offset go from 5 to 3"},
		{"L7 observers independent", L7, []Event{hwm("lo", 0, 5, -1), poll("c0", "a", 0, 0, 4)}, 0, ""},
		{"L7 final below observed", L7, []Event{poll("c0", "a", 0, 0, 5), finalBounds(0, 0, 4)}, 1, "ends at high watermark 4, below 5"},
		{"L8 pass", L8, []Event{commit(KindCommit, 0, 5), commit(KindCommitted, 0, 5), commit(KindCommit, 0, 3), commit(KindCommitted, 0, 3)}, 0, ""},
		{"L8 regression", L8, []Event{commit(KindCommit, 0, 5), commit(KindCommitted, 0, 4)}, 1, "read back as 4, below the last acknowledged commit 5"},
		{"L9 pass", L9, []Event{pid(1, 0), pid(2, 0), pid(1, 1)}, 0, ""},
		{"L9 reuse", L9, []Event{pid(1, 0), pid(2, 0), pid(1, 0)}, 1, "producer id 1 epoch 0 issued more than once"},
	}
	runBites(t, tests, nil)
}

// bite is a history and what one check must find in it.
type bite struct {
	name   string
	id     string
	events []Event
	want   int    // violations of check id
	substr string // in the first example
}

// runBites runs each case; also, if non-nil, checks more of each report.
func runBites(t *testing.T, tests []bite, also func(*testing.T, Report)) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := Check(tt.events)
			r := rep.Check(tt.id)
			if r.ID != tt.id {
				t.Fatalf("no result for %s", tt.id)
			}
			if r.Violations != tt.want {
				t.Fatalf("%s violations = %d, want %d\n%s", tt.id, r.Violations, tt.want, rep)
			}
			if tt.substr != "" && (len(r.Examples) == 0 || !strings.Contains(r.Examples[0], tt.substr)) {
				t.Fatalf("%s examples %q, want one containing %q", tt.id, r.Examples, tt.substr)
			}
			if tt.want == 0 && !rep.OK() {
				t.Fatalf("a passing history has other violations:\n%s", rep)
			}
			if tt.want > 0 && (rep.OK() || !strings.Contains(rep.String(), tt.id+" ")) {
				t.Fatalf("report not failing:\n%s", rep)
			}
			if also != nil {
				also(t, rep)
			}
		})
	}
}

func TestHealthyReport(t *testing.T) {
	evs := cat(healthy(), []Event{pid(7, 0), send("p1", "i", 1, Info, -1), fault("kill", "broker-1"), fault("kill", "broker-2"), fault("pause", "broker-1")})
	rep := Check(evs)
	if !rep.OK() {
		t.Fatalf("not OK:\n%s", rep)
	}
	c := rep.Counts
	if c.Events != len(evs) || c.Sends != 4 || c.Acked != 3 || c.Indeterminate != 1 || c.Polls != 2 || c.FinalRecords != 3 ||
		c.FinalPartitions != 2 || c.PIDs != 1 || c.Faults != 3 || c.FaultKinds["kill"] != 2 {
		t.Fatalf("counts %+v", c)
	}
	if r := rep.Check(L8); r.Exercised() || !r.NotExercised {
		t.Fatalf("L8 exercised without commits: %+v", r)
	}
	s := rep.String()
	for _, want := range []string{"result: OK", "L8 commit-regression", "not exercised", "kill×2, pause×1", "C1 latest-survives"} {
		if !strings.Contains(s, want) {
			t.Fatalf("summary lacks %q:\n%s", want, s)
		}
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		OK         bool     `json:"ok"`
		Violations int      `json:"violations"`
		Counts     Counts   `json:"counts"`
		Checks     []Result `json:"checks"`
	}
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !back.OK || back.Counts.Acked != 3 || len(back.Checks) != 12 || back.Checks[0].ID != L1 || back.Checks[11].ID != C3 {
		t.Fatalf("json %s", b)
	}
}

func TestIncompleteFinalRead(t *testing.T) {
	// Partition 1 has no final-read bounds: its ack is not judged lost, and
	// the report says so.
	evs := cat(healthy()[:8], []Event{poll("c0", "c", 1, 0, 1)})
	rep := Check(evs)
	if !rep.OK() || len(rep.Notes) != 1 || !strings.Contains(rep.Notes[0], "t/1 has no final-read bounds") {
		t.Fatalf("report:\n%s", rep)
	}
}

func TestExamplesBounded(t *testing.T) {
	var evs []Event
	for i := range 50 {
		evs = append(evs, ok(string(rune('A'+i)), 0, int64(i)))
	}
	evs = append(evs, finalBounds(0, 0, 0))
	r := Check(evs).Check(L1)
	if r.Violations != 50 || len(r.Examples) != MaxExamples {
		t.Fatalf("%d violations, %d examples", r.Violations, len(r.Examples))
	}
	if !strings.Contains(Check(evs).String(), "and 40 more") {
		t.Fatal("summary does not mention the rest")
	}
}

func TestDeterministic(t *testing.T) {
	evs := []Event{ok("a", 0, 0), ok("b", 0, 0), ok("c", 1, 0), final("d", 1, 0), final("a", 2, 0), final("a", 3, 0)}
	first, _ := json.Marshal(Check(evs))
	for range 20 {
		if again, _ := json.Marshal(Check(evs)); !bytes.Equal(first, again) {
			t.Fatalf("reports differ:\n%s\n%s", first, again)
		}
	}
}

func TestHistoryRoundTrip(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	evs := cat(healthy(), []Event{
		send("p1", "odd \"value\"\n\u00e9", 0, Info, -1),
		pid(42, 3), commit(KindCommit, 1, 7), commit(KindCommitted, 1, 7), hwm("lo", 0, 10, 9), fault("kill", "broker-0"),
		topic("compact,delete"), kok("k1", "v", 1, 8), ktomb("k1", "d", 1, 9), kpoll("c0", "k1", "d", true, 1, 9, 10), kfinal("k1", "d", true, 1, 9),
	})
	evs[0].Time = at
	var buf bytes.Buffer
	w := NewWriter(&buf)
	w.now = func() time.Time { return at }
	for _, e := range evs {
		w.Record(e)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if w.Len() != int64(len(evs)) || strings.Count(buf.String(), "\n") != len(evs) {
		t.Fatalf("wrote %d events:\n%s", w.Len(), buf.String())
	}
	// Each line is what encoding/json reads back into the same event.
	back, err := Read(strings.NewReader(buf.String() + "\n\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != len(evs) {
		t.Fatalf("read %d events, want %d", len(back), len(evs))
	}
	for i := range evs {
		want := evs[i]
		want.Time = at
		if back[i] != want {
			t.Errorf("event %d:\n got %+v\nwant %+v", i, back[i], want)
		}
	}
	// Lines from other tools: absent integers are "not applicable".
	back, err = Read(strings.NewReader(`{"kind":"send","process":"x","topic":"t","partition":0,"value":"v","outcome":"info"}` + "\n"))
	if err != nil || len(back) != 1 || back[0].Offset != -1 || back[0].HWM != -1 {
		t.Fatalf("%+v %v", back, err)
	}
	if _, err := Read(strings.NewReader("{\"kind\":\"send\"}\n{nope\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("bad line error: %v", err)
	}
	if _, err := Read(strings.NewReader(`{"topic":"t"}`)); err == nil {
		t.Fatal("event without kind accepted")
	}
}

func BenchmarkAppendJSON(b *testing.B) {
	e := send("p3", "r1a2b.p3.000000012345", 5, OK, 123456)
	e.Time = time.Now()
	buf := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		buf = e.AppendJSON(buf[:0])
	}
}

func TestDecodeFastMatchesJSON(t *testing.T) {
	lines := []string{
		`{"kind":"send","time":"2026-01-02T03:04:05.000006Z","process":"p1","topic":"t","partition":3,"offset":17,"value":"r.p1.5","outcome":"ok"}`,
		` { "kind" : "poll", "process":"c0","topic":"t","partition":0,"offset":0,"value":"a","hwm":2 } `,
		`{"value":"esc\"aped","kind":"final","topic":"t","partition":1,"offset":4}`, // escapes: slow path
		`{"kind":"pid","producer_id":9,"epoch":2,"extra":true}`,                     // unknown field: slow path
		`{"kind":"hwm","process":"final","topic":"t","partition":1,"start":0,"hwm":5}`,
		`{"kind":"fault","time":"2026-01-02T03:04:05+01:00","fault":"kill","target":"broker-1"}`,
		`{"kind":"topic","topic":"t","partition":0,"cleanup":"compact"}`,
		`{"kind":"final","topic":"t","partition":1,"offset":4,"value":"r.p0.3","key":"k7","tombstone":true}`,
		`{"kind":"send","topic":"t","partition":1,"offset":4,"value":"r.p0.4","key":"k7","tombstone":false,"outcome":"ok"}`,
	}
	var d decoder
	for _, l := range lines {
		var fast, slow Event
		if err := d.decode([]byte(l), &fast); err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		if err := slow.UnmarshalJSON([]byte(l)); err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		if !fast.Time.Equal(slow.Time) {
			t.Errorf("%s: time %v vs %v", l, fast.Time, slow.Time)
		}
		fast.Time, slow.Time = time.Time{}, time.Time{}
		if fast != slow {
			t.Errorf("%s:\nfast %+v\nslow %+v", l, fast, slow)
		}
	}
	for _, bad := range []string{`{"kind":"send",}`, `{"kind":"send","tombstone":yes}`, `{"kind":"send"`, `{"kind":"send","offset":1.5}`, `[]`} {
		var e Event
		if err := d.decode([]byte(bad), &e); err == nil {
			t.Errorf("%s decoded as %+v", bad, e)
		}
	}
}

func TestCheckReaderMatchesCheck(t *testing.T) {
	evs := cat(healthy(), []Event{ok("z", 0, 5), final("y", 0, 5), poll("c0", "z", 0, 5, 4), pid(1, 0), pid(1, 0)})
	var buf bytes.Buffer
	w := NewWriter(&buf)
	for _, e := range evs {
		w.Record(e)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	got, err := CheckReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(got)
	b, _ := json.Marshal(Check(evs))
	if !bytes.Equal(a, b) || got.OK() {
		t.Fatalf("streamed:\n%s\nin memory:\n%s", a, b)
	}
}

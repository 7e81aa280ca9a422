package check

import (
	"strings"
	"testing"
)

// Event constructors for compacted histories, on topic "t" as in
// check_test.go.

func topic(cleanup string) Event {
	e := NewEvent(KindTopic)
	e.Topic, e.Cleanup = "t", cleanup
	return e
}

func keyed(e Event, key string, tomb bool) Event {
	e.Key, e.Tombstone = key, tomb
	return e
}

func kok(key, val string, part int32, off int64) Event { return keyed(ok(val, part, off), key, false) }

func ktomb(key, val string, part int32, off int64) Event { return keyed(ok(val, part, off), key, true) }

func kpoll(cons, key, val string, tomb bool, part int32, off, hwm int64) Event {
	return keyed(poll(cons, val, part, off, hwm), key, tomb)
}

func kfinal(key, val string, tomb bool, part int32, off int64) Event {
	return keyed(final(val, part, off), key, tomb)
}

// compacted is a clean compacted history on partition 0: k1 written three
// times (the last survives), k2 written then deleted (its tombstone
// survives), k3 written then deleted (the tombstone was removed after
// delete.retention.ms), k4 written once, k5 written by an indeterminate
// send that landed after its ack. Consumer c0 read the head before
// compaction, c1 the partition after it. The final read is sparse.
func compacted() []Event {
	return []Event{
		topic("compact"),
		kok("k1", "a", 0, 0), kok("k2", "b", 0, 1), kok("k1", "c", 0, 2), kok("k3", "d", 0, 3),
		ktomb("k2", "e", 0, 4), kok("k1", "f", 0, 5), ktomb("k3", "g", 0, 6), kok("k4", "h", 0, 7),
		kok("k5", "i", 0, 8), keyed(send("p0", "j", 0, Info, -1), "k5", false),
		kpoll("c0", "k1", "a", false, 0, 0, 6), kpoll("c0", "k2", "b", false, 0, 1, 6), kpoll("c0", "k1", "c", false, 0, 2, 6),
		kpoll("c1", "k2", "e", true, 0, 4, 10), kpoll("c1", "k1", "f", false, 0, 5, 10),
		finalBounds(0, 0, 10),
		kfinal("k2", "e", true, 0, 4), kfinal("k1", "f", false, 0, 5), kfinal("k4", "h", false, 0, 7), kfinal("k5", "j", false, 0, 9),
	}
}

// without returns evs minus the final records at the given offsets.
func without(evs []Event, offsets ...int64) []Event {
	var out []Event
	for _, e := range evs {
		drop := false
		for _, o := range offsets {
			drop = drop || e.Kind == KindFinal && e.Offset == o
		}
		if !drop {
			out = append(out, e)
		}
	}
	return out
}

// TestCompactionChecksBite shows, for C1–C3, histories they pass and
// histories they must fail: the checker's negative control at unit level.
func TestCompactionChecksBite(t *testing.T) {
	tests := []bite{
		{"C1 pass", C1, compacted(), 0, ""},
		{"C2 pass", C2, compacted(), 0, ""},
		{"C3 pass", C3, compacted(), 0, ""},
		{"C1 pass uncompacted read", C1, cat(compacted()[:16], []Event{
			kfinal("k1", "a", false, 0, 0), kfinal("k2", "b", false, 0, 1), kfinal("k1", "c", false, 0, 2), kfinal("k3", "d", false, 0, 3),
			kfinal("k2", "e", true, 0, 4), kfinal("k1", "f", false, 0, 5), kfinal("k3", "g", true, 0, 6), kfinal("k4", "h", false, 0, 7),
			kfinal("k5", "i", false, 0, 8), kfinal("k5", "j", false, 0, 9),
		}), 0, ""},
		{"C1 older value survives", C1, cat(without(compacted(), 5), []Event{kfinal("k1", "c", false, 0, 2)}), 1,
			`key "k1": latest write, value "f" acknowledged to p0 at t/0@5; the final read's last record of the key is older: value "c" at offset 2`},
		{"C1 latest value missing", C1, without(compacted(), 7), 1,
			`key "k4": latest write, value "h" acknowledged to p0 at t/0@7, is missing: the final read has no record of the key`},
		{"C1 latest past the final read", C1, cat(without(compacted()[:16], 9), []Event{finalBounds(0, 0, 8),
			kfinal("k2", "e", true, 0, 4), kfinal("k1", "f", false, 0, 5), kfinal("k4", "h", false, 0, 7)}), 1,
			`key "k5": latest write, value "i" acknowledged to p0 at t/0@8, is missing: the final read has no record of the key and ends at high watermark 8`},
		{"C1 other value at the latest's offset", C1, cat(without(compacted(), 7), []Event{kfinal("k4", "x", false, 0, 7)}), 1,
			`the final read has value "x" at offset 7 there`},
		{"C1 tombstone read as a value", C1, cat(without(compacted(), 4), []Event{kfinal("k2", "e", false, 0, 4)}), 1,
			`latest write, tombstone "e" acknowledged to p0 at t/0@4; the final read has value "e" at offset 4 there`},
		{"C1 latest value deleted by an indeterminate tombstone", C1, cat(without(compacted(), 7), []Event{keyed(send("p0", "t4", 0, Info, -1), "k4", true)}), 0, ""},
		{"C1 latest value missing despite a failed tombstone", C1, cat(without(compacted(), 7), []Event{keyed(send("p0", "t4", 0, Fail, -1), "k4", true)}), 1, `key "k4"`},
		{"C1 older value survives despite an indeterminate tombstone", C1, cat(without(compacted(), 5), []Event{kfinal("k1", "c", false, 0, 2), keyed(send("p0", "t1", 0, Info, -1), "k1", true)}), 1, `key "k1"`},
		{"C2 tombstoned key comes back", C2, cat(without(compacted(), 4), []Event{kfinal("k2", "b", false, 0, 1)}), 1,
			`key "k2" came back: tombstone "e" acknowledged to p0 at t/0@4, but the final read's last record of the key is value "b" at offset 1`},
		{"C2 removed tombstone's key comes back", C2, cat(compacted(), []Event{kfinal("k3", "d", false, 0, 3)}), 1,
			`key "k3" came back`},
		{"C2 value after the tombstone", C2, cat(compacted(), []Event{kok("k3", "z", 0, 10), kfinal("k3", "z", false, 0, 10)}), 0, ""},
		{"C3 two values at one offset", C3, cat(compacted(), []Event{kpoll("c2", "k1", "x", false, 0, 2, 10)}), 1,
			`t/0@2 holds "c" (ack by p0) and "x" (poll by c2)`},
		{"C3 value at two offsets", C3, cat(compacted(), []Event{kfinal("k4", "h", false, 0, 10)}), 1,
			`"h" at 2 offsets: t/0@7, t/0@10`},
		{"C3 final read out of order", C3, cat(compacted(), []Event{kfinal("k1", "f", false, 0, 5)}), 1,
			"final read of t/0 went from offset 9 to 5"},
		{"C3 poll skips a surviving offset", C3, cat(compacted(), []Event{kpoll("c1", "k5", "j", false, 0, 9, 10)}), 1,
			"poll skip: c1 read t/0/9 after 5, but the final read has offset 7"},
		{"C3 poll gap compacted away", C3, cat(compacted(), []Event{kpoll("c1", "k4", "h", false, 0, 7, 10), kpoll("c1", "k5", "j", false, 0, 9, 10)}), 0, ""},
	}
	runBites(t, tests, func(t *testing.T, rep Report) {
		for _, id := range []string{C1, C2, C3} {
			if !rep.Check(id).Exercised() {
				t.Fatalf("%s not exercised\n%s", id, rep)
			}
		}
		// L1 never judges a compacted topic.
		if l1 := rep.Check(L1); l1.Checked != 0 || l1.Violations != 0 {
			t.Fatalf("L1 applied to a compacted topic: %+v", l1)
		}
	})
}

func TestCompactedReport(t *testing.T) {
	rep := Check(compacted())
	c := rep.Counts
	if !rep.OK() || c.CompactedTopics != 1 || c.Keys != 5 || c.Tombstones != 2 {
		t.Fatalf("counts %+v\n%s", c, rep)
	}
	if r := rep.Check(C1); r.Checked != 5 {
		t.Fatalf("C1 checked %d keys, want 5", r.Checked)
	}
	if r := rep.Check(C2); r.Checked != 2 {
		t.Fatalf("C2 checked %d keys, want 2", r.Checked)
	}
	s := rep.String()
	for _, want := range []string{"compacted topics 1: keys 5, acknowledged tombstones 2", "C2 no-resurrection", "L1 lost-write", "not exercised",
		"9 acks on compacted topics checked by C1–C3 instead of L1"} {
		if !strings.Contains(s, want) {
			t.Fatalf("summary lacks %q:\n%s", want, s)
		}
	}
}

// TestUncompactedKeepsL1: the same keyed history on a topic that does not
// compact is judged by L1, which finds every superseded record missing,
// and C1–C3 stay out of it.
func TestUncompactedKeepsL1(t *testing.T) {
	for _, cleanup := range []string{"", "delete"} {
		evs := compacted()[1:]
		if cleanup != "" {
			evs = cat([]Event{topic(cleanup)}, evs)
		}
		rep := Check(evs)
		l1 := rep.Check(L1)
		if l1.Checked != 9 || l1.Violations != 6 || !strings.Contains(l1.Examples[0], `"a" acknowledged to p0 at t/0@0: the final read has no record there`) {
			t.Fatalf("cleanup %q: L1 %+v\n%s", cleanup, l1, rep)
		}
		for _, id := range []string{C1, C2, C3} {
			if r := rep.Check(id); r.Exercised() || r.Violations != 0 {
				t.Fatalf("cleanup %q: %s applied to an uncompacted topic: %+v", cleanup, id, r)
			}
		}
		if rep.Counts.CompactedTopics != 0 {
			t.Fatalf("counts %+v", rep.Counts)
		}
	}
	// The healthy uncompacted history still passes L1 with every ack.
	if l1 := Check(healthy()).Check(L1); l1.Checked != 3 || l1.Violations != 0 {
		t.Fatalf("L1 %+v", l1)
	}
}

// TestCompactedMarkerLate: a topic event appended after the records (by
// another tool) still makes the topic compacted.
func TestCompactedMarkerLate(t *testing.T) {
	evs := cat(compacted()[1:], []Event{topic("compact,delete"), kpoll("c2", "k1", "x", false, 0, 2, 10)})
	rep := Check(evs)
	if r := rep.Check(C3); r.Violations != 1 {
		t.Fatalf("C3 %+v\n%s", r, rep)
	}
	if r := rep.Check(L1); r.Checked != 0 {
		t.Fatalf("L1 %+v", r)
	}
	if !strings.Contains(rep.String(), "C3 sparse-but-stable") {
		t.Fatal(rep.String())
	}
}

// TestCompactedExcused: a key gone after its latest acknowledged value is
// not counted when a tombstone of unknown outcome may have deleted it, and
// the report says so.
func TestCompactedExcused(t *testing.T) {
	rep := Check(cat(without(compacted(), 7), []Event{keyed(send("p0", "t4", 0, Info, -1), "k4", true)}))
	if !rep.OK() || !strings.Contains(rep.String(), "1 keys absent from the final read after a value was acknowledged, but with a tombstone of unknown outcome") {
		t.Fatalf("report:\n%s", rep)
	}
}

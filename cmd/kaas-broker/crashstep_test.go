package main

import (
	"testing"

	"github.com/kaas-dev/kaas/states"
	"github.com/kaas-dev/kaas/volume/memfs"
)

func TestCrashAtStepSpec(t *testing.T) {
	for _, tc := range []struct{ spec, kind, state, object string }{
		{"topic-delete:renamed", "topic-delete", "renamed", ""},
		{"topic-delete:rename-aside", "topic-delete", "renamed", ""},
		{"directory-reclaim:purge:orders", "directory-reclaim", "reclaimed", "orders"},
	} {
		kind, state, object, err := parseCrashAtStep(tc.spec)
		if err != nil || kind != tc.kind || state != tc.state || object != tc.object {
			t.Errorf("%q: %s %s %s, %v", tc.spec, kind, state, object, err)
		}
	}
	for _, bad := range []string{"topic-delete", "nope:renamed", "topic-delete:nope"} {
		if _, _, _, err := parseCrashAtStep(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestCrashAtStepExitsOnceRecorded(t *testing.T) {
	m := memfs.New()
	var hit []states.Record
	fsys, err := withCrashAtStep(m, "topic-delete:rename-aside:orders", func(rec states.Record) { hit = append(hit, rec) })
	if err != nil {
		t.Fatal(err)
	}
	save := func(kind, object, state, lastErr string) {
		t.Helper()
		if err := states.Save(fsys, "c", &states.Record{Kind: kind, Object: object, State: states.State(state), LastError: lastErr}); err != nil {
			t.Fatal(err)
		}
	}
	save("topic-delete", "orders", "released", "")
	save("topic-delete", "orders", "released", "rename-aside: EIO") // a failure: not recorded as done
	save("topic-delete", "other", "renamed", "")
	save("directory-reclaim", "orders", "renamed", "")
	if len(hit) != 0 {
		t.Fatalf("exited early: %+v", hit)
	}
	save("topic-delete", "orders", "renamed", "")
	if len(hit) != 1 || hit[0].State != "renamed" {
		t.Fatalf("hits %+v", hit)
	}
	rec, err := states.Load(m, "c", "topic-delete", "orders")
	if err != nil || rec == nil || rec.State != "renamed" {
		t.Fatalf("the step must be recorded before the exit: %+v, %v", rec, err)
	}
}

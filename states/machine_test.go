package states_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kaas-dev/kaas/states"
	"github.com/kaas-dev/kaas/volume/memfs"
)

// chain is a small machine for Drive's own tests.
var chain = states.Definition{
	Kind: "test-chain", Initial: "a", End: "c",
	Steps: []states.Step{{From: "a", Event: "ab", To: "b"}, {From: "b", Event: "bc", To: "c"}},
}

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func okActs(calls *[]string) states.Actions {
	return states.Actions{
		"ab": func(context.Context) error { *calls = append(*calls, "ab"); return nil },
		"bc": func(context.Context) error { *calls = append(*calls, "bc"); return nil },
	}
}

func TestDefinitionsAreChains(t *testing.T) {
	for _, def := range states.Machines {
		seen := map[states.State]bool{}
		for _, s := range def.States() {
			if seen[s] {
				t.Errorf("%s: state %q appears twice", def.Kind, s)
			}
			seen[s] = true
		}
		if got := def.States(); got[0] != def.Initial || got[len(got)-1] != def.End {
			t.Errorf("%s: chain %v does not run from %q to %q", def.Kind, got, def.Initial, def.End)
		}
		for i := 1; i < len(def.Steps); i++ {
			if def.Steps[i].From != def.Steps[i-1].To {
				t.Errorf("%s: step %d starts at %q, previous ends at %q", def.Kind, i, def.Steps[i].From, def.Steps[i-1].To)
			}
		}
		if _, ok := def.StepFrom(def.End); ok {
			t.Errorf("%s: a step leaves the end state", def.Kind)
		}
	}
}

func TestDriveToEnd(t *testing.T) {
	clk := &fakeClock{t: time.Date(2025, 3, 4, 5, 6, 7, 0, time.FixedZone("x", 3600))}
	var calls, saved []string
	rec := &states.Record{Kind: chain.Kind, Object: "o"}
	err := states.Drive(context.Background(), chain, rec, okActs(&calls),
		func(r *states.Record) error { saved = append(saved, string(r.State)); return nil }, clk.now)
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != "c" || rec.Attempts != 0 || rec.LastError != "" {
		t.Fatalf("record %+v", rec)
	}
	if !rec.Since.Equal(clk.t) || rec.Since.Location() != time.UTC {
		t.Fatalf("Since = %v, want the injected clock in UTC", rec.Since)
	}
	if strings.Join(calls, ",") != "ab,bc" || strings.Join(saved, ",") != "b,c" {
		t.Fatalf("calls %v, saves %v", calls, saved)
	}
	// At the end state, driving again does nothing.
	calls, saved = nil, nil
	if err := states.Drive(context.Background(), chain, rec, okActs(&calls), func(*states.Record) error { saved = append(saved, "x"); return nil }, clk.now); err != nil {
		t.Fatal(err)
	}
	if len(calls)+len(saved) != 0 {
		t.Fatalf("drive at end ran %v and saved %v", calls, saved)
	}
}

func TestDriveIllegal(t *testing.T) {
	noSave := func(*states.Record) error { return nil }
	var calls []string
	cases := []struct {
		name  string
		state states.State
		acts  states.Actions
	}{
		{"unknown state", "bogus", okActs(&calls)},
		{"missing action", "b", states.Actions{"ab": func(context.Context) error { return nil }}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := &states.Record{Kind: chain.Kind, Object: "o", State: c.state}
			err := states.Drive(context.Background(), chain, rec, c.acts, noSave, time.Now)
			if !errors.Is(err, states.ErrIllegalTransition) {
				t.Fatalf("Drive = %v, want ErrIllegalTransition", err)
			}
			if rec.State != c.state {
				t.Fatalf("state moved to %q", rec.State)
			}
		})
	}
	// A table whose chain is broken (no step leaves a non-end state).
	broken := states.Definition{Kind: "broken", Initial: "a", End: "c", Steps: []states.Step{{From: "a", Event: "ab", To: "b"}, {From: "x", Event: "xc", To: "c"}}}
	rec := &states.Record{Kind: "broken", Object: "o", State: "b"}
	if err := states.Drive(context.Background(), broken, rec, okActs(&calls), noSave, time.Now); !errors.Is(err, states.ErrIllegalTransition) {
		t.Fatalf("broken chain: %v, want ErrIllegalTransition", err)
	}
}

func TestDriveActionFailure(t *testing.T) {
	boom := errors.New("boom")
	var saved []states.Record
	save := func(r *states.Record) error { saved = append(saved, *r); return nil }
	fail := true
	acts := states.Actions{
		"ab": func(context.Context) error { return nil },
		"bc": func(context.Context) error {
			if fail {
				return boom
			}
			return nil
		},
	}
	rec := &states.Record{Kind: chain.Kind, Object: "o"}
	for i := 1; i <= 3; i++ {
		err := states.Drive(context.Background(), chain, rec, acts, save, time.Now)
		if !errors.Is(err, boom) {
			t.Fatalf("pass %d: %v, want boom", i, err)
		}
		if rec.State != "b" || rec.Attempts != i || rec.LastError != "bc: boom" {
			t.Fatalf("pass %d: record %+v", i, rec)
		}
		if last := saved[len(saved)-1]; last.Attempts != i || last.LastError != "bc: boom" {
			t.Fatalf("pass %d: failure not saved: %+v", i, last)
		}
	}
	fail = false
	if err := states.Drive(context.Background(), chain, rec, acts, save, time.Now); err != nil {
		t.Fatal(err)
	}
	if rec.State != "c" || rec.LastError != "" || rec.Attempts != 3 {
		t.Fatalf("after recovery: %+v (attempts are history, last error cleared)", rec)
	}
}

func TestDriveSaveErrors(t *testing.T) {
	boom, diskFull := errors.New("boom"), errors.New("disk full")
	t.Run("save after step", func(t *testing.T) {
		var calls []string
		rec := &states.Record{Kind: chain.Kind, Object: "o"}
		err := states.Drive(context.Background(), chain, rec, okActs(&calls), func(*states.Record) error { return diskFull }, time.Now)
		if !errors.Is(err, diskFull) || rec.Attempts != 1 {
			t.Fatalf("Drive = %v, attempts %d", err, rec.Attempts)
		}
		if len(calls) != 1 {
			t.Fatalf("drive went on after a failed save: %v", calls)
		}
	})
	t.Run("save of a failure", func(t *testing.T) {
		rec := &states.Record{Kind: chain.Kind, Object: "o"}
		acts := states.Actions{"ab": func(context.Context) error { return boom }}
		err := states.Drive(context.Background(), chain, rec, acts, func(*states.Record) error { return diskFull }, time.Now)
		if !errors.Is(err, boom) || !errors.Is(err, diskFull) {
			t.Fatalf("Drive = %v, want both the action and the save error", err)
		}
		if rec.Attempts != 1 || rec.LastError != "ab: boom" {
			t.Fatalf("record %+v", rec)
		}
	})
}

func TestDriveCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var calls []string
	rec := &states.Record{Kind: chain.Kind, Object: "o"}
	err := states.Drive(ctx, chain, rec, okActs(&calls), func(*states.Record) error { return nil }, time.Now)
	if !errors.Is(err, context.Canceled) || len(calls) != 0 {
		t.Fatalf("Drive = %v, calls %v", err, calls)
	}
}

// A step whose action finished is recorded even if the context ends during
// it (a broker shutting down mid-step): otherwise the record would lag the
// volume and the step's effect, such as a published partition.
func TestDriveRecordsStepFinishedAfterCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var saved []string
	acts := states.Actions{
		"ab": func(context.Context) error { cancel(); return nil },
		"bc": func(context.Context) error { return nil },
	}
	rec := &states.Record{Kind: chain.Kind, Object: "o"}
	err := states.Drive(ctx, chain, rec, acts, func(r *states.Record) error { saved = append(saved, string(r.State)); return nil }, time.Now)
	if !errors.Is(err, context.Canceled) || rec.State != "b" || strings.Join(saved, ",") != "b" {
		t.Fatalf("Drive = %v, state %q, saves %v; want the finished step saved, then stop", err, rec.State, saved)
	}
}

func TestRecordRoundTrip(t *testing.T) {
	fsys := memfs.New()
	const cluster = "c"
	recs := []states.Record{
		{Kind: "topic-delete", Object: "b", State: "renamed", Attempts: 2, LastError: "purge: x", TopicID: "id"},
		{Kind: "partition-open", Object: "a/b/1", State: "serving", Epoch: 7},
		{Kind: "partition-open", Object: "a/0", State: "pending"},
	}
	for i := range recs {
		if err := states.Save(fsys, cluster, &recs[i]); err != nil {
			t.Fatal(err)
		}
	}
	got, err := states.Load(fsys, cluster, "partition-open", "a/b/1")
	if err != nil || got == nil || got.Epoch != 7 || got.Object != "a/b/1" {
		t.Fatalf("Load = %+v, %v", got, err)
	}
	if got, err := states.Load(fsys, cluster, "partition-open", "missing"); got != nil || err != nil {
		t.Fatalf("Load missing = %+v, %v; want nil, nil", got, err)
	}
	// A temp file left by an interrupted write is not a record.
	f, err := fsys.Create("c/status/partition-open/.zz.json.tmp-0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("{")); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	all, err := states.LoadAll(fsys, cluster)
	if err != nil {
		t.Fatal(err)
	}
	var objs []string
	for _, r := range all {
		objs = append(objs, r.Kind+":"+r.Object)
	}
	if want := "partition-open:a/0,partition-open:a/b/1,topic-delete:b"; strings.Join(objs, ",") != want {
		t.Fatalf("LoadAll = %v, want %s", objs, want)
	}
	if err := states.Forget(fsys, cluster, "partition-open", "a/0"); err != nil {
		t.Fatal(err)
	}
	if err := states.Forget(fsys, cluster, "partition-open", "a/0"); err != nil {
		t.Fatalf("second forget: %v", err)
	}
	if got, _ := states.Load(fsys, cluster, "partition-open", "a/0"); got != nil {
		t.Fatalf("forgotten record still loads: %+v", got)
	}
}

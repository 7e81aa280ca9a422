package states_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kaas-dev/kaas/states"
)

// TestFireRefusesIllegalEvent: the fsm built from a Definition allows each
// declared step and refuses every other event, from every state, with an
// error that names the event, the state and what is legal there.
func TestFireRefusesIllegalEvent(t *testing.T) {
	for _, def := range states.Machines {
		events := []states.Event{"no-such-event"}
		for _, s := range def.Steps {
			events = append(events, s.Event)
		}
		for _, state := range def.States() {
			step, hasStep := def.StepFrom(state)
			for _, ev := range events {
				to, err := def.Fire(state, ev)
				if hasStep && ev == step.Event {
					if err != nil || to != step.To {
						t.Errorf("%s: Fire(%q, %q) = %q, %v; want %q", def.Kind, state, ev, to, err, step.To)
					}
					continue
				}
				if !errors.Is(err, states.ErrIllegalTransition) {
					t.Errorf("%s: Fire(%q, %q) = %q, %v; want ErrIllegalTransition", def.Kind, state, ev, to, err)
					continue
				}
				legal := "none"
				if hasStep {
					legal = string(step.Event)
				}
				for _, want := range []string{`event "` + string(ev) + `"`, `state "` + string(state) + `"`, def.Kind, "legal there: " + legal} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("%s: Fire(%q, %q) error %q does not say %q", def.Kind, state, ev, err, want)
					}
				}
			}
		}
	}
	if _, err := states.PartitionOpen.Fire("bogus", "make-dir"); !errors.Is(err, states.ErrIllegalTransition) {
		t.Errorf("Fire from an unknown state = %v, want ErrIllegalTransition", err)
	}
}

// TestDriveRefusesAForkedTable: Drive takes the next event from the fsm,
// and a state that several steps leave is a broken table, not a choice.
func TestDriveRefusesAForkedTable(t *testing.T) {
	forked := states.Definition{Kind: "forked", Initial: "a", End: "c", Steps: []states.Step{
		{From: "a", Event: "ab", To: "b"}, {From: "a", Event: "ac", To: "c"}, {From: "b", Event: "bc", To: "c"},
	}}
	ran := false
	acts := states.Actions{}
	for _, ev := range []states.Event{"ab", "ac", "bc"} {
		acts[ev] = func(context.Context) error { ran = true; return nil }
	}
	rec := &states.Record{Kind: forked.Kind, Object: "o"}
	err := states.Drive(context.Background(), forked, rec, acts, func(*states.Record) error { return nil }, time.Now)
	if !errors.Is(err, states.ErrIllegalTransition) || !strings.Contains(err.Error(), "ab, ac") {
		t.Fatalf("Drive = %v, want ErrIllegalTransition naming both events", err)
	}
	if ran || rec.State != "a" {
		t.Fatalf("a forked table ran an action (%v) or moved to %q", ran, rec.State)
	}
}

package states_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kaas-dev/kaas/states"
)

// waitErr is a wait as the engine marks one.
type waitErr struct{ reason string }

func (w waitErr) Error() string { return w.reason }
func (waitErr) Waiting() bool   { return true }

func TestIsWaiting(t *testing.T) {
	wait, boom := waitErr{"for a new epoch"}, errors.New("boom")
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"plain", boom, false},
		{"wait", wait, true},
		{"wrapped wait", fmt.Errorf("step: %w", wait), true},
		{"join of waits", errors.Join(wait, fmt.Errorf("x: %w", wait)), true},
		{"join with a failure", errors.Join(wait, boom), false},
		{"empty join", errors.Join(), false},
	}
	for _, c := range cases {
		if got := states.IsWaiting(c.err); got != c.want {
			t.Errorf("%s: IsWaiting = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestDriveWaitIsNotAnAttempt: an action that waits stops the pass and is
// saved, but its attempts do not grow and its last error says it waits.
func TestDriveWaitIsNotAnAttempt(t *testing.T) {
	wait := waitErr{"broker 2 still holds it"}
	cases := []struct {
		name         string
		errs         []error // what bc returns, pass by pass
		wantAttempts int
		wantLast     string
		wantWaiting  bool
	}{
		{"one wait", []error{wait}, 0, "waiting: bc: broker 2 still holds it", true},
		{"waits do not add up", []error{wait, wait, wait}, 0, "waiting: bc: broker 2 still holds it", true},
		{"wrapped wait", []error{fmt.Errorf("release: %w", wait)}, 0, "waiting: bc: release: broker 2 still holds it", true},
		{"failure then wait", []error{errors.New("boom"), wait}, 1, "waiting: bc: broker 2 still holds it", true},
		{"wait then failure", []error{wait, errors.New("boom")}, 1, "bc: boom", false},
		{"wait joined with a failure", []error{errors.Join(wait, errors.New("boom"))}, 1, "bc: broker 2 still holds it\nboom", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var saved []states.Record
			save := func(r *states.Record) error { saved = append(saved, *r); return nil }
			rec := &states.Record{Kind: chain.Kind, Object: "o", State: "b"}
			for i, e := range c.errs {
				acts := states.Actions{"bc": func(context.Context) error { return e }}
				if err := states.Drive(context.Background(), chain, rec, acts, save, time.Now); !errors.Is(err, e) {
					t.Fatalf("pass %d: Drive = %v, want %v", i, err, e)
				}
			}
			if rec.State != "b" || rec.Attempts != c.wantAttempts || rec.LastError != c.wantLast || rec.IsWaiting() != c.wantWaiting {
				t.Fatalf("record %+v, want attempts %d, last error %q", rec, c.wantAttempts, c.wantLast)
			}
			if len(saved) != len(c.errs) || saved[len(saved)-1] != *rec {
				t.Fatalf("saved %+v, want every pass saved, the last as %+v", saved, rec)
			}
		})
	}
	// The wait clears once the step is done.
	rec := &states.Record{Kind: chain.Kind, Object: "o", State: "b", LastError: "waiting: bc: x"}
	if err := states.Drive(context.Background(), chain, rec, okActs(new([]string)), func(*states.Record) error { return nil }, time.Now); err != nil {
		t.Fatal(err)
	}
	if rec.State != "c" || rec.LastError != "" || rec.IsWaiting() {
		t.Fatalf("after the wait: %+v", rec)
	}
}

package reconcile

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kaas-dev/kaas/states"
)

// TestDoneTellsHowThePassEnded: Done's answer is all the worker logs from,
// the attempts and whether a terminal error is news among them.
func TestDoneTellsHowThePassEnded(t *testing.T) {
	boom := errors.New("boom")
	illegal := fmt.Errorf("%w: unknown state", states.ErrIllegalTransition)
	other := fmt.Errorf("%w: no action", states.ErrIllegalTransition)
	cases := []struct {
		name string
		errs []error
		want []Ended
	}{
		{"success", []error{nil}, []Ended{{Outcome: OutcomeOK}}},
		{"failures count", []error{boom, boom}, []Ended{
			{Outcome: OutcomeFailed, Attempts: 1}, {Outcome: OutcomeFailed, Attempts: 2}}},
		{"waits keep the count", []error{boom, Waiting("a lease"), boom}, []Ended{
			{Outcome: OutcomeFailed, Attempts: 1}, {Outcome: OutcomeWaiting, Attempts: 1}, {Outcome: OutcomeFailed, Attempts: 2}}},
		{"success resets", []error{boom, nil, boom}, []Ended{
			{Outcome: OutcomeFailed, Attempts: 1}, {Outcome: OutcomeOK}, {Outcome: OutcomeFailed, Attempts: 1}}},
		{"a terminal error is news once", []error{illegal, illegal}, []Ended{
			{Outcome: OutcomeTerminal, Attempts: 1, NewTerminal: true}, {Outcome: OutcomeTerminal, Attempts: 1}}},
		{"another terminal error is news", []error{illegal, other}, []Ended{
			{Outcome: OutcomeTerminal, Attempts: 1, NewTerminal: true}, {Outcome: OutcomeTerminal, Attempts: 2, NewTerminal: true}}},
		{"terminal after a failure", []error{boom, illegal}, []Ended{
			{Outcome: OutcomeFailed, Attempts: 1}, {Outcome: OutcomeTerminal, Attempts: 2, NewTerminal: true}}},
		{"the same terminal error after a wait is news", []error{illegal, Waiting("x"), illegal}, []Ended{
			{Outcome: OutcomeTerminal, Attempts: 1, NewTerminal: true}, {Outcome: OutcomeWaiting, Attempts: 1},
			{Outcome: OutcomeTerminal, Attempts: 2, NewTerminal: true}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q := NewQueue[string](newTestClock().Now, time.Second, time.Minute)
			for i, err := range c.errs {
				q.Add("k")
				ready(q)
				got := q.Done("k", Result{}, err)
				if got != c.want[i] {
					t.Fatalf("pass %d: Done = %+v, want %+v", i, got, c.want[i])
				}
				if st, _ := q.Status("k"); st.Attempts != got.Attempts || q.Failures("k") != got.Attempts {
					t.Fatalf("pass %d: status %+v, failures %d; Done said %d attempts", i, st, q.Failures("k"), got.Attempts)
				}
			}
		})
	}
}

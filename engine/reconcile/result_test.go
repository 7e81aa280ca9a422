package reconcile

import (
	"errors"
	"fmt"
	"testing"

	"github.com/kaas-dev/kaas/states"
)

// TestMachinesSeeWaitsAsTheQueueDoes: a state machine's action that returns
// one of the engine's errors is a wait to the machine (no attempt) exactly
// when the queue would call the pass waiting.
func TestMachinesSeeWaitsAsTheQueueDoes(t *testing.T) {
	boom := errors.New("boom")
	illegal := fmt.Errorf("x: %w", states.ErrIllegalTransition)
	for _, err := range []error{
		boom,
		Waiting("a lease"),
		WaitingOn(boom),
		fmt.Errorf("release: %w", WaitingOn(boom)),
		WaitingOn(illegal),
		Terminal(boom),
		Terminal(WaitingOn(boom)),
		errors.Join(Waiting("a"), WaitingOn(boom)),
		errors.Join(Waiting("a"), boom),
	} {
		if got, want := states.IsWaiting(err), outcomeOf(err) == OutcomeWaiting; got != want {
			t.Errorf("%q: the machines see waiting %v, the queue %v", err, got, want)
		}
	}
}

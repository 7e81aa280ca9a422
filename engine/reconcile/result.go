package reconcile

import (
	"strings"
	"time"

	"github.com/kaas-dev/kaas/states"
)

// Result is what a pass asks of the queue besides its error: after a
// success, RequeueAfter > 0 runs the key again after that long; after a
// wait, it replaces the backoff.
type Result struct {
	RequeueAfter time.Duration
}

// WaitingError is a pass that stopped at a normal wait (for a new leader
// epoch, for the controller's reclaim, for a partition slot): not a
// failure. The key is retried with the usual backoff, but its attempts do
// not grow and nothing is logged at ERROR.
type WaitingError struct {
	Reason string
	Err    error // what is waited out, if an error names it
}

// Waiting is the outcome of a pass that waits for reason.
func Waiting(reason string) error { return &WaitingError{Reason: reason} }

// WaitingOn marks err as a wait; errors.Is and errors.As still see err.
func WaitingOn(err error) error {
	if err == nil {
		return nil
	}
	return &WaitingError{Reason: err.Error(), Err: err}
}

// Error is the waited-out error's own text (WaitingOn marks, it does not
// reword), or "waiting: <reason>".
func (w *WaitingError) Error() string {
	if w.Err != nil {
		return w.Err.Error()
	}
	return "waiting: " + w.Reason
}

func (w *WaitingError) Unwrap() error { return w.Err }

// Waiting makes a wait one to the state machines too (states.Waiter): an
// action that returns it is not counted as an attempt.
func (w *WaitingError) Waiting() bool { return true }

// TerminalError is a pass that cannot succeed by retrying (a state
// machine's record and table disagree): the key is not retried until it
// is enqueued again, and its status says failed (terminal).
type TerminalError struct{ Err error }

// Terminal marks err as terminal.
func Terminal(err error) error {
	if err == nil {
		return nil
	}
	return &TerminalError{Err: err}
}

func (t *TerminalError) Error() string { return t.Err.Error() }
func (t *TerminalError) Unwrap() error { return t.Err }

// Waiting is false: a terminal error is not a wait, whatever it wraps (as
// outcomeOf sees it).
func (t *TerminalError) Waiting() bool { return false }

// Outcome is how a pass ended, as the queue and the status see it.
type Outcome int

const (
	OutcomeOK Outcome = iota
	OutcomeWaiting
	OutcomeFailed
	OutcomeTerminal
)

func (o Outcome) String() string {
	switch o {
	case OutcomeOK:
		return "ok"
	case OutcomeWaiting:
		return "waiting"
	case OutcomeFailed:
		return "failed"
	case OutcomeTerminal:
		return "failed (terminal)"
	}
	return "unknown"
}

// outcomeOf classifies a pass's error. A pass may join the errors of many
// parts (the partitions of a topic): any plain failure makes it failed
// (retried with backoff, the other parts with it); otherwise any terminal
// part makes it terminal; a pass whose every part waits is waiting. An
// illegal state-machine transition is terminal: retrying cannot fix it.
func outcomeOf(err error) Outcome {
	if err == nil {
		return OutcomeOK
	}
	switch u := err.(type) {
	case *TerminalError:
		return OutcomeTerminal
	case *WaitingError:
		return OutcomeWaiting
	case states.Waiter: // a machine's own wait (states.Wait)
		if u.Waiting() {
			return OutcomeWaiting
		}
	case interface{ Unwrap() []error }:
		out := OutcomeOK
		for _, part := range u.Unwrap() {
			if part != nil {
				out = worse(out, outcomeOf(part))
			}
		}
		if out == OutcomeOK { // an empty join: not a success
			return OutcomeFailed
		}
		return out
	case interface{ Unwrap() error }:
		if inner := u.Unwrap(); inner != nil {
			return outcomeOf(inner)
		}
	}
	if err == states.ErrIllegalTransition {
		return OutcomeTerminal
	}
	return OutcomeFailed
}

// worse ranks outcomes for a joined error: failed > terminal > waiting.
func worse(a, b Outcome) Outcome {
	rank := func(o Outcome) int {
		switch o {
		case OutcomeWaiting:
			return 1
		case OutcomeTerminal:
			return 2
		case OutcomeFailed:
			return 3
		}
		return 0
	}
	if rank(b) > rank(a) {
		return b
	}
	return a
}

// waitReason is what a waiting pass waits for: the reasons of its waiting
// parts, joined.
func WaitReason(err error) string {
	var reasons []string
	var walk func(error)
	walk = func(err error) {
		switch u := err.(type) {
		case nil:
		case *WaitingError:
			reasons = append(reasons, u.Reason)
		case interface{ Unwrap() []error }:
			for _, part := range u.Unwrap() {
				walk(part)
			}
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		}
	}
	walk(err)
	if len(reasons) == 0 {
		return err.Error()
	}
	return strings.Join(reasons, "; ")
}

package states

import "strings"

// Waiter is an action's error that is a normal wait (for a new leader
// epoch, for another broker to let go of a handle), not a failure. The
// engine's waiting error is one; states cannot name it, so it asks for
// the method.
type Waiter interface{ Waiting() bool }

// Wait marks err as a wait (Waiter); errors.Is and As still see err.
func Wait(err error) error { return waitingError{err} }

type waitingError struct{ error }

func (w waitingError) Waiting() bool { return true }
func (w waitingError) Unwrap() error { return w.error }

// IsWaiting reports whether err is a wait: a Waiter, an error wrapping
// one, or a join whose every part waits (one plain failure among them
// makes the whole a failure).
func IsWaiting(err error) bool {
	switch u := err.(type) {
	case nil:
		return false
	case Waiter:
		return u.Waiting()
	case interface{ Unwrap() []error }:
		waits := false
		for _, part := range u.Unwrap() {
			if part == nil {
				continue
			}
			if !IsWaiting(part) {
				return false
			}
			waits = true
		}
		return waits
	case interface{ Unwrap() error }:
		return IsWaiting(u.Unwrap())
	}
	return false
}

// waitingPrefix starts the LastError of a record whose last pass stopped
// at a wait: "waiting: <step>: <reason>".
const waitingPrefix = "waiting: "

// IsWaiting reports whether the record's last pass stopped at a wait
// rather than failed.
func (r Record) IsWaiting() bool { return strings.HasPrefix(r.LastError, waitingPrefix) }

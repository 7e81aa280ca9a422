// Package reconcile is the reconciler's contract, after controller-runtime's:
// a pass over one key returns a Result and an error, and the error says
// whether the pass failed, waited (Waiting, WaitingOn: not a failure, no
// attempt counted) or ended for good (Terminal); Queue is the work queue
// that honours them. The engine registers one pass per kind of key.
package reconcile

import (
	"context"
	"sync"
	"time"
)

// Queue is the reconciler's work queue: keys, deduplicated, each handed to at
// most one worker at a time, retried with exponential backoff after an error
// (controller-runtime's workqueue semantics, in a few lines). Done takes a
// pass's Result and error: a wait (WaitingError) backs off like a failure
// but does not count as an attempt, a terminal error (TerminalError) is not
// retried until the key is added again, and RequeueAfter is honoured.
type Queue[K comparable] struct {
	now        func() time.Time
	baseDelay  time.Duration
	maxDelay   time.Duration
	mu         sync.Mutex
	due        map[K]time.Time // waiting keys and when they are ready
	processing map[K]bool
	// dirty holds the keys added while processing, to run again after:
	// true when a change added one, false when only a resync did.
	dirty map[K]bool
	// retries counts consecutive failed or waiting passes (the backoff);
	// the attempts shown are the status's.
	retries map[K]int
	status  map[K]KeyStatus[K] // keys whose last pass did not succeed
	wake    chan struct{}
}

// KeyStatus is how a key's last pass ended, when it did not succeed.
type KeyStatus[K comparable] struct {
	Key      K
	Outcome  Outcome
	Reason   string // the wait's reason, or the error
	Attempts int    // consecutive failed passes
	Since    time.Time
}

// NewQueue returns an empty queue.
func NewQueue[K comparable](now func() time.Time, baseDelay, maxDelay time.Duration) *Queue[K] {
	return &Queue[K]{
		now: now, baseDelay: baseDelay, maxDelay: maxDelay,
		due: map[K]time.Time{}, processing: map[K]bool{}, dirty: map[K]bool{},
		retries: map[K]int{}, status: map[K]KeyStatus[K]{},
		wake: make(chan struct{}, 1),
	}
}

// Backoff is the delay after the n-th consecutive failure (n >= 1).
func Backoff(n int, base, max time.Duration) time.Duration {
	d := base
	for i := 1; i < n && d < max; i++ {
		d *= 2
	}
	if d > max {
		d = max
	}
	return d
}

// Add makes key ready now.
func (q *Queue[K]) Add(key K) { q.AddAfter(key, 0) }

// AddAfter makes key ready after d, or sooner if it is already due sooner.
// A key whose last pass ended terminally runs again: an add is a change.
func (q *Queue[K]) AddAfter(key K, d time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.processing[key] {
		q.dirty[key] = true
		return
	}
	q.scheduleLocked(key, d)
}

// Resync is the periodic resync's add: like Add, except that a key whose
// last pass ended terminally stays put (nothing changed for it), and one
// in a pass that ends terminally is not run again for the resync.
func (q *Queue[K]) Resync(key K) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.processing[key] {
		if _, ok := q.dirty[key]; !ok {
			q.dirty[key] = false
		}
		return
	}
	if st, ok := q.status[key]; ok && st.Outcome == OutcomeTerminal {
		return
	}
	q.scheduleLocked(key, 0)
}

// scheduleLocked makes key due after d unless it is due sooner already.
func (q *Queue[K]) scheduleLocked(key K, d time.Duration) {
	at := q.now().Add(d)
	if cur, ok := q.due[key]; !ok || at.Before(cur) {
		q.due[key] = at
	}
	q.signal()
}

func (q *Queue[K]) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// Get blocks until a key is ready or ctx ends.
func (q *Queue[K]) Get(ctx context.Context) (K, bool) {
	for {
		q.mu.Lock()
		now := q.now()
		var (
			next    K
			nextAt  time.Time
			found   bool
			soonest time.Duration = -1
		)
		for k, at := range q.due {
			if !at.After(now) && (!found || at.Before(nextAt)) {
				next, nextAt, found = k, at, true
			}
			if wait := at.Sub(now); wait > 0 && (soonest < 0 || wait < soonest) {
				soonest = wait
			}
		}
		if found {
			delete(q.due, next)
			q.processing[next] = true
			if len(q.due) > 0 {
				q.signal() // another worker may take the next one
			}
			q.mu.Unlock()
			return next, true
		}
		q.mu.Unlock()
		var (
			timer <-chan time.Time
			t     *time.Timer
		)
		if soonest >= 0 {
			t = time.NewTimer(soonest)
			timer = t.C
		}
		select {
		case <-ctx.Done():
			if t != nil {
				t.Stop()
			}
			var zero K
			return zero, false
		case <-q.wake:
		case <-timer:
		}
		if t != nil {
			t.Stop()
		}
	}
}

// Ended is how a pass ended, as Done tells the worker that logs it.
type Ended struct {
	Outcome  Outcome
	Attempts int // consecutive failed passes, this one included
	// NewTerminal is a terminal error other than the one the key's last
	// pass ended with: news, where the same one again is not.
	NewTerminal bool
}

// Done finishes a key's pass and returns how it ended:
//   - success: attempts reset; the key runs again only if re-added (at
//     once if it was added during the pass) or after res.RequeueAfter;
//   - waiting: retried after res.RequeueAfter if positive, else with the
//     backoff; the attempts do not grow;
//   - failed: the attempts grow; retried with the backoff;
//   - terminal: counted once and not retried until the key is added
//     again (an add during the pass counts, after the backoff; a resync
//     does not).
//
// A key added during a pass that did not succeed still waits for its
// backoff.
func (q *Queue[K]) Done(key K, res Result, err error) Ended {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.processing, key)
	changed, dirty := q.dirty[key]
	delete(q.dirty, key)
	out := outcomeOf(err)
	if out == OutcomeOK {
		delete(q.retries, key)
		delete(q.status, key)
		switch {
		case dirty:
			q.scheduleLocked(key, 0)
		case res.RequeueAfter > 0:
			q.scheduleLocked(key, res.RequeueAfter)
		}
		return Ended{Outcome: out}
	}
	q.retries[key]++
	backoff := Backoff(q.retries[key], q.baseDelay, q.maxDelay)
	reason := err.Error()
	if out == OutcomeWaiting {
		reason = WaitReason(err)
	}
	prev, hadStatus := q.status[key]
	same := hadStatus && prev.Outcome == out && prev.Reason == reason
	ended := Ended{Outcome: out, Attempts: prev.Attempts}
	switch out {
	case OutcomeWaiting:
		if res.RequeueAfter > 0 {
			backoff = res.RequeueAfter
		}
		q.scheduleLocked(key, backoff)
	case OutcomeFailed:
		ended.Attempts++
		q.scheduleLocked(key, backoff)
	case OutcomeTerminal:
		if !same { // once per terminal error, however often it is re-added
			ended.Attempts++
			ended.NewTerminal = true
		}
		if changed {
			q.scheduleLocked(key, backoff)
		}
	}
	since := q.now()
	if same {
		since = prev.Since
	}
	q.status[key] = KeyStatus[K]{Key: key, Outcome: out, Reason: reason, Attempts: ended.Attempts, Since: since}
	return ended
}

// Failures is the current consecutive failure count of key.
func (q *Queue[K]) Failures(key K) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.status[key].Attempts
}

// Status is the last outcome of key, and whether its last pass did not
// succeed.
func (q *Queue[K]) Status(key K) (KeyStatus[K], bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	st, ok := q.status[key]
	return st, ok
}

// Statuses lists the keys whose last pass did not succeed, in no order.
func (q *Queue[K]) Statuses() []KeyStatus[K] {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]KeyStatus[K], 0, len(q.status))
	for _, st := range q.status {
		out = append(out, st)
	}
	return out
}

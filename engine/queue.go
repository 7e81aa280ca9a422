package engine

import (
	"context"
	"sync"
	"time"
)

// Queue is the reconciler's work queue: keys, deduplicated, each handed to at
// most one worker at a time, retried with exponential backoff after an error
// (controller-runtime's workqueue semantics, in a few lines).
type Queue struct {
	now        func() time.Time
	baseDelay  time.Duration
	maxDelay   time.Duration
	mu         sync.Mutex
	due        map[string]time.Time // waiting keys and when they are ready
	processing map[string]bool
	dirty      map[string]bool // added while processing: run again after
	failures   map[string]int
	wake       chan struct{}
}

// NewQueue returns an empty queue.
func NewQueue(now func() time.Time, baseDelay, maxDelay time.Duration) *Queue {
	return &Queue{
		now: now, baseDelay: baseDelay, maxDelay: maxDelay,
		due: map[string]time.Time{}, processing: map[string]bool{}, dirty: map[string]bool{},
		failures: map[string]int{}, wake: make(chan struct{}, 1),
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
func (q *Queue) Add(key string) { q.AddAfter(key, 0) }

// AddAfter makes key ready after d, or sooner if it is already due sooner.
func (q *Queue) AddAfter(key string, d time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.processing[key] {
		q.dirty[key] = true
		return
	}
	at := q.now().Add(d)
	if cur, ok := q.due[key]; !ok || at.Before(cur) {
		q.due[key] = at
	}
	q.signal()
}

func (q *Queue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// Get blocks until a key is ready or ctx ends.
func (q *Queue) Get(ctx context.Context) (string, bool) {
	for {
		q.mu.Lock()
		now := q.now()
		var (
			next    string
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
			return "", false
		case <-q.wake:
		case <-timer:
		}
		if t != nil {
			t.Stop()
		}
	}
}

// Done finishes a key: after an error it is retried with backoff; after
// success its failure count resets and it runs again only if re-added (or
// after requeue, if positive).
func (q *Queue) Done(key string, err error, requeue time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.processing, key)
	var delay time.Duration = -1
	if err != nil {
		q.failures[key]++
		delay = Backoff(q.failures[key], q.baseDelay, q.maxDelay)
	} else {
		delete(q.failures, key)
		if requeue > 0 {
			delay = requeue
		}
	}
	if q.dirty[key] {
		delete(q.dirty, key)
		if err == nil {
			delay = 0
		}
	}
	if delay >= 0 {
		at := q.now().Add(delay)
		if cur, ok := q.due[key]; !ok || at.Before(cur) {
			q.due[key] = at
		}
		q.signal()
	}
}

// Failures is the current consecutive failure count of key.
func (q *Queue) Failures(key string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.failures[key]
}

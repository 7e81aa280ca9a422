package reconcile

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kaas-dev/kaas/states"
)

func TestOutcomeOf(t *testing.T) {
	boom := errors.New("boom")
	illegal := fmt.Errorf("partition-open t/0: %w: unknown state %q", states.ErrIllegalTransition, "x")
	cases := []struct {
		name string
		err  error
		want Outcome
	}{
		{"nil", nil, OutcomeOK},
		{"plain error", boom, OutcomeFailed},
		{"waiting", Waiting("lease"), OutcomeWaiting},
		{"wrapped waiting", fmt.Errorf("open: %w", WaitingOn(boom)), OutcomeWaiting},
		{"terminal", Terminal(boom), OutcomeTerminal},
		{"illegal transition", illegal, OutcomeTerminal},
		{"all parts waiting", errors.Join(Waiting("a"), nil, WaitingOn(boom)), OutcomeWaiting},
		{"a failure among waits", errors.Join(Waiting("a"), boom), OutcomeFailed},
		{"a failure beside a terminal part", errors.Join(illegal, boom), OutcomeFailed},
		{"a terminal part among waits", errors.Join(Waiting("a"), illegal), OutcomeTerminal},
		{"a wait marks even an illegal transition", WaitingOn(illegal), OutcomeWaiting},
		{"cancelled", fmt.Errorf("step: %w", errors.New("context canceled")), OutcomeFailed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := outcomeOf(c.err); got != c.want {
				t.Fatalf("outcomeOf(%v) = %v, want %v", c.err, got, c.want)
			}
		})
	}
}

func TestWaitingKeepsTheError(t *testing.T) {
	err := fmt.Errorf("open: %w", WaitingOn(states.ErrStampMismatch))
	if !errors.Is(err, states.ErrStampMismatch) {
		t.Fatalf("errors.Is lost the waited-out error: %v", err)
	}
	if err.Error() != "open: "+states.ErrStampMismatch.Error() {
		t.Fatalf("WaitingOn reworded the error: %q", err.Error())
	}
	if got := WaitReason(errors.Join(Waiting("a lease"), WaitingOn(errors.New("a slot")))); got != "a lease; a slot" {
		t.Fatalf("waitReason = %q", got)
	}
}

// pass is one reconcile pass in a queue scenario: its result and error,
// then how long after it the key is first ready again (-1: not within an
// hour) and the attempts and outcome the queue shows.
type pass struct {
	res          Result
	err          error
	readyAfter   time.Duration
	wantAttempts int
	wantOutcome  Outcome
}

func TestQueueOutcomes(t *testing.T) {
	const base, max = 100 * time.Millisecond, 400 * time.Millisecond
	boom := errors.New("boom")
	illegal := fmt.Errorf("topic-delete t: %w: no step leaves %q", states.ErrIllegalTransition, "gone")
	cases := []struct {
		name   string
		passes []pass
	}{
		{"waiting is not an attempt, and backs off", []pass{
			{err: Waiting("a lease"), readyAfter: base, wantOutcome: OutcomeWaiting},
			{err: Waiting("a lease"), readyAfter: 2 * base, wantOutcome: OutcomeWaiting},
			{err: Waiting("a lease"), readyAfter: 4 * base, wantOutcome: OutcomeWaiting},
			{err: Waiting("a lease"), readyAfter: max, wantOutcome: OutcomeWaiting},
			{readyAfter: -1, wantOutcome: OutcomeOK},
		}},
		{"a failure after waits counts one attempt, backs off from where the waits left", []pass{
			{err: Waiting("a peer"), readyAfter: base, wantOutcome: OutcomeWaiting},
			{err: boom, readyAfter: 2 * base, wantAttempts: 1, wantOutcome: OutcomeFailed},
			{err: WaitingOn(boom), readyAfter: 4 * base, wantAttempts: 1, wantOutcome: OutcomeWaiting},
			{err: boom, readyAfter: max, wantAttempts: 2, wantOutcome: OutcomeFailed},
			{readyAfter: -1, wantOutcome: OutcomeOK},
		}},
		{"RequeueAfter after a success", []pass{
			{res: Result{RequeueAfter: 3 * time.Second}, readyAfter: 3 * time.Second, wantOutcome: OutcomeOK},
			{readyAfter: -1, wantOutcome: OutcomeOK},
		}},
		{"RequeueAfter replaces a wait's backoff", []pass{
			{res: Result{RequeueAfter: 7 * time.Second}, err: Waiting("readers to release"), readyAfter: 7 * time.Second, wantOutcome: OutcomeWaiting},
			{res: Result{RequeueAfter: time.Millisecond}, err: Waiting("readers to release"), readyAfter: time.Millisecond, wantOutcome: OutcomeWaiting},
		}},
		{"a failure ignores RequeueAfter", []pass{
			{res: Result{RequeueAfter: time.Hour}, err: boom, readyAfter: base, wantAttempts: 1, wantOutcome: OutcomeFailed},
		}},
		{"terminal stops retries", []pass{
			{err: boom, readyAfter: base, wantAttempts: 1, wantOutcome: OutcomeFailed},
			{err: Terminal(boom), readyAfter: -1, wantAttempts: 2, wantOutcome: OutcomeTerminal},
		}},
		{"an illegal transition is terminal", []pass{
			{err: illegal, readyAfter: -1, wantAttempts: 1, wantOutcome: OutcomeTerminal},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clk := newTestClock()
			q := NewQueue[string](clk.Now, base, max)
			q.Add("k")
			for i, p := range c.passes {
				if got := ready(q); !eq(got, []string{"k"}) {
					t.Fatalf("pass %d: ready = %v, want k", i, got)
				}
				if out := q.Done("k", p.res, p.err).Outcome; out != p.wantOutcome {
					t.Fatalf("pass %d: Done = %v, want %v", i, out, p.wantOutcome)
				}
				st, notOK := q.Status("k")
				if notOK != (p.wantOutcome != OutcomeOK) || (notOK && st.Outcome != p.wantOutcome) {
					t.Fatalf("pass %d: status %+v (%v), want %v", i, st, notOK, p.wantOutcome)
				}
				if q.Failures("k") != p.wantAttempts || st.Attempts != p.wantAttempts {
					t.Fatalf("pass %d: attempts %d (status %d), want %d", i, q.Failures("k"), st.Attempts, p.wantAttempts)
				}
				if p.readyAfter < 0 {
					clk.Advance(time.Hour)
					if got := ready(q); len(got) != 0 {
						t.Fatalf("pass %d: ran again without being added: %v", i, got)
					}
					continue
				}
				clk.Advance(p.readyAfter - time.Nanosecond)
				if got := ready(q); len(got) != 0 {
					t.Fatalf("pass %d: ready before %v", i, p.readyAfter)
				}
				clk.Advance(time.Nanosecond)
			}
		})
	}
}

func TestQueueTerminalRetriesWhenAddedAgain(t *testing.T) {
	clk := newTestClock()
	q := NewQueue[string](clk.Now, time.Second, time.Minute)
	illegal := fmt.Errorf("%w: unknown state", states.ErrIllegalTransition)
	q.Add("k")
	ready(q)
	q.Done("k", Result{}, illegal)
	clk.Advance(time.Hour)
	if got := ready(q); len(got) != 0 {
		t.Fatalf("terminal key retried: %v", got)
	}

	// A change enqueues it again: it runs at once; the same terminal
	// error again is not another attempt.
	q.Add("k")
	if got := ready(q); !eq(got, []string{"k"}) {
		t.Fatalf("re-added terminal key: ready = %v", got)
	}
	since := clk.Now()
	clk.Advance(time.Minute)
	q.Done("k", Result{}, illegal)
	if st, _ := q.Status("k"); st.Outcome != OutcomeTerminal || st.Attempts != 1 || !st.Since.Before(since) {
		t.Fatalf("same terminal error again: %+v", st)
	}

	// Added during the pass: retried after the backoff, not at once.
	q.Add("k")
	ready(q)
	q.Add("k")
	q.Done("k", Result{}, illegal)
	if got := ready(q); len(got) != 0 {
		t.Fatalf("dirty terminal key skipped its backoff: %v", got)
	}
	clk.Advance(time.Minute)
	if got := ready(q); !eq(got, []string{"k"}) {
		t.Fatalf("dirty terminal key after backoff: %v", got)
	}

	// Fixed: success clears the status.
	q.Done("k", Result{}, nil)
	if st, notOK := q.Status("k"); notOK || q.Failures("k") != 0 || len(q.Statuses()) != 0 {
		t.Fatalf("after success: %+v %v", st, notOK)
	}
}

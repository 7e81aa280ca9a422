package reconcile

import (
	"context"
	"errors"
	"sort"
	"sync"
	"testing"
	"time"
)

type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func newTestClock() *testClock { return &testClock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestBackoff(t *testing.T) {
	base, max := 100*time.Millisecond, 2*time.Second
	cases := []struct {
		n    int
		want time.Duration
	}{
		{1, 100 * time.Millisecond}, {2, 200 * time.Millisecond}, {3, 400 * time.Millisecond},
		{4, 800 * time.Millisecond}, {5, 1600 * time.Millisecond}, {6, 2 * time.Second},
		{7, 2 * time.Second}, {1000, 2 * time.Second}, {0, 100 * time.Millisecond},
	}
	for _, c := range cases {
		if got := Backoff(c.n, base, max); got != c.want {
			t.Errorf("Backoff(%d) = %v, want %v", c.n, got, c.want)
		}
	}
	if got := Backoff(3, time.Second, 500*time.Millisecond); got != 500*time.Millisecond {
		t.Errorf("base above max: %v", got)
	}
}

// ready drains every key ready now, without blocking: Get with an already
// cancelled context answers from the due map and never waits.
func ready(q *Queue[string]) []string {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out []string
	for {
		k, ok := q.Get(ctx)
		if !ok {
			return out
		}
		out = append(out, k)
	}
}

func sorted(s []string) []string { sort.Strings(s); return s }

func eq(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestQueueDedupAndOrder(t *testing.T) {
	clk := newTestClock()
	q := NewQueue[string](clk.Now, time.Second, time.Minute)
	q.AddAfter("late", 2*time.Second)
	q.Add("a")
	q.Add("b")
	q.Add("a")
	q.Add("a")
	if got := sorted(ready(q)); !eq(got, []string{"a", "b"}) {
		t.Fatalf("ready = %v, want a and b once each", got)
	}
	// Keys handed out are processing: nothing is ready until they are done.
	if got := ready(q); len(got) != 0 {
		t.Fatalf("ready = %v", got)
	}
	clk.Advance(2 * time.Second)
	if got := ready(q); !eq(got, []string{"late"}) {
		t.Fatalf("ready after 2s = %v, want late", got)
	}
}

func TestQueueAddAfterSoonestWins(t *testing.T) {
	cases := []struct {
		name  string
		adds  []time.Duration
		ready time.Duration
	}{
		{"later does not postpone", []time.Duration{time.Second, 5 * time.Second}, time.Second},
		{"sooner advances", []time.Duration{5 * time.Second, time.Second}, time.Second},
		{"add now wins", []time.Duration{5 * time.Second, 0}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clk := newTestClock()
			q := NewQueue[string](clk.Now, time.Second, time.Minute)
			for _, d := range c.adds {
				q.AddAfter("k", d)
			}
			if c.ready > 0 {
				clk.Advance(c.ready - time.Millisecond)
				if got := ready(q); len(got) != 0 {
					t.Fatalf("ready %v before %v", got, c.ready)
				}
				clk.Advance(time.Millisecond)
			}
			if got := ready(q); !eq(got, []string{"k"}) {
				t.Fatalf("ready at %v = %v", c.ready, got)
			}
		})
	}
}

func TestQueueRetryWithBackoff(t *testing.T) {
	clk := newTestClock()
	base, max := 100*time.Millisecond, 400*time.Millisecond
	q := NewQueue[string](clk.Now, base, max)
	boom := errors.New("boom")
	q.Add("k")
	for n := 1; n <= 5; n++ {
		if got := ready(q); !eq(got, []string{"k"}) {
			t.Fatalf("failure %d: ready = %v", n, got)
		}
		q.Done("k", Result{}, boom)
		if q.Failures("k") != n {
			t.Fatalf("Failures = %d, want %d", q.Failures("k"), n)
		}
		d := Backoff(n, base, max)
		clk.Advance(d - time.Millisecond)
		if got := ready(q); len(got) != 0 {
			t.Fatalf("failure %d: retried before its backoff %v", n, d)
		}
		clk.Advance(time.Millisecond)
	}
	if got := ready(q); !eq(got, []string{"k"}) {
		t.Fatalf("ready = %v", got)
	}
	q.Done("k", Result{}, nil)
	if q.Failures("k") != 0 {
		t.Fatalf("success did not reset failures")
	}
	clk.Advance(time.Hour)
	if got := ready(q); len(got) != 0 {
		t.Fatalf("key ran again after success without being re-added: %v", got)
	}
}

func TestQueueDoneRequeueAndDirty(t *testing.T) {
	clk := newTestClock()
	q := NewQueue[string](clk.Now, time.Second, time.Minute)
	boom := errors.New("boom")

	// Requeue after success.
	q.Add("r")
	ready(q)
	q.Done("r", Result{RequeueAfter: 3 * time.Second}, nil)
	clk.Advance(3*time.Second - time.Millisecond)
	if got := ready(q); len(got) != 0 {
		t.Fatalf("requeued too early: %v", got)
	}
	clk.Advance(time.Millisecond)
	if got := ready(q); !eq(got, []string{"r"}) {
		t.Fatalf("requeue: %v", got)
	}
	q.Done("r", Result{}, nil)

	// Added while processing: runs again right after a success...
	q.Add("d")
	ready(q)
	q.Add("d")
	if got := ready(q); len(got) != 0 {
		t.Fatalf("a processing key was handed out twice: %v", got)
	}
	q.Done("d", Result{}, nil)
	if got := ready(q); !eq(got, []string{"d"}) {
		t.Fatalf("dirty key after success: %v", got)
	}
	// ...but after a failure it still waits for its backoff.
	q.Add("d")
	q.Done("d", Result{}, boom)
	if got := ready(q); len(got) != 0 {
		t.Fatalf("dirty key after failure skipped its backoff: %v", got)
	}
	clk.Advance(time.Second)
	if got := ready(q); !eq(got, []string{"d"}) {
		t.Fatalf("dirty key after backoff: %v", got)
	}
}

func TestQueueGetWakesOnAdd(t *testing.T) {
	q := NewQueue[string](newTestClock().Now, time.Second, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // safety net
	defer cancel()
	got := make(chan string, 1)
	go func() {
		k, _ := q.Get(ctx)
		got <- k
	}()
	q.Add("x")
	if k := <-got; k != "x" {
		t.Fatalf("Get = %q", k)
	}
}

package reconcile

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kaas-dev/kaas/states"
)

// TestQueueResync: a resync adds every key again, except that a terminal
// error stays terminal until a change adds its key.
func TestQueueResync(t *testing.T) {
	boom := errors.New("boom")
	illegal := fmt.Errorf("%w: unknown state", states.ErrIllegalTransition)
	type op func(t *testing.T, q *Queue[string], clk *testClock)
	var (
		add    op = func(_ *testing.T, q *Queue[string], _ *testClock) { q.Add("k") }
		resync op = func(_ *testing.T, q *Queue[string], _ *testClock) { q.Resync("k") }
		take   op = func(t *testing.T, q *Queue[string], _ *testClock) {
			if got := ready(q); !eq(got, []string{"k"}) {
				t.Fatalf("take: ready = %v", got)
			}
		}
		done = func(err error) op {
			return func(_ *testing.T, q *Queue[string], _ *testClock) { q.Done("k", Result{}, err) }
		}
		later op = func(_ *testing.T, _ *Queue[string], clk *testClock) { clk.Advance(time.Hour) }
	)
	cases := []struct {
		name string
		ops  []op
		want []string // ready after the ops
	}{
		{"a new key runs", []op{resync}, []string{"k"}},
		{"a succeeded key runs", []op{add, take, done(nil), resync}, []string{"k"}},
		{"a failed key runs at once", []op{add, take, done(boom), resync}, []string{"k"}},
		{"a waiting key runs at once", []op{add, take, done(Waiting("a lease")), resync}, []string{"k"}},
		{"a terminal key stays put", []op{add, take, done(illegal), resync, later}, nil},
		{"a terminal key runs on a change", []op{add, take, done(illegal), resync, add}, []string{"k"}},
		{"a resync in a pass that ends terminally: not again", []op{add, take, resync, done(illegal), later}, nil},
		{"a change in a pass that ends terminally: again, after the backoff", []op{add, take, add, done(illegal), later}, []string{"k"}},
		{"a change and a resync in the pass: the change counts", []op{add, take, add, resync, done(illegal), later}, []string{"k"}},
		{"a resync and a change in the pass: the change counts", []op{add, take, resync, add, done(illegal), later}, []string{"k"}},
		{"a resync in a pass that succeeds: again at once", []op{add, take, resync, done(nil)}, []string{"k"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clk := newTestClock()
			q := NewQueue[string](clk.Now, time.Second, time.Minute)
			for _, o := range c.ops {
				o(t, q, clk)
			}
			if got := ready(q); !eq(got, c.want) {
				t.Fatalf("ready = %v, want %v", got, c.want)
			}
		})
	}
}

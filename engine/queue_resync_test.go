package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kaas-dev/kaas/engine/desired"
	"github.com/kaas-dev/kaas/states"
	"github.com/kaas-dev/kaas/volume/memfs"
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

// TestResyncLeavesTerminalKeys: the periodic resync passes over keys that
// ended terminally; an assignment naming topics unknown here adds them all.
func TestResyncLeavesTerminalKeys(t *testing.T) {
	clk := newTestClock()
	e := &Engine{fsys: memfs.New(), queue: NewQueue[Key](clk.Now, time.Second, time.Minute), routes: newRoutingTable()}
	e.routes.upsert(desired.TopicSpec{Name: "t"})
	illegal := fmt.Errorf("%w: unknown state", states.ErrIllegalTransition)
	keys := []Key{groupsKey, trashKey, topicKey("t")}
	for _, k := range keys {
		e.queue.Add(k)
	}
	for range keys {
		k, _ := e.queue.Get(t.Context())
		e.queue.Done(k, Result{}, illegal)
	}
	readyKeys := func() int {
		n := 0
		for {
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // answers from the due keys, never waits
			_, ok := e.queue.Get(ctx)
			if !ok {
				return n
			}
			n++
		}
	}
	e.resync()
	clk.Advance(time.Hour)
	if n := readyKeys(); n != 0 {
		t.Fatalf("resync ran %d terminal keys", n)
	}
	e.enqueueAll(e.queue.Add)
	if n := readyKeys(); n != len(keys) {
		t.Fatalf("a change ran %d of %d terminal keys", n, len(keys))
	}
}

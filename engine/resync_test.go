package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kaas-dev/kaas/engine/desired"
	"github.com/kaas-dev/kaas/engine/reconcile"
	"github.com/kaas-dev/kaas/states"
	"github.com/kaas-dev/kaas/volume/memfs"
)

// TestResyncLeavesTerminalKeys: the periodic resync passes over keys that
// ended terminally; an assignment naming topics unknown here adds them all.
func TestResyncLeavesTerminalKeys(t *testing.T) {
	clk := newTestClock()
	e := &Engine{fsys: memfs.New(), queue: reconcile.NewQueue[Key](clk.Now, time.Second, time.Minute), routes: newRoutingTable()}
	e.routes.upsert(desired.TopicSpec{Name: "t"})
	illegal := fmt.Errorf("%w: unknown state", states.ErrIllegalTransition)
	keys := []Key{groupsKey, trashKey, topicKey("t")}
	for _, k := range keys {
		e.queue.Add(k)
	}
	for range keys {
		k, _ := e.queue.Get(t.Context())
		e.queue.Done(k, reconcile.Result{}, illegal)
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

package engine

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kaas-dev/kaas/engine/reconcile"
	"github.com/kaas-dev/kaas/states"
)

func TestKeyStatusRows(t *testing.T) {
	clk := newTestClock()
	e := &Engine{owner: "broker-1", queue: reconcile.NewQueue[Key](clk.Now, time.Second, time.Minute)}
	passes := []struct {
		key Key
		err error
	}{
		{topicKey("waits"), reconcile.WaitingOn(fmt.Errorf("%w (waiting for the controller's directory-reclaim)", states.ErrStampMismatch))},
		{topicKey("fails"), errors.New("boom")},
		{groupsKey, fmt.Errorf("%w: unknown state", states.ErrIllegalTransition)},
		{trashKey, nil},
	}
	for _, p := range passes {
		e.queue.Add(p.key)
	}
	for range passes {
		k, _ := e.queue.Get(t.Context())
		for _, p := range passes {
			if p.key == k {
				e.queue.Done(k, reconcile.Result{}, p.err)
			}
		}
	}
	cases := []struct {
		key                               Key
		state, lastError, outcome, object string
		attempts                          int
	}{
		{topicKey("waits"), "waiting", "", "waiting: " + states.ErrStampMismatch.Error() + " (waiting for the controller's directory-reclaim)", "topic/waits", 0},
		{topicKey("fails"), "failed", "boom", "failed: boom", "topic/fails", 1},
		{groupsKey, "failed (terminal)", "illegal transition: unknown state", "failed (terminal): illegal transition: unknown state", "groups", 1},
	}
	if n := len(e.queue.Statuses()); n != len(cases) {
		t.Fatalf("%d statuses, want %d (a success has none)", n, len(cases))
	}
	for _, c := range cases {
		st, ok := e.queue.Status(c.key)
		if !ok {
			t.Fatalf("%v: no status", c.key)
		}
		r := e.keyStatusRow(st)
		if r.Kind != ReconcileKind || r.Object != c.object || string(r.State) != c.state || r.LastError != c.lastError ||
			r.Outcome != c.outcome || r.Attempts != c.attempts || r.Owner != "broker-1" || !r.Since.Equal(clk.Now()) {
			t.Errorf("%v: row %+v", c.key, r)
		}
	}
}

func TestRecordOutcome(t *testing.T) {
	cases := []struct {
		rec  states.Record
		want string
	}{
		{states.Record{Desired: "serving", State: "serving"}, "done"},
		{states.Record{Desired: "serving", State: "fenced"}, "in progress"},
		{states.Record{Desired: "deleted", State: "renamed", Attempts: 3, LastError: "purge: busy"}, "failed: purge: busy"},
		{states.Record{Desired: "reclaimed", State: "renamed", LastError: "waiting: release: broker 2 still holds it"}, "waiting: release: broker 2 still holds it"},
		{states.Record{Desired: "reclaimed", State: "renamed", Attempts: 1, LastError: "release: waiting for nothing"}, "failed: release: waiting for nothing"},
	}
	for _, c := range cases {
		if got := RecordOutcome(c.rec); got != c.want {
			t.Errorf("RecordOutcome(%+v) = %q, want %q", c.rec, got, c.want)
		}
	}
}

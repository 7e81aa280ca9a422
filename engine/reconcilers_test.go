package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"

	"github.com/kaas-dev/kaas/engine/desired"
	"github.com/kaas-dev/kaas/engine/reconcile"
	"github.com/kaas-dev/kaas/states"
	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/memfs"
)

// logLines collects a funcr JSON logger's lines.
type logLines struct {
	mu    sync.Mutex
	lines []map[string]any
}

func (l *logLines) logger(t *testing.T) logr.Logger {
	return funcr.NewJSON(func(obj string) {
		var m map[string]any
		if err := json.Unmarshal([]byte(obj), &m); err != nil {
			t.Errorf("log line %s: %v", obj, err)
		}
		l.mu.Lock()
		l.lines = append(l.lines, m)
		l.mu.Unlock()
	}, funcr.Options{Verbosity: 1})
}

// byName returns the lines about key name, with their verbosity ("error"
// for an Error line).
func (l *logLines) byName(name string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, m := range l.lines {
		if m["name"] != name {
			continue
		}
		lvl := fmt.Sprint(m["level"])
		if _, isErr := m["error"]; isErr {
			lvl = "error"
		}
		out = append(out, fmt.Sprintf("%s %s", lvl, m["msg"]))
	}
	return out
}

// runPasses runs one worker over the keys, in order, until the last
// key's pass (stop) ends it.
func runPasses(e *Engine, clk *testClock, keys ...Key) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := Key{Kind: "stop"}
	e.dispatch[stop.Kind] = func(context.Context, Key) (reconcile.Result, error) { cancel(); return reconcile.Result{}, nil }
	for _, k := range append(keys, stop) {
		e.queue.Add(k)
		clk.Advance(time.Nanosecond) // ready in the order added
	}
	e.work(ctx)
}

func TestWorkLogsAndDispatch(t *testing.T) {
	clk := newTestClock()
	var logs logLines
	illegal := fmt.Errorf("%w: unknown state %q", states.ErrIllegalTransition, "x")
	e := &Engine{log: logs.logger(t), queue: reconcile.NewQueue[Key](clk.Now, time.Second, time.Minute)}
	e.dispatch = map[Kind]ReconcileFunc{
		KindTopic: func(ctx context.Context, key Key) (reconcile.Result, error) {
			// The pass's logger comes with the context.
			e.passLog(ctx).Info("pass")
			switch key.Name {
			case "waits":
				return reconcile.Result{}, reconcile.Waiting("the controller's reclaim")
			case "fails":
				return reconcile.Result{}, errors.New("boom")
			case "illegal":
				return reconcile.Result{}, illegal
			}
			return reconcile.Result{}, nil
		},
	}
	runPasses(e, clk, topicKey("waits"), topicKey("fails"), topicKey("illegal"), topicKey("fine"), Key{Kind: "nonsense", Name: "x"})

	cases := []struct {
		name string
		want []string
	}{
		{"waits", []string{"0 pass", "1 reconcile waiting"}},
		{"fails", []string{"0 pass", "error reconcile failed; retrying with backoff"}},
		{"illegal", []string{"0 pass", "error reconcile failed for good; not retried until the key is enqueued again"}},
		{"fine", []string{"0 pass"}},
		{"x", []string{"error reconcile failed for good; not retried until the key is enqueued again"}},
	}
	for _, c := range cases {
		if got := logs.byName(c.name); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s: log %q, want %q", c.name, got, c.want)
		}
	}
	seen := map[any]bool{}
	logs.mu.Lock()
	for _, m := range logs.lines {
		if m["msg"] == "pass" {
			if m["kind"] != "topic" || seen[m["reconcileID"]] || m["reconcileID"] == nil {
				t.Errorf("pass logger without its own reconcile ID and kind: %v", m)
			}
			seen[m["reconcileID"]] = true
		}
	}
	logs.mu.Unlock()

	// Enqueued again, the terminal key runs again, and the same terminal
	// error is not logged at ERROR a second time.
	runPasses(e, clk, topicKey("illegal"))
	if got := logs.byName("illegal"); len(got) != 3 || got[2] != "0 pass" {
		t.Errorf("illegal after re-enqueue: log %q", got)
	}
	if st, _ := e.queue.Status(topicKey("illegal")); st.Outcome != reconcile.OutcomeTerminal || st.Attempts != 1 {
		t.Errorf("illegal status %+v", st)
	}
	if st, _ := e.queue.Status(topicKey("waits")); st.Outcome != reconcile.OutcomeWaiting || st.Attempts != 0 || st.Reason != "the controller's reclaim" {
		t.Errorf("waits status %+v", st)
	}

	// Outside a pass, the engine's own logger.
	e.passLog(context.Background()).Info("outside", "name", "outside")
	logs.mu.Lock()
	last := logs.lines[len(logs.lines)-1]
	logs.mu.Unlock()
	if last["msg"] != "outside" || last["reconcileID"] != nil {
		t.Errorf("passLog outside a pass: %v", last)
	}
}

// TestSpecWrittenWithoutBumpIsSeen: a writer that crashed between a spec
// and the desired state's version token (the operator killed mid-delete)
// left a change no token announces; the next reconcile of the topic reads
// the spec itself, sees the listing is stale, and the delete completes.
func TestSpecWrittenWithoutBumpIsSeen(t *testing.T) {
	ctx := safety(t)
	fsys := memfs.New()
	e := startEngine(t, fsys)
	spec, err := e.CreateTopic(CreateTopicRequest{Name: "quiet", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	mustServing(t, ctx, e.Engine, "quiet")
	spec.Deleted = true
	spec.Generation++
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := volume.WriteFileAtomic(fsys, desired.SpecPath(testCluster, "quiet"), b); err != nil {
		t.Fatal(err)
	}
	e.resync()
	poll(t, ctx, "the delete completed", func() error {
		if _, err := desired.ReadTopicSpec(fsys, testCluster, "quiet"); !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("spec still there: %v", err)
		}
		return nil
	})
}

package txns

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/engine/groups"
)

// fakeClock is a manual clock: Advance moves time and runs due timers
// synchronously, in time order, outside its own lock. waitTimers blocks
// until background goroutines have armed timers.
type fakeClock struct {
	mu      sync.Mutex
	changed *sync.Cond
	now     time.Time
	seq     int
	timers  []*fakeTimer
}

type fakeTimer struct {
	clock   *fakeClock
	at      time.Time
	seq     int
	f       func()
	stopped bool
}

func newFakeClock() *fakeClock {
	c := &fakeClock{now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	c.changed = sync.NewCond(&c.mu)
	return c
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) groups.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &fakeTimer{clock: c, at: c.now.Add(d), seq: c.seq, f: f}
	c.timers = append(c.timers, t)
	c.changed.Broadcast()
	return t
}

func (t *fakeTimer) Stop() bool {
	t.clock.mu.Lock()
	defer t.clock.mu.Unlock()
	was := !t.stopped
	t.stopped = true
	t.clock.changed.Broadcast()
	return was
}

// live is the number of armed timers. Under c.mu.
func (c *fakeClock) live() int {
	n := 0
	for _, t := range c.timers {
		if !t.stopped {
			n++
		}
	}
	return n
}

// waitTimers blocks until at least n timers are armed.
func (c *fakeClock) waitTimers(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.live() < n {
		c.changed.Wait()
	}
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	target := c.now.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		var next *fakeTimer
		live := c.timers[:0]
		for _, t := range c.timers {
			if t.stopped {
				continue
			}
			live = append(live, t)
			if !t.at.After(target) && (next == nil || t.at.Before(next.at) || (t.at.Equal(next.at) && t.seq < next.seq)) {
				next = t
			}
		}
		c.timers = live
		if next == nil {
			c.now = target
			c.mu.Unlock()
			return
		}
		next.stopped = true
		c.now = next.at
		c.mu.Unlock()
		next.f()
	}
}

// fakeJournal keeps appended records. It can fail appends or waits, and
// hold batches' durability until released; waitBatches blocks until
// appends happened.
type fakeJournal struct {
	mu         sync.Mutex
	appended   *sync.Cond
	recs       []Record
	batches    [][]Record
	failAppend error
	failWait   error
	hold       bool
	gates      map[int]chan struct{} // batch index → closed when durable
}

func newFakeJournal(seed []Record) *fakeJournal {
	j := &fakeJournal{recs: cloneRecords(seed)}
	j.appended = sync.NewCond(&j.mu)
	return j
}

func (j *fakeJournal) Append(recs []Record) (int64, func(context.Context) error, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.failAppend != nil {
		return 0, nil, j.failAppend
	}
	off := int64(len(j.recs))
	batch := cloneRecords(recs)
	j.recs = append(j.recs, batch...)
	j.batches = append(j.batches, batch)
	j.appended.Broadcast()
	var gate chan struct{}
	if j.hold {
		gate = make(chan struct{})
		if j.gates == nil {
			j.gates = make(map[int]chan struct{})
		}
		j.gates[len(j.batches)-1] = gate
	}
	failWait := j.failWait
	return off, func(ctx context.Context) error {
		if gate != nil {
			select {
			case <-gate:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return failWait
	}, nil
}

func cloneRecords(recs []Record) []Record {
	out := make([]Record, len(recs))
	for i, r := range recs {
		out[i] = Record{Key: clone(r.Key), Value: clone(r.Value)}
	}
	return out
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

func (j *fakeJournal) set(f func(j *fakeJournal)) {
	j.mu.Lock()
	defer j.mu.Unlock()
	f(j)
}

// release makes batch (an index among this journal's appends) durable.
func (j *fakeJournal) release(batch int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	close(j.gates[batch])
	delete(j.gates, batch)
}

func (j *fakeJournal) waitBatches(n int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for len(j.batches) < n {
		j.appended.Wait()
	}
}

func (j *fakeJournal) batchCount() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.batches)
}

func (j *fakeJournal) records() []Record {
	j.mu.Lock()
	defer j.mu.Unlock()
	return cloneRecords(j.recs)
}

// fakeMarkers records WriteMarkers calls. It fails the next `failures`
// calls, and while block is set calls wait for it to close (or ctx).
type fakeMarkers struct {
	mu       sync.Mutex
	called   *sync.Cond
	calls    []Markers
	failures int
	block    chan struct{}
}

var errMarkers = errors.New("injected marker failure")

func newFakeMarkers() *fakeMarkers {
	m := &fakeMarkers{}
	m.called = sync.NewCond(&m.mu)
	return m
}

func (m *fakeMarkers) WriteMarkers(ctx context.Context, mk Markers) error {
	m.mu.Lock()
	m.calls = append(m.calls, mk)
	m.called.Broadcast()
	fail := m.failures > 0
	if fail {
		m.failures--
	}
	block := m.block
	m.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if fail {
		return errMarkers
	}
	return nil
}

func (m *fakeMarkers) waitCalls(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for len(m.calls) < n {
		m.called.Wait()
	}
}

func (m *fakeMarkers) got() []Markers {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Markers(nil), m.calls...)
}

type fakeIDs struct {
	mu   sync.Mutex
	next int64
	err  error
}

func (f *fakeIDs) Next() (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return -1, f.err
	}
	f.next++
	return f.next - 1, nil
}

var errInjected = errors.New("injected journal failure")

// harness is a coordinator of shard 3 at leader epoch 7 on fakes.
type harness struct {
	t       *testing.T
	c       *Coordinator
	clock   *fakeClock
	journal *fakeJournal
	markers *fakeMarkers
	ids     *fakeIDs
}

const (
	testEpoch       = 7
	testMarkerRetry = 100 * time.Millisecond
	testAbortCheck  = 10 * time.Second
	testExpiration  = time.Hour
)

// option changes a harness before its coordinator is built.
type option func(h *harness, cfg *Config)

// blockMarkers leaves every transaction in its Prepare* state.
func blockMarkers(h *harness, _ *Config) { h.markers.block = make(chan struct{}) }

func withConfig(f func(*Config)) option { return func(_ *harness, cfg *Config) { f(cfg) } }

// newHarness builds a started coordinator whose log holds seed (replayed).
func newHarness(t *testing.T, seed []Record, opts ...option) *harness {
	t.Helper()
	h := newUnstarted(t, seed, opts...)
	h.c.Start()
	return h
}

// newUnstarted builds a coordinator with seed replayed, not started.
func newUnstarted(t *testing.T, seed []Record, opts ...option) *harness {
	t.Helper()
	h := &harness{t: t, clock: newFakeClock(), journal: newFakeJournal(seed), markers: newFakeMarkers(), ids: &fakeIDs{next: 1000}}
	cfg := Config{
		Shard:        3,
		Epoch:        testEpoch,
		Journal:      h.journal,
		IDs:          h.ids,
		Markers:      h.markers,
		Clock:        h.clock,
		Logger:       testr.New(t),
		MaxTimeout:   15 * time.Minute,
		AbortCheck:   testAbortCheck,
		IDExpiration: testExpiration,
		MarkerRetry:  testMarkerRetry,
	}
	for _, o := range opts {
		o(h, &cfg)
	}
	h.c = New(cfg)
	for _, r := range seed {
		if err := h.c.Replay(r); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		h.c.Close()
		h.c.bg.Wait() // no goroutine outlives its test
	})
	return h
}

// settle waits until the coordinator's background work is done: writes
// settled, markers written, completions durable. Callers make sure nothing
// blocks it (blocked markers, held batches).
func (h *harness) settle() { h.c.bg.Wait() }

var ctx = context.Background()

// init is a new producer's InitProducerID with a one-minute timeout.
func (h *harness) init(txnID string) (int64, int16) {
	h.t.Helper()
	pid, epoch, code := h.c.InitProducerID(ctx, txnID, time.Minute, -1, -1)
	if code != 0 {
		h.t.Fatalf("InitProducerID(%s): %v", txnID, kerr.ErrorForCode(code))
	}
	return pid, epoch
}

func (h *harness) add(txnID string, pid int64, epoch int16, parts ...TopicPartition) {
	h.t.Helper()
	for i, code := range h.c.AddPartitions(ctx, txnID, pid, epoch, parts) {
		if code != 0 {
			h.t.Fatalf("AddPartitions(%s) %v: %v", txnID, parts[i], kerr.ErrorForCode(code))
		}
	}
}

// meta is txnID's state as the coordinator holds it.
func (h *harness) meta(txnID string) (meta, bool) {
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	t := h.c.txns[txnID]
	if t == nil {
		return meta{}, false
	}
	return t.meta, true
}

func (h *harness) state(txnID string) string {
	h.t.Helper()
	m, ok := h.meta(txnID)
	if !ok {
		return "none"
	}
	return m.state.String()
}

// logged is the journal as "id State pid/epoch" lines ("id tombstone").
func (h *harness) logged() []string {
	h.t.Helper()
	return describeRecords(h.t, h.journal.records())
}

func describeRecords(t *testing.T, recs []Record) []string {
	t.Helper()
	out := make([]string, 0, len(recs))
	for _, r := range recs {
		id, err := parseKey(r.Key)
		if err != nil {
			t.Fatal(err)
		}
		if r.Value == nil {
			out = append(out, id+" tombstone")
			continue
		}
		m, err := parseValue(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s %s %d/%d", id, m.state, m.producerID, m.epoch))
	}
	return out
}

// seedMeta is a state to replay: producer 7 at epoch 3, a one-minute
// timeout, started and updated a second before the fake clock's start.
func seedMeta(state string, parts ...TopicPartition) meta {
	s, err := kmsg.ParseTransactionState(state)
	if err != nil {
		panic(err)
	}
	start := newFakeClock().Now().UnixMilli() - 1000
	m := meta{
		producerID: 7, epoch: 3, lastProducerID: -1, lastEpoch: -1,
		timeout: time.Minute, state: s,
		partitions: make(map[TopicPartition]struct{}), groups: make(map[string]struct{}),
		startMs: -1, updateMs: start, timeoutFromMs: -1,
	}
	if s != stateEmpty {
		m.startMs, m.timeoutFromMs = start, start
	}
	for _, tp := range parts {
		m.partitions[tp] = struct{}{}
	}
	return m
}

func seed(txnID string, m meta) []Record { return []Record{record(txnID, m)} }

func tp(topic string, p int32) TopicPartition { return TopicPartition{topic, p} }

func codeName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	if err := kerr.ErrorForCode(code); err != nil {
		return err.Error()
	}
	return fmt.Sprint(code)
}

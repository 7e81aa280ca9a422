package txns

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kaas-dev/kaas/engine/groups"
)

func (cfg Config) withDefaults() Config {
	if cfg.Clock == nil {
		cfg.Clock = groups.RealClock()
	}
	if cfg.MaxTimeout <= 0 {
		cfg.MaxTimeout = DefaultMaxTimeout
	}
	if cfg.AbortCheck <= 0 {
		cfg.AbortCheck = DefaultAbortCheck
	}
	if cfg.IDExpiration <= 0 {
		cfg.IDExpiration = DefaultIDExpiration
	}
	if cfg.MarkerRetry <= 0 {
		cfg.MarkerRetry = DefaultMarkerRetry
	}
	return cfg
}

// Coordinator serves the transactional IDs of one shard.
//
// One mutex guards every ID; it is never held while waiting for the
// journal, the markers or a producer ID block. A state change is appended
// under the lock and applied once durable (settle): until then the ID has
// a pending transition and any other change of it answers
// CONCURRENT_TRANSACTIONS (retriable), as Kafka's pendingState does, so
// what the coordinator answers, and what VerifyPartitions confirms to a
// partition, is always what the next owner will read.
type Coordinator struct {
	cfg Config
	log logr.Logger

	// ctx ends at Close (or a journal failure): durability waits and
	// marker writes in the background use it.
	ctx    context.Context
	cancel context.CancelFunc
	bg     sync.WaitGroup

	mu   sync.Mutex
	txns map[string]*txn
	// settled is closed (and replaced) whenever changes settle: callers
	// waiting for a transaction's end look again.
	settled    chan struct{}
	started    bool
	closed     bool
	checkTimer groups.Timer
}

// txn is one transactional ID: its durable state, and whether a change of
// it is on its way to the journal.
type txn struct {
	id string
	meta
	pending bool
	// stored is false for a new ID until its first record is durable.
	stored bool
}

// New returns a coordinator with no transactional IDs. Replay records into
// it, then Start it.
func New(cfg Config) *Coordinator {
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	return &Coordinator{
		cfg:     cfg,
		log:     cfg.Logger.WithValues("shard", cfg.Shard, "epoch", cfg.Epoch),
		ctx:     ctx,
		cancel:  cancel,
		txns:    make(map[string]*txn),
		settled: make(chan struct{}),
	}
}

// Start begins serving after loading: it resumes the ends of transactions
// found prepared (markers, then completion) and the timeout checks.
func (c *Coordinator) Start() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.started {
		return
	}
	c.started = true
	now := c.nowMs()
	for _, t := range c.txns {
		switch {
		case t.state == stateOngoing:
			t.timeoutFromMs = max(t.startMs, now)
		case prepared(t.state):
			// The previous owner decided but may not have written every
			// marker: write them all again (a second marker is a no-op).
			c.endInBackground(t)
		}
	}
	c.scheduleCheck()
}

// Close stops timers and background marker writes; waiting calls answer
// NOT_COORDINATOR. Nothing is written.
func (c *Coordinator) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closeLocked()
}

func (c *Coordinator) closeLocked() {
	if c.closed {
		return
	}
	c.closed = true
	c.cancel()
	if c.checkTimer != nil {
		c.checkTimer.Stop()
	}
}

// refusal is the code for any request while the coordinator cannot serve,
// 0 if it can. Under the lock.
func (c *Coordinator) refusal() int16 {
	switch {
	case c.closed:
		return kerr.NotCoordinator.Code
	case !c.started:
		return kerr.CoordinatorLoadInProgress.Code
	}
	return 0
}

func (c *Coordinator) nowMs() int64 { return c.cfg.Clock.Now().UnixMilli() }

// change is one transactional ID's transition: via (optional) then next,
// appended in one batch; next is the state applied once durable.
type change struct {
	t    *txn
	via  *meta
	next meta
	// timedOut marks the abort of a transaction that ran past its
	// timeout (Counts.TimedOut).
	timedOut bool
}

// endChange is t's transaction decided as next (Prepare*): one that
// touched nothing has no markers to wait for and is completed in the same
// batch.
func endChange(t *txn, next meta, nowMs int64) change {
	if !next.empty() {
		return change{t: t, next: next}
	}
	return change{t: t, via: &next, next: next.completed(nowMs)}
}

var errInvalidTransition = errors.New("txns: invalid transition")

// write appends the records of changes as one batch and marks their IDs
// pending. The returned channel yields nil once the batch is durable and
// applied, or the error. Under the lock; the caller waits off it.
//
// A journal error fails the shard (see Journal): the coordinator closes
// itself, since a write reported failed may still be read by the next
// owner, and only the next owner knows.
func (c *Coordinator) write(what string, changes ...change) <-chan error {
	done := make(chan error, 1)
	recs := make([]Record, 0, len(changes))
	for _, ch := range changes {
		from := ch.t.state
		for _, m := range []*meta{ch.via, &ch.next} {
			if m == nil {
				continue
			}
			if err := checkTransition(from, m.state); err != nil {
				c.log.Error(err, "not writing", "what", what, "transactionalID", ch.t.id)
				done <- fmt.Errorf("%w: %s of %q: %w", errInvalidTransition, what, ch.t.id, err)
				return done
			}
			recs = append(recs, record(ch.t.id, *m))
			from = m.state
		}
	}
	_, wait, err := c.cfg.Journal.Append(recs)
	if err != nil {
		err = fmt.Errorf("txns: appending %s: %w", what, err)
		c.settle(changes, err)
		done <- err
		return done
	}
	for _, ch := range changes {
		ch.t.pending = true
	}
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		err := wait(c.ctx)
		if err != nil {
			err = fmt.Errorf("txns: writing %s: %w", what, err)
		}
		c.mu.Lock()
		c.settle(changes, err)
		c.mu.Unlock()
		done <- err
	}()
	return done
}

// settle applies changes once durable, or drops them after err. Under the
// lock.
func (c *Coordinator) settle(changes []change, err error) {
	close(c.settled)
	c.settled = make(chan struct{})
	for _, ch := range changes {
		t := ch.t
		t.pending = false
		if err != nil {
			if !t.stored && c.txns[t.id] == t {
				delete(c.txns, t.id)
			}
			continue
		}
		t.stored = true
		t.meta = ch.next
		c.count(ch)
		switch {
		case t.state == stateDead:
			delete(c.txns, t.id)
		case prepared(t.state):
			c.endInBackground(t)
		}
	}
	if err != nil {
		c.fail(err)
	}
}

// fail closes the coordinator after a journal error. Under the lock.
func (c *Coordinator) fail(err error) {
	if c.closed {
		return // the wait ended because we closed
	}
	c.log.Error(err, "transaction coordinator stops: the shard must be reloaded")
	c.closeLocked()
}

// await waits for a write's outcome or the caller's ctx. A request that
// gives up still leaves the write to settle in the background.
func await(ctx context.Context, done <-chan error) error {
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// answer is the code of a write's outcome: a journal error (the shard
// failed), an invalid transition (a bug, logged) or a caller giving up all
// answer NOT_COORDINATOR, which makes the producer find the coordinator
// again and retry.
func answer(err error) int16 {
	if err != nil {
		return kerr.NotCoordinator.Code
	}
	return 0
}

// sleep waits d on the coordinator's clock; false if it closed first.
func (c *Coordinator) sleep(d time.Duration) bool {
	ch := make(chan struct{})
	timer := c.cfg.Clock.AfterFunc(d, func() { close(ch) })
	select {
	case <-ch:
		return true
	case <-c.ctx.Done():
		timer.Stop()
		return false
	}
}

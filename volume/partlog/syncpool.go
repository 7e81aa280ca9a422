package partlog

import (
	"sync"
	"time"
)

// DefaultSyncWorkers is the number of workers of the process-wide SyncPool
// that logs opened without Config.SyncPool share.
const DefaultSyncWorkers = 128

// keepIdleWorkers is how many workers of a pool wait for work when there is
// none, so that a burst of rounds does not start goroutines each time;
// the rest exit.
const keepIdleWorkers = 4

// SyncPool runs the group-commit rounds of many logs on at most Workers
// goroutines. A log with callers waiting in Sync is queued once and a
// worker runs its next round; a log that still has callers after it is
// queued again, behind the others, so one busy partition never holds a
// worker while others wait. The rounds of one log never overlap, each
// round still covers everything appended before it started, and one fence
// check per round stays: group commit is unchanged, only the goroutine a
// round runs on is shared. Idle logs cost no goroutine, and the number of
// fsyncs and fence checks in flight at once (the file descriptors they
// need) is bounded by the pool's size.
//
// The zero value is not usable: use NewSyncPool.
type SyncPool struct {
	max   int
	after func(time.Duration, func()) (stop func() bool)

	mu      sync.Mutex
	cond    sync.Cond
	queue   []*syncer // ready logs, FIFO from head
	head    int
	workers int // goroutines running
	idle    int // of which waiting for work, not yet signalled
}

// NewSyncPool returns a pool of at most workers goroutines (at least 1).
// after, if not nil, replaces time.AfterFunc for the delays before a round
// whose fence check failed transiently runs again (tests inject a clock
// with it); it calls f once d has passed, and its stop cancels that call,
// reporting whether it did.
func NewSyncPool(workers int, after func(d time.Duration, f func()) (stop func() bool)) *SyncPool {
	if after == nil {
		after = func(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }
	}
	p := &SyncPool{max: max(workers, 1), after: after}
	p.cond.L = &p.mu
	return p
}

var (
	defaultPoolOnce sync.Once
	defaultPool     *SyncPool
)

// DefaultSyncPool is the process-wide pool of DefaultSyncWorkers workers
// that logs opened without Config.SyncPool use.
func DefaultSyncPool() *SyncPool {
	defaultPoolOnce.Do(func() { defaultPool = NewSyncPool(DefaultSyncWorkers, nil) })
	return defaultPool
}

// Workers returns the pool's size.
func (p *SyncPool) Workers() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.max
}

// SetWorkers changes the pool's size (at least 1): more workers start as
// logs are queued, and workers beyond it exit once out of work.
func (p *SyncPool) SetWorkers(n int) {
	p.mu.Lock()
	p.max = max(n, 1)
	p.mu.Unlock()
}

// push queues s (just made syncQueued) and gets a worker to it: a waiting
// one, or a new one while the pool has fewer than its size.
func (p *SyncPool) push(s *syncer) {
	p.mu.Lock()
	p.queue = append(p.queue, s)
	switch {
	case p.idle > 0:
		p.idle--
		p.cond.Signal()
	case p.workers < p.max:
		p.workers++
		go p.work()
	}
	p.mu.Unlock()
}

// requeue queues s again from the worker that just ran it, which goes on
// to the queue's head itself: no other worker needs waking.
func (p *SyncPool) requeue(s *syncer) {
	p.mu.Lock()
	p.queue = append(p.queue, s)
	p.mu.Unlock()
}

// work is one worker: it runs queued logs' rounds until the queue is empty,
// then waits for more if fewer than keepIdleWorkers wait, or exits.
func (p *SyncPool) work() {
	p.mu.Lock()
	for {
		for p.head == len(p.queue) {
			if p.idle >= keepIdleWorkers || p.workers > p.max {
				p.workers--
				p.mu.Unlock()
				return
			}
			p.idle++
			p.cond.Wait() // whoever signals took us off idle
		}
		s := p.queue[p.head]
		p.queue[p.head] = nil
		p.head++
		if p.head == len(p.queue) {
			p.queue, p.head = p.queue[:0], 0
		} else if p.head >= 64 && p.head*2 >= len(p.queue) {
			n := copy(p.queue, p.queue[p.head:])
			clear(p.queue[n:])
			p.queue, p.head = p.queue[:n], 0
		}
		p.mu.Unlock()
		s.runRound()
		p.mu.Lock()
	}
}

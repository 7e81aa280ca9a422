package wire

import (
	"context"
	"sync"
	"time"
)

// requestBudget is the memory budget of request frames
// (queued.max.request.bytes): the bytes of every frame being read or not
// yet answered, across connections.
//
// A frame is charged as its bytes arrive, not for the size it announces
// (conn.readBody grows its buffer, and its charge, as the buffer fills), so
// frames announced and never sent hold next to nothing. Unlike a FIFO
// semaphore, a request that fits is never queued behind a larger one still
// waiting.
//
// Growing charges could deadlock: frames each holding part of the budget,
// each waiting for more. A partial charge is therefore granted only if,
// after it, the free budget still covers the rest of every frame being
// read, so any one of them can finish; otherwise a frame may only take all
// it still needs at once. A frame given all it needs no longer waits: it
// is answered or dropped (FrameTimeout) and gives its bytes back.
type requestBudget struct {
	limit int64
	now   func() time.Time

	mu   sync.Mutex
	used int64
	// partial lists the frames being read that hold part of their size.
	partial []*frameCharge
	waiters int
	// changed is closed (and replaced) when bytes come back while someone
	// waits.
	changed chan struct{}
	// blockedSince is when the current waiters started waiting, or when
	// one of them last got in.
	blockedSince time.Time
}

// frameCharge is one frame's share of the budget.
type frameCharge struct {
	size, held int64
	idx        int // in requestBudget.partial; -1 when not there
}

func newRequestBudget(limit int64, now func() time.Time) *requestBudget {
	return &requestBudget{limit: limit, now: now, changed: make(chan struct{})}
}

// charge raises f's charge to want bytes (want <= f.size) or, when only
// that is safe, to all of f.size, waiting until the budget allows. It
// returns how long it waited; an error only when ctx ended (f keeps what it
// held: drop it).
func (b *requestBudget) charge(ctx context.Context, f *frameCharge, want int64) (time.Duration, error) {
	var start time.Time
	b.mu.Lock()
	for !b.tryCharge(f, want) {
		if start.IsZero() {
			start = b.now()
		}
		if b.waiters == 0 {
			b.blockedSince = start
		}
		b.waiters++
		ch := b.changed
		b.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			b.mu.Lock()
			b.waiters--
			b.mu.Unlock()
			return b.now().Sub(start), ctx.Err()
		}
		b.mu.Lock()
		b.waiters--
	}
	var waited time.Duration
	if !start.IsZero() {
		now := b.now()
		waited = now.Sub(start)
		b.blockedSince = now // a waiter got in: the budget moves
	}
	b.mu.Unlock()
	return waited, nil
}

// tryCharge grants what charge asks for if it can; b.mu is held.
func (b *requestBudget) tryCharge(f *frameCharge, want int64) bool {
	free := b.limit - b.used
	rest := f.size - f.held
	switch {
	case want < f.size && want-f.held <= free && b.safeAfter(f, want, free-(want-f.held)):
		b.grant(f, want)
	case rest <= free:
		b.grant(f, f.size)
	default:
		return false
	}
	return true
}

// safeAfter reports whether, with free bytes left once f holds want, every
// frame being read could still get all it needs.
func (b *requestBudget) safeAfter(f *frameCharge, want, free int64) bool {
	if f.size-want > free {
		return false
	}
	for _, g := range b.partial {
		if g != f && g.size-g.held > free {
			return false
		}
	}
	return true
}

func (b *requestBudget) grant(f *frameCharge, held int64) {
	b.used += held - f.held
	f.held = held
	switch {
	case held < f.size && f.idx < 0:
		f.idx = len(b.partial)
		b.partial = append(b.partial, f)
	case held == f.size && f.idx >= 0:
		b.unlist(f)
	}
}

func (b *requestBudget) unlist(f *frameCharge) {
	last := len(b.partial) - 1
	b.partial[f.idx] = b.partial[last]
	b.partial[f.idx].idx = f.idx
	b.partial[last] = nil
	b.partial = b.partial[:last]
	f.idx = -1
}

// drop gives back all f holds (a frame given up) and returns it.
func (b *requestBudget) drop(f *frameCharge) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	if f.idx >= 0 {
		b.unlist(f)
	}
	n := f.held
	f.held = 0
	b.giveBack(n)
	return n
}

// release gives back n bytes of frames read whole (answered or dropped).
func (b *requestBudget) release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.giveBack(n)
	b.mu.Unlock()
}

func (b *requestBudget) giveBack(n int64) {
	b.used -= n
	if b.waiters > 0 {
		close(b.changed)
		b.changed = make(chan struct{})
	}
}

// blocked reports how long requests have waited without any of them
// getting in (0 when none waits), and the bytes held.
func (b *requestBudget) blocked() (time.Duration, int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.waiters == 0 {
		return 0, b.used
	}
	return b.now().Sub(b.blockedSince), b.used
}

// held reports the bytes charged.
func (b *requestBudget) held() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// reading reports how many frames are being read holding part of their
// size (for tests).
func (b *requestBudget) reading() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.partial)
}

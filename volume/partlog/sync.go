package partlog

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"sync"
	"syscall"
	"time"
)

// syncer is one log's group commit: each round covers every batch appended
// before it started with one fsync of the active segment and one fence
// check (open + read). Appends continue while a round runs; callers arriving
// meanwhile are served by the next round. Rounds run on the workers of a
// SyncPool (syncpool.go), one round of a log at a time: a log with waiters
// is queued once, and a log without any costs no goroutine.
type syncer struct {
	l    *Log
	pool *SyncPool

	mu      sync.Mutex
	waiters []*waiter
	stopped bool
	state   syncState
	// roundEnded is broadcast when a round in flight (state syncRunning)
	// ends, for stop.
	roundEnded sync.Cond
	// timer is the pending retry of a round whose fence check failed for a
	// transient reason (state syncBackoff); backoff the delay it used.
	timer   func() bool
	backoff time.Duration
	// closeRetries counts the transient fence-check failures since Close
	// began: the final sync gives up after maxCloseRetries of them.
	closeRetries int

	// The fields below belong to whoever runs a round: one pool worker at a
	// time, or Close after stopping the syncer.

	// lastCheckpoint is when a round last wrote the manifest checkpoint.
	lastCheckpoint time.Time
	// checkpointNoSpace is set while checkpoints fail for a full volume,
	// so that it is logged once.
	checkpointNoSpace bool
	// fsynced is the active segment's end as of its last successful fsync,
	// so that a round retried after a failed fence check does not fsync
	// again what nothing followed.
	fsynced struct {
		seg *segment
		pos int64
	}
	// fenceMissing counts consecutive fence checks that found no fence;
	// fenceTransient is set while fence checks fail transiently (logged
	// once each way).
	fenceMissing   int
	fenceTransient bool
}

// syncState is where a syncer is in its pool.
type syncState uint8

const (
	syncIdle    syncState = iota // nothing to do, in no queue
	syncQueued                   // in the pool's ready queue
	syncRunning                  // a worker runs its round
	syncBackoff                  // waiting for a retry after a transient fence-check failure
)

// Fence checks that fail for a reason that says nothing about who holds the
// fence are retried (see transientFenceError): the round keeps its waiters
// and runs again after a delay doubling from minFenceRetry to
// maxFenceRetry. A fence found missing is retried fenceMissingLimit times
// in a row and then taken for a fenced log: the directory was replaced.
const (
	minFenceRetry     = 10 * time.Millisecond
	maxFenceRetry     = time.Second
	fenceMissingLimit = 5
	maxCloseRetries   = 3
)

// waiter is one Sync call waiting for the high watermark to pass offset.
type waiter struct {
	offset int64
	done   chan error // buffered: the syncer never blocks on a gone caller
}

func (s *syncer) start(l *Log, pool *SyncPool, now time.Time) {
	s.l = l
	s.pool = pool
	s.roundEnded.L = &s.mu
	s.lastCheckpoint = now
}

// wake tells the syncer to look for work: a log with nothing queued or
// running is queued in its pool. A log waiting to retry its fence check
// waits on, unless it failed meanwhile (its waiters get the error now).
func (s *syncer) wake() {
	s.mu.Lock()
	switch s.state {
	case syncIdle:
	case syncBackoff:
		if s.l.Err() == nil || s.timer == nil || !s.timer() {
			s.mu.Unlock()
			return
		}
		s.timer = nil
	default:
		s.mu.Unlock()
		return
	}
	if s.stopped {
		s.mu.Unlock()
		return
	}
	s.state = syncQueued
	s.mu.Unlock()
	s.pool.push(s)
}

// retryDue is the backoff timer's end: queue the round again.
func (s *syncer) retryDue() {
	s.mu.Lock()
	if s.state != syncBackoff || s.stopped {
		s.mu.Unlock()
		return
	}
	s.timer = nil
	s.state = syncQueued
	s.mu.Unlock()
	s.pool.push(s)
}

// Sync blocks until every batch through offset (inclusive) is durable and a
// fence check in the same round found this writer's epoch, then returns nil;
// HighWatermark is then > offset. Offsets beyond the last appended batch are
// clamped to it, so Sync(ctx, math.MaxInt64) covers everything appended so
// far. Concurrent callers share rounds. A failed fsync is never retried: the
// log fails (ErrLogFailed) and every waiting caller gets the error; a higher
// epoch in the fence gives a sticky ErrFenced. A fence check that fails for
// a transient reason (out of file descriptors, a stale handle, the fence
// being replaced) acknowledges nothing and is retried with backoff, the
// callers still waiting. If ctx ends first, Sync returns its error and the
// data may or may not become durable.
func (l *Log) Sync(ctx context.Context, offset int64) error {
	return l.sync.request(offset, false).Wait(ctx)
}

// SyncLater is Sync in two halves: it asks for the round now (the pool
// runs it as soon as a worker is free) and returns the wait. A caller with
// many logs to make durable (a produce request for many partitions) asks
// for every log's round before it waits for any, so the rounds run side by
// side instead of one after another.
func (l *Log) SyncLater(offset int64) PendingSync {
	return l.sync.request(offset, false)
}

// PendingSync is a round asked for by SyncLater.
type PendingSync struct {
	w      *waiter // nil: decided at once, err
	err    error
	offset int64
}

// Wait waits for the round (Sync's outcome), or ctx.
func (p PendingSync) Wait(ctx context.Context) error {
	if p.w == nil {
		return p.err
	}
	select {
	case err := <-p.w.done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("sync through offset %d: %w", p.offset, ctx.Err())
	}
}

// request asks for a round covering offset; internal requests (from
// Close) are allowed on a closed log.
func (s *syncer) request(offset int64, internal bool) PendingSync {
	l := s.l
	if err := l.Err(); err != nil {
		return PendingSync{err: err}
	}
	if offset < l.HighWatermark() {
		return PendingSync{}
	}
	l.mu.Lock()
	closed, leo := l.closed, l.next
	l.mu.Unlock()
	if closed && !internal {
		return PendingSync{err: ErrClosed}
	}
	offset = min(offset, leo-1)
	if offset < l.HighWatermark() {
		return PendingSync{}
	}
	w := &waiter{offset: offset, done: make(chan error, 1)}
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return PendingSync{err: ErrClosed}
	}
	s.waiters = append(s.waiters, w)
	s.mu.Unlock()
	s.wake()
	return PendingSync{w: w, offset: offset}
}

// runRound is what a pool worker does with a queued syncer: one round if
// any caller waits, then queue it again if callers still wait, or arm the
// retry timer if the round's fence check failed transiently.
func (s *syncer) runRound() {
	s.mu.Lock()
	if s.stopped || s.state != syncQueued {
		s.mu.Unlock()
		return
	}
	s.state = syncRunning
	s.mu.Unlock()

	var transient error
	if s.resolve() {
		transient = s.round(false)
	}
	s.resolve()

	s.mu.Lock()
	defer s.mu.Unlock()
	s.roundEnded.Broadcast()
	switch {
	case s.stopped:
		s.state = syncIdle
	case transient != nil && s.l.isClosed.Load() && s.closeRetries >= maxCloseRetries:
		// Close is waiting for a final sync the fence will not allow:
		// give up (nothing more is acknowledged; the data is in the file
		// for the next owner to recover).
		for _, w := range s.waiters {
			w.done <- fmt.Errorf("partition log closing: %w", transient)
		}
		clear(s.waiters)
		s.waiters = s.waiters[:0]
		s.state = syncIdle
	case transient != nil:
		if s.l.isClosed.Load() {
			s.closeRetries++
		}
		s.backoff = min(max(2*s.backoff, minFenceRetry), maxFenceRetry)
		s.state = syncBackoff
		s.timer = s.pool.after(s.backoff, s.retryDue)
	case len(s.waiters) > 0:
		s.backoff = 0
		s.state = syncQueued
		s.pool.requeue(s)
	default:
		s.backoff = 0
		s.state = syncIdle
	}
}

// resolve answers the waiters the current state satisfies (or fails them
// all if the log failed) and reports whether any still wait.
func (s *syncer) resolve() bool {
	err := s.l.Err()
	hw := s.l.HighWatermark()
	s.mu.Lock()
	defer s.mu.Unlock()
	keep := s.waiters[:0]
	for _, w := range s.waiters {
		switch {
		case err != nil:
			w.done <- err
		case w.offset < hw:
			w.done <- nil
		default:
			keep = append(keep, w)
		}
	}
	clear(s.waiters[len(keep):])
	s.waiters = keep
	return len(keep) > 0
}

// stop takes the syncer out of its pool: no round starts any more, a round
// in flight is waited for, a pending retry is cancelled, and the waiters
// left behind get ErrClosed.
func (s *syncer) stop() {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return
	}
	s.stopped = true
	if s.timer != nil {
		s.timer()
		s.timer = nil
	}
	for s.state == syncRunning {
		s.roundEnded.Wait()
	}
	// A queued syncer stays in the pool's queue until a worker pops it and
	// finds it stopped.
	for _, w := range s.waiters {
		w.done <- ErrClosed
	}
	s.waiters = nil
	s.mu.Unlock()
}

// round runs one group commit: snapshot the append state, fsync the active
// segment (outside the append mutex), re-read the fence, advance the
// checkpoint if due (or forced), then publish the new high watermark.
// Segments sealed since the last round were fsynced by the roll.
//
// A fence check that failed for a transient reason publishes nothing and
// is returned (the caller retries the round later); every other failure
// makes the log fail, and round returns nil.
func (s *syncer) round(forceCheckpoint bool) error {
	l := s.l
	if l.Err() != nil {
		return nil
	}
	l.mu.Lock()
	seg := l.segs[len(l.segs)-1]
	target, pos := l.next, seg.size
	written := l.written.Load()
	offsets, times, files := seg.offsets, seg.times, seg.files
	segMax, logMax, firstAppend := seg.maxTS, l.maxTS, seg.firstAppend
	maxTSGen := l.maxTSGen.Load()
	l.mu.Unlock()

	prev := l.durable.Load()
	obs := l.cfg.Rounds
	var r SyncRound
	var t0 time.Time
	if (target != prev.hw || seg != prev.seg) && (seg != s.fsynced.seg || pos != s.fsynced.pos) {
		if obs != nil {
			t0 = l.cfg.Now()
		}
		f, err := l.hc.Acquire(seg.h)
		if err != nil {
			// Nothing fsynced: a descriptor shortage is retried like a
			// fence check's; any other failure to open our own segment
			// is final.
			err = fmt.Errorf("open segment %s for fsync: %w", seg.name, err)
			if transientOpenError(err) {
				return err
			}
			l.fail(err)
			return nil
		}
		err = f.Sync()
		l.hc.Release(seg.h)
		if err != nil {
			l.fail(fmt.Errorf("sync segment %s: %w", seg.name, err))
			return nil
		}
		s.fsynced.seg, s.fsynced.pos = seg, pos
		l.synced.Store(written)
		if obs != nil {
			r.Synced, r.Fsync, r.Bytes = true, l.cfg.Now().Sub(t0), pos
			if seg == prev.seg {
				r.Bytes = pos - prev.pos
			}
		}
	}
	// Clean now (this round's fsync, or an earlier one's, covers every
	// append it counted): the write slot goes back, whatever the fence
	// check says (a fenced log appends nothing more).
	l.releaseSlotIfClean(written)
	if !l.opts.skipFenceRecheck {
		if obs != nil {
			t0 = l.cfg.Now()
		}
		if err := s.checkFence(); err != nil {
			if transientFenceError(err) {
				return err
			}
			l.fail(err)
			return nil
		}
		if obs != nil {
			r.FenceChecked, r.Fence = true, l.cfg.Now().Sub(t0)
		}
	}
	if obs != nil {
		obs.ObserveSyncRound(r)
	}
	if now := l.cfg.Now(); forceCheckpoint || now.Sub(s.lastCheckpoint) >= l.cfg.CheckpointInterval {
		if err := s.checkpoint(seg, pos, target, offsets, times, files, segMax, firstAppend); err != nil {
			if !errors.Is(err, ErrNoSpace) && !errors.Is(err, errTryLater) {
				l.fail(fmt.Errorf("checkpoint: %w", err))
				return nil
			}
			// The volume is full, or out of descriptors for an index
			// file: the previous manifest stays valid and the checkpoint
			// does not advance (see nospace.go); the next due round
			// tries again.
			s.noteCheckpointNoSpace(err)
		} else {
			s.lastCheckpoint = now
			s.noteCheckpointNoSpace(nil)
		}
	}
	l.durable.Store(&durableState{hw: target, seg: seg, pos: pos, maxTS: logMax})
	if l.maxTSGen.Load() != maxTSGen {
		// A swap recomputed the max meanwhile: logMax may name a batch
		// it removed.
		l.mu.Lock()
		l.publishMaxTSLocked()
		l.mu.Unlock()
	}
	return nil
}

// checkFence is the round's fence check: Log.checkFence, with a fence found
// missing retried (a transient error) until fenceMissingLimit checks in a
// row found none, and the change between failing and succeeding checks
// logged once each way.
func (s *syncer) checkFence() error {
	l := s.l
	err := l.checkFence()
	switch {
	case err == nil:
		s.fenceMissing = 0
		if s.fenceTransient {
			s.fenceTransient = false
			l.log.Info("fence readable again; acknowledging resumes")
		}
		return nil
	case errors.Is(err, errFenceMissing):
		s.fenceMissing++
		if s.fenceMissing >= fenceMissingLimit {
			return fmt.Errorf("%w: %d fence checks in a row found no fence", ErrFenced, s.fenceMissing)
		}
	case !transientFenceError(err):
		return err
	}
	if !s.fenceTransient {
		s.fenceTransient = true
		l.log.Info("fence check failed; nothing is acknowledged until it succeeds, retrying with backoff", "err", err.Error())
	}
	return err
}

// transientFenceError reports whether a fence check failed for a reason that
// says nothing about who holds the fence: the process or the system is out
// of file descriptors, an NFS handle went stale, a call was interrupted,
// or the fence was missing (a reader racing another host's replace of it
// gets ENOENT on some filesystems). Such a check is retried, never taken
// for fencing, and acknowledges nothing until it succeeds.
func transientFenceError(err error) bool {
	if errors.Is(err, ErrFenced) {
		return false
	}
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ESTALE) || errors.Is(err, syscall.EINTR) ||
		errors.Is(err, fs.ErrNotExist)
}

// checkpoint writes the index entries and then the manifest checkpoint of a
// round. An ENOSPC that leaves the previous manifest in place wraps
// ErrNoSpace; any other error is final.
func (s *syncer) checkpoint(seg *segment, pos, target int64, offsets []offsetEntry, times []timeEntry,
	files *indexFiles, segMax tsMark, firstAppend time.Time) error {
	l := s.l
	if files != nil {
		if err := files.flush(offsets, times); err != nil {
			if isRecoverableNoSpace(err) {
				return noSpace("checkpoint: write index entries", err)
			}
			return err
		}
	}
	cp := checkpoint{
		SegmentBase: seg.base, SegmentEpoch: seg.epoch,
		Position: pos, NextOffset: target,
		IndexEntries: int64(len(offsets)), TimeIndexEntries: int64(len(times)),
		MaxTimestamp: segMax.ts, MaxTimestampBase: segMax.base, MaxTimestampLast: segMax.last,
	}
	if !firstAppend.IsZero() {
		cp.FirstAppendUnixMilli = firstAppend.UnixMilli()
	}
	if err := l.advanceCheckpoint(cp); err != nil {
		if manifestUnchangedNoSpace(err) {
			return noSpace("checkpoint", err)
		}
		return manifestUnchangedTryLater(err)
	}
	return nil
}

// noteCheckpointNoSpace logs when checkpoints start failing for a full
// volume (err non-nil) and when they work again (nil), once each.
func (s *syncer) noteCheckpointNoSpace(err error) {
	switch {
	case err != nil && !s.checkpointNoSpace:
		s.checkpointNoSpace = true
		s.l.log.Info("the manifest checkpoint does not advance until the volume has room (or descriptors) again; acknowledged data is unaffected", "err", err.Error())
	case err == nil && s.checkpointNoSpace:
		s.checkpointNoSpace = false
		s.l.log.Info("manifest checkpoint advances again")
	}
}

// advanceCheckpoint writes the manifest with cp unless a later checkpoint
// (from a roll that happened meanwhile) is already written.
func (l *Log) advanceCheckpoint(cp checkpoint) error {
	l.manMu.Lock()
	defer l.manMu.Unlock()
	if !cp.after(l.man.Checkpoint) {
		return nil
	}
	m := l.man.clone()
	m.Checkpoint = cp
	if err := writeManifest(l.fsys, l.dir, &m); err != nil {
		return err
	}
	l.man = m
	return nil
}

// finalSync makes everything appended durable and writes the final
// checkpoint. Close calls it after stopping appends. A fence that stays
// unreadable through a few retries ends it with the fence's error: nothing
// more is acknowledged, and the next owner recovers the tail.
func (l *Log) finalSync() error {
	if err := l.sync.request(math.MaxInt64, true).Wait(context.Background()); err != nil {
		return err
	}
	l.sync.stop()
	if err := l.sync.round(true); err != nil {
		return fmt.Errorf("final checkpoint: %w", err)
	}
	return l.Err()
}

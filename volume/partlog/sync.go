package partlog

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// syncer is the group-commit loop: one goroutine runs rounds, each round
// covering every batch appended before it started with one fsync of the
// active segment and one fence check (open + read). Appends continue while a
// round runs; callers arriving meanwhile are served by the next round.
type syncer struct {
	l *Log

	mu      sync.Mutex
	waiters []*waiter
	stopped bool

	kick chan struct{} // capacity 1: "there may be work"
	quit chan struct{}
	done chan struct{}

	// lastCheckpoint is when a round last wrote the manifest checkpoint.
	// Only the syncer goroutine (or Close, after stopping it) touches it.
	lastCheckpoint time.Time
	// checkpointNoSpace is set while checkpoints fail for a full volume
	// (syncer goroutine only), so that it is logged once.
	checkpointNoSpace bool
}

// waiter is one Sync call waiting for the high watermark to pass offset.
type waiter struct {
	offset int64
	done   chan error // buffered: the syncer never blocks on a gone caller
}

func (s *syncer) start(l *Log, now time.Time) {
	s.l = l
	s.kick = make(chan struct{}, 1)
	s.quit = make(chan struct{})
	s.done = make(chan struct{})
	s.lastCheckpoint = now
	go s.run()
}

// wake tells the syncer to look for work.
func (s *syncer) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Sync blocks until every batch through offset (inclusive) is durable and a
// fence check in the same round found this writer's epoch, then returns nil;
// HighWatermark is then > offset. Offsets beyond the last appended batch are
// clamped to it, so Sync(ctx, math.MaxInt64) covers everything appended so
// far. Concurrent callers share rounds. A failed fsync is never retried: the
// log fails (ErrLogFailed) and every waiting caller gets the error; a higher
// epoch in the fence gives a sticky ErrFenced. If ctx ends first, Sync
// returns its error and the data may or may not become durable.
func (l *Log) Sync(ctx context.Context, offset int64) error {
	return l.sync.request(ctx, offset, false)
}

// request is Sync; internal requests (from Close) are allowed on a closed log.
func (s *syncer) request(ctx context.Context, offset int64, internal bool) error {
	l := s.l
	if err := l.Err(); err != nil {
		return err
	}
	if offset < l.HighWatermark() {
		return nil
	}
	l.mu.Lock()
	closed, leo := l.closed, l.next
	l.mu.Unlock()
	if closed && !internal {
		return ErrClosed
	}
	offset = min(offset, leo-1)
	if offset < l.HighWatermark() {
		return nil
	}
	w := &waiter{offset: offset, done: make(chan error, 1)}
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return ErrClosed
	}
	s.waiters = append(s.waiters, w)
	s.mu.Unlock()
	s.wake()
	select {
	case err := <-w.done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("sync through offset %d: %w", offset, ctx.Err())
	}
}

func (s *syncer) run() {
	defer close(s.done)
	for {
		select {
		case <-s.kick:
		case <-s.quit:
			return
		}
		for s.resolve() {
			s.round(false)
		}
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

// stop ends the syncer goroutine and fails the waiters it leaves behind.
func (s *syncer) stop() {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return
	}
	s.stopped = true
	s.mu.Unlock()
	close(s.quit)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.waiters {
		w.done <- ErrClosed
	}
	s.waiters = nil
}

// round runs one group commit: snapshot the append state, fsync the active
// segment (outside the append mutex), re-read the fence, advance the
// checkpoint if due (or forced), then publish the new high watermark.
// Segments sealed since the last round were fsynced by the roll.
func (s *syncer) round(forceCheckpoint bool) {
	l := s.l
	if l.Err() != nil {
		return
	}
	l.mu.Lock()
	seg := l.segs[len(l.segs)-1]
	target, pos := l.next, seg.size
	offsets, times, files := seg.offsets, seg.times, seg.files
	segMax, logMax, firstAppend := seg.maxTS, l.maxTS, seg.firstAppend
	l.mu.Unlock()

	prev := l.durable.Load()
	obs := l.cfg.Rounds
	var r SyncRound
	var t0 time.Time
	if target != prev.hw || seg != prev.seg {
		if obs != nil {
			t0 = l.cfg.Now()
		}
		if err := seg.rf.Sync(); err != nil {
			l.fail(fmt.Errorf("sync segment %s: %w", seg.rf.Name(), err))
			return
		}
		if obs != nil {
			r.Synced, r.Fsync, r.Bytes = true, l.cfg.Now().Sub(t0), pos
			if seg == prev.seg {
				r.Bytes = pos - prev.pos
			}
		}
	}
	if !l.opts.skipFenceRecheck {
		if obs != nil {
			t0 = l.cfg.Now()
		}
		if err := l.checkFence(); err != nil {
			l.fail(err)
			return
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
			if !errors.Is(err, ErrNoSpace) {
				l.fail(fmt.Errorf("checkpoint: %w", err))
				return
			}
			// The volume is full: the previous manifest stays valid and
			// the checkpoint does not advance (see nospace.go); the next
			// due round tries again.
			s.noteCheckpointNoSpace(err)
		} else {
			s.lastCheckpoint = now
			s.noteCheckpointNoSpace(nil)
		}
	}
	l.durable.Store(&durableState{hw: target, seg: seg, pos: pos, maxTS: logMax})
}

// checkpoint writes the index entries and then the manifest checkpoint of a
// round. An ENOSPC that leaves the previous manifest in place wraps
// ErrNoSpace; any other error is final.
func (s *syncer) checkpoint(seg *segment, pos, target int64, offsets []offsetEntry, times []timeEntry,
	files *indexFiles, segMax tsMark, firstAppend time.Time) error {
	l := s.l
	if files != nil {
		if err := files.flush(offsets, times, true); err != nil {
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
		return err
	}
	return nil
}

// noteCheckpointNoSpace logs when checkpoints start failing for a full
// volume (err non-nil) and when they work again (nil), once each.
func (s *syncer) noteCheckpointNoSpace(err error) {
	switch {
	case err != nil && !s.checkpointNoSpace:
		s.checkpointNoSpace = true
		s.l.log.Info("volume full: the manifest checkpoint does not advance until space is freed; acknowledged data is unaffected", "err", err.Error())
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
// checkpoint. Close calls it after stopping appends.
func (l *Log) finalSync() error {
	if err := l.sync.request(context.Background(), math.MaxInt64, true); err != nil {
		return err
	}
	l.sync.stop()
	l.sync.round(true)
	return l.Err()
}

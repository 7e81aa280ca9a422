package partlog

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"time"
)

// Limits are the Config fields a topic's configuration can change while the
// log is open (segment.bytes, segment.ms, max.message.bytes,
// message.timestamp.type). Zero fields take the defaults.
type Limits struct {
	SegmentBytes  int64
	SegmentAge    time.Duration
	MaxBatchBytes int32
	// LogAppendTime stamps every appended batch with the writer's clock
	// (message.timestamp.type=LogAppendTime).
	LogAppendTime bool
}

// Reconfigure applies new limits to the open log; appends after it see them.
// Invalid limits are refused and change nothing. A smaller segment size or
// age takes effect at the next append (which rolls if the active segment is
// now too big or too old); nothing already written is touched.
func (l *Log) Reconfigure(lim Limits) error {
	if lim.SegmentAge < 0 {
		return fmt.Errorf("partlog reconfigure: negative segment age %v", lim.SegmentAge)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	c := l.cfg
	c.SegmentBytes, c.SegmentAge, c.MaxBatchBytes = lim.SegmentBytes, lim.SegmentAge, lim.MaxBatchBytes
	c, err := c.withDefaults()
	if err != nil {
		return fmt.Errorf("partlog reconfigure: %w", err)
	}
	if c.SegmentBytes == l.cfg.SegmentBytes && c.SegmentAge == l.cfg.SegmentAge &&
		c.MaxBatchBytes == l.cfg.MaxBatchBytes && lim.LogAppendTime == l.cfg.LogAppendTime {
		return nil
	}
	l.cfg.SegmentBytes, l.cfg.SegmentAge, l.cfg.MaxBatchBytes = c.SegmentBytes, c.SegmentAge, c.MaxBatchBytes
	l.cfg.LogAppendTime = lim.LogAppendTime
	l.log.V(1).Info("reconfigured", "segmentBytes", c.SegmentBytes, "segmentAge", c.SegmentAge,
		"maxBatchBytes", c.MaxBatchBytes, "logAppendTime", lim.LogAppendTime)
	return nil
}

// ErrNoSpace means the volume had no room for an append (ENOSPC). The log is
// unchanged and stays usable: the append may be retried once space is freed.
var ErrNoSpace = errors.New("no space left on the data volume")

// Deleting records: the log start offset moves up and whole segments below
// it are dropped. The four questions of docs/design.md §1:
//
//   - One atomic primitive? The decision is: the manifest replace
//     (WriteFileAtomic) that raises LogStartOffset and drops the segments
//     from the list. Removing the files is not atomic (three unlinks per
//     segment, after their handles are closed) and comes only after it.
//   - Idempotent and re-driven? Yes: a dropped segment's files are named
//     by no manifest of this writer, whatever state the removal was in.
//     The next pass that drops segments and every Open remove such files
//     (sweepUnlisted, unlisted.go), so a crash between the manifest write
//     and the last unlink converges.
//   - One writer, fenced by epoch? The fence is read before the manifest
//     write (a fenced writer never moves the log start) and again after it,
//     before any file is removed: a new owner that claimed the fence before
//     the manifest was durable may have read the old manifest, which still
//     names the segments, so a writer that finds itself fenced there removes
//     nothing. One that finds its fence still held knows every later owner
//     reads the new manifest (close-to-open), which no longer names them.
//   - Names as identities? Segments are named by base offset and creating
//     epoch (and a cleaned one by its generation), never reused below the
//     log start, and a file is removed only if the manifest this writer
//     made durable last does not name it (see unlistedRule).
//
// Handles before deletes: a dropped segment's read handle is closed first,
// by the dropper or, while a reader has it pinned (a Ref being sent, a Read
// in progress), by the last unpin; only then are its files removed, so the
// space is really freed and NFS leaves no .nfsXXXX file behind.

// DeleteRecordsBefore raises the log start offset to offset (at most the
// high watermark; -1 means the high watermark), durably, and removes the
// segments wholly below it. It returns the new log start offset.
//
// An offset above the high watermark (or negative other than -1) gives an
// error wrapping ErrOffsetOutOfRange and changes nothing; one at or below
// the log start changes nothing. The active segment is never removed: an
// offset inside it only moves the log start. Readers below the new log
// start get ErrOffsetOutOfRange.
func (l *Log) DeleteRecordsBefore(offset int64) (int64, error) {
	l.retMu.Lock()
	defer l.retMu.Unlock()
	if err := l.usable(); err != nil {
		return l.LogStartOffset(), err
	}
	hw := l.HighWatermark()
	if offset == -1 {
		offset = hw
	}
	start := l.LogStartOffset()
	switch {
	case offset < 0:
		return start, fmt.Errorf("%w: delete records before offset %d", ErrOffsetOutOfRange, offset)
	case offset > hw:
		return start, fmt.Errorf("%w: delete records before offset %d: beyond the high watermark %d", ErrOffsetOutOfRange, offset, hw)
	case offset <= start:
		return start, nil
	}
	l.mu.Lock()
	k := 0
	for k < len(l.segs)-1 && l.segs[k].sealed && l.segs[k].next <= offset {
		k++
	}
	victims := slices.Clone(l.segs[:k])
	l.mu.Unlock()
	if _, err := l.dropPrefix(victims, offset, "delete records"); err != nil {
		return l.LogStartOffset(), err
	}
	return l.LogStartOffset(), nil
}

// RetentionPolicy is retention.ms and retention.bytes (-1: unlimited).
type RetentionPolicy struct {
	Ms    int64
	Bytes int64
}

// RetentionResult reports what EnforceRetention removed.
type RetentionResult struct {
	Segments       int   // segments deleted
	Bytes          int64 // their bytes
	LogStartOffset int64 // the log start offset after the pass
}

// EnforceRetention deletes the oldest segments that retention expires.
//
// Kafka's rules (cleanup.policy=delete), applied from the oldest segment
// while one holds:
//
//   - retention.ms >= 0 and the segment's largest timestamp (the file's
//     modification time when no batch carried one) is older than
//     now - retention.ms;
//   - retention.bytes >= 0 and the log's size without the segment is still
//     at least retention.bytes;
//   - the segment lies wholly below the log start offset (DeleteRecords).
//
// Only segments wholly below the high watermark are deleted. When every
// sealed segment goes and the active one is expired too, non-empty and
// wholly durable, it is rolled and deleted as well (as Kafka does), so that
// retention.ms really removes old data from a quiet partition. The new log
// start is the base of the first remaining segment (never lower than
// before). See DeleteRecordsBefore for the durability and handle rules.
func (l *Log) EnforceRetention(now time.Time, p RetentionPolicy) (RetentionResult, error) {
	l.retMu.Lock()
	defer l.retMu.Unlock()
	res := RetentionResult{LogStartOffset: l.LogStartOffset()}
	if err := l.usable(); err != nil {
		return res, err
	}
	nowMs := now.UnixMilli()

	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return res, ErrClosed
	}
	hw := l.durable.Load().hw
	logStart := l.logStart.Load()
	var total int64
	for _, s := range l.segs {
		total += s.size
	}
	expired := func(s *segment) bool {
		switch {
		case s.next <= logStart:
			return true
		case p.Bytes >= 0 && total-s.size >= p.Bytes:
			return true
		case p.Ms >= 0:
			ts, ok := l.segmentTimeLocked(s)
			return ok && ts < nowMs-p.Ms
		}
		return false
	}
	k := 0
	for k < len(l.segs)-1 {
		s := l.segs[k]
		if s.next > hw || !expired(s) {
			break
		}
		total -= s.size
		k++
	}
	if a := l.segs[len(l.segs)-1]; k == len(l.segs)-1 && a.size > 0 && l.next == hw && expired(a) {
		// Everything is expired, the active segment too: roll it so that
		// it can go (an empty active segment remains).
		if err := l.rollLocked(); err != nil {
			l.mu.Unlock()
			if rollUndone(err) {
				return res, fmt.Errorf("retention: roll the expired active segment: %w", err)
			}
			return res, l.fail(fmt.Errorf("retention: roll the expired active segment: %w", err))
		}
		k++
	}
	victims := slices.Clone(l.segs[:k])
	newStart := max(logStart, l.segs[k].base)
	l.mu.Unlock()
	if k == 0 {
		return res, nil
	}
	for _, v := range victims {
		res.Bytes += v.size
	}
	res.Segments = len(victims)
	if _, err := l.dropPrefix(victims, newStart, "retention"); err != nil {
		res.LogStartOffset = l.LogStartOffset()
		res.Segments, res.Bytes = 0, 0
		return res, err
	}
	res.LogStartOffset = l.LogStartOffset()
	return res, nil
}

// segmentTimeLocked is Kafka's "largest timestamp" of a segment (l.mu
// held): its largest batch max timestamp, or, when no batch carried a
// positive one, the modification time of its file (by name: an attribute
// a few seconds stale does not matter here, and it takes no descriptor).
// ok is false when neither is known.
func (l *Log) segmentTimeLocked(s *segment) (int64, bool) {
	if s.maxTS.ts > 0 && !s.maxTSUnknown {
		return s.maxTS.ts, true
	}
	fi, err := l.fsys.Stat(s.name)
	if err != nil || fi.ModTime().IsZero() {
		return 0, false
	}
	return fi.ModTime().UnixMilli(), true
}

// usable returns why the log cannot change any more, nil if it can.
func (l *Log) usable() error {
	if err := l.Err(); err != nil {
		return err
	}
	if l.isClosed.Load() {
		return ErrClosed
	}
	return nil
}

// dropPrefix makes victims (the first len(victims) segments, sealed, never
// the active one) leave the log and raises the log start to at least
// newStart: manifest first (fence checked before it), then, with the fence
// checked again, the in-memory state, the handles and the files. The
// caller holds retMu. It reports whether the files were (or will be, by the
// last unpin) removed.
func (l *Log) dropPrefix(victims []*segment, newStart int64, why string) (removed bool, err error) {
	k := len(victims)
	l.manMu.Lock()
	if err := l.checkFence(); err != nil {
		l.manMu.Unlock()
		return false, l.fenceFailure(why, err)
	}
	m := l.man.clone()
	for i, v := range victims {
		if i >= len(m.Segments)-1 || m.Segments[i].id() != v.id() || !m.Segments[i].Sealed {
			l.manMu.Unlock()
			return false, fmt.Errorf("%s: %w: segment %s is not the sealed segment %d of the manifest", why, ErrCorruptLog, v.id().stem(), i)
		}
	}
	m.Segments = slices.Clone(m.Segments[k:])
	m.LogStartOffset = max(m.LogStartOffset, newStart)
	err = writeManifest(l.fsys, l.dir, &m)
	if err == nil {
		l.man = m
	}
	l.manMu.Unlock()
	if err != nil {
		if manifestUnchangedNoSpace(err) {
			return false, noSpace(why+": write manifest", err)
		}
		if err := manifestUnchangedTryLater(err); errors.Is(err, errTryLater) {
			return false, fmt.Errorf("%s: write manifest: %w", why, err) // the next pass drops them
		}
		// The manifest may or may not have been replaced: like a failed
		// checkpoint, this is final.
		return false, l.fail(fmt.Errorf("%s: %w", why, err))
	}
	// The new log start is durable. A new owner that claimed the fence
	// before that may have read the old manifest, which names the victims:
	// remove files only if the fence is still ours now.
	fenceErr := l.checkFence()
	remove := fenceErr == nil

	l.mu.Lock()
	for cur := l.logStart.Load(); newStart > cur && !l.logStart.CompareAndSwap(cur, newStart); cur = l.logStart.Load() {
	}
	if l.closed {
		// Close owns every handle of l.segs now (closed, or left to the
		// last Release): the victims' files stay, unlisted, removed by the
		// next Open.
		l.mu.Unlock()
		return false, l.fenceFailure(why, fenceErr)
	}
	for i, v := range victims {
		if l.segs[i] != v {
			l.mu.Unlock()
			panic("partlog: segments dropped from the front outside retMu")
		}
	}
	for _, v := range victims {
		v.gone = true
	}
	l.segs = slices.Clone(l.segs[k:])
	l.mu.Unlock()

	deferred := l.retireAll(victims, remove)
	if k > 0 {
		l.log.V(1).Info("dropped segments", "reason", why, "segments", k,
			"first", victims[0].id().stem(), "logStartOffset", l.LogStartOffset(),
			"filesRemoved", remove, "deferred", deferred)
	}
	if !remove {
		return false, l.fenceFailure(why, fenceErr)
	}
	l.sweepUnlisted(nil)
	return true, nil
}

// fenceFailure turns a failed fence check into the error of a retention
// step: fenced is final (the log fails); a fence that could not be read
// changes nothing durable and is returned as is. nil stays nil.
func (l *Log) fenceFailure(why string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrFenced):
		return l.fail(err)
	default:
		return fmt.Errorf("%s: %w", why, err)
	}
}

// retireAll retires segs, just gone from l.segs (see retire), frees those
// no reader pins, and returns how many wait for their last unpin.
func (l *Log) retireAll(segs []*segment, remove bool) (deferred int) {
	var free []*segment
	for _, s := range segs {
		if l.retire(s, remove) {
			free = append(free, s)
		}
	}
	for _, s := range free {
		l.freeSegment(s, remove)
	}
	return len(segs) - len(free)
}

// freeSegment closes a dropped segment's read handle (its only one: sealed
// segments keep no other open) and then, if remove, removes its files. A
// removal that fails leaves an unlisted file that the next sweep removes.
func (l *Log) freeSegment(s *segment, remove bool) {
	if err := l.hc.Forget(s.h); err != nil {
		l.log.V(1).Info("closing the read handle of a dropped segment failed", "segment", s.name, "err", err.Error())
	}
	if !remove {
		return
	}
	logPath, indexPath, timePath := s.id().paths(l.dir)
	for _, p := range []string{logPath, indexPath, timePath} {
		if err := l.fsys.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			l.log.Info("removing a dropped segment's file failed; a later pass removes it", "file", p, "err", err.Error())
		}
	}
}

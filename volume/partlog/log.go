// Package partlog is the append-only log of one Kafka partition on the
// shared volume: RecordBatch v2 bytes, stored as received, in epoch-named
// segments with sparse offset and time indexes, epoch-named manifests (each
// written only by its epoch's writer; recovery uses the highest) and a fence.
//
// One writer per partition, fenced by leader epoch (docs/design.md §1-2):
//   - Open writes the fence for its epoch before it reads the old tail, and
//     never appends to a segment another epoch created.
//   - Sync acknowledges data only after fsync and after re-reading the fence
//     (open + read) in the same group-commit round.
//   - A failed write or fsync is final: the Log refuses everything until it
//     is reopened, which re-verifies the tail.
//
// Every filesystem call goes through volume.FS; segments are read with
// pread (ReadAt), never mmap.
package partlog

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/handles"
)

// Defaults for Config fields left zero.
const (
	DefaultSegmentBytes       = 1 << 30
	DefaultSegmentAge         = 7 * 24 * time.Hour
	DefaultMaxBatchBytes      = 1048588
	DefaultIndexIntervalBytes = 4096
	DefaultCheckpointInterval = time.Second
)

// Config configures a Log. Zero fields take the defaults above.
type Config struct {
	Epoch              int32         // leader epoch of this writer (>= 0)
	SegmentBytes       int64         // roll threshold, at most 4 GiB-1 (index positions are uint32)
	SegmentAge         time.Duration // roll when the active segment's first append is older
	MaxBatchBytes      int32         // max.message.bytes
	IndexIntervalBytes int32         // bytes between sparse index entries
	CheckpointInterval time.Duration // how often a sync round also advances the manifest checkpoint
	// LogAppendTime stamps each appended batch with the writer's clock
	// (message.timestamp.type=LogAppendTime): Append sets the batch's
	// timestamp type and max timestamp and recomputes its CRC.
	LogAppendTime bool
	// PreviousEpochs are epochs whose manifests Open reads even when the
	// directory listing (possibly stale on a shared volume) does not show
	// them: the epoch the fence held before a separate ClaimFence, which
	// Open can no longer learn from the fence itself.
	PreviousEpochs []int32
	// FenceNotDurable says the caller claimed the fence with
	// ClaimFenceDeferred and was told it is not durable yet: Open makes it
	// durable before it reads any older state and before its manifest.
	FenceNotDurable bool
	Now             func() time.Time
	Logger          logr.Logger
	// Rounds, if set, is told the timings of each group-commit round
	// (rounds.go), measured with Now.
	Rounds RoundObserver
	// SyncPool runs the log's group-commit rounds; nil is the process-wide
	// DefaultSyncPool.
	SyncPool *SyncPool
	// Handles caches the log's open files (segments and the append
	// handle); nil is the process-wide handles.Default().
	Handles *handles.Cache
	// WriteSlots bounds the logs with appends not yet fsynced; nil is
	// the process-wide DefaultWriteSlots().
	WriteSlots *WriteSlots
}

func (c Config) withDefaults() (Config, error) {
	if c.Epoch < 0 {
		return c, fmt.Errorf("partlog config: negative epoch %d", c.Epoch)
	}
	if c.SegmentBytes == 0 {
		c.SegmentBytes = DefaultSegmentBytes
	}
	if c.SegmentBytes < 0 || c.SegmentBytes > math.MaxUint32 {
		return c, fmt.Errorf("partlog config: segment bytes %d out of range (1..%d)", c.SegmentBytes, int64(math.MaxUint32))
	}
	if c.SegmentAge == 0 {
		c.SegmentAge = DefaultSegmentAge
	}
	if c.MaxBatchBytes == 0 {
		c.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if c.MaxBatchBytes < BatchHeaderSize {
		return c, fmt.Errorf("partlog config: max batch bytes %d is below the %d-byte batch header", c.MaxBatchBytes, BatchHeaderSize)
	}
	if c.IndexIntervalBytes <= 0 {
		c.IndexIntervalBytes = DefaultIndexIntervalBytes
	}
	if c.CheckpointInterval <= 0 {
		c.CheckpointInterval = DefaultCheckpointInterval
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c, nil
}

// AppendResult describes an appended batch.
type AppendResult struct {
	BaseOffset int64 // offset assigned to the batch's first record
	LastOffset int64 // offset of its last record
	Rolled     bool  // the append rolled to a new segment first
}

// EpochEntry is one leader-epoch history entry: Epoch's first offset.
type EpochEntry struct {
	Epoch       int32 `json:"epoch"`
	StartOffset int64 `json:"startOffset"`
}

// SegmentInfo describes one segment.
type SegmentInfo struct {
	Base      int64 // first offset
	EndOffset int64 // offset after the last batch (appended, durable or not)
	Epoch     int32 // leader epoch of the writer that created it (a cleaned segment: that cleaned it)
	Gen       int64 // cleaned generation, 0 for a segment as appended
	Size      int64 // bytes
	Sealed    bool
}

// durableState is what readers may see: published by the syncer after a
// round's fsync and fence check, read without locks.
type durableState struct {
	hw    int64    // high watermark: next offset after the last durable batch
	seg   *segment // the segment that was active when the round started
	pos   int64    // durable end of seg
	maxTS tsMark   // largest max timestamp below hw
}

// Log is one partition's log. It is safe for concurrent use.
type Log struct {
	fsys volume.FS
	dir  string
	cfg  Config
	opts options // Open's options: negative controls, off in production
	log  logr.Logger

	// mu is the append mutex: it guards the fields below and the (mu)
	// fields of the active segment. No fsync of the active segment runs
	// under it except at roll.
	mu     sync.Mutex
	segs   []*segment      // ordered by base; the last is active
	wh     *handles.Handle // append handle of the active segment (cached)
	next   int64           // log end offset
	maxTS  tsMark          // largest max timestamp appended
	closed bool
	// listing is Open's listing of the directory until OpenListing takes it.
	listing []string
	// fenceUnsynced is set during Open while the fence's rename may not be
	// durable yet (a new partition's lean path).
	fenceUnsynced bool

	// hc caches the open files. written counts successful appends (under
	// mu) and synced the count as of the last successful fsync of the
	// active segment: the active segment's handles may be closed only
	// while they are equal (clean), so that no write error is lost.
	hc              *handles.Cache
	written, synced atomic.Uint64
	// slots bounds the logs that are not clean; slotHeld says l holds one
	// (taken with its first append after a clean round, given back by the
	// round that finds it clean again, or by Close).
	slots    *WriteSlots
	slotHeld atomic.Bool

	isClosed atomic.Bool // closed, readable without mu
	logStart atomic.Int64
	durable  atomic.Pointer[durableState]
	failure  atomic.Pointer[failedError]

	// manMu guards man, the last manifest written, and serialises manifest
	// writes (roll under mu, checkpoint rounds outside it). Lock order: mu,
	// then manMu.
	manMu sync.Mutex
	man   manifest

	sync syncer

	// refs counts live Refs (ReadRef); segment read handles are closed by
	// Close or, while Refs are live, by the last Release, except those of
	// segments retention drops, closed by their last unpin (see refs).
	refs refs

	// retMu serialises the passes that move the log start and drop
	// segments (EnforceRetention, DeleteRecordsBefore): only they remove
	// segments from the front of segs. Lock order: retMu, then mu.
	retMu sync.Mutex

	// cleaning is set while a cleaning pass runs on this log, from before
	// its first output is created until after its last manifest write:
	// the unlisted-file sweep keeps this epoch's unnamed cleaned files
	// meanwhile (unlisted.go).
	cleaning atomic.Bool
	// maxTSGen counts the recomputations of maxTS after swaps (changed
	// under mu), so that a sync round that read maxTS before one does
	// not publish the old mark last.
	maxTSGen atomic.Uint64
	// cleanGen is the highest cleaned generation of this epoch used or
	// seen; a cleaned output takes the next one (NewCleanedWriter).
	cleanGen atomic.Int64

	closeOnce sync.Once
	closeErr  error
}

// Epoch returns the writer's leader epoch.
func (l *Log) Epoch() int32 { return l.cfg.Epoch }

// HighWatermark returns the offset after the last batch that is durable and
// was covered by a fence check. Readers never see beyond it.
func (l *Log) HighWatermark() int64 { return l.durable.Load().hw }

// LogEndOffset returns the offset the next appended batch will get.
func (l *Log) LogEndOffset() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.next
}

// LogStartOffset returns the first offset of the log.
func (l *Log) LogStartOffset() int64 { return l.logStart.Load() }

// EpochHistory returns a copy of the leader-epoch history, oldest first.
func (l *Log) EpochHistory() []EpochEntry {
	l.manMu.Lock()
	defer l.manMu.Unlock()
	return slices.Clone(l.man.Epochs)
}

// Segments describes the segments, oldest first.
func (l *Log) Segments() []SegmentInfo {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]SegmentInfo, len(l.segs))
	for i, s := range l.segs {
		out[i] = SegmentInfo{Base: s.base, EndOffset: s.next, Epoch: s.epoch, Gen: s.gen, Size: s.size, Sealed: s.sealed}
	}
	return out
}

// Size returns the total bytes of all segments, durable or not.
func (l *Log) Size() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var n int64
	for _, s := range l.segs {
		n += s.size
	}
	return n
}

// Err returns the sticky error of a failed or fenced log, nil while healthy.
// It wraps ErrLogFailed and the cause (errors.Is works for ErrFenced too).
func (l *Log) Err() error {
	if f := l.failure.Load(); f != nil {
		return f
	}
	return nil
}

// fail makes err the sticky failure (the first one wins), wakes the syncer
// so waiting Sync callers get it, and returns the sticky error.
func (l *Log) fail(err error) error {
	l.failure.CompareAndSwap(nil, &failedError{cause: err})
	f := l.failure.Load()
	switch {
	case f.cause != err:
	case errors.Is(err, ErrFenced):
		// A newer leader epoch took the partition over: the normal end of
		// this writer's term, not a fault.
		l.log.Info("fenced by a newer leader epoch; this writer acknowledges nothing more", "dir", l.dir, "epoch", l.cfg.Epoch, "cause", err.Error())
	default:
		l.log.Error(err, "partition log failed; it refuses writes until reopened", "dir", l.dir, "epoch", l.cfg.Epoch)
	}
	l.sync.wake()
	return f
}

// Append validates batch, stamps its base offset and partition leader epoch
// in place (batch is modified; neither field is covered by the CRC) and
// writes it with one write call, rolling first if the active segment is full
// or old. With Config.LogAppendTime it also sets the batch's timestamp type
// and max timestamp to the writer's clock and recomputes the CRC (also in
// place). The batch is not visible to readers until a Sync covers it.
//
// Validation errors wrap ErrCorruptBatch or ErrBatchTooLarge and leave the
// log healthy. A full volume (ENOSPC) on the write or on the roll's file
// creation or manifest write leaves it healthy too: the partial write is
// truncated away (or the half-created segment removed), nothing in memory
// changes, and the error wraps ErrNoSpace and the cause; the append may be
// retried once space is freed. Any other write or roll failure, and any
// fsync failure, makes the log fail (ErrLogFailed).
func (l *Log) Append(batch []byte) (AppendResult, error) {
	c, err := Check(batch)
	if err != nil {
		return AppendResult{}, fmt.Errorf("append: %w", err)
	}
	return l.AppendChecked(c)
}

// AppendChecked is Append of a batch already validated by Check.
func (l *Log) AppendChecked(c Checked) (AppendResult, error) {
	batch, h := c.bytes, c.header
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return AppendResult{}, ErrClosed
	}
	if err := l.Err(); err != nil {
		return AppendResult{}, err
	}
	// Under mu: Reconfigure changes the limits under it.
	if len(batch) > int(l.cfg.MaxBatchBytes) {
		return AppendResult{}, fmt.Errorf("%w: %d bytes, max %d", ErrBatchTooLarge, len(batch), l.cfg.MaxBatchBytes)
	}
	now := l.cfg.Now()
	var res AppendResult
	if l.shouldRollLocked(int64(len(batch)), int64(h.LastOffsetDelta), now) {
		if err := l.rollLocked(); err != nil {
			if rollUndone(err) {
				return AppendResult{}, err
			}
			return AppendResult{}, l.fail(err)
		}
		res.Rolled = true
	}

	s := l.segs[len(l.segs)-1]
	base := l.next
	last := base + int64(h.LastOffsetDelta)
	if l.cfg.LogAppendTime {
		h.Attributes, h.MaxTimestamp = stampLogAppendTime(batch, now.UnixMilli())
	}
	stampBatch(batch, base, l.cfg.Epoch)
	pos := s.size
	wf, err := l.hc.Acquire(l.wh)
	if err != nil {
		// Nothing written: refused, the log stays healthy.
		return AppendResult{}, fmt.Errorf("append: open %s: %w", s.name, err)
	}
	n, err := wf.WriteAt(batch, pos)
	if err == nil && n < len(batch) {
		err = io.ErrShortWrite
	}
	if err != nil {
		err = fmt.Errorf("append to %s at position %d: %w", s.name, pos, err)
		if isNoSpace(err) {
			err = l.undoWriteLocked(wf, pos, err)
		} else {
			err = l.fail(err)
		}
		l.hc.Release(l.wh)
		return AppendResult{}, err
	}
	l.takeSlotLocked()
	l.written.Add(1)
	l.hc.Release(l.wh)
	s.noteBatch(pos, base, last, h.MaxTimestamp, int64(l.cfg.IndexIntervalBytes))
	s.size += int64(len(batch))
	s.next = last + 1
	if s.firstAppend.IsZero() {
		s.firstAppend = now
	}
	if h.MaxTimestamp > l.maxTS.ts {
		l.maxTS = tsMark{ts: h.MaxTimestamp, base: base, last: last}
	}
	l.next = last + 1
	res.BaseOffset, res.LastOffset = base, last
	return res, nil
}

// shouldRollLocked reports whether a batch of n bytes and the given last
// offset delta must go to a new segment. An empty segment is never rolled.
func (l *Log) shouldRollLocked(n, lastDelta int64, now time.Time) bool {
	s := l.segs[len(l.segs)-1]
	if s.size == 0 {
		return false
	}
	switch {
	case s.size+n > l.cfg.SegmentBytes:
		return true
	case s.size+n > math.MaxUint32: // index positions are uint32
		return true
	case l.next+lastDelta-s.base > math.MaxUint32: // relative offsets are uint32
		return true
	case !s.firstAppend.IsZero() && now.Sub(s.firstAppend) >= l.cfg.SegmentAge:
		return true
	}
	return false
}

// rollLocked seals the active segment and starts a new one at the log end
// offset. Order: fsync the old segment and its indexes (so its sealed end is
// durable), create the new segment files, fsync the directory, check the
// fence, then write this epoch's manifest naming the sealed end and the new
// segment. A crash before the manifest write leaves an unlisted empty segment
// of the manifest's own epoch, which recovery ignores and the next Open at a
// higher epoch removes (at the same epoch the next roll re-creates it).
//
// A full volume before the manifest is replaced (writing the old segment's
// index entries, creating the new files, writing the manifest's temp file)
// is not a failure of the log: the new segment's files are removed, the old
// segment stays active and unsealed, and the error wraps ErrNoSpace. The old
// segment's fsyncs and index entries stay done (the index files are
// rewritten from the same positions by the next flush; the final time entry
// is a valid sparse entry). A failed fsync is final, ENOSPC or not.
func (l *Log) rollLocked() error {
	old := l.segs[len(l.segs)-1]
	wf, err := l.hc.Acquire(l.wh)
	if err != nil {
		return fmt.Errorf("%w: roll: open %s: %w", errRollNotDone, old.name, err)
	}
	err = wf.Sync()
	l.hc.Release(l.wh)
	if err != nil {
		return fmt.Errorf("roll: sync segment %s: %w", old.name, err)
	}
	old.addTimeEntry() // final entry, so the time index ends at the segment max
	if err := old.files.flush(old.offsets, old.times); err != nil {
		switch {
		case isRecoverableNoSpace(err):
			return noSpace("roll: write index entries", err)
		case errors.Is(err, errTryLater):
			return fmt.Errorf("%w: roll: %w", errRollNotDone, err)
		}
		return fmt.Errorf("roll: %w", err)
	}
	seg, wh, err := l.createSegment(l.next)
	if err != nil {
		if isRecoverableNoSpace(err) {
			return noSpace("roll", err)
		}
		if errors.Is(err, errCreateUnavailable) {
			return fmt.Errorf("%w: roll: %w", errRollNotDone, err)
		}
		return fmt.Errorf("roll: %w", err)
	}
	seg.seq = old.seq + 1
	if err := l.checkFence(); err != nil {
		l.forgetSegment(seg, wh)
		if transientFenceError(err) {
			// Nothing durable names the new segment: undo the roll as
			// for a full volume; the old segment stays active.
			l.removeSegmentFiles(seg)
			return fmt.Errorf("%w: roll: %w", errRollNotDone, err)
		}
		return fmt.Errorf("roll: %w", err)
	}
	l.manMu.Lock()
	m := l.man.clone()
	lastSeg := &m.Segments[len(m.Segments)-1]
	lastSeg.Sealed = true
	lastSeg.EndOffset = l.next
	lastSeg.Size = old.size
	lastSeg.MaxTimestamp, lastSeg.MaxTimestampOffset = old.maxTS.ts, old.maxTS.last
	m.Segments = append(m.Segments, manifestSegment{Base: seg.base, Epoch: seg.epoch})
	m.Checkpoint = emptyCheckpoint(seg)
	err = writeManifest(l.fsys, l.dir, &m)
	if err == nil {
		l.man = m
	}
	l.manMu.Unlock()
	if err != nil {
		l.forgetSegment(seg, wh)
		if manifestUnchangedNoSpace(err) {
			// The manifest on the volume still names the old segment as
			// active; the new one's files are unlisted and ours to remove.
			l.removeSegmentFiles(seg)
			return noSpace("roll", err)
		}
		if err := manifestUnchangedTryLater(err); errors.Is(err, errTryLater) {
			l.removeSegmentFiles(seg)
			return fmt.Errorf("%w: roll: %w", errRollNotDone, err)
		}
		return fmt.Errorf("roll: %w", err)
	}

	old.sealed = true
	old.ro.Store(true)
	old.files.seal() // written and synced above
	old.files = nil
	if err := l.hc.Forget(l.wh); err != nil {
		l.log.V(1).Info("closing the append handle of a sealed segment failed", "segment", old.name, "err", err.Error())
	}
	l.wh = wh
	l.segs = append(l.segs, seg)
	l.log.V(1).Info("rolled segment", "sealed", old.id().stem(), "endOffset", l.next, "size", old.size)
	return nil
}

// errRollNotDone marks a roll undone because its fence check failed for a
// transient reason: the log stays healthy, the append that needed the roll
// is refused (a retriable error), and the next one tries again.
var errRollNotDone = errors.New("roll not done")

// rollUndone reports whether a failed roll left the log as it was (a full
// volume, or a fence that could not be read): not a failure of the log.
func rollUndone(err error) bool {
	return errors.Is(err, ErrNoSpace) || errors.Is(err, errRollNotDone)
}

// emptyCheckpoint is the checkpoint at the start of a new segment.
func emptyCheckpoint(s *segment) checkpoint {
	return checkpoint{SegmentBase: s.base, SegmentEpoch: s.epoch, Position: 0, NextOffset: s.base,
		MaxTimestamp: -1, MaxTimestampBase: -1, MaxTimestampLast: -1}
}

// clone deep-copies the manifest's slices.
func (m manifest) clone() manifest {
	m.Epochs = slices.Clone(m.Epochs)
	m.Segments = slices.Clone(m.Segments)
	return m
}

// errFenceMissing is a fence check's finding that there is no fence. A
// writer's fence never goes away while it writes, so this is a reader
// racing another host's replace of it (some filesystems answer ENOENT then)
// or the directory replaced under it (a topic deleted): the sync rounds
// retry it a few times before taking it for fencing.
var errFenceMissing = fmt.Errorf("no fence: %w", fs.ErrNotExist)

// checkFence opens and reads the fence: ErrFenced if it holds another
// epoch, errFenceMissing if there is none.
func (l *Log) checkFence() error {
	epoch, err := readFence(l.fsys, l.dir)
	if err != nil {
		return fmt.Errorf("check fence: %w", err)
	}
	if epoch < 0 {
		return fmt.Errorf("check fence: %w", errFenceMissing)
	}
	if epoch != l.cfg.Epoch {
		return fmt.Errorf("%w: fence holds epoch %d, this writer has %d", ErrFenced, epoch, l.cfg.Epoch)
	}
	return nil
}

// readView is what a reader needs of one segment, copied under mu, and
// the segment's open file (acquireView).
type readView struct {
	seg   *segment
	f     volume.File
	limit int64 // readable end (durable, below the high watermark)
	// end is where the offsets of a cleaned segment, wholly readable, end
	// (the next segment's base), which its last batch may end before; -1
	// for any other segment, whose batches run to its end.
	end     int64
	offsets []offsetEntry
	times   []timeEntry
	loaded  bool
}

// viewAt returns the readable view of the segment holding offset (< hw),
// its file open and its index loaded. The segment is pinned (see refs): the
// caller calls l.unpin(v.seg) once done with its read handle, error or not,
// when v.seg is non-nil.
func (l *Log) viewAt(d *durableState, offset int64) (readView, error) {
	l.mu.Lock()
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base > offset }) - 1
	if i < 0 {
		l.mu.Unlock()
		return readView{}, fmt.Errorf("%w: offset %d is below the first segment", ErrOffsetOutOfRange, offset)
	}
	v := l.viewLocked(d, l.segs[i])
	l.pinLocked(v.seg)
	l.mu.Unlock()
	v, err := l.acquireView(v)
	if err != nil {
		return v, err
	}
	return l.loadView(v)
}

// acquireView opens v's pinned segment file through the cache (outside
// Log.mu: it may have to open it). On failure the segment is unpinned and
// the view's seg is nil.
func (l *Log) acquireView(v readView) (readView, error) {
	f, err := l.hc.Acquire(v.seg.h)
	if err != nil {
		l.unpinOnly(v.seg)
		if errors.Is(err, handles.ErrForgotten) {
			err = ErrClosed
		}
		return readView{}, fmt.Errorf("open %s: %w", v.seg.name, err)
	}
	v.f = f
	return v, nil
}

// viewLocked builds the view of s as of d.
func (l *Log) viewLocked(d *durableState, s *segment) readView {
	v := readView{seg: s, offsets: s.offsets, times: s.times, loaded: s.indexLoaded, end: -1}
	switch {
	case s == d.seg:
		v.limit = d.pos
	case s.seq < d.seg.seq:
		v.limit = s.size // sealed before the durable segment was active
		if s.gen != 0 {
			v.end = s.next
		}
	default:
		v.limit = 0 // created after the last round: nothing durable yet
	}
	return v
}

// loadView loads a sealed segment's index files on first use.
func (l *Log) loadView(v readView) (readView, error) {
	if v.loaded {
		return v, nil
	}
	s := v.seg
	s.loadMu.Lock()
	defer s.loadMu.Unlock()
	l.mu.Lock()
	loaded := s.indexLoaded
	v.offsets, v.times = s.offsets, s.times
	l.mu.Unlock()
	if loaded {
		return v, nil
	}
	logPath, indexPath, timePath := s.id().paths(l.dir)
	ob, err := readPrefix(l.fsys, indexPath, -1)
	if err != nil {
		return v, fmt.Errorf("load index of %s: %w", logPath, err)
	}
	tb, err := readPrefix(l.fsys, timePath, -1)
	if err != nil {
		return v, fmt.Errorf("load time index of %s: %w", logPath, err)
	}
	offsets := decodeOffsetEntries(ob, s.size)
	times := decodeTimeEntries(tb, s.next-s.base)
	l.mu.Lock()
	s.offsets, s.times, s.indexLoaded = offsets, times, true
	l.mu.Unlock()
	v.offsets, v.times, v.loaded = offsets, times, true
	return v, nil
}

// checkReadable returns the durable state for a read at offset, or why the
// read cannot be served.
func (l *Log) checkReadable(offset int64) (*durableState, error) {
	if err := l.Err(); err != nil {
		return nil, err
	}
	if l.isClosed.Load() {
		return nil, ErrClosed
	}
	d := l.durable.Load()
	if start := l.logStart.Load(); offset < start || offset > d.hw {
		return nil, fmt.Errorf("%w: offset %d, log start %d, high watermark %d", ErrOffsetOutOfRange, offset, start, d.hw)
	}
	return d, nil
}

// errPastSegment is findBatch's finding that offset lies after the last
// batch of a cleaned segment, in the gap cleaning left before the next
// segment: the read goes on there.
var errPastSegment = errors.New("offset past the last batch of a cleaned segment")

// findBatch returns the position of the batch holding offset in v or, in
// a cleaned segment, of the first batch after offset (offsets in a gap
// cleaning left read from the next batch, as in Kafka).
func findBatch(v readView, offset int64) (int64, error) {
	pos := lookupPosition(v.offsets, v.seg.base, offset)
	sc := newHeaderScanner(v.f, v.seg.name, pos, v.limit)
	defer sc.release()
	for {
		h, at, err := sc.next()
		if err == io.EOF && v.end >= 0 {
			return 0, errPastSegment
		}
		if err == io.EOF {
			return 0, fmt.Errorf("%w: offset %d not found in %s below position %d", ErrCorruptLog, offset, v.seg.name, v.limit)
		}
		if err != nil {
			return 0, err
		}
		if h.LastOffset() >= offset {
			return at, nil
		}
	}
}

// Read appends to dst whole batches starting with the batch containing
// offset, as many as fit in maxBytes but always at least one, never past the
// high watermark and never across a segment boundary (the caller reads on
// from the next offset). offset == HighWatermark returns dst unchanged;
// offsets below LogStartOffset or above the high watermark give
// ErrOffsetOutOfRange. The first batch may start before offset, or, for an
// offset that cleaning removed, after it (in the next segment, past a gap
// at a cleaned segment's end); dst is unchanged when no batch is left
// below the high watermark.
func (l *Log) Read(offset int64, maxBytes int, dst []byte) ([]byte, error) {
	d, err := l.checkReadable(offset)
	if err != nil {
		return dst, err
	}
	if offset == d.hw {
		return dst, nil
	}
	v, start, err := l.findView(d, offset)
	if v.seg != nil {
		defer l.unpin(v.seg)
	}
	if err != nil || start < 0 {
		return dst, err
	}
	avail := v.limit - start
	want := min(int64(max(maxBytes, 0)), avail)
	if want < BatchHeaderSize {
		want = min(BatchHeaderSize, avail)
	}
	n0 := len(dst)
	dst = slices.Grow(dst, int(want))[:n0+int(want)]
	if err := readFullAt(v.f, dst[n0:], start); err != nil {
		return dst[:n0], fmt.Errorf("read %s at %d: %w", v.seg.name, start, err)
	}
	// Keep the whole batches that fit.
	buf := dst[n0:]
	var total int64
	for total+BatchHeaderSize <= int64(len(buf)) {
		h, err := ParseStoredBatchHeader(buf[total:])
		if err != nil {
			return dst[:n0], fmt.Errorf("%w: %s at position %d: %v", ErrCorruptLog, v.seg.name, start+total, err)
		}
		if total+h.Size() > int64(len(buf)) {
			if total == 0 { // the first batch is bigger than maxBytes: return it whole
				size := h.Size()
				if size > avail {
					return dst[:n0], fmt.Errorf("%w: %s: batch at %d runs past end %d", ErrCorruptLog, v.seg.name, start, v.limit)
				}
				dst = slices.Grow(dst[:n0+int(want)], int(size-want))[:n0+int(size)]
				if err := readFullAt(v.f, dst[n0+int(want):], start+want); err != nil {
					return dst[:n0], fmt.Errorf("read %s at %d: %w", v.seg.name, start+want, err)
				}
				return dst, nil
			}
			break
		}
		total += h.Size()
	}
	return dst[:n0+int(total)], nil
}

// findView returns the pinned view of the segment holding offset and the
// position of the batch findBatch finds there. Past the last batch of a
// cleaned segment it goes on with the next segment, from its base; start is
// -1 when no batch is left below the high watermark. The caller unpins
// v.seg when it is non-nil, error or not.
func (l *Log) findView(d *durableState, offset int64) (v readView, start int64, err error) {
	for {
		v, err = l.viewAt(d, offset)
		if err != nil {
			return v, -1, err
		}
		if v.limit == 0 && v.end < 0 {
			return v, -1, nil // created after the last round: nothing durable yet
		}
		start, err = findBatch(v, offset)
		if !errors.Is(err, errPastSegment) {
			return v, start, err
		}
		offset = v.end
		l.unpin(v.seg)
		if offset >= d.hw {
			return readView{}, -1, nil
		}
	}
}

// Scan calls fn with the header of every batch from the one containing from
// up to the high watermark, in offset order (for producer-state replay). An
// error from fn stops the scan and is returned. from below LogStartOffset
// starts at LogStartOffset.
func (l *Log) Scan(from int64, fn func(h BatchHeader) error) error {
	if err := l.Err(); err != nil {
		return err
	}
	if l.isClosed.Load() {
		return ErrClosed
	}
	d := l.durable.Load()
	from = max(from, l.logStart.Load())
	for from < d.hw {
		next, done, err := l.scanSegment(d, from, fn)
		if err != nil || done {
			return err
		}
		from = next
	}
	return nil
}

// scanSegment is Scan within the segment holding from, pinned meanwhile. It
// returns where the scan goes on, and done when nothing more is readable.
func (l *Log) scanSegment(d *durableState, from int64, fn func(h BatchHeader) error) (next int64, done bool, err error) {
	v, pos, err := l.findView(d, from)
	if v.seg != nil {
		defer l.unpin(v.seg)
	}
	if err != nil || pos < 0 {
		return from, true, err
	}
	sc := newHeaderScanner(v.f, v.seg.name, pos, v.limit)
	defer sc.release()
	for {
		h, _, err := sc.next()
		if err == io.EOF {
			return max(from, v.end), false, nil // a cleaned segment's offsets run to its end
		}
		if err != nil {
			return from, true, err
		}
		if err := fn(h); err != nil {
			return from, true, err
		}
		from = h.NextOffset()
	}
}

// OffsetForTimestamp returns the offset and timestamp of the first record
// (in offset order, below the high watermark) whose timestamp is >= ts, as
// Kafka's ListOffsets: the time index finds the first batch whose max
// timestamp is >= ts, and that batch's records are decoded to find the
// record (recordAtOrAfter). The special Kafka timestamps (-1 latest, -2
// earliest, -3 max) are the broker's to map to HighWatermark,
// LogStartOffset and MaxTimestamp.
func (l *Log) OffsetForTimestamp(ts int64) (offset, timestamp int64, ok bool) {
	if l.Err() != nil || l.isClosed.Load() {
		return 0, 0, false
	}
	d := l.durable.Load()
	l.mu.Lock()
	segs := l.segs
	l.mu.Unlock()
	for i := 0; i < len(segs); i++ {
		s := segs[i]
		l.mu.Lock()
		if s.gone {
			// Dropped, or replaced by a cleaned segment, meanwhile: go on
			// in the current list from the segment now holding s's
			// offsets (a cleaned one holds a subset of what was searched).
			segs = l.segs
			i = max(sort.Search(len(segs), func(j int) bool { return segs[j].base > s.base })-1, 0) - 1
			l.mu.Unlock()
			continue
		}
		v := l.viewLocked(d, s)
		segMax := s.maxTS.ts
		if v.limit == 0 || (segMax < ts && !s.maxTSUnknown) {
			l.mu.Unlock()
			continue
		}
		l.pinLocked(s)
		l.mu.Unlock()
		v, err := l.acquireView(v)
		if err != nil {
			return 0, 0, false
		}
		offset, timestamp, found, err := l.offsetForTimestampIn(v, ts)
		l.unpin(s)
		if err != nil || found {
			return offset, timestamp, found
		}
	}
	return 0, 0, false
}

// offsetForTimestampIn is OffsetForTimestamp within one pinned segment's
// view. A failure is logged and returned (the caller answers not found).
func (l *Log) offsetForTimestampIn(v readView, ts int64) (offset, timestamp int64, ok bool, err error) {
	s := v.seg
	v, err = l.loadView(v)
	if err != nil {
		l.log.Error(err, "offset for timestamp: loading index failed", "segment", s.name)
		return 0, 0, false, err
	}
	from := lookupTime(v.times, s.base, ts)
	pos := lookupPosition(v.offsets, s.base, from)
	sc := newHeaderScanner(v.f, s.name, pos, v.limit)
	defer sc.release()
	for {
		h, at, err := sc.next()
		if err == io.EOF {
			return 0, 0, false, nil
		}
		if err != nil {
			l.log.Error(err, "offset for timestamp: scan failed", "segment", s.name)
			return 0, 0, false, err
		}
		if h.MaxTimestamp >= ts {
			if offset, timestamp, ok := l.recordAtOrAfter(v, at, h, ts); ok {
				return offset, timestamp, true, nil
			}
		}
	}
}

// MaxTimestamp returns the batch holding the largest max timestamp below the
// high watermark (the earliest such batch on ties): offset is its last
// offset. ok is false when there is none.
func (l *Log) MaxTimestamp() (offset, timestamp int64, ok bool) {
	d := l.durable.Load()
	if d.maxTS.ts < 0 {
		return 0, 0, false
	}
	return d.maxTS.last, d.maxTS.ts, true
}

// Close waits for a final sync of everything appended, writes the final
// checkpoint and closes every handle; segment read handles used by live
// Refs are closed by their last Release instead. It is idempotent; later calls return
// the first call's result. A failed or fenced log closes its handles without
// writing anything and returns its sticky error.
func (l *Log) Close() error {
	l.closeOnce.Do(func() { l.closeErr = l.close() })
	return l.closeErr
}

func (l *Log) close() error {
	l.mu.Lock()
	l.closed = true
	l.isClosed.Store(true)
	l.mu.Unlock()

	var errs []error
	if l.Err() == nil {
		if err := l.finalSync(); err != nil {
			errs = append(errs, fmt.Errorf("close: final sync: %w", err))
		}
	}
	l.sync.stop()

	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.segs {
		if s.files != nil {
			s.files.seal()
		}
	}
	// Read handles may be in use by live Refs: the last Release closes them.
	errs = append(errs, l.closeReadHandles(l.segs)...)
	if err := l.hc.Forget(l.wh); err != nil {
		errs = append(errs, err)
	}
	l.releaseSlot()
	if err := l.Err(); err != nil && len(errs) == 0 {
		return err
	}
	if len(errs) > 0 {
		return fmt.Errorf("close partition log %s: %w", l.dir, errors.Join(errs...))
	}
	return nil
}

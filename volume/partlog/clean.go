package partlog

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"slices"
	"time"

	"github.com/kaas-dev/kaas/volume"
)

// The log cleaner's mechanism on one log: which range may be cleaned
// (CleanablePlan), reading it (PinSealed), writing a cleaned segment
// (NewCleanedWriter) and swapping it in for its inputs (SwapCleaned). What
// a cleaned segment keeps is the caller's policy. The swap answers the
// four questions as dropPrefix does (docs/volume.md, Segment compaction):
// the manifest replace that names the output instead of the inputs is the
// one atomic decision; the fence is read before it (a fenced cleaner swaps
// nothing) and after it (a fenced cleaner deletes nothing); outputs are
// unnamed until the swap and inputs unnamed after it, so the unlisted-file
// rule converges every crash.

// ErrCleanStale means a cleaned segment was not swapped in because its
// inputs are no longer the log's (retention or DeleteRecords dropped some
// meanwhile): its files were removed, the log is unchanged and healthy.
var ErrCleanStale = errors.New("partlog: cleaning inputs changed; group not swapped")

// cleanOpenTries bounds the generations NewCleanedWriter tries: names are
// never reused, so more than a few taken ones means something else writes
// this epoch's names.
const cleanOpenTries = 16

// BeginClean marks a cleaning pass as running on the log, before its
// first output is created: the unlisted-file sweep keeps this epoch's
// unnamed cleaned files meanwhile. One pass at a time.
func (l *Log) BeginClean() error {
	if err := l.usable(); err != nil {
		return err
	}
	if !l.cleaning.CompareAndSwap(false, true) {
		return errors.New("partlog: a cleaning pass already runs on this log")
	}
	return nil
}

// EndClean ends the pass BeginClean began, after its last swap (or abort),
// and sweeps: outputs a failure could not remove are garbage from now on.
func (l *Log) EndClean() {
	l.retMu.Lock()
	defer l.retMu.Unlock()
	l.cleaning.Store(false)
	if l.usable() == nil {
		l.sweepUnlisted(nil)
	}
}

// CleanerOffset returns the first offset not yet cleaned (the log start if
// the log was never cleaned), clamped to [log start, log end].
func (l *Log) CleanerOffset() int64 {
	l.manMu.Lock()
	off := l.man.CleanerOffset
	l.manMu.Unlock()
	return l.clampToLog(off)
}

// clampToLog clamps off to [log start, log end], as Kafka resets a cleaner
// checkpoint out of the log's range.
func (l *Log) clampToLog(off int64) int64 {
	start := l.LogStartOffset()
	if off < start {
		return start
	}
	return min(off, l.LogEndOffset())
}

// CleanablePlan is what one log offers a cleaning pass: offsets
// [FirstDirty, FirstUncleanable) are dirty and may be cleaned, everything
// below FirstDirty was cleaned before; Segments are the sealed segments
// wholly below FirstUncleanable, from the log start, each one of them
// cleanable.
type CleanablePlan struct {
	LogStart         int64
	FirstDirty       int64
	FirstUncleanable int64
	Segments         []SegmentInfo
	// CleanBytes and DirtyBytes size the segments below and above
	// FirstDirty (a segment holding it counts as dirty), for the dirty
	// ratio.
	CleanBytes, DirtyBytes int64
	// DirtyTime is the newest record time (Unix ms) of the first dirty
	// segment, 0 if unknown or there is none: what max.compaction.lag.ms
	// is measured from.
	DirtyTime int64
}

// CleanablePlan returns the range a pass may clean, as Kafka's
// cleanableOffsets: FirstDirty is CleanerOffset; FirstUncleanable is the
// base of the first segment that is the active one, not wholly below
// lastStable (the caller's last stable offset) and the high watermark, not
// sealed before the durable segment (a cleaned segment takes its first
// input's creation order, which must read as durable), or dirty with a
// max timestamp newer than now - minLag (min.compaction.lag.ms).
func (l *Log) CleanablePlan(now time.Time, minLag time.Duration, lastStable int64) CleanablePlan {
	firstDirty := l.CleanerOffset()
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.durable.Load()
	p := CleanablePlan{LogStart: l.logStart.Load(), FirstDirty: firstDirty}
	horizon := now.Add(-minLag).UnixMilli()
	upTo := min(lastStable, d.hw)
	for _, s := range l.segs {
		p.FirstUncleanable = s.base
		if !s.sealed || s.seq >= d.seg.seq || s.next > upTo {
			break
		}
		if s.next > firstDirty && minLag > 0 {
			if ts, ok := l.segmentTimeLocked(s); !ok || ts > horizon {
				break
			}
		}
		if s.next > firstDirty {
			if p.DirtyBytes == 0 {
				p.DirtyTime, _ = l.segmentTimeLocked(s)
			}
			p.DirtyBytes += s.size
		} else {
			p.CleanBytes += s.size
		}
		p.Segments = append(p.Segments, SegmentInfo{Base: s.base, EndOffset: s.next, Epoch: s.epoch, Gen: s.gen, Size: s.size, Sealed: true})
		p.FirstUncleanable = s.next
	}
	p.FirstUncleanable = max(p.FirstUncleanable, p.LogStart)
	p.FirstDirty = min(max(p.FirstDirty, p.LogStart), p.FirstUncleanable)
	return p
}

// Groups splits the plan's segments that start below upTo (the end of
// what the pass's key map covers) into runs of consecutive segments whose
// sizes sum to at most maxBytes (segment.bytes; a bigger segment is a
// group of its own) and whose offsets span at most MaxUint32, so that one
// cleaned segment can replace each (Kafka's groupSegmentsBySize).
func (p CleanablePlan) Groups(maxBytes, upTo int64) [][]SegmentInfo {
	var out [][]SegmentInfo
	var cur []SegmentInfo
	var size int64
	for _, s := range p.Segments {
		if s.Base >= upTo {
			break
		}
		if len(cur) > 0 && (size+s.Size > maxBytes || s.EndOffset-1-cur[0].Base > math.MaxUint32) {
			out = append(out, cur)
			cur, size = nil, 0
		}
		cur = append(cur, s)
		size += s.Size
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// SegmentSet is a run of consecutive sealed segments pinned for a
// cleaning pass: retention may drop them meanwhile (the swap then
// aborts), but their files stay readable until Release.
type SegmentSet struct {
	l    *Log
	segs []*segment
	buf  []byte
}

// PinSealed pins the segments holding offsets [from, to), whole (a walk
// starts at the first one's first batch, which may lie below from): each
// must be sealed before the durable segment and wholly below the high
// watermark (CleanablePlan's segments are), else the plan is stale and
// nothing is pinned.
func (l *Log) PinSealed(from, to int64) (*SegmentSet, error) {
	if err := l.usable(); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.durable.Load()
	set := &SegmentSet{l: l}
	for _, s := range l.segs {
		if s.next <= from || s.base >= to {
			continue
		}
		if !s.sealed || s.seq >= d.seg.seq || s.next > d.hw {
			return nil, fmt.Errorf("pin [%d, %d) for cleaning: segment %s is not sealed and durable", from, to, s.id().stem())
		}
		set.segs = append(set.segs, s)
	}
	if len(set.segs) == 0 {
		return nil, fmt.Errorf("pin [%d, %d) for cleaning: no segment there", from, to)
	}
	for _, s := range set.segs {
		l.pinLocked(s)
	}
	return set, nil
}

// Segments describes the pinned segments, oldest first.
func (s *SegmentSet) Segments() []SegmentInfo {
	out := make([]SegmentInfo, len(s.segs))
	for i, seg := range s.segs {
		out[i] = SegmentInfo{Base: seg.base, EndOffset: seg.next, Epoch: seg.epoch, Gen: seg.gen, Size: seg.size, Sealed: true}
	}
	return out
}

// Throttle is charged with the bytes a pass reads or writes; its error
// stops the pass. rate.Limiter.WaitN fits.
type Throttle func(ctx context.Context, n int) error

// Walk calls fn with every batch of the set in offset order, read with
// pread into a buffer reused for the next batch (fn must not keep it).
// throttle (nil: none) is charged with each batch's bytes before fn sees
// it; ctx is checked per batch. An error from fn, throttle or ctx stops
// the walk and is returned.
func (s *SegmentSet) Walk(ctx context.Context, throttle Throttle, fn func(batch []byte) error) error {
	for _, seg := range s.segs {
		if err := s.walkSegment(ctx, seg, throttle, fn); err != nil {
			return err
		}
	}
	return nil
}

func (s *SegmentSet) walkSegment(ctx context.Context, seg *segment, throttle Throttle, fn func([]byte) error) error {
	f, err := s.l.hc.Acquire(seg.h)
	if err != nil {
		return fmt.Errorf("clean: open %s: %w", seg.name, err)
	}
	defer s.l.hc.Release(seg.h)
	sc := newHeaderScanner(f, seg.name, 0, seg.size)
	defer sc.release()
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("clean: read %s: %w", seg.name, err)
		}
		h, at, err := sc.next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("clean: %w", err)
		}
		n := int(h.Size())
		s.buf = slices.Grow(s.buf[:0], n)[:n]
		if err := readFullAt(f, s.buf, at); err != nil {
			return fmt.Errorf("clean: read %s at %d: %w", seg.name, at, err)
		}
		if throttle != nil {
			if err := throttle(ctx, n); err != nil {
				return fmt.Errorf("clean: throttle: %w", err)
			}
		}
		if err := fn(s.buf); err != nil {
			return err
		}
	}
}

// Release unpins the set; inputs a swap retired are freed by the last
// unpin. Idempotent.
func (s *SegmentSet) Release() {
	for _, seg := range s.segs {
		s.l.unpinOnly(seg)
	}
	s.segs = nil
}

// CleanedWriter writes one cleaned segment: the next generation of the
// log's epoch, its files created exclusively (a name is never written
// twice), its indexes built by the rules of appended segments. It is not
// safe for concurrent use.
type CleanedWriter struct {
	l       *Log
	seg     *segment // the output as it grows: size, next, maxTS, indexes
	files   []volume.File
	paths   []string
	w       *bufio.Writer
	last    int64 // last offset written, base-1 before the first batch
	done    bool  // finished: files synced and closed
	aborted bool
	named   bool // a manifest may name it: never removed by Abort
}

// cleanedWriteBuffer is the writer's buffer: a few hundred KiB per write
// call, as Kafka's cleaner's write buffer.
const cleanedWriteBuffer = 256 << 10

// NewCleanedWriter creates the files of a cleaned segment at base, the
// base of its first input, under the next generation of this epoch (a
// taken name moves on to the following one). A pass must be running
// (BeginClean), so that no sweep takes the files for an abandoned pass's.
func (l *Log) NewCleanedWriter(base int64) (*CleanedWriter, error) {
	if err := l.usable(); err != nil {
		return nil, err
	}
	if !l.cleaning.Load() {
		return nil, errors.New("partlog: cleaned segment written outside a cleaning pass (BeginClean)")
	}
	for range cleanOpenTries {
		id := segID{base: base, epoch: l.cfg.Epoch, gen: l.cleanGen.Add(1)}
		w, err := l.createCleaned(id)
		if errors.Is(err, fs.ErrExist) {
			l.log.V(1).Info("cleaned segment name taken; trying the next generation", "segment", id.stem())
			continue
		}
		return w, err
	}
	return nil, fmt.Errorf("create cleaned segment at %d: %d generations taken", base, cleanOpenTries)
}

// createCleaned creates id's three files exclusively; on failure it
// removes those it created.
func (l *Log) createCleaned(id segID) (*CleanedWriter, error) {
	logPath, indexPath, timePath := id.paths(l.dir)
	w := &CleanedWriter{l: l, last: id.base - 1,
		seg: &segment{base: id.base, epoch: id.epoch, gen: id.gen, name: logPath, next: id.base, maxTS: noTS, indexLoaded: true}}
	for _, p := range []string{logPath, indexPath, timePath} {
		f, err := l.fsys.CreateExclusive(p)
		if err != nil {
			w.Abort()
			return nil, fmt.Errorf("create cleaned segment file %s: %w", p, err)
		}
		w.files, w.paths = append(w.files, f), append(w.paths, p)
	}
	w.w = bufio.NewWriterSize(w.files[0], cleanedWriteBuffer)
	return w, nil
}

// Name is the output's segment file path.
func (w *CleanedWriter) Name() string { return w.seg.name }

// Size is the bytes appended so far.
func (w *CleanedWriter) Size() int64 { return w.seg.size }

// Append writes batch, a stored batch (ParseStoredBatchHeader) whose
// offsets follow the last one appended and stay within MaxUint32 of the
// base, to the output. Its CRC is checked: what a cleaned segment holds
// must be what readers can trust as they trust appended batches.
func (w *CleanedWriter) Append(batch []byte) error {
	if w.done || w.aborted {
		return errors.New("partlog: append to a finished cleaned segment")
	}
	h, err := ParseStoredBatchHeader(batch)
	if err != nil {
		return fmt.Errorf("cleaned segment %s: %w", w.seg.name, err)
	}
	switch {
	case h.Size() != int64(len(batch)):
		return fmt.Errorf("cleaned segment %s: %w: batch of %d bytes given %d", w.seg.name, ErrCorruptBatch, h.Size(), len(batch))
	case crc32Update(0, batch[offAttributes:]) != h.CRC:
		return fmt.Errorf("cleaned segment %s: %w: crc mismatch in the batch at offset %d", w.seg.name, ErrCorruptBatch, h.BaseOffset)
	case h.BaseOffset <= w.last:
		return fmt.Errorf("cleaned segment %s: batch at offset %d after offset %d", w.seg.name, h.BaseOffset, w.last)
	case h.LastOffset()-w.seg.base > math.MaxUint32 || w.seg.size+h.Size() > math.MaxUint32:
		return fmt.Errorf("cleaned segment %s: batch at offset %d overflows the uint32 index", w.seg.name, h.BaseOffset)
	}
	if _, err := w.w.Write(batch); err != nil {
		return fmt.Errorf("write cleaned segment %s: %w", w.seg.name, err)
	}
	w.seg.noteBatch(w.seg.size, h.BaseOffset, h.LastOffset(), h.MaxTimestamp, int64(w.l.cfg.IndexIntervalBytes))
	w.seg.size += h.Size()
	w.seg.next = h.NextOffset()
	w.last = h.LastOffset()
	return nil
}

// Finish makes the output durable: the final time entry (as a roll adds),
// the index files, an fsync of each file and of the directory. On error
// it removes the output (nothing depends on it yet) and returns why.
func (w *CleanedWriter) Finish() error {
	if w.done || w.aborted {
		return errors.New("partlog: cleaned segment finished twice")
	}
	err := w.finish()
	if err != nil {
		w.Abort()
		return fmt.Errorf("finish cleaned segment %s: %w", w.seg.name, err)
	}
	w.done = true
	return nil
}

func (w *CleanedWriter) finish() error {
	w.seg.addTimeEntry()
	if err := w.w.Flush(); err != nil {
		return err
	}
	for i, data := range [][]byte{nil, encodeOffsetEntries(nil, w.seg.offsets), encodeTimeEntries(nil, w.seg.times)} {
		if len(data) > 0 {
			if _, err := w.files[i].WriteAt(data, 0); err != nil {
				return fmt.Errorf("write %s: %w", w.paths[i], err)
			}
		}
	}
	for i, f := range w.files {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("sync %s: %w", w.paths[i], err)
		}
	}
	files := w.files
	w.files = nil
	for i, f := range files {
		if err := f.Close(); err != nil {
			return fmt.Errorf("close %s: %w", w.paths[i], err)
		}
	}
	if err := w.l.fsys.SyncDir(w.l.dir); err != nil {
		return fmt.Errorf("sync dir: %w", err)
	}
	return nil
}

// Abort closes and removes the output; a removal that fails leaves an
// unnamed file the sweep after the pass removes. Idempotent; a no-op once
// a manifest may name the output (swapped in, or its swap failed midway).
func (w *CleanedWriter) Abort() {
	if w.aborted || w.named {
		return
	}
	w.aborted = true
	for _, f := range w.files {
		_ = f.Close()
	}
	w.files = nil
	w.removeFiles()
}

// abandon closes the output's files and leaves them for a sweep.
func (w *CleanedWriter) abandon() {
	w.named = true // nothing removes them here any more
	for _, f := range w.files {
		_ = f.Close()
	}
	w.files = nil
}

func (w *CleanedWriter) removeFiles() {
	for _, p := range w.paths {
		if err := w.l.fsys.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			w.l.log.V(1).Info("removing an abandoned cleaned segment file failed; the next sweep removes it", "file", p, "err", err.Error())
		}
	}
}

// SwapCleaned makes out (finished) replace the segments of set in the log,
// as one manifest replace, and sets the cleaner offset to cleanerOffset
// (< 0: unchanged). Protocol of dropPrefix, under retMu:
//
//   - the inputs must still be consecutive sealed segments of the log
//     (retention may have dropped some): else ErrCleanStale, out removed;
//   - fence check (fenced: the log fails with ErrFenced and removes
//     nothing, out included: the new owner's sweep does),
//     then the manifest with the inputs' entries replaced by out's: ENOSPC
//     or a descriptor shortage before its rename leaves the old manifest
//     and removes out; any other failure leaves it unknown which manifest
//     is durable and fails the log (out is kept: it may be named);
//   - fence check again: only a writer still holding it removes the
//     inputs, a fenced one removes nothing and fails;
//   - out takes the inputs' place in memory, with the first input's
//     creation order (so it reads as durable); the inputs are retired and
//     freed by their last unpin (the set's Release at the latest).
func (l *Log) SwapCleaned(set *SegmentSet, out *CleanedWriter, cleanerOffset int64) error {
	const why = "swap cleaned segment"
	l.retMu.Lock()
	defer l.retMu.Unlock()
	if set.l != l || out.l != l {
		return fmt.Errorf("%s: inputs or output of another log", why)
	}
	if !out.done || out.aborted {
		return fmt.Errorf("%s: %s is not finished", why, out.seg.name)
	}
	if err := l.usable(); err != nil {
		out.Abort()
		return err
	}
	inputs := set.segs
	if len(inputs) == 0 || inputs[0].base != out.seg.base || out.seg.next > inputs[len(inputs)-1].next {
		out.Abort()
		return fmt.Errorf("%s: %s does not fit its inputs", why, out.seg.name)
	}
	l.mu.Lock()
	at := l.inputsAtLocked(inputs)
	l.mu.Unlock()
	if at < 0 {
		out.Abort()
		return fmt.Errorf("%s %s: %w", why, out.seg.name, ErrCleanStale)
	}

	first, last := inputs[0], inputs[len(inputs)-1]
	ms := manifestSegment{Base: first.base, Epoch: out.seg.epoch, Gen: out.seg.gen, Sealed: true,
		EndOffset: last.next, Size: out.seg.size}
	if out.seg.maxTS.ts < 0 {
		// No batch left: as old as its inputs, for retention.ms.
		out.seg.maxTS = noTS
		for _, s := range inputs {
			if s.maxTS.ts > out.seg.maxTS.ts {
				out.seg.maxTS = s.maxTS
			}
		}
	}
	ms.MaxTimestamp, ms.MaxTimestampOffset = out.seg.maxTS.ts, out.seg.maxTS.last

	l.manMu.Lock()
	if err := l.checkFence(); err != nil {
		l.manMu.Unlock()
		// Named by no manifest, but a writer that may be fenced deletes
		// nothing: the sweep of whoever holds the fence removes it.
		out.abandon()
		return l.fenceFailure(why, err)
	}
	m := l.man.clone()
	j := slices.IndexFunc(m.Segments, func(s manifestSegment) bool { return s.id() == first.id() })
	for i, s := range inputs {
		if j < 0 || j+i >= len(m.Segments)-1 || m.Segments[j+i].id() != s.id() || !m.Segments[j+i].Sealed {
			l.manMu.Unlock()
			out.Abort()
			return fmt.Errorf("%s: %w: segment %s is not a sealed segment of the manifest in order", why, ErrCorruptLog, s.id().stem())
		}
	}
	m.Segments = slices.Concat(m.Segments[:j], []manifestSegment{ms}, m.Segments[j+len(inputs):])
	if cleanerOffset >= 0 {
		m.CleanerOffset = cleanerOffset
	}
	err := writeManifest(l.fsys, l.dir, &m)
	if err == nil {
		l.man = m
	}
	l.manMu.Unlock()
	if err != nil {
		if manifestUnchangedNoSpace(err) {
			out.Abort()
			return noSpace(why+": write manifest", err)
		}
		if err := manifestUnchangedTryLater(err); errors.Is(err, errTryLater) {
			out.Abort()
			return fmt.Errorf("%s: write manifest: %w", why, err)
		}
		// Either manifest may be the durable one: keep out, fail.
		out.named = true
		return l.fail(fmt.Errorf("%s: %w", why, err))
	}
	out.named = true
	// A new owner that claimed the fence before the manifest was durable
	// may have read the old one, which names the inputs.
	fenceErr := l.checkFence()
	remove := fenceErr == nil

	s := out.seg
	s.seq, s.sealed, s.next = first.seq, true, last.next
	s.ro.Store(true)
	l.newSegmentHandle(s)
	l.mu.Lock()
	if l.closed {
		// Close owns l.segs' handles now; the manifest names out, which
		// the next Open reads, and the inputs are unlisted there.
		l.mu.Unlock()
		_ = l.hc.Forget(s.h)
		return l.fenceFailure(why, fenceErr)
	}
	if l.inputsAtLocked(inputs) != at {
		l.mu.Unlock()
		panic("partlog: segments dropped outside retMu")
	}
	l.segs = slices.Concat(l.segs[:at], []*segment{s}, l.segs[at+len(inputs):])
	for _, in := range inputs {
		in.gone = true
	}
	l.refreshMaxTSLocked()
	l.mu.Unlock()

	deferred := l.retireAll(inputs, remove)
	l.log.V(1).Info("swapped in a cleaned segment", "segment", s.id().stem(), "inputs", len(inputs),
		"endOffset", s.next, "size", s.size, "cleanerOffset", cleanerOffset, "filesRemoved", remove, "deferred", deferred)
	return l.fenceFailure(why, fenceErr)
}

// inputsAtLocked returns where inputs stand in l.segs (l.mu held), or -1
// unless they are there, consecutive, sealed and before the active one.
func (l *Log) inputsAtLocked(inputs []*segment) int {
	at := slices.Index(l.segs, inputs[0])
	if at < 0 || at+len(inputs) >= len(l.segs) {
		return -1
	}
	for i, s := range inputs {
		if l.segs[at+i] != s || !s.sealed || s.gone {
			return -1
		}
	}
	return at
}

// refreshMaxTSLocked recomputes the log's max timestamp mark from its
// segments after a swap (l.mu held), which may have removed the batch
// holding it, and publishes it.
func (l *Log) refreshMaxTSLocked() {
	l.maxTS = maxTSOf(l.segs)
	l.maxTSGen.Add(1)
	l.publishMaxTSLocked()
}

// publishMaxTSLocked makes l.maxTS the durable max timestamp mark when
// everything appended is durable (l.mu held); otherwise the next sync
// round publishes it with the rest.
func (l *Log) publishMaxTSLocked() {
	d := l.durable.Load()
	if d.hw == l.next && d.maxTS != l.maxTS {
		nd := *d
		nd.maxTS = l.maxTS
		l.durable.CompareAndSwap(d, &nd)
	}
}

// maxTSOf is the largest max timestamp mark of segs (the earliest on
// ties). An empty segment holds no batch: a cleaned one keeps its inputs'
// max timestamp for retention only.
func maxTSOf(segs []*segment) tsMark {
	m := noTS
	for _, s := range segs {
		if s.size > 0 && s.maxTS.ts > m.ts {
			m = s.maxTS
		}
	}
	return m
}

// RollIfQuiet rolls the active segment when it is not empty, wholly
// durable and its first append is older than age, so that the tail of a
// partition nobody writes to becomes cleanable (rolls otherwise happen
// only on append). It reports whether it rolled. A roll undone (a full
// volume, a fence unreadable for now) leaves the log healthy; any other
// roll failure fails it.
func (l *Log) RollIfQuiet(age time.Duration) (bool, error) {
	l.retMu.Lock()
	defer l.retMu.Unlock()
	if err := l.usable(); err != nil {
		return false, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false, ErrClosed
	}
	a := l.segs[len(l.segs)-1]
	d := l.durable.Load()
	if a.size == 0 || l.next != d.hw || a.firstAppend.IsZero() || l.cfg.Now().Sub(a.firstAppend) < age {
		return false, nil
	}
	if err := l.rollLocked(); err != nil {
		if rollUndone(err) {
			return false, fmt.Errorf("roll a quiet segment: %w", err)
		}
		return false, l.fail(fmt.Errorf("roll a quiet segment: %w", err))
	}
	// Nothing was appended, so the rolled segment is durable up to its
	// sealed end and the new one is empty: publish that now, or the
	// sealed one stays the durable segment, uncleanable, until an append.
	nd := *d
	nd.seg, nd.pos = l.segs[len(l.segs)-1], 0
	l.durable.CompareAndSwap(d, &nd)
	return true, nil
}

// maxCleanedGen is the highest generation of epoch's cleaned segments that
// m or names (Open's listing) show: the next output starts above it.
func maxCleanedGen(m *manifest, names []string, epoch int32) int64 {
	var g int64
	for _, s := range m.Segments {
		if s.Epoch == epoch {
			g = max(g, s.Gen)
		}
	}
	for _, n := range names {
		if id, ok := parseAnySegmentFile(n); ok && id.epoch == epoch {
			g = max(g, id.gen)
		}
	}
	return g
}

package partlog

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"path"
	"slices"
	"sort"
	"time"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/handles"
)

// recoverChunk is the read size when verifying the CRC of tail batches.
const recoverChunk = 64 << 10

// Open opens (or creates) the log of the partition in dir, which must exist.
// It takes over the partition for cfg.Epoch:
//
//  1. read the fence; a higher epoch there means ErrFenced. Write cfg.Epoch
//     to it, durably, before reading anything else, so a previous writer can
//     no longer acknowledge writes (its next sync round sees the new fence);
//  2. list the directory once (the temp sweep, recovery and the
//     unlisted-file sweep share the listing, and OpenListing hands it on);
//     read the manifest with the highest writer epoch (or adopt segment
//     files found without one) and trust its sealed segments without
//     reading them;
//  3. recover the last segment from the manifest checkpoint forward only:
//     validate each batch (length, magic, CRC-32C, offsets), truncate at the
//     first torn or invalid one, rebuild the index entries after the
//     checkpoint, and fsync what that found or changed (nothing when the
//     file ends at the checkpoint). Segment files of epochs newer than the
//     manifest's writer (a writer that died before its manifest was
//     durable, or whose manifest is unreadable) are adopted after it: the
//     manifest's chain is cut where the first of them starts, and only they
//     are scanned;
//  4. if the last segment was created under another epoch, seal it at the
//     recovered end and start a segment named with cfg.Epoch (its files
//     created, then one directory fsync), recording (cfg.Epoch, end offset)
//     in the epoch history;
//  5. write this epoch's manifest (manifest-e<epoch>.json), and only once it
//     is durable remove the older ones;
//  6. remove the segment files that manifest does not name and no owner
//     can need (sweepUnlisted), if the fence is still ours.
//
// A brand-new partition (no fence, and nothing but temp files in the
// listing) takes a lean path: there is no previous writer to stop, so the
// fence's rename is made durable by the directory fsync that follows the
// creation of the first segment's files, still before the manifest. Any
// older state in the listing makes the fence durable before it is read.
//
// Everything recovered is durable, so the high watermark starts at the log
// end offset. Open never creates dir: directories belong to the reconciler.
// Options are for tests only (negative.go).
func Open(fsys volume.FS, dir string, cfg Config, opts ...Option) (*Log, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	l := &Log{fsys: fsys, dir: dir, cfg: cfg, opts: newOptions(opts), log: cfg.Logger.WithValues("dir", dir, "epoch", cfg.Epoch)}
	l.hc = cfg.Handles
	if l.hc == nil {
		l.hc = handles.Default()
	}
	l.slots = cfg.WriteSlots
	if l.slots == nil {
		l.slots = DefaultWriteSlots()
	}
	prev, err := l.claimFence()
	if err != nil {
		return nil, fmt.Errorf("open partition log %s: %w", dir, err)
	}
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("open partition log %s: list: %w", dir, err)
	}
	entries = l.sweepTemps(entries)
	l.listing = make([]string, len(entries))
	for i, e := range entries {
		l.listing[i] = e.Name()
	}
	if err := l.recover(prev, entries); err != nil {
		l.closeHandles()
		return nil, fmt.Errorf("open partition log %s: %w", dir, err)
	}
	pool := cfg.SyncPool
	if pool == nil {
		pool = DefaultSyncPool()
	}
	l.sync.start(l, pool, cfg.Now())
	return l, nil
}

// OpenListing returns the names Open found in the partition directory
// (after its fence write and temp sweep, before recovery wrote anything),
// sorted, for a caller that would otherwise list the directory again right
// after Open (the producer-state snapshots). It hands them over once: later
// calls return nil. Like any listing it may be stale on a shared volume.
func (l *Log) OpenListing() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	names := l.listing
	l.listing = nil
	return names
}

// claimFence is the fence claim of Open: ClaimFence, except that a fence
// found absent is written without its directory fsync, which recover
// makes before it reads anything older or writes the manifest. So does a
// fence the caller claimed that way (Config.FenceNotDurable).
func (l *Log) claimFence() (int32, error) {
	prev, synced, err := claimFence(l.fsys, l.dir, l.cfg.Epoch, true)
	if err == nil && prev < l.cfg.Epoch {
		l.log.Info("claimed partition", "from", prev, "to", l.cfg.Epoch)
	}
	l.fenceUnsynced = l.cfg.FenceNotDurable || !synced
	return prev, err
}

// ClaimFence is the first step of a takeover at epoch: it refuses a fence
// holding a higher epoch (ErrFenced) and durably writes epoch over a lower
// or absent one, so that the previous writer can no longer acknowledge
// anything (its next sync round reads the new fence). A fence already at
// epoch is left as it is. It returns the epoch the fence held, -1 if none.
// Open claims the fence itself; a caller that claims it first, as its own
// recorded step, passes the returned epoch in Config.PreviousEpochs.
func ClaimFence(fsys volume.FS, dir string, epoch int32) (int32, error) {
	prev, _, err := claimFence(fsys, dir, epoch, false)
	return prev, err
}

// ClaimFenceDeferred is ClaimFence for a claimant that opens the log next:
// over an absent fence (a new partition: nobody to stop yet) it writes the
// fence without the directory fsync and reports durable false; the caller
// then passes Config.FenceNotDurable to Open, which makes the fence durable
// before it reads any older state and before its manifest, sharing the
// directory fsync that follows the creation of the first segment. Over an
// existing fence it is ClaimFence (durable: a takeover's fence must be
// durable before the old tail is read).
func ClaimFenceDeferred(fsys volume.FS, dir string, epoch int32) (prev int32, durable bool, err error) {
	return claimFence(fsys, dir, epoch, true)
}

// claimFence is ClaimFence; with deferNew, a fence found absent is renamed
// into place without the directory fsync (synced false).
func claimFence(fsys volume.FS, dir string, epoch int32, deferNew bool) (prev int32, synced bool, err error) {
	prev, err = readFence(fsys, dir)
	if err != nil {
		return 0, false, err
	}
	switch {
	case prev > epoch:
		return 0, false, fmt.Errorf("%w: fence holds epoch %d, this writer has %d", ErrFenced, prev, epoch)
	case prev < epoch:
		if err := writeFence(fsys, dir, epoch, !(deferNew && prev < 0)); err != nil {
			return 0, false, err
		}
		return prev, !(deferNew && prev < 0), nil
	}
	return prev, true, nil
}

// sweepTemps removes temp files left by WriteFileAtomic after a crash, as
// entries (Open's listing) shows them, and returns entries without them. A
// zombie's in-flight temp removed here only makes its rename fail.
func (l *Log) sweepTemps(entries []fs.DirEntry) []fs.DirEntry {
	kept := entries[:0]
	for _, e := range entries {
		if !volume.IsTempName(e.Name()) {
			kept = append(kept, e)
			continue
		}
		if err := l.fsys.Remove(path.Join(l.dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			l.log.V(1).Info("removing temp file failed", "file", e.Name(), "err", err.Error())
		}
	}
	return kept
}

// syncFence makes a fence written without its directory fsync durable (a
// no-op when it is): before anything older than this writer is read, and
// before its manifest can be durable.
func (l *Log) syncFence() error {
	if !l.fenceUnsynced {
		return nil
	}
	if err := l.fsys.SyncDir(l.dir); err != nil {
		return fmt.Errorf("sync dir %s after the fence: %w", l.dir, err)
	}
	l.fenceUnsynced = false
	return nil
}

// onlyFence reports whether entries (Open's listing, temps swept) hold
// nothing but the fence: a brand-new partition.
func onlyFence(entries []fs.DirEntry) bool {
	for _, e := range entries {
		if e.Name() != fenceName {
			return false
		}
	}
	return true
}

// recover builds the Log's state from the volume and writes the manifest.
// prevFence is the epoch the fence held before this writer claimed it.
// entries is Open's listing of the directory, temps swept.
func (l *Log) recover(prevFence int32, entries []fs.DirEntry) error {
	fresh := onlyFence(entries)
	if !fresh {
		// Older state: the fence must be durable before it is read.
		if err := l.syncFence(); err != nil {
			return err
		}
	}
	// The previous fence holder's manifest is opened even if the listing
	// (possibly stale on a shared volume) does not show it yet.
	probe := append([]int32{prevFence, l.cfg.Epoch}, l.cfg.PreviousEpochs...)
	set, err := loadManifests(l.fsys, l.dir, entries, l.log, probe...)
	if set.maxEpoch > l.cfg.Epoch {
		return fmt.Errorf("%w: a manifest was written by epoch %d, this writer has %d", ErrFenced, set.maxEpoch, l.cfg.Epoch)
	}
	if err != nil {
		return err
	}
	m := set.m
	adopted := false
	var newer []segmentFile
	if m == nil {
		if m, err = l.adoptSegments(entries); err != nil {
			return err
		}
		adopted = true
	} else {
		if set.name == legacyManifestName {
			l.log.Info("adopting a legacy manifest", "file", legacyManifestName, "writerEpoch", m.WriterEpoch)
		}
		if newer, err = l.newerSegments(entries, m.WriterEpoch); err != nil {
			return err
		}
		if err := cutAtNewer(m, newer); err != nil {
			return err
		}
	}
	if err := l.checkHistory(m); err != nil {
		return err
	}
	l.logStart.Store(m.LogStartOffset)

	// The manifest's chain ends where the first newer segment starts (stop),
	// or at its last segment's recovered end.
	stop := int64(-1)
	if len(newer) > 0 {
		stop = newer[0].base
	}
	next := m.LogStartOffset
	var tail *segment
	for i, ms := range m.Segments {
		last := i == len(m.Segments)-1
		if ms.Sealed && !(last && stop >= 0 && ms.EndOffset != stop) {
			s, err := l.openSealed(ms, i)
			if err != nil {
				return err
			}
			l.segs = append(l.segs, s)
			next = ms.EndOffset
			continue
		}
		// The unsealed last segment: recovered from the checkpoint, up to
		// the first newer segment if there is one. (A sealed last segment
		// ending beyond that is re-sealed there, scanned from its start.)
		var cp *checkpoint
		if !adopted && !ms.Sealed && m.Checkpoint.SegmentBase == ms.Base && m.Checkpoint.SegmentEpoch == ms.Epoch &&
			(stop < 0 || m.Checkpoint.NextOffset <= stop) {
			cp = &m.Checkpoint
		}
		limit := int64(-1)
		if last {
			limit = stop
		}
		s, err := l.recoverSegment(m, i, cp, limit)
		if err != nil {
			return err
		}
		next = s.next
		if limit < 0 {
			tail = s
		}
	}
	// Segments of newer epochs, in order: each scanned from its start, each
	// but the last sealed where the next one starts.
	for j, f := range newer {
		ms := manifestSegment{Base: f.base, Epoch: f.epoch}
		m.Segments = append(m.Segments, ms)
		if n := len(m.Epochs); n == 0 || m.Epochs[n-1].Epoch != f.epoch {
			m.Epochs = addEpoch(m.Epochs, EpochEntry{Epoch: f.epoch, StartOffset: f.base})
		}
		limit := int64(-1)
		if j < len(newer)-1 {
			limit = newer[j+1].base
		}
		s, err := l.recoverSegment(m, len(m.Segments)-1, nil, limit)
		if err != nil {
			return err
		}
		next = s.next
		if limit < 0 {
			tail = s
		}
	}

	// Take over: never append to a segment another epoch created.
	var dropped *segment
	if tail == nil || tail.epoch != l.cfg.Epoch {
		if tail != nil {
			if tail.size == 0 {
				// Nothing in it: replace it rather than keep an empty sealed
				// segment at the same base.
				dropped = tail
				l.forgetSegment(tail, nil)
				l.segs = l.segs[:len(l.segs)-1]
				m.Segments = m.Segments[:len(m.Segments)-1]
			} else {
				l.sealTail(m, tail)
			}
		}
		seg, wh, err := l.createSegment(next)
		if err != nil {
			return err
		}
		l.fenceUnsynced = false // createSegment's directory fsync covered the fence
		seg.seq = len(l.segs)
		l.segs = append(l.segs, seg)
		l.wh = wh
		m.Segments = append(m.Segments, manifestSegment{Base: seg.base, Epoch: seg.epoch})
		tail = seg
	} else {
		// Our own epoch's segment (a reopen): append to it, opening its
		// append handle on the first append.
		l.wh = l.hc.NewHandle(l.segmentOpener(tail.name, nil), l.clean)
	}
	if n := len(m.Epochs); n == 0 || m.Epochs[n-1].Epoch != l.cfg.Epoch {
		m.Epochs = addEpoch(m.Epochs, EpochEntry{Epoch: l.cfg.Epoch, StartOffset: next})
		l.log.Info("started leader epoch", "startOffset", next)
	}
	// The manifest may name nothing the directory does not hold durably
	// (createSegment synced the new segment's files), and never a fence
	// that could be lost.
	if err := l.syncFence(); err != nil {
		return err
	}

	m.WriterEpoch = l.cfg.Epoch
	m.Checkpoint = checkpoint{
		SegmentBase: tail.base, SegmentEpoch: tail.epoch,
		Position: tail.size, NextOffset: tail.next,
		IndexEntries: int64(len(tail.offsets)), TimeIndexEntries: int64(len(tail.times)),
		MaxTimestamp: tail.maxTS.ts, MaxTimestampBase: tail.maxTS.base, MaxTimestampLast: tail.maxTS.last,
	}
	if !tail.firstAppend.IsZero() {
		m.Checkpoint.FirstAppendUnixMilli = tail.firstAppend.UnixMilli()
	}
	// A brand-new partition's manifest would say only what adoption infers
	// from its one empty segment (adoptSegments: the segment, its epoch
	// starting at 0): its first checkpoint writes it. Until then a crash
	// leaves the fence and the segment, which the next Open adopts and
	// scans, as after a crash before any manifest (docs/volume.md).
	if !(fresh && adopted && len(set.names) == 0) {
		// The recovery may have taken long: make sure nobody claimed the
		// partition meanwhile before publishing our view of it.
		if err := l.checkFence(); err != nil {
			if errors.Is(err, errFenceMissing) {
				// Claimed above and gone: the directory was replaced.
				return fmt.Errorf("%w: the fence claimed at epoch %d is gone", ErrFenced, l.cfg.Epoch)
			}
			return err
		}
		if err := writeManifest(l.fsys, l.dir, m); err != nil {
			return err
		}
	}
	l.man = m.clone()
	l.cleanGen.Store(maxCleanedGen(m, l.listing, l.cfg.Epoch))
	l.removeOldManifests(set.names)
	// Re-drive every removal a crash or a fenced writer left undone, and
	// remove the empty tail replaced above (its manifest entry is gone, so
	// it is garbage like any other; named here in case the listing is
	// stale).
	names := l.listing
	if dropped != nil {
		logPath, indexPath, timePath := dropped.id().paths("")
		names = append(slices.Clip(names), logPath, indexPath, timePath)
	}
	l.sweepUnlisted(names)

	l.next = next
	l.maxTS = maxTSOf(l.segs)
	l.durable.Store(&durableState{hw: next, seg: tail, pos: tail.size, maxTS: l.maxTS})
	l.log.V(1).Info("opened partition log", "logStartOffset", m.LogStartOffset, "logEndOffset", next, "segments", len(l.segs))
	return nil
}

// checkHistory refuses state written by a higher epoch.
// recoverSegment recovers m.Segments[i] from cp (nil: from its start) up to
// limit (-1: to its end, leaving it the active tail) and appends it to the
// log's segments; a segment with a limit is sealed there.
func (l *Log) recoverSegment(m *manifest, i int, cp *checkpoint, limit int64) (*segment, error) {
	s, err := l.recoverTail(m.Segments[i], cp, len(l.segs), limit)
	if err != nil {
		l.forgetSegment(s, nil)
		return nil, err
	}
	l.segs = append(l.segs, s)
	if limit >= 0 {
		l.sealRecovered(&m.Segments[i], s)
	}
	return s, nil
}

func (l *Log) checkHistory(m *manifest) error {
	if m.WriterEpoch > l.cfg.Epoch {
		return fmt.Errorf("%w: manifest written by epoch %d, this writer has %d", ErrFenced, m.WriterEpoch, l.cfg.Epoch)
	}
	for _, e := range m.Epochs {
		if e.Epoch > l.cfg.Epoch {
			return fmt.Errorf("%w: epoch history has epoch %d, this writer has %d", ErrFenced, e.Epoch, l.cfg.Epoch)
		}
	}
	for _, s := range m.Segments {
		if s.Epoch > l.cfg.Epoch {
			return fmt.Errorf("%w: segment %s was created by a later epoch", ErrFenced, s.id().stem())
		}
	}
	return nil
}

// addEpoch appends e to history, first dropping entries it supersedes (an
// epoch that starts where e starts never got any data), as Kafka's
// leader-epoch cache does.
func addEpoch(history []EpochEntry, e EpochEntry) []EpochEntry {
	for len(history) > 0 {
		last := history[len(history)-1]
		if last.Epoch < e.Epoch && last.StartOffset < e.StartOffset {
			break
		}
		history = history[:len(history)-1]
	}
	return append(history, e)
}

// openSealed checks that a sealed segment's file is at least as long as
// its sealed size and leaves it open in the cache, least recently used
// first. Its indexes load on first use.
func (l *Log) openSealed(ms manifestSegment, seq int) (*segment, error) {
	logPath, _, _ := ms.id().paths(l.dir)
	rf, err := l.fsys.Open(logPath)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: sealed segment %s is missing", ErrCorruptLog, logPath)
		}
		return nil, fmt.Errorf("open sealed segment: %w", err)
	}
	fi, err := rf.Stat()
	if err != nil {
		_ = rf.Close()
		return nil, fmt.Errorf("stat sealed segment %s: %w", logPath, err)
	}
	if fi.Size() < ms.Size {
		_ = rf.Close()
		return nil, fmt.Errorf("%w: sealed segment %s has %d bytes, manifest says %d", ErrCorruptLog, logPath, fi.Size(), ms.Size)
	}
	s := &segment{
		base: ms.Base, epoch: ms.Epoch, gen: ms.Gen, seq: seq, name: logPath,
		sealed: true, size: ms.Size, next: ms.EndOffset,
		maxTS:        tsMark{ts: ms.MaxTimestamp, base: -1, last: ms.MaxTimestampOffset},
		maxTSUnknown: ms.MaxTimestampUnknown,
	}
	s.ro.Store(true)
	s.h = l.hc.Adopt(rf, l.segmentOpener(logPath, s), nil)
	return s, nil
}

// segmentOpener opens the segment file name for a cached handle: read-only
// once s is sealed (s nil: always read-write, for an append handle).
func (l *Log) segmentOpener(name string, s *segment) func() (volume.File, error) {
	return func() (volume.File, error) {
		if s != nil && s.ro.Load() {
			return l.fsys.Open(name)
		}
		return l.fsys.OpenReadWrite(name)
	}
}

// clean reports whether everything appended has been fsynced, so that the
// active segment's handles may be closed (handles.Handle's evictable): a
// file closed with writes not yet fsynced could lose the report of a
// write error.
func (l *Log) clean() bool { return l.written.Load() == l.synced.Load() }

// newSegmentHandle gives s its cached read (and, while active, fsync)
// handle, closed: it opens on first use. Sealed segments may always be
// closed; the active one only while the log is clean.
func (l *Log) newSegmentHandle(s *segment) {
	s.h = l.hc.NewHandle(l.segmentOpener(s.name, s), func() bool { return s.ro.Load() || l.clean() })
}

// sealTail seals the recovered last segment of a previous epoch at its
// recovered end. Bytes a fenced writer appends to it later are beyond the
// sealed size and never read.
func (l *Log) sealTail(m *manifest, tail *segment) {
	l.sealRecovered(&m.Segments[len(m.Segments)-1], tail)
	l.log.Info("sealed previous epoch's segment", "segment", tail.id().stem(), "endOffset", tail.next, "size", tail.size)
}

// sealRecovered seals s, just recovered by recoverTail, at its recovered
// end: it closes the handles only an active segment keeps and records the
// sealed end in ms.
func (l *Log) sealRecovered(ms *manifestSegment, s *segment) {
	s.sealed = true
	s.ro.Store(true)
	if s.files != nil {
		s.files.seal() // flushed and synced by recoverTail
		s.files = nil
	}
	ms.Sealed = true
	ms.EndOffset = s.next
	ms.Size = s.size
	ms.MaxTimestamp, ms.MaxTimestampOffset = s.maxTS.ts, s.maxTS.last
}

// removeOldManifests removes the manifests found at Open other than this
// epoch's, which is durable by now (so the removals never leave the
// partition without a manifest). A failure only leaves a superseded file
// that recovery does not choose; the next Open removes it again. A fenced
// writer that rewrites its own manifest after this only recreates such a
// file.
func (l *Log) removeOldManifests(names []string) {
	own := manifestName(l.cfg.Epoch)
	for _, name := range names {
		if name == own {
			continue
		}
		if err := l.fsys.Remove(path.Join(l.dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			l.log.V(1).Info("removing a superseded manifest failed", "file", name, "err", err.Error())
			continue
		}
		l.log.V(1).Info("removed superseded manifest", "file", name)
	}
}

// removeSegmentFiles removes the files of an empty segment dropped from the
// manifest (its handles are closed). The manifest no longer names it, so a
// failure leaves only an ignored file (adoption prefers the higher epoch at
// the same base).
func (l *Log) removeSegmentFiles(s *segment) {
	logPath, indexPath, timePath := s.id().paths(l.dir)
	for _, p := range []string{logPath, indexPath, timePath} {
		if err := l.fsys.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			l.log.V(1).Info("removing dropped empty segment file failed", "file", p, "err", err.Error())
		}
	}
}

// recoverTail opens the last segment read-write and recovers it: state from
// the checkpoint (if cp is non-nil), then every batch after it validated,
// the file truncated at the first torn or invalid batch, index entries
// rebuilt, and the segment (if anything followed the checkpoint) and the
// indexes (if entries were rebuilt) fsynced.
//
// With limit >= 0 the segment is one that a newer epoch's segment starting
// at offset limit follows: it is recovered up to exactly limit (an error
// wrapping ErrCorruptLog if its valid batches do not reach limit exactly)
// and never truncated, since the bytes after limit are a fenced writer's
// late appends, never read. The caller seals it.
func (l *Log) recoverTail(ms manifestSegment, cp *checkpoint, seq int, limit int64) (*segment, error) {
	if ms.Gen != 0 {
		// Cleaned segments are sealed and their batches sparse: the dense
		// tail recovery below would cut them. A chain that needs it is
		// not one kaas writes.
		return nil, fmt.Errorf("%w: cleaned segment %s would have to be recovered as a tail", ErrCorruptLog, ms.id().stem())
	}
	logPath, indexPath, timePath := ms.id().paths(l.dir)
	s := &segment{base: ms.Base, epoch: ms.Epoch, seq: seq, name: logPath, next: ms.Base, maxTS: noTS, indexLoaded: true}
	s.files = &indexFiles{fsys: l.fsys, offsetPath: indexPath, timePath: timePath}
	l.newSegmentHandle(s)
	wf, err := l.hc.Acquire(s.h)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return s, fmt.Errorf("%w: last segment %s is missing", ErrCorruptLog, logPath)
		}
		return s, fmt.Errorf("open last segment: %w", err)
	}
	defer l.hc.Release(s.h)
	fi, err := wf.Stat()
	if err != nil {
		return s, fmt.Errorf("stat %s: %w", logPath, err)
	}
	fileSize := fi.Size()

	var durableEnd int64
	if cp != nil {
		if cp.Position > fileSize {
			return s, fmt.Errorf("%w: checkpoint at position %d but %s has only %d bytes", ErrCorruptLog, cp.Position, logPath, fileSize)
		}
		durableEnd = cp.Position
		if err := l.loadCheckpoint(s, cp, indexPath, timePath); err != nil {
			l.log.Info("index files do not match the checkpoint; rescanning the last segment from its start", "segment", logPath, "reason", err.Error())
			s.size, s.next, s.maxTS, s.offsets, s.times, s.lastIdxPos, s.firstAppend = 0, s.base, noTS, nil, nil, 0, time.Time{}
		}
	}
	kept := s.files.offsetsDone
	keptTimes := s.files.timesDone
	if s.size == 0 {
		kept, keptTimes = 0, 0
	}

	reason, err := l.scanTail(s, wf, fileSize, limit)
	if err != nil {
		return s, err
	}
	if s.size < durableEnd {
		return s, fmt.Errorf("%w: %s: checkpointed data up to %d, but only %d bytes are valid (%s)", ErrCorruptLog, logPath, durableEnd, s.size, reason)
	}
	if limit >= 0 && s.next != limit {
		return s, fmt.Errorf("%w: %s: valid batches end at offset %d, but the next segment (a newer epoch's) starts at %d (%s)", ErrCorruptLog, logPath, s.next, limit, reason)
	}
	if limit < 0 && s.size < fileSize {
		l.log.Info("truncating torn tail", "segment", logPath, "validEnd", s.size, "fileSize", fileSize, "reason", reason)
		if err := wf.Truncate(s.size); err != nil {
			return s, fmt.Errorf("truncate %s to %d: %w", logPath, s.size, err)
		}
	}
	// The tail may hold batches the previous writer never synced: make them
	// durable before the high watermark covers them, and a truncation
	// durable with them. Nothing past the checkpoint (fsynced before it was
	// written) needs no fsync.
	if s.size > durableEnd || (limit < 0 && fileSize > s.size) {
		if err := wf.Sync(); err != nil {
			return s, fmt.Errorf("sync recovered segment %s: %w", logPath, err)
		}
	}
	if s.size > 0 && s.firstAppend.IsZero() {
		s.firstAppend = l.cfg.Now() // unknown: count the age from now
	}

	// Index files: keep the checkpointed entries, drop the rest, write the
	// rebuilt ones.
	if err := s.files.truncate(kept, keptTimes); err != nil {
		return s, err
	}
	if len(s.offsets) > kept || len(s.times) > keptTimes {
		if err := s.files.flush(s.offsets, s.times); err != nil {
			return s, fmt.Errorf("rebuild indexes: %w", err)
		}
	}
	return s, nil
}

// loadCheckpoint sets s to the checkpointed state and loads the
// checkpointed index entries. It fails if the index files hold fewer valid
// entries than the checkpoint counted.
func (l *Log) loadCheckpoint(s *segment, cp *checkpoint, indexPath, timePath string) error {
	ob, err := readPrefix(l.fsys, indexPath, cp.IndexEntries*indexEntrySize)
	if err != nil {
		return err
	}
	tb, err := readPrefix(l.fsys, timePath, cp.TimeIndexEntries*timeIndexEntrySize)
	if err != nil {
		return err
	}
	offsets := decodeOffsetEntries(ob, cp.Position)
	times := decodeTimeEntries(tb, cp.NextOffset-s.base)
	if int64(len(offsets)) != cp.IndexEntries || int64(len(times)) != cp.TimeIndexEntries {
		return fmt.Errorf("checkpoint counts %d/%d entries, files hold %d/%d valid", cp.IndexEntries, cp.TimeIndexEntries, len(offsets), len(times))
	}
	s.size, s.next = cp.Position, cp.NextOffset
	s.maxTS = tsMark{ts: cp.MaxTimestamp, base: cp.MaxTimestampBase, last: cp.MaxTimestampLast}
	s.offsets, s.times = offsets, times
	if n := len(offsets); n > 0 {
		s.lastIdxPos = int64(offsets[n-1].pos)
	}
	if cp.Position > 0 && cp.FirstAppendUnixMilli != 0 {
		s.firstAppend = time.UnixMilli(cp.FirstAppendUnixMilli)
	}
	s.files.offsetsDone, s.files.timesDone = len(offsets), len(times)
	return nil
}

// scanTail validates batches from s.size to fileSize, advancing s over each
// valid one. It stops at the first torn or invalid batch and says why; only
// read errors are returned as errors. It reads nothing before s.size. With
// limit >= 0 it also stops once s.next reaches limit, and at a batch that
// would pass it.
func (l *Log) scanTail(s *segment, rf volume.File, fileSize, limit int64) (reason string, err error) {
	var hdr [BatchHeaderSize]byte
	chunk := make([]byte, recoverChunk)
	interval := int64(l.cfg.IndexIntervalBytes)
	for pos := s.size; pos < fileSize; {
		if limit >= 0 && s.next >= limit {
			return "", nil
		}
		if fileSize-pos < BatchHeaderSize {
			return fmt.Sprintf("partial header at %d", pos), nil
		}
		if err := readFullAt(rf, hdr[:], pos); err != nil {
			return "", fmt.Errorf("read %s at %d: %w", s.name, pos, err)
		}
		h, perr := ParseBatchHeader(hdr[:])
		if perr != nil {
			return fmt.Sprintf("invalid header at %d: %v", pos, perr), nil
		}
		if h.BaseOffset != s.next {
			return fmt.Sprintf("batch at %d has base offset %d, expected %d", pos, h.BaseOffset, s.next), nil
		}
		if limit >= 0 && h.NextOffset() > limit {
			return fmt.Sprintf("batch at %d ends at offset %d, past %d", pos, h.NextOffset(), limit), nil
		}
		end := pos + h.Size()
		if end > fileSize {
			return fmt.Sprintf("partial batch at %d: %d bytes, %d left", pos, h.Size(), fileSize-pos), nil
		}
		// CRC over [attributes, end), streamed so a huge length field
		// allocates nothing.
		crc := crc32Update(0, hdr[offAttributes:])
		for at := pos + BatchHeaderSize; at < end; {
			n := min(int64(len(chunk)), end-at)
			if err := readFullAt(rf, chunk[:n], at); err != nil {
				return "", fmt.Errorf("read %s at %d: %w", s.name, at, err)
			}
			crc = crc32Update(crc, chunk[:n])
			at += n
		}
		if crc != h.CRC {
			return fmt.Sprintf("crc mismatch in batch at %d", pos), nil
		}
		s.noteBatch(pos, h.BaseOffset, h.LastOffset(), h.MaxTimestamp, interval)
		s.size, s.next = end, h.NextOffset()
		pos = end
	}
	return "", nil
}

// segmentFile is a segment found in a listing of the partition directory.
type segmentFile struct {
	base  int64
	epoch int32
}

// newerSegments returns the segment files in entries (a listing of dir)
// created by epochs newer than w, the writer epoch of the manifest recovery
// uses, in offset order. The manifest cannot list them: their writer died
// before its own manifest was durable (then they hold nothing it
// acknowledged, usually nothing at all), or its manifest could not be read.
// Either way they are adopted rather than ignored, so acknowledged data is
// never dropped. Of several at one base the highest epoch wins, and a
// segment starting after one of a higher epoch is superseded by it (a
// fenced writer's). A segment of an epoch above this writer's means a later
// writer exists: ErrFenced. Cleaned segments are never adopted (the plain
// name parser refuses them): one no manifest names was never swapped in.
func (l *Log) newerSegments(entries []fs.DirEntry, w int32) ([]segmentFile, error) {
	var list []segmentFile
	for _, e := range entries {
		base, epoch, ok := parseSegmentName(e.Name())
		if !ok || epoch <= w {
			continue
		}
		if epoch > l.cfg.Epoch {
			return nil, fmt.Errorf("%w: segment %s was created by a later epoch", ErrFenced, segmentStem(base, epoch))
		}
		list = append(list, segmentFile{base, epoch})
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].base != list[j].base {
			return list[i].base < list[j].base
		}
		return list[i].epoch > list[j].epoch
	})
	var out []segmentFile
	for _, f := range list {
		if n := len(out); n > 0 && (out[n-1].base == f.base || f.epoch < out[n-1].epoch) {
			l.log.Info("ignoring segment superseded by a newer epoch's", "segment", segmentStem(f.base, f.epoch), "by", segmentStem(out[n-1].base, out[n-1].epoch))
			continue
		}
		out = append(out, f)
	}
	if len(out) > 0 {
		l.log.Info("adopting segments of epochs newer than the manifest's writer", "manifestEpoch", w, "segments", len(out), "first", segmentStem(out[0].base, out[0].epoch))
	}
	return out, nil
}

// cutAtNewer ends m's segment chain where the first newer segment starts:
// segments starting at or after it are dropped (the newer epoch's writer
// sealed the chain there; anything beyond is a fenced writer's), and the
// last one kept is recovered up to that offset by the caller. A sealed end
// before it leaves a hole, which is refused.
func cutAtNewer(m *manifest, newer []segmentFile) error {
	if len(newer) == 0 {
		return nil
	}
	b0 := newer[0].base
	k := sort.Search(len(m.Segments), func(i int) bool { return m.Segments[i].Base >= b0 })
	m.Segments = m.Segments[:k]
	if k == 0 {
		m.LogStartOffset = max(m.LogStartOffset, b0)
		return nil
	}
	if last := m.Segments[k-1]; last.Sealed && last.EndOffset < b0 {
		return fmt.Errorf("%w: segment %s is sealed at offset %d, but the next segment %s starts at %d", ErrCorruptLog,
			segmentStem(last.Base, last.Epoch), last.EndOffset, segmentStem(b0, newer[0].epoch), b0)
	}
	return nil
}

// adoptSegments builds a manifest from the segment files in entries (a
// listing of dir) when there is no manifest (first open of a directory
// written without one, or a lost manifest). Sealed sizes come from the
// files; only the last segment is scanned, from its start. At one base
// offset the highest epoch wins. A cleaned segment file is refused
// (ErrCorruptLog).
func (l *Log) adoptSegments(entries []fs.DirEntry) (*manifest, error) {
	type found = segmentFile
	byBase := map[int64]found{}
	for _, e := range entries {
		if id, ok := parseAnySegmentFile(e.Name()); ok && id.gen != 0 {
			// Only a manifest tells a cleaned segment that replaced its
			// inputs from one abandoned half-way: guessing could bring
			// back what cleaning removed, or lose what it kept.
			return nil, fmt.Errorf("%w: no manifest, but a cleaned segment file %s", ErrCorruptLog, e.Name())
		}
		base, epoch, ok := parseSegmentName(e.Name())
		if !ok {
			continue
		}
		if f, dup := byBase[base]; dup {
			l.log.Info("ignoring segment superseded at the same base offset", "segment", segmentStem(base, min(epoch, f.epoch)))
			if f.epoch > epoch {
				continue
			}
		}
		byBase[base] = found{base, epoch}
	}
	list := make([]found, 0, len(byBase))
	for _, f := range byBase {
		list = append(list, f)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].base < list[j].base })

	m := &manifest{Version: manifestVersion, WriterEpoch: -1}
	if len(list) == 0 {
		return m, nil
	}
	if len(list) == 1 && list[0].base == 0 {
		// A partition that never checkpointed (a new one writes its
		// manifest with its first checkpoint): the usual case, not news.
		l.log.V(1).Info("no manifest: adopting the first segment", "epoch", list[0].epoch)
	} else {
		l.log.Info("no manifest: adopting segment files", "segments", len(list))
	}
	m.LogStartOffset = list[0].base
	for i, f := range list {
		ms := manifestSegment{Base: f.base, Epoch: f.epoch}
		if i < len(list)-1 {
			ms.Sealed = true
			ms.EndOffset = list[i+1].base
			logPath, _, timePath := segID{base: f.base, epoch: f.epoch}.paths(l.dir)
			size, err := fileSize(l.fsys, logPath)
			if err != nil {
				return nil, err
			}
			ms.Size = size
			tb, err := readPrefix(l.fsys, timePath, -1)
			if err != nil {
				return nil, err
			}
			if times := decodeTimeEntries(tb, ms.EndOffset-f.base); len(times) > 0 {
				last := times[len(times)-1]
				ms.MaxTimestamp, ms.MaxTimestampOffset = last.ts, f.base+int64(last.rel)
			} else {
				ms.MaxTimestamp, ms.MaxTimestampOffset, ms.MaxTimestampUnknown = -1, -1, true
			}
		}
		m.Segments = append(m.Segments, ms)
		if n := len(m.Epochs); n == 0 || m.Epochs[n-1].Epoch != f.epoch {
			m.Epochs = addEpoch(m.Epochs, EpochEntry{Epoch: f.epoch, StartOffset: f.base})
		}
	}
	return m, nil
}

// fileSize opens name and returns its size (open, not stat by name: on a
// shared filesystem only open is fresh).
func fileSize(fsys volume.FS, name string) (int64, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return 0, fmt.Errorf("open %s: %w", name, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("stat %s: %w", name, err)
	}
	return fi.Size(), nil
}

// errCreateUnavailable marks a segment creation that failed for want of
// file descriptors: nothing was created, and it may be tried again.
var errCreateUnavailable = errors.New("segment files not created")

// createSegment creates the files of a new, empty segment of this writer's
// epoch at base (truncating any unlisted leftover of the same name) and
// fsyncs the directory. It returns the segment (its read/sync handle
// closed: it opens on first use) and its append handle (open).
//
// If a step fails, the files it created are removed again (they are
// unlisted, of the caller's own epoch, so nobody else reads them), so a full
// volume leaves no half-created segment behind; the directory is not synced
// after the removal, and a crash that resurrects the files leaves an
// unlisted empty segment, which recovery ignores.
func (l *Log) createSegment(base int64) (*segment, *handles.Handle, error) {
	logPath, indexPath, timePath := segID{base: base, epoch: l.cfg.Epoch}.paths(l.dir)
	s := &segment{base: base, epoch: l.cfg.Epoch, name: logPath, next: base, maxTS: noTS, indexLoaded: true,
		files: &indexFiles{fsys: l.fsys, offsetPath: indexPath, timePath: timePath}}
	var created []string
	fail := func(step string, err error) (*segment, *handles.Handle, error) {
		for _, name := range created {
			_ = l.fsys.Remove(name)
		}
		if transientOpenError(err) {
			err = fmt.Errorf("%w: %w", errCreateUnavailable, err)
		}
		return nil, nil, fmt.Errorf("create segment %s: %s: %w", logPath, step, err)
	}
	// Only the log file: the index files are created by their first
	// flush (indexFiles.write), since most segments of a partition that
	// takes little traffic never get an index entry, and a file create is
	// the dearest step of opening a new partition.
	wf, err := l.fsys.Create(logPath)
	created = append(created, logPath) // a lost reply may have created it
	if err != nil {
		return fail("create", err)
	}
	if err := l.fsys.SyncDir(l.dir); err != nil {
		_ = wf.Close()
		return fail("sync dir", fmt.Errorf("%w: %w", errSyncFailed, err))
	}
	l.newSegmentHandle(s)
	return s, l.hc.Adopt(wf, l.segmentOpener(logPath, nil), l.clean), nil
}

// forgetSegment gives back the handles of s (and wh) to the cache, which
// closes them: used on paths that already failed or hold nothing unsynced.
func (l *Log) forgetSegment(s *segment, wh *handles.Handle) {
	if wh != nil {
		_ = l.hc.Forget(wh)
	}
	if s != nil && s.h != nil {
		_ = l.hc.Forget(s.h)
	}
}

// closeHandles gives back everything a failed Open opened.
func (l *Log) closeHandles() {
	for _, s := range l.segs {
		l.forgetSegment(s, nil)
	}
	if l.wh != nil {
		_ = l.hc.Forget(l.wh)
		l.wh = nil
	}
}

// crc32Update extends a CRC-32C.
func crc32Update(crc uint32, b []byte) uint32 { return crc32.Update(crc, castagnoli, b) }

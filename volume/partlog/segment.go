package partlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/handles"
)

// offsetEntry is one sparse offset index entry: the batch starting at
// segment base + rel begins at byte pos.
type offsetEntry struct {
	rel uint32
	pos uint32
}

// timeEntry is one sparse time index entry: ts is the segment's running max
// timestamp, first attained by the batch starting at segment base + rel.
// Every batch before that one has a max timestamp <= ts.
type timeEntry struct {
	ts  int64
	rel uint32
}

// tsMark records the batch holding a max timestamp.
type tsMark struct {
	ts   int64 // -1: none
	base int64 // base offset of the batch
	last int64 // last offset of the batch
}

var noTS = tsMark{ts: -1, base: -1, last: -1}

// segment is one segment file and its indexes.
//
// Fields marked (mu) are guarded by Log.mu while the segment is active and
// immutable once it is sealed (sealing happens under Log.mu too).
type segment struct {
	base  int64
	epoch int32
	gen   int64 // cleaned generation, 0 for a plain segment
	seq   int   // creation order within this Log: later segments have larger seq
	// h is the cached handle readers pread from (Log.acquireView). For the
	// active segment it is a second read-write handle, distinct from the
	// append handle, on which the syncer calls Sync, so that Sync and
	// WriteAt never share a File; once sealed it reopens read-only (ro).
	h    *handles.Handle
	name string // the segment file's path
	ro   atomic.Bool

	sealed bool   // (mu)
	size   int64  // (mu) bytes of whole batches
	next   int64  // (mu) offset after the last batch
	maxTS  tsMark // (mu) largest batch max timestamp
	// maxTSUnknown is set for segments adopted without a manifest whose
	// time index could not tell their max timestamp.
	maxTSUnknown bool
	firstAppend  time.Time // (mu) zero while empty or unknown
	// gone is set (mu) once s has left Log.segs: a reader that took s from
	// an older copy of the list must not pin it any more. A segment that a
	// cleaned one replaces leaves from the middle of the list, where
	// comparing creation order with the first segment's cannot tell.
	gone bool

	// offsets and times are the in-memory sparse indexes (mu). For the
	// active segment they are always loaded; for a sealed segment loaded by
	// Open they are read from the index files on first use (indexLoaded).
	offsets     []offsetEntry
	times       []timeEntry
	indexLoaded bool        // (mu)
	lastIdxPos  int64       // (mu) position of the last offset entry, 0 if none
	loadMu      sync.Mutex  // serialises lazy index loads
	files       *indexFiles // non-nil while the segment is active
}

// id identifies s's files.
func (s *segment) id() segID { return segID{base: s.base, epoch: s.epoch, gen: s.gen} }

// indexFiles are the index files of the active segment. Entries reach them
// in checkpoint rounds, at roll and at Close, each flush opening the files,
// writing, fsyncing and closing them: an idle partition holds none open.
// Recovery trusts only the count recorded in the manifest checkpoint.
type indexFiles struct {
	fsys        volume.FS
	mu          sync.Mutex // serialises writers: syncer, roll, Close
	offsetPath  string
	timePath    string
	done        bool // sealed: later flushes are no-ops
	offsetsDone int  // entries written to the offset index
	timesDone   int  // entries written to the time index
	// dirUnsynced: a flush created an index file whose directory entry
	// is not synced yet.
	dirUnsynced bool
}

// errTryLater marks a step that could not open a file for a transient
// reason (out of file descriptors, see transientOpenError) before it
// changed anything: an index flush that wrote nothing to that file, a
// manifest write that failed before its rename. It may simply be tried
// again later.
var errTryLater = errors.New("file unavailable; nothing changed")

// transientOpenError reports whether an open failed for a reason that says
// nothing about the file: out of file descriptors, interrupted, or a stale
// NFS handle on the way.
func transientOpenError(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.EINTR) || errors.Is(err, syscall.ESTALE)
}

// noteBatch updates the segment's max timestamp and sparse indexes for a
// batch [base, last] written at pos. It depends only on the segment's state
// and the batch, so recovery rebuilds exactly the entries the writer made.
func (s *segment) noteBatch(pos, base, last int64, maxTS int64, interval int64) {
	if maxTS > s.maxTS.ts {
		s.maxTS = tsMark{ts: maxTS, base: base, last: last}
	}
	if pos-s.lastIdxPos < interval {
		return
	}
	s.offsets = append(s.offsets, offsetEntry{rel: uint32(base - s.base), pos: uint32(pos)})
	s.lastIdxPos = pos
	s.addTimeEntry()
}

// addTimeEntry appends a time entry for the running max if it grew since the
// last time entry.
func (s *segment) addTimeEntry() {
	if s.maxTS.ts < 0 {
		return
	}
	if n := len(s.times); n > 0 && s.times[n-1].ts >= s.maxTS.ts {
		return
	}
	s.times = append(s.times, timeEntry{ts: s.maxTS.ts, rel: uint32(s.maxTS.base - s.base)})
}

// lookupPosition returns a batch boundary at or before the batch holding
// offset, from the sparse offset index.
func lookupPosition(entries []offsetEntry, base, offset int64) int64 {
	rel := offset - base
	i := sort.Search(len(entries), func(i int) bool { return int64(entries[i].rel) > rel })
	if i == 0 {
		return 0
	}
	return int64(entries[i-1].pos)
}

// lookupTime returns an offset from which to scan for the first batch with a
// max timestamp >= ts: the batch of the largest entry below ts (every batch
// before it is below ts too), or the segment base.
func lookupTime(entries []timeEntry, base, ts int64) int64 {
	i := sort.Search(len(entries), func(i int) bool { return entries[i].ts >= ts })
	if i == 0 {
		return base
	}
	return base + int64(entries[i-1].rel)
}

// encodeOffsetEntries appends the on-disk form of entries to dst.
func encodeOffsetEntries(dst []byte, entries []offsetEntry) []byte {
	for _, e := range entries {
		dst = binary.BigEndian.AppendUint32(dst, e.rel)
		dst = binary.BigEndian.AppendUint32(dst, e.pos)
	}
	return dst
}

// encodeTimeEntries appends the on-disk form of entries to dst.
func encodeTimeEntries(dst []byte, entries []timeEntry) []byte {
	for _, e := range entries {
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.ts))
		dst = binary.BigEndian.AppendUint32(dst, e.rel)
	}
	return dst
}

// decodeOffsetEntries decodes whole entries of b, keeping the longest prefix
// that is strictly increasing and points before size.
func decodeOffsetEntries(b []byte, size int64) []offsetEntry {
	n := len(b) / indexEntrySize
	out := make([]offsetEntry, 0, n)
	for i := 0; i < n; i++ {
		e := offsetEntry{
			rel: binary.BigEndian.Uint32(b[i*indexEntrySize:]),
			pos: binary.BigEndian.Uint32(b[i*indexEntrySize+4:]),
		}
		if int64(e.pos) >= size {
			break
		}
		if k := len(out); k > 0 && (e.rel <= out[k-1].rel || e.pos <= out[k-1].pos) {
			break
		}
		out = append(out, e)
	}
	return out
}

// decodeTimeEntries decodes whole entries of b, keeping the longest prefix
// strictly increasing in timestamp and non-decreasing in offset, with
// relative offsets below maxRel.
func decodeTimeEntries(b []byte, maxRel int64) []timeEntry {
	n := len(b) / timeIndexEntrySize
	out := make([]timeEntry, 0, n)
	for i := 0; i < n; i++ {
		e := timeEntry{
			ts:  int64(binary.BigEndian.Uint64(b[i*timeIndexEntrySize:])),
			rel: binary.BigEndian.Uint32(b[i*timeIndexEntrySize+8:]),
		}
		if int64(e.rel) >= maxRel {
			break
		}
		if k := len(out); k > 0 && (e.ts <= out[k-1].ts || e.rel < out[k-1].rel) {
			break
		}
		out = append(out, e)
	}
	return out
}

// readPrefix reads up to n bytes from the start of name. A missing file
// reads as empty.
func readPrefix(fsys volume.FS, name string, n int64) ([]byte, error) {
	f, err := fsys.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", name, err)
	}
	defer f.Close()
	if n < 0 {
		fi, err := f.Stat()
		if err != nil {
			return nil, fmt.Errorf("stat %s: %w", name, err)
		}
		n = fi.Size()
	}
	buf := make([]byte, n)
	m, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return buf[:m], nil
}

// flush writes the entries beyond those already in the files and fsyncs
// them, opening each file for it and closing it after. offsets and times
// are snapshots taken under Log.mu: their first len() elements never
// change. A file that could not be opened for a transient reason wraps
// errTryLater; a failed fsync wraps errSyncFailed.
//
// A segment's index files are created by their first flush (createSegment
// leaves them out); the directory is synced after a flush that created
// one, before flush returns, so that a checkpoint or manifest counting
// their entries never outlives the files.
func (f *indexFiles) flush(offsets []offsetEntry, times []timeEntry) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		return nil // sealed meanwhile: the roll wrote and synced everything
	}
	if len(offsets) > f.offsetsDone {
		buf := encodeOffsetEntries(nil, offsets[f.offsetsDone:])
		if err := f.write(f.offsetPath, "offset index", buf, int64(f.offsetsDone)*indexEntrySize); err != nil {
			return err
		}
		f.offsetsDone = len(offsets)
	}
	if len(times) > f.timesDone {
		buf := encodeTimeEntries(nil, times[f.timesDone:])
		if err := f.write(f.timePath, "time index", buf, int64(f.timesDone)*timeIndexEntrySize); err != nil {
			return err
		}
		f.timesDone = len(times)
	}
	if f.dirUnsynced {
		if err := f.fsys.SyncDir(path.Dir(f.offsetPath)); err != nil {
			return fmt.Errorf("sync dir after creating the index files of %s: %w: %w", f.offsetPath, errSyncFailed, err)
		}
		f.dirUnsynced = false
	}
	return nil
}

// write writes buf at off of the index file name (creating it if it is
// missing: flush syncs the directory), fsyncs and closes it.
func (f *indexFiles) write(name, what string, buf []byte, off int64) error {
	file, err := f.fsys.OpenReadWrite(name)
	if errors.Is(err, fs.ErrNotExist) {
		file, err = f.fsys.Create(name)
		f.dirUnsynced = f.dirUnsynced || err == nil
	}
	if err != nil {
		if transientOpenError(err) {
			return fmt.Errorf("open %s %s: %w: %w", what, name, errTryLater, err)
		}
		return fmt.Errorf("open %s %s: %w", what, name, err)
	}
	if _, err := file.WriteAt(buf, off); err != nil {
		_ = file.Close()
		return fmt.Errorf("write %s %s: %w", what, name, err)
	}
	if err := file.Sync(); err != nil {
		_ = file.Close()
		return fmt.Errorf("sync %s %s: %w: %w", what, name, errSyncFailed, err)
	}
	// Synced: a close error loses nothing.
	_ = file.Close()
	return nil
}

// truncate cuts the index files to the entries recovery keeps. A missing
// file that is to keep nothing stays missing (its first flush creates it);
// one that is to keep entries cannot be missing, since loadCheckpoint read
// them from it, but is created if it is.
func (f *indexFiles) truncate(offsets, times int) error {
	for _, t := range []struct {
		name string
		size int64
	}{{f.offsetPath, int64(offsets) * indexEntrySize}, {f.timePath, int64(times) * timeIndexEntrySize}} {
		file, err := f.fsys.OpenReadWrite(t.name)
		if errors.Is(err, fs.ErrNotExist) {
			if t.size == 0 {
				continue
			}
			file, err = f.fsys.Create(t.name)
			f.dirUnsynced = f.dirUnsynced || err == nil
		}
		if err != nil {
			return fmt.Errorf("open %s: %w", t.name, err)
		}
		err = file.Truncate(t.size)
		_ = file.Close()
		if err != nil {
			return fmt.Errorf("truncate %s: %w", t.name, err)
		}
	}
	f.offsetsDone, f.timesDone = offsets, times
	return nil
}

// seal makes later flushes no-ops: the segment is sealed, its entries
// written and synced.
func (f *indexFiles) seal() {
	f.mu.Lock()
	f.done = true
	f.mu.Unlock()
}

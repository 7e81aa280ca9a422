package partlog

import (
	"fmt"
	"math"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/kaas-dev/kaas/volume"
)

// Ref is a byte range of a segment file holding whole record batches, as
// ReadRef returns it: the caller sends [Pos, Pos+Len) of File (with
// sendfile(2) when File implements volume.Fder) and then calls Release.
//
// While a Ref is live, the Log keeps File open even across Close: a handle
// closed under a sender would let the kernel reuse its descriptor number for
// another file, and sendfile would then send that file's bytes. The bytes of
// the range never change (they are below the high watermark, and segments
// are append-only).
type Ref struct {
	File volume.File
	Pos  int64
	Len  int

	hold *refHold // nil for an empty Ref
}

// refHold is one counted reference on a Log's read handles.
type refHold struct {
	l        *Log
	seg      *segment // the segment whose handle the Ref uses (pinned), nil if none
	released atomic.Bool
}

// Release gives the reference back. It is idempotent (copies of a Ref share
// one reference) and a no-op on an empty Ref. After Release the range must
// not be read.
func (r Ref) Release() {
	if r.hold == nil || !r.hold.released.CompareAndSwap(false, true) {
		return
	}
	if r.hold.seg != nil {
		r.hold.l.unpin(r.hold.seg)
	}
	r.hold.l.unref()
}

// refs counts live Refs and refuses new ones once Close has begun.
//
// It also pins segments: every read of a segment's handle (a live Ref, or a
// Read, Scan or OffsetForTimestamp in progress) holds a pin on the segment,
// taken under Log.mu while the segment is still in Log.segs, and with it a
// pin on the segment's cached file handle (acquireView), so that the cache
// never closes a descriptor a reader or a sender (sendfile) uses. A segment
// that retention or DeleteRecordsBefore drops is retired: its read handle is
// closed, and then its files removed, by whoever drops the last pin (the
// dropper itself when there is none), so the disk is really freed and no
// sender ever finds its descriptor closed or reused under it. Close forgets
// every handle: the cache closes each at once, or at its last release.
type refs struct {
	mu      sync.Mutex
	n       int  // live references
	closing bool // Close has begun: no new references

	pins    map[*segment]int  // readers using each segment's read handle
	retired map[*segment]bool // dropped segments waiting for their last pin
}

// pinLocked pins s, which is in l.segs (Log.mu held).
func (l *Log) pinLocked(s *segment) {
	l.refs.mu.Lock()
	if l.refs.pins == nil {
		l.refs.pins = map[*segment]int{}
	}
	l.refs.pins[s]++
	l.refs.mu.Unlock()
}

// unpin drops a pin taken by pinLocked and the handle pin acquireView took
// with it. The last pin of a retired segment closes its read handle and
// removes its files.
func (l *Log) unpin(s *segment) {
	l.hc.Release(s.h)
	l.unpinOnly(s)
}

// unpinOnly drops a pin taken by pinLocked whose handle is not held.
func (l *Log) unpinOnly(s *segment) {
	l.refs.mu.Lock()
	n := l.refs.pins[s] - 1
	if n < 0 {
		l.refs.mu.Unlock()
		panic("partlog: segment unpinned more often than pinned")
	}
	if n > 0 {
		l.refs.pins[s] = n
		l.refs.mu.Unlock()
		return
	}
	delete(l.refs.pins, s)
	remove, retired := l.refs.retired[s]
	l.refs.mu.Unlock()
	if retired {
		// Nobody can pin it again (it left l.segs): free it, and only then
		// forget it, so that the unlisted-file sweep leaves its files alone
		// until its handle is closed.
		l.freeSegment(s, remove)
		l.refs.mu.Lock()
		delete(l.refs.retired, s)
		l.refs.mu.Unlock()
	}
}

// retire marks s, just dropped from l.segs, as retired; remove says
// whether its files are to be removed once its handle is closed. It
// reports whether no pin holds it: the caller then frees it itself;
// otherwise the last unpin does.
func (l *Log) retire(s *segment, remove bool) (free bool) {
	l.refs.mu.Lock()
	defer l.refs.mu.Unlock()
	if l.refs.pins[s] == 0 {
		return true
	}
	if l.refs.retired == nil {
		l.refs.retired = map[*segment]bool{}
	}
	l.refs.retired[s] = remove
	return false
}

// retiredStems returns the stems of retired segments still pinned: their
// files stay until the last unpin, and the unlisted-file sweep leaves them
// alone.
func (l *Log) retiredStems() map[string]bool {
	l.refs.mu.Lock()
	defer l.refs.mu.Unlock()
	out := make(map[string]bool, len(l.refs.retired))
	for s := range l.refs.retired {
		out[s.id().stem()] = true
	}
	return out
}

// acquire takes a reference, or fails once Close has begun.
func (l *Log) acquire() (*refHold, error) {
	l.refs.mu.Lock()
	defer l.refs.mu.Unlock()
	if l.refs.closing {
		return nil, ErrClosed
	}
	l.refs.n++
	return &refHold{l: l}, nil
}

func (l *Log) unref() {
	l.refs.mu.Lock()
	l.refs.n--
	n := l.refs.n
	l.refs.mu.Unlock()
	if n < 0 {
		panic("partlog: Ref released more often than acquired")
	}
}

// closeReadHandles forgets the segments' read handles: the cache closes
// each now when nothing holds it, and otherwise at its last release (a
// live Ref's, or a read's in progress). Called once, by Close.
func (l *Log) closeReadHandles(segs []*segment) []error {
	l.refs.mu.Lock()
	l.refs.closing = true
	l.refs.mu.Unlock()
	var errs []error
	for _, s := range segs {
		if err := l.hc.Forget(s.h); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// LiveRefs returns the number of Refs not yet released (for tests and
// diagnostics).
func (l *Log) LiveRefs() int {
	l.refs.mu.Lock()
	defer l.refs.mu.Unlock()
	return l.refs.n
}

// ReadRef is Read without the copy: it returns a reference to the same
// bytes Read would append (whole batches starting with the batch containing
// offset, as many as fit in maxBytes but at least one, never past the high
// watermark, within one segment), with the same errors. offset ==
// HighWatermark returns an empty Ref. The caller must Release a non-empty
// Ref once it has sent it; Close does not wait for it.
//
// Unlike Read, ReadRef does not read the batches' bodies: it reads the
// headers it needs to find the end (using the sparse offset index to skip
// most of them), so an I/O error in the body shows when the range is sent.
func (l *Log) ReadRef(offset int64, maxBytes int) (Ref, error) {
	return l.ReadRefBelow(offset, maxBytes, math.MaxInt64)
}

// ReadRefBelow is ReadRef of only the batches whose base offset is below
// below: a read_committed fetch stops at the last stable offset, which is
// always a batch boundary (the first batch of an open transaction).
func (l *Log) ReadRefBelow(offset int64, maxBytes int, below int64) (Ref, error) {
	d, err := l.checkReadable(offset)
	if err != nil {
		return Ref{}, err
	}
	if offset == d.hw || offset >= below {
		return Ref{}, nil
	}
	hold, err := l.acquire()
	if err != nil {
		return Ref{}, err
	}
	ref, seg, err := l.readRef(d, offset, maxBytes, below)
	if seg != nil {
		hold.seg = seg // the Ref keeps the segment's pin until Release
	}
	if err != nil || ref.Len == 0 {
		Ref{hold: hold}.Release()
		return Ref{}, err
	}
	ref.hold = hold
	return ref, nil
}

// readRef finds the range for ReadRef; the caller holds a reference, so
// the segment handles stay open across Close, and readRef returns the
// segment it pinned (nil if none), which the caller unpins when done.
func (l *Log) readRef(d *durableState, offset int64, maxBytes int, below int64) (Ref, *segment, error) {
	v, start, err := l.findView(d, offset)
	if err != nil || start < 0 {
		return Ref{}, v.seg, err
	}
	ref, err := l.readRefIn(v, start, maxBytes, below)
	return ref, v.seg, err
}

// readRefIn finds the range for ReadRef in the pinned view v, from the
// batch at position start.
func (l *Log) readRefIn(v readView, start int64, maxBytes int, below int64) (Ref, error) {
	rf := v.f
	avail := v.limit - start
	want := min(int64(max(maxBytes, 0)), avail)
	if want < BatchHeaderSize {
		want = min(BatchHeaderSize, avail)
	}
	end := start + want // Read's buffer end: batches must end at or before it

	// Every index entry is a batch boundary; batches between start and the
	// last entry at or before end (and below the offset bound) all fit, so
	// scanning starts there.
	p := start
	if i := sort.Search(len(v.offsets), func(i int) bool {
		return int64(v.offsets[i].pos) > end || v.seg.base+int64(v.offsets[i].rel) >= below
	}); i > 0 {
		if e := int64(v.offsets[i-1].pos); e > start {
			p = e
		}
	}

	bp := scanBufPool.Get().(*[]byte)
	defer scanBufPool.Put(bp)
	buf := *bp
	bufPos, bufLen := int64(-1), 0
	for p+BatchHeaderSize <= end {
		if bufPos < 0 || p+BatchHeaderSize > bufPos+int64(bufLen) {
			n := int(min(int64(len(buf)), end-p))
			if err := readFullAt(rf, buf[:n], p); err != nil {
				return Ref{}, fmt.Errorf("read %s at %d: %w", v.seg.name, p, err)
			}
			bufPos, bufLen = p, n
		}
		off := p - bufPos
		h, err := ParseStoredBatchHeader(buf[off : off+BatchHeaderSize])
		if err != nil {
			return Ref{}, fmt.Errorf("%w: %s at position %d: %v", ErrCorruptLog, v.seg.name, p, err)
		}
		if h.BaseOffset >= below {
			break
		}
		if p+h.Size() > end {
			if p == start { // the first batch is bigger than maxBytes: return it whole
				if h.Size() > avail {
					return Ref{}, fmt.Errorf("%w: %s: batch at %d runs past end %d", ErrCorruptLog, v.seg.name, start, v.limit)
				}
				return Ref{File: rf, Pos: start, Len: int(h.Size())}, nil
			}
			break
		}
		p += h.Size()
	}
	return Ref{File: rf, Pos: start, Len: int(p - start)}, nil
}

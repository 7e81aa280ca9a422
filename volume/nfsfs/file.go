package nfsfs

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/kaas-dev/kaas/volume"
)

// extent is a run of written bytes at off.
type extent struct {
	off int64
	b   []byte
}

func (e extent) end() int64 { return e.off + int64(len(e.b)) }

// dirtyFile is one view's unflushed changes to one open file, shared by all
// of the view's handles on it like a host's page cache. Extents are sorted,
// disjoint and never adjacent, so an appending writer grows one extent.
// Truncations are replayed before the extents: to minTrunc (the lowest size
// since the last flush, past which the backing's old bytes are gone), then
// to lastTrunc (the size the last Truncate set).
type dirtyFile struct {
	mu        sync.Mutex
	ext       []extent
	bytes     int64 // total length of ext
	truncated bool
	minTrunc  int64
	lastTrunc int64
	spare     []byte             // a flushed extent's buffer, reused by the next write
	writers   map[*file]struct{} // the view's writable handles, to flush through
	dead      bool               // the view crashed

	refs int // the view's handles on the file; guarded by View.mu
}

func (d *dirtyFile) pending() bool { return len(d.ext) > 0 || d.truncated }

func (d *dirtyFile) reset() {
	d.ext, d.bytes, d.truncated = nil, 0, false
}

// size is the file's size as this view sees it, given the backing's.
func (d *dirtyFile) size(backing int64) int64 {
	if d.truncated {
		backing = d.lastTrunc
	}
	if n := len(d.ext); n > 0 {
		return max(backing, d.ext[n-1].end())
	}
	return backing
}

// info returns fi with the size this view sees.
func (d *dirtyFile) info(fi fs.FileInfo) fs.FileInfo {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.pending() || fi.IsDir() {
		return fi
	}
	return sizedInfo{fi, d.size(fi.Size())}
}

type sizedInfo struct {
	fs.FileInfo
	size int64
}

func (i sizedInfo) Size() int64 { return i.size }

// write records p at off. Called with d.mu held.
func (d *dirtyFile) write(p []byte, off int64) {
	if len(p) == 0 {
		return
	}
	end := off + int64(len(p))
	n := len(d.ext)
	if n > 0 {
		last := &d.ext[n-1]
		switch {
		case off == last.end(): // appending, the common case
			last.b = append(last.b, p...)
			d.bytes += int64(len(p))
			return
		case off > last.end():
			d.ext = append(d.ext, extent{off, bytes.Clone(p)})
			d.bytes += int64(len(p))
			return
		case off >= last.off && end <= last.end():
			copy(last.b[off-last.off:], p)
			return
		}
	}
	// Merge p with every extent it overlaps or touches: ext[i:j].
	i := sort.Search(n, func(k int) bool { return d.ext[k].end() >= off })
	j := sort.Search(n, func(k int) bool { return d.ext[k].off > end })
	if n == 0 {
		// The first write since a flush: reuse the flushed buffer.
		d.ext = append(d.ext, extent{off, append(d.spare, p...)})
		d.spare = nil
		d.bytes += int64(len(p))
		return
	}
	if i == j {
		d.ext = slices.Insert(d.ext, i, extent{off, bytes.Clone(p)})
		d.bytes += int64(len(p))
		return
	}
	start, stop := min(off, d.ext[i].off), max(end, d.ext[j-1].end())
	var buf []byte
	if first := d.ext[i]; first.off == start {
		buf = slices.Grow(first.b, int(stop-start)-len(first.b))[:stop-start]
	} else {
		buf = make([]byte, stop-start)
		copy(buf[first.off-start:], first.b)
	}
	// Together with p the extents cover [start, stop) without a gap, so
	// every byte of buf is set below.
	for _, e := range d.ext[i+1 : j] {
		copy(buf[e.off-start:], e.b)
	}
	copy(buf[off-start:], p)
	for _, e := range d.ext[i:j] {
		d.bytes -= int64(len(e.b))
	}
	d.bytes += int64(len(buf))
	d.ext = slices.Replace(d.ext, i, j, extent{start, buf})
}

// truncate records a truncation to size. Called with d.mu held.
func (d *dirtyFile) truncate(size int64) {
	for len(d.ext) > 0 {
		e := &d.ext[len(d.ext)-1]
		if e.end() <= size {
			break
		}
		if e.off >= size {
			d.bytes -= int64(len(e.b))
			d.ext = d.ext[:len(d.ext)-1]
			continue
		}
		d.bytes -= e.end() - size
		e.b = e.b[:size-e.off]
		break
	}
	if !d.truncated || size < d.minTrunc {
		d.minTrunc = size
	}
	d.truncated, d.lastTrunc = true, size
}

// readAt reads p at off as this view sees the file: the backing's bytes
// (none past a pending truncation) under the dirty extents.
func (d *dirtyFile) readAt(b volume.File, p []byte, off int64) (int, error) {
	d.mu.Lock()
	if !d.pending() {
		d.mu.Unlock()
		return b.ReadAt(p, off)
	}
	defer d.mu.Unlock()
	if len(p) == 0 {
		return 0, nil
	}
	end := off + int64(len(p))
	i := sort.Search(len(d.ext), func(k int) bool { return d.ext[k].end() > off })
	if i < len(d.ext) && d.ext[i].off <= off && end <= d.ext[i].end() {
		e := d.ext[i]
		return copy(p, e.b[off-e.off:]), nil
	}
	fi, err := b.Stat()
	if err != nil {
		return 0, err
	}
	size := d.size(fi.Size())
	if off >= size {
		return 0, io.EOF
	}
	q := p[:min(int64(len(p)), size-off)]
	base := fi.Size()
	if d.truncated {
		base = min(base, d.minTrunc)
	}
	k := 0
	if off < base {
		k, err = b.ReadAt(q[:min(int64(len(q)), base-off)], off)
		if err != nil && err != io.EOF {
			return 0, err
		}
	}
	clear(q[k:])
	qend := off + int64(len(q))
	for ; i < len(d.ext) && d.ext[i].off < qend; i++ {
		e := d.ext[i]
		lo, hi := max(e.off, off), min(e.end(), qend)
		copy(q[lo-off:hi-off], e.b[lo-e.off:hi-e.off])
	}
	if len(q) < len(p) {
		return len(q), io.EOF
	}
	return len(q), nil
}

// flushTo sends the pending changes to the backing through w and forgets
// them, whether or not that worked: like a failed writeback, a failed flush
// is reported once and its data is gone. Called with d.mu held.
func (d *dirtyFile) flushTo(w volume.File) error {
	defer func() {
		// Keep one buffer of a steady writer (a log appending between
		// fsyncs) for the next round, unless it is large.
		if n := len(d.ext); n > 0 && cap(d.ext[n-1].b) <= maxSpare {
			d.spare = d.ext[n-1].b[:0]
		}
		d.reset()
	}()
	if d.truncated {
		if err := w.Truncate(d.minTrunc); err != nil {
			return err
		}
		if d.lastTrunc != d.minTrunc {
			if err := w.Truncate(d.lastTrunc); err != nil {
				return err
			}
		}
	}
	for _, e := range d.ext {
		if _, err := w.WriteAt(e.b, e.off); err != nil {
			return err
		}
	}
	return nil
}

// maxSpare bounds the buffer a flushed file keeps for its next writes.
const maxSpare = 4 << 20

const (
	fileOpen int32 = iota
	fileClosed
	fileCrashed
)

// file is a handle opened through a View: a backing handle, with writes
// buffered in the view's dirtyFile. Reads, writes and seeks of one handle
// come from one goroutine at a time (volume.File), except ReadAt.
type file struct {
	v        *View
	n        *node
	d        *dirtyFile
	b        volume.File
	name     string
	writable bool
	off      int64
	state    atomic.Int32
}

var _ volume.File = (*file)(nil)

func (f *file) Name() string { return f.name }

// check returns the error a closed or crashed handle gives.
func (f *file) check(op string) error {
	switch f.state.Load() {
	case fileClosed:
		return pathErr(op, f.name, fs.ErrClosed)
	case fileCrashed:
		return pathErr(op, f.name, ErrCrashed)
	}
	return nil
}

// fail turns err into ErrCrashed if the view crashed meanwhile (it closed
// the backing handle under the caller).
func (f *file) fail(op string, err error) error {
	if err != nil && err != io.EOF && f.state.Load() == fileCrashed {
		return pathErr(op, f.name, ErrCrashed)
	}
	return err
}

func (f *file) ReadAt(p []byte, off int64) (int, error) {
	if err := f.check("read"); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, pathErr("readat", f.name, errors.New("negative offset"))
	}
	n, err := f.d.readAt(f.b, p, off)
	return n, f.fail("read", err)
}

func (f *file) Read(p []byte) (int, error) {
	if err := f.check("read"); err != nil {
		return 0, err
	}
	if len(p) == 0 {
		return 0, nil
	}
	n, err := f.d.readAt(f.b, p, f.off)
	f.off += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, f.fail("read", err)
}

// buffer applies fn to the view's dirty state of the file, for a write or
// truncate.
func (f *file) buffer(op string, fn func(d *dirtyFile)) error {
	if err := f.check(op); err != nil {
		return err
	}
	if !f.writable {
		return pathErr(op, f.name, syscall.EBADF)
	}
	f.d.mu.Lock()
	defer f.d.mu.Unlock()
	if f.d.dead {
		return pathErr(op, f.name, ErrCrashed)
	}
	fn(f.d)
	return nil
}

func (f *file) Write(p []byte) (int, error) {
	err := f.buffer("write", func(d *dirtyFile) { d.write(p, f.off) })
	if err != nil {
		return 0, err
	}
	f.off += int64(len(p))
	return len(p), nil
}

func (f *file) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, pathErr("writeat", f.name, errors.New("negative offset"))
	}
	if err := f.buffer("write", func(d *dirtyFile) { d.write(p, off) }); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (f *file) Truncate(size int64) error {
	if err := f.check("truncate"); err != nil {
		return err
	}
	if !f.writable || size < 0 {
		return pathErr("truncate", f.name, syscall.EINVAL)
	}
	return f.buffer("truncate", func(d *dirtyFile) { d.truncate(size) })
}

func (f *file) Seek(offset int64, whence int) (int64, error) {
	if err := f.check("seek"); err != nil {
		return 0, err
	}
	var abs int64
	switch whence {
	case io.SeekStart:
		abs = offset
	case io.SeekCurrent:
		abs = f.off + offset
	case io.SeekEnd:
		fi, err := f.Stat()
		if err != nil {
			return 0, err
		}
		abs = fi.Size() + offset
	default:
		return 0, pathErr("seek", f.name, syscall.EINVAL)
	}
	if abs < 0 {
		return 0, pathErr("seek", f.name, syscall.EINVAL)
	}
	f.off = abs
	return abs, nil
}

// Stat describes the file with the size this view sees.
func (f *file) Stat() (fs.FileInfo, error) {
	if err := f.check("stat"); err != nil {
		return nil, err
	}
	fi, err := f.b.Stat()
	if err != nil {
		return nil, f.fail("stat", err)
	}
	return f.d.info(fi), nil
}

// flush sends the view's pending changes to the file to the backing,
// through this handle if it is writable and through another of the view's
// writable handles otherwise (fsync of a read-only descriptor flushes the
// host's dirty pages too).
func (f *file) flush(op string) error {
	d := f.d
	d.mu.Lock()
	if !d.pending() {
		d.mu.Unlock()
		return nil
	}
	w := f
	if !f.writable {
		for o := range d.writers {
			w = o
			break
		}
	}
	err := d.flushTo(w.b)
	d.mu.Unlock()
	// The view's cached size is stale now that the server has the data.
	f.v.s.mu.Lock()
	p := f.n.path
	f.v.s.mu.Unlock()
	f.v.mu.Lock()
	delete(f.v.attrs, p)
	f.v.mu.Unlock()
	if err != nil {
		return pathErr(op, f.name, cause(err))
	}
	return nil
}

// Sync flushes the view's writes to the file and then syncs the backing.
func (f *file) Sync() error {
	if err := f.check("sync"); err != nil {
		return err
	}
	if err := f.flush("sync"); err != nil {
		return f.fail("sync", err)
	}
	return f.fail("sync", f.b.Sync())
}

// Close flushes the view's writes to the file if the handle is writable
// (not syncing them), closes the backing handle and releases the file,
// removing it if it was silly-renamed and this was its last handle.
func (f *file) Close() error {
	if !f.state.CompareAndSwap(fileOpen, fileClosed) {
		return f.check("close")
	}
	var err error
	if f.writable {
		err = f.flush("close")
	}
	if cerr := f.b.Close(); err == nil {
		err = cerr
	}
	v := f.v
	v.mu.Lock()
	delete(v.files, f)
	if f.d.refs--; f.d.refs == 0 && v.dirty[f.n] == f.d {
		delete(v.dirty, f.n)
	}
	v.mu.Unlock()
	f.d.mu.Lock()
	delete(f.d.writers, f)
	f.d.mu.Unlock()
	v.s.release(f.n)
	return err
}

package nfsfs

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kaas-dev/kaas/volume"
)

// View is one host's client of the shared volume. It implements volume.FS
// and is safe for concurrent use.
type View struct {
	s    *Server
	host string

	mu    sync.Mutex
	gen   uint64 // bumped by every invalidation, so a racing lookup does not cache a stale answer
	attrs map[string]attrEntry
	neg   map[string]time.Time // expiry of a remembered ENOENT
	dirs  map[string]dirEntry
	files map[*file]struct{}   // open handles
	dirty map[*node]*dirtyFile // this host's page cache of each open file
}

var _ volume.FS = (*View)(nil)

type attrEntry struct {
	fi  fs.FileInfo
	exp time.Time
}

type dirEntry struct {
	ents []fs.DirEntry
	exp  time.Time
}

// maxCache bounds each cache loosely: past it, expired entries are swept.
const maxCache = 4096

// reset empties the view's caches and forgets its handles. Called with
// v.mu held, or before the view is shared.
func (v *View) reset() {
	v.gen++
	v.attrs = map[string]attrEntry{}
	v.neg = map[string]time.Time{}
	v.dirs = map[string]dirEntry{}
	v.files = map[*file]struct{}{}
	v.dirty = map[*node]*dirtyFile{}
}

// Crash models this host losing power: every write of the view that was
// not flushed is dropped, every file the view has open fails from now on
// with an error wrapping ErrCrashed, and its handles are released (so
// silly-renamed files whose last handle it held are removed). The view
// itself then works again, as the rebooted host, with empty caches.
func (v *View) Crash() {
	v.mu.Lock()
	files, dirty := v.files, v.dirty
	v.reset()
	v.mu.Unlock()
	for _, d := range dirty {
		d.mu.Lock()
		d.reset()
		d.spare, d.dead = nil, true
		d.mu.Unlock()
	}
	for f := range files {
		if f.state.CompareAndSwap(fileOpen, fileCrashed) {
			_ = f.b.Close()
			v.s.release(f.n)
		}
	}
}

// DirtyBytes returns how many written bytes the view holds unflushed.
func (v *View) DirtyBytes() int64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	var total int64
	for _, d := range v.dirty {
		d.mu.Lock()
		total += d.bytes
		d.mu.Unlock()
	}
	return total
}

func (v *View) now() time.Time { return v.s.opts.Now() }

// missing reports whether a failed lookup of c is remembered.
func (v *View) missing(c string, now time.Time) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	exp, ok := v.neg[c]
	if ok && !now.Before(exp) {
		delete(v.neg, c)
		return false
	}
	return ok
}

// rememberMissing records a failed lookup of c made at now, unless the
// view changed its namespace since generation gen.
func (v *View) rememberMissing(c string, now time.Time, gen uint64) {
	ttl := v.s.opts.NegTTL
	if ttl <= 0 {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.gen != gen {
		return
	}
	delete(v.attrs, c)
	sweep(v.neg, now, func(exp time.Time) time.Time { return exp })
	v.neg[c] = now.Add(ttl)
}

// sweep drops expired entries from a cache that has grown past maxCache.
func sweep[E any](m map[string]E, now time.Time, exp func(E) time.Time) {
	if len(m) < maxCache {
		return
	}
	for k, e := range m {
		if !now.Before(exp(e)) {
			delete(m, k)
		}
	}
}

// forget drops what the view caches about c and its parent's listing, and
// with subtree everything below c too: the view's own namespace change
// makes them stale, and an NFS client updates its own caches.
func (v *View) forget(c string, subtree bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.gen++
	delete(v.attrs, c)
	delete(v.neg, c)
	delete(v.dirs, c)
	delete(v.dirs, path.Dir(c))
	if !subtree {
		return
	}
	prefix := c + "/"
	for k := range v.attrs {
		if strings.HasPrefix(k, prefix) {
			delete(v.attrs, k)
		}
	}
	for k := range v.neg {
		if strings.HasPrefix(k, prefix) {
			delete(v.neg, k)
		}
	}
	for k := range v.dirs {
		if strings.HasPrefix(k, prefix) {
			delete(v.dirs, k)
		}
	}
}

// dirtyOf returns the view's dirty state of the open file at c, or nil.
func (v *View) dirtyOf(c string) *dirtyFile {
	v.s.mu.Lock()
	n := v.s.nodes[c]
	v.s.mu.Unlock()
	if n == nil {
		return nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.dirty[n]
}

// Stat implements volume.FS. The answer may come from the view's attribute
// cache, and a remembered failed lookup fails again; the view's own
// unflushed writes show in the size.
func (v *View) Stat(name string) (fs.FileInfo, error) {
	c, now := path.Clean(name), v.now()
	if v.missing(c, now) {
		return nil, pathErr("stat", name, syscall.ENOENT)
	}
	v.mu.Lock()
	e, hit := v.attrs[c]
	if hit && !now.Before(e.exp) {
		delete(v.attrs, c)
		hit = false
	}
	gen := v.gen
	v.mu.Unlock()
	fi := e.fi
	if !hit {
		var err error
		if fi, err = v.s.backing.Stat(name); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				v.rememberMissing(c, now, gen)
			}
			return nil, err
		}
		if ttl := v.s.opts.AttrTTL; ttl > 0 {
			v.mu.Lock()
			if v.gen == gen {
				sweep(v.attrs, now, func(e attrEntry) time.Time { return e.exp })
				v.attrs[c] = attrEntry{fi: fi, exp: now.Add(ttl)}
			}
			v.mu.Unlock()
		}
	}
	if d := v.dirtyOf(c); d != nil {
		return d.info(fi), nil
	}
	return fi, nil
}

// ReadDir implements volume.FS. The listing may come from the view's
// directory cache.
func (v *View) ReadDir(name string) ([]fs.DirEntry, error) {
	c, now := path.Clean(name), v.now()
	v.mu.Lock()
	if e, ok := v.dirs[c]; ok {
		if now.Before(e.exp) {
			v.mu.Unlock()
			return slices.Clone(e.ents), nil
		}
		delete(v.dirs, c)
	}
	gen := v.gen
	v.mu.Unlock()
	ents, err := v.s.backing.ReadDir(name)
	if err != nil {
		return nil, err
	}
	if ttl := v.s.opts.DirTTL; ttl > 0 {
		v.mu.Lock()
		if v.gen == gen {
			sweep(v.dirs, now, func(e dirEntry) time.Time { return e.exp })
			v.dirs[c] = dirEntry{ents: slices.Clone(ents), exp: now.Add(ttl)}
		}
		v.mu.Unlock()
	}
	return ents, nil
}

type openMode int

const (
	modeCreate openMode = iota
	modeCreateExclusive
	modeOpen
	modeOpenReadWrite
)

// open opens name in the backing under the server's lock, so that the
// handle is registered before any remove or rename can look for it.
func (v *View) open(name string, mode openMode) (volume.File, error) {
	c, now := path.Clean(name), v.now()
	lookup := mode == modeOpen || mode == modeOpenReadWrite
	if lookup && v.missing(c, now) {
		return nil, pathErr("open", name, syscall.ENOENT)
	}
	v.mu.Lock()
	gen := v.gen
	v.mu.Unlock()

	s := v.s
	s.mu.Lock()
	var b volume.File
	var err error
	switch mode {
	case modeCreate:
		b, err = s.backing.Create(name)
	case modeCreateExclusive:
		b, err = s.backing.CreateExclusive(name)
	case modeOpen:
		b, err = s.backing.Open(name)
	default:
		b, err = s.backing.OpenReadWrite(name)
	}
	if err != nil {
		s.mu.Unlock()
		if lookup && errors.Is(err, fs.ErrNotExist) {
			v.rememberMissing(c, now, gen)
		}
		return nil, err
	}
	n := s.acquire(c)
	s.mu.Unlock()

	f := &file{v: v, n: n, b: b, name: name, writable: mode != modeOpen}
	v.mu.Lock()
	d := v.dirty[n]
	if d == nil {
		d = &dirtyFile{writers: map[*file]struct{}{}}
		v.dirty[n] = d
	}
	d.refs++
	f.d = d
	v.files[f] = struct{}{}
	v.mu.Unlock()
	if lookup {
		// Close-to-open: an open revalidates, so the next Stat asks anew.
		v.mu.Lock()
		delete(v.attrs, c)
		v.mu.Unlock()
	} else {
		v.forget(c, false)
	}
	if f.writable {
		d.mu.Lock()
		if mode == modeCreate {
			d.reset() // O_TRUNC: this host's unflushed writes go too
		}
		d.writers[f] = struct{}{}
		d.mu.Unlock()
	}
	return f, nil
}

// Create implements volume.FS.
func (v *View) Create(name string) (volume.File, error) { return v.open(name, modeCreate) }

// CreateExclusive implements volume.FS.
func (v *View) CreateExclusive(name string) (volume.File, error) {
	return v.open(name, modeCreateExclusive)
}

// Open implements volume.FS. It fails at once if a failed lookup of name is
// remembered; otherwise it revalidates (close-to-open).
func (v *View) Open(name string) (volume.File, error) { return v.open(name, modeOpen) }

// OpenReadWrite implements volume.FS, like Open.
func (v *View) OpenReadWrite(name string) (volume.File, error) {
	return v.open(name, modeOpenReadWrite)
}

// Remove implements volume.FS. A file that any view holds open is renamed
// to a hidden .nfs name instead, removed when its last handle closes.
func (v *View) Remove(name string) error {
	c := path.Clean(name)
	s := v.s
	s.mu.Lock()
	var err error
	if n := s.openFile(c); n != nil {
		if _, serr := s.sillyRename(n, c); serr != nil {
			err = pathErr("remove", name, cause(serr))
		}
	} else if err = s.backing.Remove(name); err == nil {
		if n := s.nodes[c]; n != nil {
			// An open directory: its handles see it gone.
			delete(s.nodes, c)
			n.path = ""
		}
	}
	s.mu.Unlock()
	if err == nil {
		v.forget(c, true)
	}
	return err
}

// Rename implements volume.FS. A target that any view holds open is first
// renamed to a hidden .nfs name, as the NFS client does, and kept until its
// last handle closes. Should the rename itself then fail, the target is put
// back, so that a failed rename changes nothing.
func (v *View) Rename(oldname, newname string) error {
	co, cn := path.Clean(oldname), path.Clean(newname)
	s := v.s
	s.mu.Lock()
	var hidden string
	target := s.openFile(cn)
	if target != nil && co != cn && s.nodes[co] != target {
		var err error
		if hidden, err = s.sillyRename(target, cn); err != nil {
			s.mu.Unlock()
			return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: cause(err)}
		}
	}
	err := s.backing.Rename(oldname, newname)
	switch {
	case err != nil && hidden != "":
		if s.backing.Rename(hidden, cn) == nil {
			s.move(hidden, cn)
			target.hidden = false
		}
	case err == nil && co != cn:
		s.move(co, cn)
	}
	s.mu.Unlock()
	if err == nil {
		v.forget(co, true)
		v.forget(cn, true)
	}
	return err
}

// MkdirAll implements volume.FS.
func (v *View) MkdirAll(name string, perm fs.FileMode) error {
	if err := v.s.backing.MkdirAll(name, perm); err != nil {
		return err
	}
	for c := path.Clean(name); ; c = path.Dir(c) {
		v.forget(c, false)
		if c == path.Dir(c) {
			return nil
		}
	}
}

// SyncDir implements volume.FS.
func (v *View) SyncDir(name string) error { return v.s.backing.SyncDir(name) }

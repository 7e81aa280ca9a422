// Package memfs is an in-memory volume.FS that models what survives a crash.
//
// Every file (inode) keeps its current bytes and the bytes as of its last
// successful Sync; every directory keeps its current entries and its durable
// entries, which SyncDir (or Sync of an open directory) sets to the current
// ones. CrashClone keeps only the durable state, so tests can check that
// code fsyncs files before renaming them and fsyncs directories after.
//
// Paths are cleaned with path.Clean and resolved against a single root:
// "a/b", "/a/b" and "./a//b" name the same file. Errors are *fs.PathError
// wrapping the errno Linux would return, so errors.Is(err, fs.ErrNotExist)
// and friends hold where the os package would make them hold. A path
// component longer than NAME_MAX (255 bytes) fails with ENAMETOOLONG, as on
// Linux.
package memfs

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kaas-dev/kaas/volume"
)

const (
	filePerm = 0o644
	dirPerm  = 0o755
)

// node is an inode: a regular file or a directory.
type node struct {
	dir  bool
	perm fs.FileMode

	// Regular files.
	data   []byte
	synced []byte // contents as of the last successful Sync

	// Directories.
	entries map[string]*node
	durable map[string]*node // entries as of the last SyncDir
}

func newDir(perm fs.FileMode) *node {
	return &node{dir: true, perm: perm, entries: map[string]*node{}, durable: map[string]*node{}}
}

// FS is an in-memory volume.FS. It is safe for concurrent use: one mutex
// guards the whole tree and every open file.
type FS struct {
	mu   sync.Mutex
	root *node
}

var _ volume.FS = (*FS)(nil)

// New returns an empty FS whose root directory exists and is durable.
func New() *FS {
	return &FS{root: newDir(dirPerm)}
}

// CrashClone returns a new FS holding only what would survive a power loss
// now: starting at the root, the durable entries of each directory,
// recursively (a directory whose own entry is not durable vanishes with its
// subtree), and each file with the contents of its last successful Sync. An
// inode reachable under two durable names (renamed between directories that
// were both synced) stays one inode in the clone.
func (m *FS) CrashClone() *FS {
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := map[*node]*node{}
	var clone func(n *node) *node
	clone = func(n *node) *node {
		if c, ok := seen[n]; ok {
			return c
		}
		if !n.dir {
			c := &node{perm: n.perm, data: bytes.Clone(n.synced), synced: bytes.Clone(n.synced)}
			seen[n] = c
			return c
		}
		c := newDir(n.perm)
		seen[n] = c
		for name, child := range n.durable {
			cc := clone(child)
			c.entries[name] = cc
			c.durable[name] = cc
		}
		return c
	}
	return &FS{root: clone(m.root)}
}

// split cleans name into its components below the root; the root itself has
// none.
func split(name string) []string {
	p := path.Clean("/" + name)
	if p == "/" {
		return nil
	}
	return strings.Split(p[1:], "/")
}

// components is split, refusing a component longer than NAME_MAX with
// ENAMETOOLONG, as every call on Linux does: code that derives a name too
// long for a real filesystem fails here too.
func components(op, name string) ([]string, error) {
	parts := split(name)
	for _, p := range parts {
		if len(p) > volume.NameMax {
			return nil, pathErr(op, name, syscall.ENAMETOOLONG)
		}
	}
	return parts, nil
}

func pathErr(op, name string, err error) error {
	return &fs.PathError{Op: op, Path: name, Err: err}
}

// walk resolves the directory holding the last component of name. It
// returns that directory and the last component ("" for the root).
// Called with m.mu held.
func (m *FS) walk(op, name string) (*node, string, error) {
	parts, err := components(op, name)
	if err != nil {
		return nil, "", err
	}
	if len(parts) == 0 {
		return nil, "", nil
	}
	d := m.root
	for _, p := range parts[:len(parts)-1] {
		next, ok := d.entries[p]
		if !ok {
			return nil, "", pathErr(op, name, syscall.ENOENT)
		}
		if !next.dir {
			return nil, "", pathErr(op, name, syscall.ENOTDIR)
		}
		d = next
	}
	return d, parts[len(parts)-1], nil
}

// lookup resolves name to its node. Called with m.mu held.
func (m *FS) lookup(op, name string) (*node, error) {
	dir, base, err := m.walk(op, name)
	if err != nil {
		return nil, err
	}
	if dir == nil {
		return m.root, nil
	}
	n, ok := dir.entries[base]
	if !ok {
		return nil, pathErr(op, name, syscall.ENOENT)
	}
	return n, nil
}

func (m *FS) create(name string, exclusive bool) (volume.File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.walk("open", name)
	if err != nil {
		return nil, err
	}
	if dir == nil { // the root
		if exclusive {
			return nil, pathErr("open", name, syscall.EEXIST)
		}
		return nil, pathErr("open", name, syscall.EISDIR)
	}
	n, ok := dir.entries[base]
	switch {
	case ok && exclusive:
		return nil, pathErr("open", name, syscall.EEXIST)
	case ok && n.dir:
		return nil, pathErr("open", name, syscall.EISDIR)
	case ok:
		// O_TRUNC: the synced bytes stay until the next Sync, so a crash
		// may bring the old contents back.
		n.data = nil
	default:
		n = &node{perm: filePerm}
		dir.entries[base] = n
	}
	return &file{fs: m, n: n, name: name, writable: true}, nil
}

// Create implements volume.FS.
func (m *FS) Create(name string) (volume.File, error) { return m.create(name, false) }

// CreateExclusive implements volume.FS.
func (m *FS) CreateExclusive(name string) (volume.File, error) { return m.create(name, true) }

// Open implements volume.FS. Directories may be opened (and synced, as on
// Linux) but not read.
func (m *FS) Open(name string) (volume.File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup("open", name)
	if err != nil {
		return nil, err
	}
	return &file{fs: m, n: n, name: name}, nil
}

// OpenReadWrite implements volume.FS.
func (m *FS) OpenReadWrite(name string) (volume.File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup("open", name)
	if err != nil {
		return nil, err
	}
	if n.dir {
		return nil, pathErr("open", name, syscall.EISDIR)
	}
	return &file{fs: m, n: n, name: name, writable: true}, nil
}

// linkErr mirrors the *os.LinkError that os.Rename returns.
func linkErr(oldname, newname string, err error) error {
	return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
}

// Rename implements volume.FS with the semantics of os.Rename: the inode
// moves, so open files follow it; a file replaces a file; an existing
// directory is never replaced (EEXIST, as os.Rename returns).
func (m *FS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	odir, obase, err := m.walk("rename", oldname)
	if err != nil {
		return linkErr(oldname, newname, errors.Unwrap(err))
	}
	ndir, nbase, err := m.walk("rename", newname)
	if err != nil {
		return linkErr(oldname, newname, errors.Unwrap(err))
	}
	if odir == nil || ndir == nil {
		return linkErr(oldname, newname, syscall.EBUSY) // the root
	}
	n, ok := odir.entries[obase]
	if !ok {
		return linkErr(oldname, newname, syscall.ENOENT)
	}
	target, exists := ndir.entries[nbase]
	if exists && target == n {
		return nil // same inode: rename(2) does nothing
	}
	if n.dir && isWithin(n, ndir) {
		return linkErr(oldname, newname, syscall.EINVAL) // into its own subtree
	}
	if exists {
		switch {
		case target.dir:
			// os.Rename refuses any existing directory as the target,
			// before rename(2) could replace an empty one.
			return linkErr(oldname, newname, syscall.EEXIST)
		case n.dir:
			return linkErr(oldname, newname, syscall.ENOTDIR)
		}
	}
	delete(odir.entries, obase)
	ndir.entries[nbase] = n
	return nil
}

// isWithin reports whether d is dir or lies below it.
func isWithin(dir, d *node) bool {
	if dir == d {
		return true
	}
	for _, c := range dir.entries {
		if c.dir && isWithin(c, d) {
			return true
		}
	}
	return false
}

// Remove implements volume.FS.
func (m *FS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.walk("remove", name)
	if err != nil {
		return err
	}
	if dir == nil {
		return pathErr("remove", name, syscall.EBUSY)
	}
	n, ok := dir.entries[base]
	if !ok {
		return pathErr("remove", name, syscall.ENOENT)
	}
	if n.dir && len(n.entries) > 0 {
		return pathErr("remove", name, syscall.ENOTEMPTY)
	}
	delete(dir.entries, base)
	return nil
}

// MkdirAll implements volume.FS. A zero perm means 0755.
func (m *FS) MkdirAll(name string, perm fs.FileMode) error {
	if perm == 0 {
		perm = dirPerm
	}
	parts, err := components("mkdir", name)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	d := m.root
	for _, p := range parts {
		next, ok := d.entries[p]
		if !ok {
			next = newDir(perm.Perm())
			d.entries[p] = next
		} else if !next.dir {
			return pathErr("mkdir", name, syscall.ENOTDIR)
		}
		d = next
	}
	return nil
}

// ReadDir implements volume.FS; the entries are sorted by name.
func (m *FS) ReadDir(name string) ([]fs.DirEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup("open", name)
	if err != nil {
		return nil, err
	}
	if !n.dir {
		return nil, pathErr("readdirent", name, syscall.ENOTDIR)
	}
	names := make([]string, 0, len(n.entries))
	for k := range n.entries {
		names = append(names, k)
	}
	slices.Sort(names)
	out := make([]fs.DirEntry, len(names))
	for i, k := range names {
		out[i] = fs.FileInfoToDirEntry(info(k, n.entries[k]))
	}
	return out, nil
}

// Stat implements volume.FS.
func (m *FS) Stat(name string) (fs.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup("stat", name)
	if err != nil {
		return nil, err
	}
	return info(path.Base(path.Clean("/"+name)), n), nil
}

// SyncDir implements volume.FS: the directory's current entries become its
// durable ones. Unlike the OS, it refuses a regular file (ENOTDIR), which
// is always a bug in the caller.
func (m *FS) SyncDir(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup("open", name)
	if err != nil {
		return err
	}
	if !n.dir {
		return pathErr("sync", name, syscall.ENOTDIR)
	}
	n.durable = maps.Clone(n.entries)
	return nil
}

// fileInfo is a snapshot of a node. ModTime is always the zero time, which
// keeps tests deterministic; kaas never decides anything from it.
type fileInfo struct {
	name string
	size int64
	mode fs.FileMode
}

func info(name string, n *node) fileInfo {
	if n.dir {
		return fileInfo{name: name, mode: fs.ModeDir | n.perm}
	}
	return fileInfo{name: name, size: int64(len(n.data)), mode: n.perm}
}

func (i fileInfo) Name() string       { return i.name }
func (i fileInfo) Size() int64        { return i.size }
func (i fileInfo) Mode() fs.FileMode  { return i.mode }
func (i fileInfo) ModTime() time.Time { return time.Time{} }
func (i fileInfo) IsDir() bool        { return i.mode.IsDir() }
func (i fileInfo) Sys() any           { return nil }

// file is an open handle. Its state is guarded by fs.mu, which also makes
// ReadAt safe alongside writes.
type file struct {
	fs       *FS
	n        *node
	name     string
	writable bool
	off      int64
	closed   bool
}

var _ volume.File = (*file)(nil)

func (f *file) Name() string { return f.name }

// check returns the error os would give for op on this handle, if any.
// Called with f.fs.mu held.
func (f *file) check(op string, write bool) error {
	if f.closed {
		return pathErr(op, f.name, fs.ErrClosed)
	}
	if f.n.dir && op != "sync" && op != "stat" && op != "seek" {
		return pathErr(op, f.name, syscall.EISDIR)
	}
	if write && !f.writable {
		return pathErr(op, f.name, syscall.EBADF)
	}
	return nil
}

func (f *file) Read(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("read", false); err != nil {
		return 0, err
	}
	if len(p) == 0 {
		return 0, nil
	}
	if f.off >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.n.data[f.off:])
	f.off += int64(n)
	return n, nil
}

func (f *file) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("read", false); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, pathErr("readat", f.name, errors.New("negative offset"))
	}
	n := 0
	if off < int64(len(f.n.data)) {
		n = copy(p, f.n.data[off:])
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// writeAt writes p at off, zero-filling any gap. Called with f.fs.mu held.
func (f *file) writeAt(p []byte, off int64) {
	end := off + int64(len(p))
	if end > int64(len(f.n.data)) {
		f.n.data = append(f.n.data, make([]byte, end-int64(len(f.n.data)))...)
	}
	copy(f.n.data[off:], p)
}

func (f *file) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("write", true); err != nil {
		return 0, err
	}
	f.writeAt(p, f.off)
	f.off += int64(len(p))
	return len(p), nil
}

func (f *file) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("write", true); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, pathErr("writeat", f.name, errors.New("negative offset"))
	}
	f.writeAt(p, off)
	return len(p), nil
}

func (f *file) Seek(offset int64, whence int) (int64, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("seek", false); err != nil {
		return 0, err
	}
	var abs int64
	switch whence {
	case io.SeekStart:
		abs = offset
	case io.SeekCurrent:
		abs = f.off + offset
	case io.SeekEnd:
		abs = int64(len(f.n.data)) + offset
	default:
		return 0, pathErr("seek", f.name, syscall.EINVAL)
	}
	if abs < 0 {
		return 0, pathErr("seek", f.name, syscall.EINVAL)
	}
	f.off = abs
	return abs, nil
}

func (f *file) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return pathErr("close", f.name, fs.ErrClosed)
	}
	f.closed = true
	return nil
}

// Sync makes the file's current contents its durable ones; on an open
// directory it makes the directory's entries durable, as fsync does.
func (f *file) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("sync", false); err != nil {
		return err
	}
	if f.n.dir {
		f.n.durable = maps.Clone(f.n.entries)
		return nil
	}
	f.n.synced = bytes.Clone(f.n.data)
	return nil
}

func (f *file) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("truncate", false); err != nil {
		return err
	}
	if !f.writable || size < 0 {
		return pathErr("truncate", f.name, syscall.EINVAL)
	}
	if size <= int64(len(f.n.data)) {
		f.n.data = f.n.data[:size]
	} else {
		f.n.data = append(f.n.data, make([]byte, size-int64(len(f.n.data)))...)
	}
	return nil
}

func (f *file) Stat() (fs.FileInfo, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("stat", false); err != nil {
		return nil, err
	}
	return info(path.Base(path.Clean("/"+f.name)), f.n), nil
}

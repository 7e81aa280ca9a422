// Package fusefs serves a volume.FS as a FUSE mount, so that an unmodified
// kaas broker (which only uses package os) can run on top of a test volume:
// an NFS-like view, a fault-injecting wrapper, or an in-memory FS.
//
// The kernel is told to cache nothing it could decide on its own: entry,
// negative-entry and attribute timeouts are zero, files are opened without
// keep-cache and there is no writeback cache. Every lookup, stat and open
// therefore reaches the FS below, which alone decides what a "host" sees.
// Reads still go through the page cache (no direct I/O) so that sendfile
// from a file on the mount works, as kaas's Fetch path needs; the cache is
// dropped on every open, which is what close-to-open asks for.
//
// close(2) maps to volume.File.Close: the FUSE flush of a handle that was
// written closes the file below (an NFS-like FS makes its writes visible to
// other hosts there, and the error reaches the caller of close). Should the
// handle be used again afterwards, as happens when a descriptor was
// duplicated or inherited by a child process, the file is reopened by path.
package fusefs

import (
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"log"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/kaas-dev/kaas/volume"
)

// Options tune a mount. The zero value is usable.
type Options struct {
	// Name is the source shown in /proc/mounts; "kaas" when empty.
	Name string
	// StatfsDir, if set, is a directory of the real OS whose statfs(2)
	// figures the mount reports. Otherwise statfs reports a fixed, roomy
	// filesystem.
	StatfsDir string
	// Debug logs every FUSE request and reply to Logger.
	Debug bool
	// Logger receives go-fuse's diagnostics and the Debug log; nil means
	// the standard logger.
	Logger *log.Logger
}

// Server is one mount of a volume.FS.
type Server struct {
	dir   string
	fsys  volume.FS
	root  string
	opts  Options
	fuse  *fuse.Server
	inos  inoTable
	ops   [numOps]atomic.Uint64
	errs  atomic.Uint64
	lazy  atomic.Bool
	unmnt sync.Mutex
	done  chan struct{} // closed when the server stopped serving
}

// Mount serves the directory root of fsys at the existing directory dir
// and returns once the kernel has the mount.
func Mount(dir string, fsys volume.FS, root string, opts Options) (*Server, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("fusefs: mount point %s: %w", dir, err)
	}
	if root == "" {
		root = "."
	}
	if opts.Name == "" {
		opts.Name = "kaas"
	}
	s := &Server{dir: abs, fsys: fsys, root: path.Clean(root), opts: opts}
	s.inos.init()

	var zero time.Duration
	fopts := &fs.Options{
		EntryTimeout:    &zero,
		AttrTimeout:     &zero,
		NegativeTimeout: &zero,
		RootStableAttr:  &fs.StableAttr{Ino: rootIno},
		Logger:          opts.Logger,
		MountOptions: fuse.MountOptions{
			FsName: opts.Name,
			Name:   "kaasfs",
			// Mount with mount(2) when we may (root), so fusermount is
			// not needed; go-fuse falls back to it otherwise.
			DirectMount: true,
			// 1 MiB requests instead of 128 KiB: fewer round trips for
			// segment writes and fetch reads.
			MaxWrite: 1 << 20,
			// Readdirplus would only prime entries that expire at once.
			DisableReadDirPlus: true,
			DisableXAttrs:      true,
			Debug:              opts.Debug,
			Logger:             opts.Logger,
		},
	}
	srv, err := fs.Mount(abs, &node{srv: s}, fopts)
	if err != nil {
		return nil, fmt.Errorf("fusefs: mount %s at %s: %w", root, abs, err)
	}
	s.fuse = srv
	s.done = make(chan struct{})
	go func() { srv.Wait(); close(s.done) }()
	return s, nil
}

// Dir returns the mount point.
func (s *Server) Dir() string { return s.dir }

// Unmount unmounts the file system. If the mount is busy (a process still
// has a file or its working directory on it), it detaches the mount lazily
// instead: the mount point is free at once, and the kernel keeps the
// connection until the last user is gone, so Wait may then block until
// that happens or the process exits.
func (s *Server) Unmount() error {
	s.unmnt.Lock()
	defer s.unmnt.Unlock()
	if s.lazy.Load() {
		return nil
	}
	select {
	case <-s.done: // unmounted already, from here or from outside
		return nil
	default:
	}
	err := s.fuse.Unmount()
	if err == nil {
		return nil
	}
	if lerr := lazyUnmount(s.dir); lerr != nil {
		return fmt.Errorf("fusefs: unmount %s: %w (lazy unmount: %v)", s.dir, err, lerr)
	}
	s.lazy.Store(true)
	return nil
}

// Wait blocks until the mount is gone and every request was served.
func (s *Server) Wait() { <-s.done }

// OpCounts returns how many FUSE requests of each kind the mount served,
// plus "errors" for those answered with an error other than ENOENT.
func (s *Server) OpCounts() map[string]uint64 {
	m := make(map[string]uint64, numOps+1)
	for i := range s.ops {
		if n := s.ops[i].Load(); n > 0 {
			m[opNames[i]] = n
		}
	}
	m["errors"] = s.errs.Load()
	return m
}

// errno counts an operation and converts its error.
func (s *Server) count(op opKind, err error) syscall.Errno {
	s.ops[op].Add(1)
	e := toErrno(err)
	if e != 0 && e != syscall.ENOENT {
		s.errs.Add(1)
	}
	return e
}

type opKind int

const (
	opLookup opKind = iota
	opGetattr
	opSetattr
	opOpen
	opCreate
	opRead
	opWrite
	opFlush
	opRelease
	opFsync
	opFsyncdir
	opMkdir
	opUnlink
	opRmdir
	opRename
	opReaddir
	opStatfs
	numOps
)

var opNames = [numOps]string{
	opLookup: "lookup", opGetattr: "getattr", opSetattr: "setattr",
	opOpen: "open", opCreate: "create", opRead: "read", opWrite: "write",
	opFlush: "flush", opRelease: "release", opFsync: "fsync",
	opFsyncdir: "fsyncdir", opMkdir: "mkdir", opUnlink: "unlink",
	opRmdir: "rmdir", opRename: "rename", opReaddir: "readdir",
	opStatfs: "statfs",
}

// toErrno maps an error of the FS below to the errno the kernel returns.
// An errno anywhere in the chain wins; then the io/fs sentinels; anything
// else (a crashed view, an injected fault without errno) is EIO.
func toErrno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var e syscall.Errno
	if errors.As(err, &e) && e != 0 {
		return e
	}
	switch {
	case errors.Is(err, iofs.ErrNotExist):
		return syscall.ENOENT
	case errors.Is(err, iofs.ErrExist):
		return syscall.EEXIST
	case errors.Is(err, iofs.ErrPermission):
		return syscall.EACCES
	case errors.Is(err, iofs.ErrClosed):
		return syscall.EBADF
	case errors.Is(err, iofs.ErrInvalid):
		return syscall.EINVAL
	}
	return syscall.EIO
}

// rootIno is the root directory's inode number; others count up from it.
const rootIno = 1

// inoTable hands out inode numbers per path, for FSs that do not report
// the identity of their files. A path keeps its number while
// it names the same kind of file; renames and removes through this mount
// move or drop it, so a file created later at a removed path gets a new
// number. go-fuse identifies nodes by these numbers, so a number must never
// name two places in its tree at once.
type inoTable struct {
	mu   sync.Mutex
	next uint64
	m    map[string]inoEntry
}

type inoEntry struct {
	ino  uint64
	mode uint32
}

func (t *inoTable) init() {
	t.next = rootIno
	t.m = map[string]inoEntry{}
}

// get returns the number of p, allocating one if p is new or changed kind.
func (t *inoTable) get(p string, mode uint32) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.m[p]; ok && e.mode == mode {
		return e.ino
	}
	return t.allocLocked(p, mode)
}

// fresh gives p a new number: a file was just created there.
func (t *inoTable) fresh(p string, mode uint32) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.allocLocked(p, mode)
}

func (t *inoTable) allocLocked(p string, mode uint32) uint64 {
	t.next++
	t.m[p] = inoEntry{ino: t.next, mode: mode}
	return t.next
}

// forget drops p and everything below it.
func (t *inoTable) forget(p string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.forgetLocked(p)
}

func (t *inoTable) forgetLocked(p string) {
	delete(t.m, p)
	prefix := p + "/"
	for k := range t.m {
		if strings.HasPrefix(k, prefix) {
			delete(t.m, k)
		}
	}
}

// rename moves the numbers of oldp and everything below it to newp.
func (t *inoTable) rename(oldp, newp string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	moved := map[string]inoEntry{}
	prefix := oldp + "/"
	for k, e := range t.m {
		if k == oldp {
			moved[newp] = e
		} else if strings.HasPrefix(k, prefix) {
			moved[newp+"/"+k[len(prefix):]] = e
		}
	}
	t.forgetLocked(oldp)
	t.forgetLocked(newp)
	for k, e := range moved {
		t.m[k] = e
	}
}

// node is a file or directory of the mount. It holds no path: the path is
// read from go-fuse's tree, which follows renames made through the mount.
type node struct {
	fs.Inode
	srv *Server
}

var (
	_ fs.NodeLookuper  = (*node)(nil)
	_ fs.NodeGetattrer = (*node)(nil)
	_ fs.NodeSetattrer = (*node)(nil)
	_ fs.NodeOpener    = (*node)(nil)
	_ fs.NodeCreater   = (*node)(nil)
	_ fs.NodeFsyncer   = (*node)(nil)
	_ fs.NodeMkdirer   = (*node)(nil)
	_ fs.NodeUnlinker  = (*node)(nil)
	_ fs.NodeRmdirer   = (*node)(nil)
	_ fs.NodeRenamer   = (*node)(nil)
	_ fs.NodeReaddirer = (*node)(nil)
	_ fs.NodeStatfser  = (*node)(nil)
)

// errStale is returned for a node that is no longer in the tree (it was
// removed or replaced through this mount) when it must be found by path.
var errStale = syscall.ESTALE

// path returns the node's path in the FS below, or ESTALE if the node was
// unlinked.
func (n *node) path() (string, error) {
	var segs []string
	in := n.EmbeddedInode()
	root := in.Root()
	for p := in; p != root; {
		name, parent := p.Parent()
		if parent == nil {
			return "", errStale
		}
		segs = append(segs, name)
		p = parent
	}
	for i, j := 0, len(segs)-1; i < j; i, j = i+1, j-1 {
		segs[i], segs[j] = segs[j], segs[i]
	}
	return path.Join(n.srv.root, strings.Join(segs, "/")), nil
}

func (n *node) childPath(name string) (string, error) {
	p, err := n.path()
	if err != nil {
		return "", err
	}
	return path.Join(p, name), nil
}

func modeOf(fi iofs.FileInfo) uint32 {
	if fi.IsDir() {
		return syscall.S_IFDIR
	}
	return syscall.S_IFREG
}

// fillAttr copies fi into a. Inode number and file type are set by go-fuse
// from the node's stable attributes.
func fillAttr(fi iofs.FileInfo, a *fuse.Attr) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		a.FromStat(st)
		a.Ino = 0
	} else {
		a.Nlink = 1
		if t := fi.ModTime(); !t.IsZero() {
			a.SetTimes(&t, &t, &t)
		}
	}
	if fi.IsDir() {
		a.Nlink = max(a.Nlink, 2)
	}
	a.Size = uint64(fi.Size())
	a.Blocks = (a.Size + 511) / 512
	a.Mode = modeOf(fi) | uint32(fi.Mode().Perm())
}

// inoOf returns the inode number of the file at p described by fi.
//
// When the FS below reports the backing file's own identity (a
// *syscall.Stat_t, as volume.OS() does), that identity is used: a file
// that replaced another by a rename made on another mount then is a new
// inode here too, and the kernel never mixes cached pages of the two
// versions. Otherwise numbers go by path (see inoTable); created files get
// a fresh one.
func (s *Server) inoOf(p string, fi iofs.FileInfo, created bool) uint64 {
	if id, ok := identity(fi); ok {
		return id
	}
	if created {
		return s.inos.fresh(p, modeOf(fi))
	}
	return s.inos.get(p, modeOf(fi))
}

// identity returns the inode number for the backing file fi describes,
// if the FS below reports one.
func identity(fi iofs.FileInfo) (uint64, bool) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		if id := uint64(st.Dev)<<32 ^ st.Ino; id > rootIno {
			return id, true
		}
	}
	return 0, false
}

// openAs opens the node's path for reading (and writing) and checks that
// it opened the file the node stands for. Lookup and open are separate
// steps: another mount may have replaced the name in between. Opening the
// new file under the old inode would let the kernel mix cached pages of
// both, so the open fails with ESTALE instead, and the kernel looks the
// name up again and retries.
func (n *node) openAs(write bool) (volume.File, error) {
	p, err := n.path()
	if err != nil {
		return nil, err
	}
	var f volume.File
	if write {
		f, err = n.srv.fsys.OpenReadWrite(p)
	} else {
		f, err = n.srv.fsys.Open(p)
	}
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	if id, ok := identity(fi); ok && id != n.StableAttr().Ino {
		_ = f.Close()
		return nil, errStale
	}
	return f, nil
}

// child makes (or finds) the inode of the child at p described by fi.
func (n *node) child(ctx context.Context, p string, fi iofs.FileInfo, created bool, out *fuse.EntryOut) *fs.Inode {
	mode := modeOf(fi)
	ino := n.srv.inoOf(p, fi, created)
	fillAttr(fi, &out.Attr)
	return n.NewInode(ctx, &node{srv: n.srv}, fs.StableAttr{Mode: mode, Ino: ino})
}

// Lookup implements fs.NodeLookuper.
func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	p, err := n.childPath(name)
	if err != nil {
		return nil, n.srv.count(opLookup, err)
	}
	fi, err := n.srv.fsys.Stat(p)
	if err != nil {
		return nil, n.srv.count(opLookup, err)
	}
	n.srv.count(opLookup, nil)
	return n.child(ctx, p, fi, false, out), 0
}

// Getattr implements fs.NodeGetattrer. Through an open handle it asks the
// open file, which keeps working after the name is gone.
func (n *node) Getattr(_ context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	var fi iofs.FileInfo
	var err error
	if h, ok := fh.(*handle); ok {
		fi, err = h.stat()
	} else {
		var p string
		if p, err = n.path(); err == nil {
			fi, err = n.srv.fsys.Stat(p)
		}
	}
	if err != nil {
		return n.srv.count(opGetattr, err)
	}
	fillAttr(fi, &out.Attr)
	return n.srv.count(opGetattr, nil)
}

// Setattr implements fs.NodeSetattrer: only the size is applied; mode,
// owner and times are accepted and ignored, as volume.FS has no call for
// them.
func (n *node) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if size, ok := in.GetSize(); ok {
		var err error
		if h, ok := fh.(*handle); ok {
			err = h.truncate(int64(size))
		} else {
			err = n.truncate(int64(size))
		}
		if err != nil {
			return n.srv.count(opSetattr, err)
		}
	}
	n.srv.count(opSetattr, nil)
	// The reply carries fresh attributes; Getattr counts itself.
	return n.Getattr(ctx, fh, out)
}

func (n *node) truncate(size int64) error {
	p, err := n.path()
	if err != nil {
		return err
	}
	f, err := n.srv.fsys.OpenReadWrite(p)
	if err != nil {
		return err
	}
	if err := f.Truncate(size); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// Open implements fs.NodeOpener.
func (n *node) Open(_ context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	write := flags&syscall.O_ACCMODE != syscall.O_RDONLY
	h := &handle{node: n, write: write}
	var err error
	h.f, err = n.openAs(write)
	if err != nil {
		return nil, 0, n.srv.count(opOpen, err)
	}
	// The kernel sends O_TRUNC as a separate setattr unless it negotiated
	// atomic truncation; honour it here in case it did.
	if write && flags&syscall.O_TRUNC != 0 {
		if err := h.f.Truncate(0); err != nil {
			_ = h.f.Close()
			return nil, 0, n.srv.count(opOpen, err)
		}
		h.dirty = true
	}
	// No FOPEN_KEEP_CACHE: the kernel drops its cached pages of the file
	// on every open.
	return h, 0, n.srv.count(opOpen, nil)
}

// Create implements fs.NodeCreater. O_EXCL maps to CreateExclusive; a plain
// O_CREAT must not truncate a file that appeared since the kernel's lookup.
func (n *node) Create(ctx context.Context, name string, flags, _ uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	p, err := n.childPath(name)
	if err != nil {
		return nil, nil, 0, n.srv.count(opCreate, err)
	}
	fsys := n.srv.fsys
	var f volume.File
	switch {
	case flags&syscall.O_EXCL != 0:
		f, err = fsys.CreateExclusive(p)
	case flags&syscall.O_TRUNC != 0:
		f, err = fsys.Create(p)
	default:
		f, err = fsys.CreateExclusive(p)
		if errors.Is(err, iofs.ErrExist) {
			f, err = fsys.OpenReadWrite(p)
		}
	}
	if err != nil {
		return nil, nil, 0, n.srv.count(opCreate, err)
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, nil, 0, n.srv.count(opCreate, err)
	}
	ch := n.child(ctx, p, fi, true, out)
	// dirty: a create is flushed on close like a write.
	h := &handle{node: ch.Operations().(*node), write: true, f: f, dirty: true}
	return ch, h, 0, n.srv.count(opCreate, nil)
}

// Mkdir implements fs.NodeMkdirer. volume.FS has only MkdirAll, which does
// not fail on an existing directory, so existence is checked first.
func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	p, err := n.childPath(name)
	if err != nil {
		return nil, n.srv.count(opMkdir, err)
	}
	if _, err := n.srv.fsys.Stat(p); err == nil {
		return nil, n.srv.count(opMkdir, syscall.EEXIST)
	}
	if err := n.srv.fsys.MkdirAll(p, iofs.FileMode(mode&0o777)); err != nil {
		return nil, n.srv.count(opMkdir, err)
	}
	fi, err := n.srv.fsys.Stat(p)
	if err != nil {
		return nil, n.srv.count(opMkdir, err)
	}
	n.srv.count(opMkdir, nil)
	return n.child(ctx, p, fi, true, out), 0
}

func (n *node) remove(op opKind, name string) syscall.Errno {
	p, err := n.childPath(name)
	if err == nil {
		err = n.srv.fsys.Remove(p)
	}
	if err == nil {
		n.srv.inos.forget(p)
	}
	return n.srv.count(op, err)
}

// Unlink implements fs.NodeUnlinker.
func (n *node) Unlink(_ context.Context, name string) syscall.Errno {
	return n.remove(opUnlink, name)
}

// Rmdir implements fs.NodeRmdirer.
func (n *node) Rmdir(_ context.Context, name string) syscall.Errno {
	return n.remove(opRmdir, name)
}

// Rename implements fs.NodeRenamer. volume.FS has no RENAME_NOREPLACE or
// RENAME_EXCHANGE; like GlusterFS, the mount answers EINVAL to them.
func (n *node) Rename(_ context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	if flags != 0 {
		return n.srv.count(opRename, syscall.EINVAL)
	}
	np, ok := newParent.(*node)
	if !ok {
		return n.srv.count(opRename, syscall.EXDEV)
	}
	oldp, err := n.childPath(name)
	if err != nil {
		return n.srv.count(opRename, err)
	}
	newp, err := np.childPath(newName)
	if err != nil {
		return n.srv.count(opRename, err)
	}
	if err := n.srv.fsys.Rename(oldp, newp); err != nil {
		return n.srv.count(opRename, err)
	}
	n.srv.inos.rename(oldp, newp)
	return n.srv.count(opRename, nil)
}

// Readdir implements fs.NodeReaddirer.
func (n *node) Readdir(_ context.Context) (fs.DirStream, syscall.Errno) {
	p, err := n.path()
	if err != nil {
		return nil, n.srv.count(opReaddir, err)
	}
	des, err := n.srv.fsys.ReadDir(p)
	if err != nil {
		return nil, n.srv.count(opReaddir, err)
	}
	list := make([]fuse.DirEntry, 0, len(des))
	for _, de := range des {
		mode := uint32(syscall.S_IFREG)
		if de.IsDir() {
			mode = syscall.S_IFDIR
		}
		list = append(list, fuse.DirEntry{
			Name: de.Name(),
			Mode: mode,
			Ino:  n.srv.inos.get(path.Join(p, de.Name()), mode),
		})
	}
	return fs.NewListDirStream(list), n.srv.count(opReaddir, nil)
}

// Fsync implements fs.NodeFsyncer for files (fsync and fdatasync alike)
// and, through go-fuse's fallback, fsyncdir for directories.
func (n *node) Fsync(_ context.Context, fh fs.FileHandle, _ uint32) syscall.Errno {
	if n.IsDir() {
		p, err := n.path()
		if err == nil {
			err = n.srv.fsys.SyncDir(p)
		}
		return n.srv.count(opFsyncdir, err)
	}
	h, ok := fh.(*handle)
	if !ok {
		return n.srv.count(opFsync, syscall.EBADF)
	}
	return n.srv.count(opFsync, h.sync())
}

// Statfs implements fs.NodeStatfser.
func (n *node) Statfs(_ context.Context, out *fuse.StatfsOut) syscall.Errno {
	if d := n.srv.opts.StatfsDir; d != "" {
		var st syscall.Statfs_t
		if err := syscall.Statfs(d, &st); err != nil {
			return n.srv.count(opStatfs, err)
		}
		out.FromStatfsT(&st)
		return n.srv.count(opStatfs, nil)
	}
	*out = fuse.StatfsOut{
		Blocks: 1 << 28, Bfree: 1 << 28, Bavail: 1 << 28, // 1 TiB of 4 KiB blocks
		Files: 1 << 24, Ffree: 1 << 24,
		Bsize: 4096, Frsize: 4096, NameLen: 255,
	}
	return n.srv.count(opStatfs, nil)
}

// handle is an open file of the mount.
//
// mu guards f: ReadAt runs under the read lock (volume.File allows
// concurrent ReadAt), everything else under the write lock.
type handle struct {
	node  *node
	write bool

	mu    sync.RWMutex
	f     volume.File // nil after flush closed it; reopened on demand
	dirty bool        // written since the last open, sync or flush
	gone  bool        // released
}

var (
	_ fs.FileReader   = (*handle)(nil)
	_ fs.FileWriter   = (*handle)(nil)
	_ fs.FileFlusher  = (*handle)(nil)
	_ fs.FileReleaser = (*handle)(nil)
)

// fileLocked returns the open file, reopening it by path after a flush.
// The caller holds the write lock.
func (h *handle) fileLocked() (volume.File, error) {
	if h.gone {
		return nil, syscall.EBADF
	}
	if h.f != nil {
		return h.f, nil
	}
	f, err := h.node.openAs(h.write)
	if err != nil {
		return nil, fmt.Errorf("fusefs: reopen after close: %w", err)
	}
	h.f = f
	return f, nil
}

// Read implements fs.FileReader.
func (h *handle) Read(_ context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	srv := h.node.srv
	h.mu.RLock()
	f := h.f
	if f != nil {
		n, err := readFull(f, dest, off)
		h.mu.RUnlock()
		if err != nil {
			return nil, srv.count(opRead, err)
		}
		return fuse.ReadResultData(dest[:n]), srv.count(opRead, nil)
	}
	h.mu.RUnlock()

	h.mu.Lock()
	defer h.mu.Unlock()
	f, err := h.fileLocked()
	if err != nil {
		return nil, srv.count(opRead, err)
	}
	n, err := readFull(f, dest, off)
	if err != nil {
		return nil, srv.count(opRead, err)
	}
	return fuse.ReadResultData(dest[:n]), srv.count(opRead, nil)
}

// readFull reads at off until dest is full or the end of the file; the
// kernel takes a short read as end of file.
func readFull(f volume.File, dest []byte, off int64) (int, error) {
	n, err := f.ReadAt(dest, off)
	if err == io.EOF {
		err = nil
	}
	return n, err
}

// Write implements fs.FileWriter.
func (h *handle) Write(_ context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f, err := h.fileLocked()
	if err != nil {
		return 0, h.node.srv.count(opWrite, err)
	}
	h.dirty = true
	n, err := f.WriteAt(data, off)
	if err != nil && n == 0 {
		return 0, h.node.srv.count(opWrite, err)
	}
	// A short write is reported as such; the kernel retries the rest and
	// gets the error then.
	return uint32(n), h.node.srv.count(opWrite, nil)
}

func (h *handle) truncate(size int64) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	f, err := h.fileLocked()
	if err != nil {
		return err
	}
	h.dirty = true
	return f.Truncate(size)
}

func (h *handle) sync() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	f, err := h.fileLocked()
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	h.dirty = false
	return nil
}

func (h *handle) stat() (iofs.FileInfo, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f, err := h.fileLocked()
	if err != nil {
		return nil, err
	}
	return f.Stat()
}

// Flush implements fs.FileFlusher. It runs on every close(2) of a
// descriptor of the handle, synchronously, so its error is close's error.
// A handle with writes not yet flushed or synced closes its file here:
// that is the moment an NFS client flushes to the server.
func (h *handle) Flush(context.Context) syscall.Errno {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.dirty || h.f == nil {
		return h.node.srv.count(opFlush, nil)
	}
	err := h.f.Close()
	h.f = nil
	h.dirty = false
	return h.node.srv.count(opFlush, err)
}

// Release implements fs.FileReleaser: the last descriptor is gone.
func (h *handle) Release(context.Context) syscall.Errno {
	h.mu.Lock()
	defer h.mu.Unlock()
	var err error
	if h.f != nil {
		err = h.f.Close()
		h.f = nil
	}
	h.gone = true
	return h.node.srv.count(opRelease, err)
}

// lazyUnmount detaches the mount at dir even though it is busy.
func lazyUnmount(dir string) error {
	err := syscall.Unmount(dir, syscall.MNT_DETACH)
	if err == nil {
		return nil
	}
	// Not root: fusermount can do it for the user who mounted.
	for _, prog := range []string{"fusermount3", "fusermount"} {
		if _, lerr := execLookPath(prog); lerr != nil {
			continue
		}
		if ferr := runQuiet(prog, "-u", "-z", dir); ferr == nil {
			return nil
		}
	}
	return err
}

// statErrIsStaleMount reports whether err is what stat(2) returns on a
// FUSE mount whose server died.
func statErrIsStaleMount(err error) bool {
	return errors.Is(err, syscall.ENOTCONN) || errors.Is(err, syscall.ECONNABORTED)
}

// UnmountStale removes mounts left at dir by a process that died without
// unmounting (its mount point then answers ENOTCONN). It also unmounts a
// live mount at dir, so call it only for a mount point the caller owns.
func UnmountStale(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("fusefs: %s: %w", dir, err)
	}
	for range 8 { // mounts may be stacked
		mounted, err := isMountPoint(abs)
		if err != nil {
			return err
		}
		if !mounted {
			if _, err := os.Stat(abs); statErrIsStaleMount(err) {
				return fmt.Errorf("fusefs: %s is a dead mount that is not in mountinfo: %w", abs, err)
			}
			return nil
		}
		if err := syscall.Unmount(abs, 0); err != nil {
			if lerr := lazyUnmount(abs); lerr != nil {
				return fmt.Errorf("fusefs: unmount stale %s: %w (lazy: %v)", abs, err, lerr)
			}
		}
	}
	return fmt.Errorf("fusefs: %s is still mounted after 8 unmounts", abs)
}

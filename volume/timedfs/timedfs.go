// Package timedfs wraps a volume.FS so that every call is timed and
// reported to an Observer: a slow NFS server shows as slow operations.
// It imports no engine package; the observer (a histogram per operation,
// engine/datametrics) is given to Wrap.
package timedfs

import (
	"io/fs"
	"time"

	"github.com/kaas-dev/kaas/volume"
)

// Op is one kind of filesystem call.
type Op int

// The operations timed. File.Seek is not: it moves a position only.
const (
	Create Op = iota
	CreateExclusive
	Open
	OpenReadWrite
	Rename
	Remove
	MkdirAll
	ReadDir
	Stat
	SyncDir
	Read  // File.Read and File.ReadAt
	Write // File.Write and File.WriteAt
	Fsync // File.Sync
	Truncate
	Fstat // File.Stat
	Close
	NumOps // the number of operations, not one
)

var opNames = [NumOps]string{
	Create: "create", CreateExclusive: "create_exclusive", Open: "open", OpenReadWrite: "open_read_write",
	Rename: "rename", Remove: "remove", MkdirAll: "mkdir_all", ReadDir: "readdir", Stat: "stat",
	SyncDir: "syncdir", Read: "read", Write: "write", Fsync: "fsync", Truncate: "truncate",
	Fstat: "fstat", Close: "close",
}

// String is the operation's label value.
func (o Op) String() string {
	if o < 0 || o >= NumOps {
		return "unknown"
	}
	return opNames[o]
}

// Observer is told how long each call took, error or not. It is called on
// the caller's goroutine and must not block.
type Observer interface {
	ObserveOp(op Op, d time.Duration)
}

// Wrap returns fsys timed by now (time.Now in production). Files it opens
// implement volume.Fder when fsys's files do, so sendfile still applies
// (its transfers are not timed).
func Wrap(fsys volume.FS, obs Observer, now func() time.Time) volume.FS {
	if now == nil {
		now = time.Now
	}
	return &timedFS{inner: fsys, obs: obs, now: now}
}

type timedFS struct {
	inner volume.FS
	obs   Observer
	now   func() time.Time
}

func (t *timedFS) since(op Op, start time.Time) { t.obs.ObserveOp(op, t.now().Sub(start)) }

func (t *timedFS) file(op Op, open func(string) (volume.File, error), name string) (volume.File, error) {
	start := t.now()
	f, err := open(name)
	t.since(op, start)
	if err != nil {
		return nil, err
	}
	tf := &timedFile{inner: f, fs: t}
	if fd, ok := f.(volume.Fder); ok {
		return &timedFdFile{timedFile: tf, fd: fd}, nil
	}
	return tf, nil
}

func (t *timedFS) Create(name string) (volume.File, error) {
	return t.file(Create, t.inner.Create, name)
}

func (t *timedFS) CreateExclusive(name string) (volume.File, error) {
	return t.file(CreateExclusive, t.inner.CreateExclusive, name)
}

func (t *timedFS) Open(name string) (volume.File, error) { return t.file(Open, t.inner.Open, name) }

func (t *timedFS) OpenReadWrite(name string) (volume.File, error) {
	return t.file(OpenReadWrite, t.inner.OpenReadWrite, name)
}

func (t *timedFS) Rename(oldname, newname string) error {
	defer t.since(Rename, t.now())
	return t.inner.Rename(oldname, newname)
}

func (t *timedFS) Remove(name string) error {
	defer t.since(Remove, t.now())
	return t.inner.Remove(name)
}

func (t *timedFS) MkdirAll(name string, perm fs.FileMode) error {
	defer t.since(MkdirAll, t.now())
	return t.inner.MkdirAll(name, perm)
}

func (t *timedFS) ReadDir(name string) ([]fs.DirEntry, error) {
	defer t.since(ReadDir, t.now())
	return t.inner.ReadDir(name)
}

func (t *timedFS) Stat(name string) (fs.FileInfo, error) {
	defer t.since(Stat, t.now())
	return t.inner.Stat(name)
}

func (t *timedFS) SyncDir(name string) error {
	defer t.since(SyncDir, t.now())
	return t.inner.SyncDir(name)
}

type timedFile struct {
	inner volume.File
	fs    *timedFS
}

// timedFdFile is a timedFile whose inner file has a descriptor.
type timedFdFile struct {
	*timedFile
	fd volume.Fder
}

func (f *timedFdFile) Fd() uintptr { return f.fd.Fd() }

func (f *timedFile) Read(p []byte) (int, error) {
	defer f.fs.since(Read, f.fs.now())
	return f.inner.Read(p)
}

func (f *timedFile) ReadAt(p []byte, off int64) (int, error) {
	defer f.fs.since(Read, f.fs.now())
	return f.inner.ReadAt(p, off)
}

func (f *timedFile) Write(p []byte) (int, error) {
	defer f.fs.since(Write, f.fs.now())
	return f.inner.Write(p)
}

func (f *timedFile) WriteAt(p []byte, off int64) (int, error) {
	defer f.fs.since(Write, f.fs.now())
	return f.inner.WriteAt(p, off)
}

func (f *timedFile) Seek(offset int64, whence int) (int64, error) {
	return f.inner.Seek(offset, whence)
}

func (f *timedFile) Close() error {
	defer f.fs.since(Close, f.fs.now())
	return f.inner.Close()
}

func (f *timedFile) Name() string { return f.inner.Name() }

func (f *timedFile) Sync() error {
	defer f.fs.since(Fsync, f.fs.now())
	return f.inner.Sync()
}

func (f *timedFile) Truncate(size int64) error {
	defer f.fs.since(Truncate, f.fs.now())
	return f.inner.Truncate(size)
}

func (f *timedFile) Stat() (fs.FileInfo, error) {
	defer f.fs.since(Fstat, f.fs.now())
	return f.inner.Stat()
}

// Space passes the volume's size through (volume.SpaceOf), untimed: a
// wrapped filesystem tells its size as the one it wraps does.
func (t *timedFS) Space(dir string) (volume.Space, error) { return volume.SpaceOf(t.inner, dir) }

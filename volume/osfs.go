package volume

import (
	"io/fs"
	"os"
)

// Fder is implemented by files backed by an OS file descriptor (the files
// returned by OS()). Code that wants sendfile or other fd-level calls
// type-asserts for it and falls back to Read/ReadAt when it is absent, as it
// is for memfs and faultfs files.
type Fder interface {
	Fd() uintptr
}

const (
	filePerm = 0o644
	dirPerm  = 0o755
)

// osFS is the production FS: a thin layer over package os. It adds no
// caching and no retries: retry policy belongs to callers, who know whether
// an operation is idempotent.
type osFS struct{}

// OS returns the FS backed by the operating system. Files are created 0644
// (before umask). The files it returns are *os.File and implement Fder.
func OS() FS { return osFS{} }

// openFile wraps os.OpenFile so that a failed open yields a nil File
// interface rather than a typed nil *os.File.
func openFile(name string, flag int) (File, error) {
	f, err := os.OpenFile(name, flag, filePerm)
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (osFS) Create(name string) (File, error) {
	return openFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC)
}

func (osFS) CreateExclusive(name string) (File, error) {
	return openFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL)
}

func (osFS) Open(name string) (File, error) {
	return openFile(name, os.O_RDONLY)
}

func (osFS) OpenReadWrite(name string) (File, error) {
	return openFile(name, os.O_RDWR)
}

func (osFS) Rename(oldname, newname string) error {
	return os.Rename(oldname, newname)
}

func (osFS) Remove(name string) error {
	return os.Remove(name)
}

// MkdirAll creates name and its missing parents with perm, or 0755 when perm
// is zero.
func (osFS) MkdirAll(name string, perm fs.FileMode) error {
	if perm == 0 {
		perm = dirPerm
	}
	return os.MkdirAll(name, perm)
}

func (osFS) ReadDir(name string) ([]fs.DirEntry, error) {
	return os.ReadDir(name)
}

func (osFS) Stat(name string) (fs.FileInfo, error) {
	return os.Stat(name)
}

// SyncDir fsyncs the directory through a read-only descriptor, which is what
// makes creates, renames and removes in it durable on Linux.
func (osFS) SyncDir(name string) error {
	d, err := os.Open(name)
	if err != nil {
		return err
	}
	serr := d.Sync()
	cerr := d.Close()
	if serr != nil {
		return serr
	}
	return cerr
}

var _ Fder = (*os.File)(nil)

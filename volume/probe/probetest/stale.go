// Package probetest holds test doubles for the volume probe and the
// cross-host check: a per-host view of a shared volume whose reads can be
// served from a stale client cache, as stock GlusterFS caching does.
package probetest

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/kaas-dev/kaas/volume"
)

// StaleView is one host's view of a shared volume.FS. It remembers what
// this host last read from each file; while Stale is on, opening a file
// this host has read before returns those remembered contents, whatever
// other hosts wrote since (a close-to-open violation). Writes, renames and
// removes through the view itself drop its memory of the names involved,
// as a client's own changes do.
type StaleView struct {
	inner volume.FS
	stale atomic.Bool
	// StaleReads counts opens served from the remembered contents.
	StaleReads atomic.Int64

	mu    sync.Mutex
	cache map[string][]byte
}

var _ volume.FS = (*StaleView)(nil)

// NewStaleView returns a view of inner that serves stale reads while
// SetStale(true).
func NewStaleView(inner volume.FS) *StaleView {
	return &StaleView{inner: inner, cache: map[string][]byte{}}
}

// SetStale turns stale reads on or off.
func (v *StaleView) SetStale(on bool) { v.stale.Store(on) }

func (v *StaleView) forget(names ...string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, n := range names {
		delete(v.cache, n)
	}
}

// Open implements volume.FS, from the remembered contents when stale.
func (v *StaleView) Open(name string) (volume.File, error) {
	v.mu.Lock()
	old, ok := v.cache[name]
	v.mu.Unlock()
	if ok && v.stale.Load() {
		v.StaleReads.Add(1)
		return newMemFile(name, old), nil
	}
	data, err := volume.ReadFile(v.inner, name)
	if err != nil {
		return nil, err
	}
	v.mu.Lock()
	v.cache[name] = data
	v.mu.Unlock()
	return newMemFile(name, data), nil
}

// Create implements volume.FS.
func (v *StaleView) Create(name string) (volume.File, error) {
	v.forget(name)
	return v.inner.Create(name)
}

// CreateExclusive implements volume.FS.
func (v *StaleView) CreateExclusive(name string) (volume.File, error) {
	v.forget(name)
	return v.inner.CreateExclusive(name)
}

// OpenReadWrite implements volume.FS.
func (v *StaleView) OpenReadWrite(name string) (volume.File, error) {
	v.forget(name)
	return v.inner.OpenReadWrite(name)
}

// Rename implements volume.FS.
func (v *StaleView) Rename(oldname, newname string) error {
	v.forget(oldname, newname)
	return v.inner.Rename(oldname, newname)
}

// Remove implements volume.FS.
func (v *StaleView) Remove(name string) error {
	v.forget(name)
	return v.inner.Remove(name)
}

// MkdirAll implements volume.FS.
func (v *StaleView) MkdirAll(name string, perm fs.FileMode) error {
	return v.inner.MkdirAll(name, perm)
}

// ReadDir implements volume.FS.
func (v *StaleView) ReadDir(name string) ([]fs.DirEntry, error) { return v.inner.ReadDir(name) }

// Stat implements volume.FS.
func (v *StaleView) Stat(name string) (fs.FileInfo, error) { return v.inner.Stat(name) }

// SyncDir implements volume.FS.
func (v *StaleView) SyncDir(name string) error { return v.inner.SyncDir(name) }

// memFile is a read-only file over a byte slice.
type memFile struct {
	*bytes.Reader
	name string
	size int64
}

func newMemFile(name string, data []byte) *memFile {
	return &memFile{Reader: bytes.NewReader(data), name: name, size: int64(len(data))}
}

func (f *memFile) Name() string { return f.name }
func (f *memFile) Close() error { return nil }
func (f *memFile) Sync() error  { return nil }
func (f *memFile) Write([]byte) (int, error) {
	return 0, &fs.PathError{Op: "write", Path: f.name, Err: syscall.EBADF}
}
func (f *memFile) WriteAt([]byte, int64) (int, error) {
	return 0, &fs.PathError{Op: "write", Path: f.name, Err: syscall.EBADF}
}
func (f *memFile) Truncate(int64) error {
	return &fs.PathError{Op: "truncate", Path: f.name, Err: syscall.EBADF}
}
func (f *memFile) Stat() (fs.FileInfo, error) { return fileInfo{f.name, f.size}, nil }

var _ io.ReaderAt = (*memFile)(nil)

type fileInfo struct {
	name string
	size int64
}

func (i fileInfo) Name() string       { return i.name }
func (i fileInfo) Size() int64        { return i.size }
func (i fileInfo) Mode() fs.FileMode  { return 0o444 }
func (i fileInfo) ModTime() time.Time { return time.Time{} }
func (i fileInfo) IsDir() bool        { return false }
func (i fileInfo) Sys() any           { return nil }

// String describes the view for test failures.
func (v *StaleView) String() string {
	return fmt.Sprintf("stale view (stale=%v, %d stale reads)", v.stale.Load(), v.StaleReads.Load())
}

// Package volume is the seam through which every filesystem call of kaas goes.
//
// The shared volume promises only three things (see docs/design.md §1): a rename
// within one directory is atomic, an exclusive create is atomic, and
// close-to-open visibility. The FS interface exposes exactly the calls kaas
// needs and documents, per call, what kaas may and may not assume of it, so
// that a test implementation (memfs, faultfs) can behave like the floor of
// that contract rather than like a local disk.
//
// This package imports no other kaas package.
package volume

import (
	"io"
	"io/fs"
)

// FS is the filesystem seam. Paths are slash-separated and may be absolute
// or relative; implementations do not interpret them beyond the OS.
//
// Errors follow the os package: errors.Is(err, fs.ErrNotExist) and
// errors.Is(err, fs.ErrExist) hold where the os package would make them hold.
type FS interface {
	// Create opens name for reading and writing, creating it if absent and
	// truncating it if present. The new directory entry is durable only after
	// SyncDir of its parent; the contents only after File.Sync.
	Create(name string) (File, error)

	// CreateExclusive creates name with O_CREAT|O_EXCL: exactly one racer
	// succeeds; the others get an error satisfying errors.Is(err, fs.ErrExist).
	// On real shared filesystems an EEXIST is not proof that another host
	// holds a finished claim: callers re-read it.
	CreateExclusive(name string) (File, error)

	// Open opens an existing file read-only. On a shared filesystem this is
	// the only call that guarantees fresh contents (close-to-open).
	Open(name string) (File, error)

	// OpenReadWrite opens an existing file for reading and writing without
	// truncating it. Writes go to the offset of the file position; callers
	// that append seek or track their own offset through WriteAt.
	OpenReadWrite(name string) (File, error)

	// Rename atomically replaces newname with oldname when both are in the
	// same directory. The rename is durable only after SyncDir of the
	// directory (both directories if they differ). An error may mean the
	// rename was applied and the reply lost: re-read before retrying.
	Rename(oldname, newname string) error

	// Remove removes a file or an empty directory. Removing a file another
	// host holds open may leave a hidden .nfsXXXX file behind on NFS.
	Remove(name string) error

	// MkdirAll creates a directory and any missing parents. It is a sequence
	// of steps, not an atomic one; new entries are durable after SyncDir of
	// each parent.
	MkdirAll(name string, perm fs.FileMode) error

	// ReadDir lists the names in a directory, sorted. On a shared filesystem
	// the listing may be served from a cache that is seconds old: never decide
	// ownership or fencing from it alone.
	ReadDir(name string) ([]fs.DirEntry, error)

	// Stat describes a file. Like ReadDir, it may be stale across hosts.
	Stat(name string) (fs.FileInfo, error)

	// SyncDir makes the directory's entries (creates, renames, removes)
	// durable. An error here is final for whatever was renamed into it.
	SyncDir(name string) error
}

// File is an open file. It is used by one goroutine at a time, except that
// ReadAt may be called concurrently with itself and with writes (pread).
type File interface {
	io.Reader
	io.ReaderAt
	io.Writer
	io.WriterAt
	io.Seeker
	io.Closer

	// Name returns the name the file was opened with.
	Name() string
	// Sync flushes the file's data and metadata to stable storage. A failed
	// Sync is final: the data written since the last successful Sync may be
	// lost, and retrying Sync may falsely report success (Linux marks the
	// pages clean and reports the error once). Callers never retry it.
	Sync() error
	// Truncate changes the size of the file.
	Truncate(size int64) error
	// Stat describes the open file.
	Stat() (fs.FileInfo, error)
}

package volume

import (
	"errors"
	"fmt"
)

// Space is the size of the filesystem a directory is on, as statfs(2)
// reports it: Total bytes, and Usable bytes (free to an unprivileged
// writer, what a partition log may still grow into).
type Space struct {
	Total, Usable int64
}

// Spacer is implemented by filesystems that can tell their size (the one
// OS returns). Test filesystems (memfs, faultfs) do not: their size is
// unknown.
type Spacer interface {
	Space(dir string) (Space, error)
}

// ErrSpaceUnknown is SpaceOf's answer for a filesystem that cannot tell
// its size.
var ErrSpaceUnknown = errors.New("filesystem does not report its size")

// SpaceOf returns the size of the filesystem dir is on, or an error
// wrapping ErrSpaceUnknown when fsys cannot tell. On a shared volume this
// is a call to the server (NFS FSSTAT): it may be slow.
func SpaceOf(fsys FS, dir string) (Space, error) {
	s, ok := fsys.(Spacer)
	if !ok {
		return Space{}, fmt.Errorf("size of %s: %w", dir, ErrSpaceUnknown)
	}
	return s.Space(dir)
}

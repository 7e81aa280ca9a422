package partlog

import (
	"errors"
	"fmt"
	"io/fs"
	"path"

	"github.com/kaas-dev/kaas/volume"
)

// ReadFence returns the leader epoch in a partition's fence, or -1 when the
// partition has none yet. It opens and reads the file (close-to-open), so
// the answer is fresh even on a shared volume.
func ReadFence(fsys volume.FS, dir string) (int32, error) { return readFence(fsys, dir) }

// Info is what a reader without the writer's handles can tell of a log:
// the manifest's view as of its last checkpoint, and the files' sizes.
type Info struct {
	Epoch          int32 // the fence
	LogStartOffset int64
	// CheckpointEnd is the end offset as of the manifest's last durable
	// checkpoint; a live writer may be ahead of it.
	CheckpointEnd int64
	Segments      int
	SizeBytes     int64
}

// Inspect reads a partition directory without opening the log: no recovery,
// no writes, safe while a writer holds it.
func Inspect(fsys volume.FS, dir string) (Info, error) {
	var info Info
	epoch, err := readFence(fsys, dir)
	if err != nil {
		return info, err
	}
	info.Epoch = epoch
	// The manifest recovery would use: the highest writer epoch's (the
	// fence holder's opened directly, the listing may be stale).
	m, err := readManifest(fsys, dir, epoch)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return info, fmt.Errorf("inspect %s: %w", dir, err)
	}
	if m != nil {
		info.LogStartOffset = m.LogStartOffset
		info.Segments = len(m.Segments)
		info.CheckpointEnd = m.Checkpoint.NextOffset
		for _, s := range m.Segments {
			if s.Sealed && s.EndOffset > info.CheckpointEnd {
				info.CheckpointEnd = s.EndOffset
			}
		}
	}
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return info, fmt.Errorf("inspect %s: %w", dir, err)
	}
	for _, e := range ents {
		if st, err := fsys.Stat(path.Join(dir, e.Name())); err == nil && !st.IsDir() {
			info.SizeBytes += st.Size()
		}
	}
	return info, nil
}

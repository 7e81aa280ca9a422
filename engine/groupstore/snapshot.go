package groupstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/partlog"
)

// snapshotFile is one snapshot name found in the shard directory.
type snapshotFile struct {
	offset int64
	epoch  int32
	name   string
}

// listSnapshots returns the snapshot files in dir, newest (highest offset,
// then highest epoch) first. The listing may be stale on a shared volume;
// that only hides a snapshot, and the log replay covers what it would have.
func listSnapshots(fsys volume.FS, dir string) ([]snapshotFile, error) {
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list snapshots in %s: %w", dir, err)
	}
	var out []snapshotFile
	for _, e := range ents {
		if off, epoch, ok := parseSnapshotName(e.Name()); ok {
			out = append(out, snapshotFile{offset: off, epoch: epoch, name: e.Name()})
		}
	}
	slices.SortFunc(out, func(a, b snapshotFile) int {
		if c := -cmpInt(a.offset, b.offset); c != 0 {
			return c
		}
		return -cmpInt(int64(a.epoch), int64(b.epoch))
	})
	return out, nil
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// pendingSnapshot is a table serialised under the append lock, to be
// written outside it.
type pendingSnapshot struct {
	offset int64
	data   []byte
}

// takeSnapshotLocked serialises the table as of the log end. s.mu and
// s.snapSem are held; the caller writes the result with writeSnapshot.
func (s *Store) takeSnapshotLocked() *pendingSnapshot {
	s.sinceSnap = 0
	return &pendingSnapshot{offset: s.next, data: s.tbl.encodeSnapshot(s.cfg.Index, s.next, s.cfg.Epoch)}
}

// writeSnapshot waits until everything the snapshot covers is durable and
// fence-checked, then writes it atomically and removes snapshots older than
// the previous one. Waiting first means a snapshot never names data the log
// may lose (a failed fsync, or a fence that stopped this owner); the check
// at load (partlog.CheckSnapshot) still guards against an owner that passed its
// last fence check and then wrote late.
func (s *Store) writeSnapshot(ctx context.Context, p *pendingSnapshot) error {
	if p.offset > 0 {
		if err := s.log.Sync(ctx, p.offset-1); err != nil {
			s.noteFailure(err)
			return fmt.Errorf("snapshot at %d: sync: %w", p.offset, err)
		}
	}
	name := path.Join(s.cfg.Dir, SnapshotName(p.offset, s.cfg.Epoch))
	if err := volume.WriteFileAtomic(s.cfg.FS, name, p.data); err != nil {
		return fmt.Errorf("snapshot at %d: %w", p.offset, err)
	}
	s.mu.Lock()
	floor := s.lastSnap
	s.lastSnap = max(s.lastSnap, p.offset)
	s.mu.Unlock()
	s.logger.V(1).Info("wrote snapshot", "offset", p.offset, "bytes", len(p.data))
	// Keep this snapshot and the one before it.
	s.removeSnapshotsBelow(floor)
	s.truncateBelow(floor)
	return nil
}

// truncateBelow deletes the log's whole segments below floor, the offset of
// the older kept snapshot: both kept snapshots cover everything before
// them, so a load never replays from below floor. Without this a shard's
// log grows forever (a busy group commits thousands of offsets a second).
// Best effort: a failed deletion leaves segments the next round removes.
func (s *Store) truncateBelow(floor int64) {
	if floor <= s.log.LogStartOffset() {
		return
	}
	start, err := s.log.DeleteRecordsBefore(floor)
	if err != nil {
		s.logger.V(1).Info("log truncation below the older snapshot failed", "floor", floor, "err", err.Error())
		return
	}
	s.logger.V(1).Info("truncated the log below the older snapshot", "logStart", start)
}

// removeSnapshotsBelow removes snapshot files with an offset below floor,
// best effort: a leftover is an older snapshot, never used while a newer
// valid one exists, and removed by the next round.
func (s *Store) removeSnapshotsBelow(floor int64) {
	if floor <= 0 {
		return
	}
	files, err := listSnapshots(s.cfg.FS, s.cfg.Dir)
	if err != nil {
		s.logger.V(1).Info("snapshot retention: listing failed", "err", err.Error())
		return
	}
	removed := 0
	for _, f := range files {
		if f.offset >= floor {
			continue
		}
		if err := s.cfg.FS.Remove(path.Join(s.cfg.Dir, f.name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.logger.V(1).Info("snapshot retention: remove failed", "file", f.name, "err", err.Error())
			continue
		}
		removed++
	}
	if removed > 0 {
		if err := s.cfg.FS.SyncDir(s.cfg.Dir); err != nil {
			s.logger.V(1).Info("snapshot retention: sync dir failed", "err", err.Error())
		}
	}
}

// loadSnapshot loads the newest usable snapshot into a fresh table and
// returns it with its offset (-1 and an empty table if none). Snapshots the
// version-conditional rule rejects for good are removed first: those of the
// opener's own epoch must be gone before its log end grows past them, so
// failing to remove one fails the load; older epochs' are best effort.
func (s *Store) loadSnapshot() (table, int64, error) {
	files, err := listSnapshots(s.cfg.FS, s.cfg.Dir)
	if err != nil {
		return newTable(), -1, err
	}
	logStart := s.log.LogStartOffset()
	var usable []snapshotFile
	var ownStale error
	removed := false
	for _, f := range files {
		switch v := partlog.CheckSnapshotAgainst(f.offset, f.epoch, logStart, s.log.EndOffsetForEpoch); v {
		case partlog.SnapshotUsable:
			usable = append(usable, f)
		case partlog.SnapshotBeyondEpoch:
			_, end := s.log.EndOffsetForEpoch(f.epoch)
			s.logger.Info("removing a snapshot beyond its writer's epoch in the log (a fenced owner's late write)",
				"file", f.name, "epochEnd", end)
			err := s.cfg.FS.Remove(path.Join(s.cfg.Dir, f.name))
			switch {
			case err == nil:
				removed = true
			case errors.Is(err, fs.ErrNotExist):
			case f.epoch == s.cfg.Epoch:
				ownStale = errors.Join(ownStale, fmt.Errorf("remove stale snapshot %s: %w", f.name, err))
			default:
				s.logger.V(1).Info("removing a stale snapshot failed", "file", f.name, "err", err.Error())
			}
		default:
			s.logger.V(1).Info("skipping snapshot", "file", f.name, "verdict", int(v), "logStart", logStart)
		}
	}
	if removed {
		if err := s.cfg.FS.SyncDir(s.cfg.Dir); err != nil {
			ownStale = errors.Join(ownStale, fmt.Errorf("remove stale snapshots: sync dir: %w", err))
		}
	}
	if ownStale != nil {
		return newTable(), -1, ownStale
	}
	for _, f := range usable {
		tbl, err := readSnapshot(s.cfg.FS, path.Join(s.cfg.Dir, f.name), f, s.cfg.Index)
		if err != nil {
			// Torn, corrupt or unreadable: an older snapshot or the log
			// replay gives the same table.
			s.logger.Info("skipping unreadable snapshot", "file", f.name, "err", err.Error())
			continue
		}
		return tbl, f.offset, nil
	}
	return newTable(), -1, nil
}

// readSnapshot reads and checks one snapshot file into a fresh table.
func readSnapshot(fsys volume.FS, name string, f snapshotFile, shard int32) (table, error) {
	b, err := volume.ReadFile(fsys, name)
	if err != nil {
		return table{}, err
	}
	tbl := newTable()
	h, err := decodeSnapshot(b, func(key, value []byte, offset int64) {
		tbl.put(key, bytes.Clone(value), offset)
	})
	if err != nil {
		return table{}, err
	}
	if h.Offset != f.offset || h.Epoch != f.epoch || h.Shard != shard {
		return table{}, fmt.Errorf("%w: header says offset %d, epoch %d, shard %d", errBadSnapshot, h.Offset, h.Epoch, h.Shard)
	}
	return tbl, nil
}

package volume

// SetDirSyncerJoined sets the hook a DirSyncer calls after a caller starts
// waiting for the next sync of a directory (tests only: set it before the
// first SyncDir).
func SetDirSyncerJoined(d *DirSyncer, fn func(dir string)) { d.joined = fn }

// DirSyncerDirs is how many directories d has a sync of running or waiting.
func DirSyncerDirs(d *DirSyncer) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.dirs)
}

package volume

import (
	"fmt"
	"path"
	"sync"
)

// DirSyncer coalesces directory fsyncs: group commit per directory, the
// pattern of a partition log's sync rounds applied to SyncDir.
//
// A caller of SyncDir has just created, renamed or removed something in the
// directory and needs a SyncDir that started after that change. If none is
// running, the caller runs one. If one is running, it may have read the
// directory before the change, so the caller waits for the next one; every
// caller arriving while that sync runs shares the one after it. Under load
// a directory sees at most one sync in flight and one waiting, whatever the
// number of callers: N writers into one directory cost about two syncs per
// sync latency instead of N.
//
// Each sync's error goes to every caller it covers, and only to them: a
// failed SyncDir is final for whatever those callers changed (FS.SyncDir),
// and a caller arriving later gets a sync of its own. A DirSyncer is safe for
// concurrent use, holds no goroutine, and forgets a directory when no sync
// of it is running or waiting.
//
// The four questions (docs/volume.md): it adds no operation on the volume,
// only shares SyncDir calls between callers, each of whom still sees a
// SyncDir start after its own change returned; atomicity, re-driving,
// writers and names are those of the callers' own steps.
type DirSyncer struct {
	fsys FS

	mu   sync.Mutex
	dirs map[string]*dirSyncs

	// joined, if set (tests only), is called after a caller starts
	// waiting for the next sync of a directory.
	joined func(dir string)
}

// dirSyncs is one directory's sync in flight and the one waiting for it.
type dirSyncs struct {
	running *dirSync // started; nil when none runs
	next    *dirSync // to start when running ends; nil when nobody waits
}

// dirSync is one SyncDir shared by the callers it covers.
type dirSync struct {
	done chan struct{} // closed when err is set
	err  error
}

// NewDirSyncer returns a DirSyncer whose syncs go to fsys.SyncDir.
func NewDirSyncer(fsys FS) *DirSyncer {
	return &DirSyncer{fsys: fsys, dirs: map[string]*dirSyncs{}}
}

// SyncDir returns once a SyncDir of dir that started after this call began
// has completed, with that sync's error.
func (d *DirSyncer) SyncDir(dir string) error {
	dir = path.Clean(dir)
	d.mu.Lock()
	st := d.dirs[dir]
	if st == nil {
		st = &dirSyncs{}
		d.dirs[dir] = st
	}
	switch {
	case st.running == nil:
		// Nothing in flight: this caller's sync starts now.
		g := &dirSync{done: make(chan struct{})}
		st.running = g
		d.mu.Unlock()
		return d.run(dir, st, g)
	case st.next == nil:
		// The sync in flight may predate our change: start the next one
		// when it ends, for everyone who arrives until then.
		g := &dirSync{done: make(chan struct{})}
		st.next = g
		prev := st.running
		d.mu.Unlock()
		d.noteJoined(dir)
		<-prev.done
		return d.run(dir, st, g)
	default:
		// The next sync has not started (it starts when the running one
		// ends, after this caller's change): share it.
		g := st.next
		d.mu.Unlock()
		d.noteJoined(dir)
		<-g.done
		return g.err
	}
}

func (d *DirSyncer) noteJoined(dir string) {
	if d.joined != nil {
		d.joined(dir)
	}
}

// run runs g, the directory's running sync, and hands over to the next.
func (d *DirSyncer) run(dir string, st *dirSyncs, g *dirSync) error {
	err := d.fsys.SyncDir(dir)
	d.mu.Lock()
	g.err = err
	// The next sync (if any) starts now, in its own caller, which waits
	// on g.done: nobody joins it from here on.
	st.running, st.next = st.next, nil
	if st.running == nil {
		delete(d.dirs, dir)
	}
	d.mu.Unlock()
	close(g.done)
	return err
}

// WriteFileAtomic is the package's WriteFileAtomic with its final directory
// fsync shared through d: temp file, write, fsync, close, rename over name,
// then a coalesced SyncDir of name's directory. Its errors are those of
// WriteFileAtomic.
func (d *DirSyncer) WriteFileAtomic(name string, data []byte) error {
	if err := WriteFileRenamed(d.fsys, name, data); err != nil {
		return err
	}
	dir := path.Clean(path.Dir(name))
	if err := d.SyncDir(dir); err != nil {
		return fmt.Errorf("write %s atomically: renamed, but sync dir %s: %w", name, dir, err)
	}
	return nil
}

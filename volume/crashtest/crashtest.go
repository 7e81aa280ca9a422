// Package crashtest gives the crash sweeps of kaas's named machines the
// volumes they crash: the same workload runs on each Substrate, crashes at
// every operation, and restarts on what the crash left.
//
//   - memfs: one in-memory volume; a crash keeps what was synced.
//   - memfs-syncmeta: the same, but every namespace change (create, rename,
//     remove, mkdir) is durable as soon as it is applied, as on an NFS
//     server before it replies. It finds what a lazy directory sync hides,
//     such as a temp file or a half-done rename that survives the crash.
//   - nfsfs: per-host NFS-like views (volume/nfsfs, no attribute caching)
//     over one memfs: a host's writes reach the server only at Sync or
//     Close, removing an open file leaves a .nfsXXXX file, and a crash drops
//     what every host had not flushed, then what the server had not synced.
package crashtest

import (
	"io/fs"
	"path"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/memfs"
	"github.com/kaas-dev/kaas/volume/nfsfs"
)

// World is one crash point's volume as its hosts see it.
type World interface {
	// Host returns host name's view of the volume (the same view for the
	// same name).
	Host(name string) volume.FS
	// Crash loses what a crash of every host (and of the volume) loses and
	// returns the volume as freshly started hosts see it.
	Crash() World
}

// Substrate builds fresh worlds.
type Substrate struct {
	Name  string
	Fresh func() World
}

// Substrates are the filesystems every sweep runs on.
func Substrates() []Substrate {
	return []Substrate{
		{Name: "memfs", Fresh: func() World { return MemWorld{Mem: memfs.New()} }},
		{Name: "memfs-syncmeta", Fresh: func() World { return MemWorld{Mem: memfs.New(), SyncMeta: true} }},
		{Name: "nfsfs", Fresh: func() World { return newNFSWorld(memfs.New()) }},
	}
}

// MemWorld is one memfs shared by every host: a crash keeps what was
// synced. With SyncMeta every namespace change is durable at once.
type MemWorld struct {
	Mem      *memfs.FS
	SyncMeta bool
}

// Host returns the memfs (every host sees the same one).
func (w MemWorld) Host(string) volume.FS {
	if w.SyncMeta {
		return syncMetaFS{w.Mem}
	}
	return w.Mem
}

// Crash returns the crash clone.
func (w MemWorld) Crash() World { return MemWorld{Mem: w.Mem.CrashClone(), SyncMeta: w.SyncMeta} }

// syncMetaFS syncs the parent directory of every namespace change.
type syncMetaFS struct{ *memfs.FS }

func (s syncMetaFS) syncDirOf(names ...string) {
	for _, n := range names {
		_ = s.FS.SyncDir(path.Dir(n))
	}
}

func (s syncMetaFS) Create(name string) (volume.File, error) {
	f, err := s.FS.Create(name)
	if err == nil {
		s.syncDirOf(name)
	}
	return f, err
}

func (s syncMetaFS) CreateExclusive(name string) (volume.File, error) {
	f, err := s.FS.CreateExclusive(name)
	if err == nil {
		s.syncDirOf(name)
	}
	return f, err
}

func (s syncMetaFS) Rename(oldname, newname string) error {
	err := s.FS.Rename(oldname, newname)
	if err == nil {
		s.syncDirOf(oldname, newname)
	}
	return err
}

func (s syncMetaFS) Remove(name string) error {
	err := s.FS.Remove(name)
	if err == nil {
		s.syncDirOf(name)
	}
	return err
}

func (s syncMetaFS) MkdirAll(name string, perm fs.FileMode) error {
	err := s.FS.MkdirAll(name, perm)
	if err == nil {
		for d := path.Clean(name); d != "." && d != "/"; d = path.Dir(d) {
			s.syncDirOf(d)
		}
	}
	return err
}

// nfsWorld is per-host nfsfs views of one server over a memfs.
type nfsWorld struct {
	backing *memfs.FS
	server  *nfsfs.Server
	views   map[string]*nfsfs.View
}

func newNFSWorld(backing *memfs.FS) *nfsWorld {
	return &nfsWorld{backing: backing, server: nfsfs.New(backing, nfsfs.Options{}), views: map[string]*nfsfs.View{}}
}

func (w *nfsWorld) Host(name string) volume.FS {
	v := w.server.View(name)
	w.views[name] = v
	return v
}

func (w *nfsWorld) Crash() World {
	for _, v := range w.views {
		v.Crash()
	}
	return newNFSWorld(w.backing.CrashClone())
}

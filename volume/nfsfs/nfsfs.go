// Package nfsfs gives each simulated host its own view of one shared volume,
// behaving like an NFS client at the floor of the contract kaas relies on
// (docs/design.md §1): what a stock NFS client is allowed to do, and what the
// filesystems available to tests (a local directory, memfs, GlusterFS in
// strict mode, a plain go-fuse loopback) never do on their own.
//
// A Server wraps the backing volume.FS (memfs in unit tests, a directory
// under a FUSE mount in process tests) and hands out one View per host
// name. Each View models one host's client:
//
//   - Write-back caching. Writes through a View's files stay in the view
//     (dirty extents) until Sync or Close sends them to the backing. The
//     writing host reads its own writes; other hosts see them only after
//     the flush, and are promised them only by an open after it
//     (close-to-open). Crash drops what was not flushed, as a host that
//     loses power drops its dirty pages. This is what makes "acknowledge
//     only what is fsynced" testable across hosts.
//   - Attribute, directory and negative lookup caches. Stat and ReadDir
//     may answer from a per-view cache for AttrTTL and DirTTL, and a failed
//     lookup keeps failing for NegTTL (lookupcache=all), as acregmax,
//     acdirmax and negative dentries do on NFS. Open of a name always
//     revalidates. kaas must never decide fencing, liveness or ownership
//     from Stat or ReadDir alone; these caches make code that does fail.
//   - Silly rename. Removing a file that any host holds open, or renaming
//     over it, leaves a hidden .nfsXXXXXXXXXXXXXXXX file in its directory
//     until the last handle closes, so the directory cannot be removed
//     meanwhile (ENOTEMPTY). kaas's deletes must tolerate that and re-drive.
//
// Namespace operations (create, rename, remove, mkdir) go to the backing at
// once, as NFS sends them to the server synchronously; their durability is
// the backing's business (memfs.CrashClone models a server crash, View.Crash
// a client crash). Everything else passes through.
//
// Paths are keyed by path.Clean: use one spelling of each path (all absolute
// or all relative) with one Server.
package nfsfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kaas-dev/kaas/volume"
)

// ErrCrashed is wrapped by every error of a file that was open on a View
// when it crashed.
var ErrCrashed = errors.New("nfsfs: host crashed")

// Options sets how stale a View's answers may be. Zero TTLs mean no
// caching.
type Options struct {
	AttrTTL time.Duration // Stat answers may be served from the view's cache this long
	DirTTL  time.Duration // ReadDir listings may be this stale
	NegTTL  time.Duration // a failed lookup (ENOENT from Stat or Open) is remembered this long
	// Now is the clock the TTLs are measured with; time.Now if nil.
	Now func() time.Time
}

// node is one open file as the server knows it, shared by every handle on
// it from every view. It is keyed by its current backing path, and moves
// with renames.
type node struct {
	path   string // current backing path; "" once removed for good
	opens  int    // handles open on it, from all views
	hidden bool   // silly-renamed: removed from the backing on last close
}

// Server is the shared volume as seen by many hosts.
type Server struct {
	backing volume.FS
	opts    Options

	mu    sync.Mutex // guards the fields below and orders namespace operations
	nodes map[string]*node
	views map[string]*View
	seq   uint64 // for silly-rename names
}

// New returns a server over backing.
func New(backing volume.FS, opts Options) *Server {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Server{backing: backing, opts: opts, nodes: map[string]*node{}, views: map[string]*View{}}
}

// View returns host's view of the volume, the same one for the same name.
func (s *Server) View(host string) *View {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.views[host]
	if !ok {
		v = &View{s: s, host: host}
		v.reset()
		s.views[host] = v
	}
	return v
}

// Hidden returns the backing paths of the silly-renamed files that open
// handles keep alive, sorted.
func (s *Server) Hidden() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, n := range s.nodes {
		if n.hidden {
			out = append(out, n.path)
		}
	}
	slices.Sort(out)
	return out
}

// acquire registers a handle on the file at backing path c. Called with
// s.mu held.
func (s *Server) acquire(c string) *node {
	n, ok := s.nodes[c]
	if !ok {
		n = &node{path: c}
		s.nodes[c] = n
	}
	n.opens++
	return n
}

// release drops a handle on n; the last one removes a silly-renamed file.
// The removal's error is dropped, as the NFS client's asynchronous unlink
// drops it: the hidden file is then left behind, as on NFS.
func (s *Server) release(n *node) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n.opens--; n.opens > 0 {
		return
	}
	if s.nodes[n.path] == n {
		delete(s.nodes, n.path)
	}
	if n.hidden && n.path != "" {
		_ = s.backing.Remove(n.path)
	}
}

// move rekeys the nodes at oldp, and below it if it is a directory, to
// newp. Called with s.mu held.
func (s *Server) move(oldp, newp string) {
	for p, n := range s.nodes {
		var np string
		switch {
		case p == oldp:
			np = newp
		case strings.HasPrefix(p, oldp+"/"):
			np = newp + p[len(oldp):]
		default:
			continue
		}
		delete(s.nodes, p)
		n.path = np
		s.nodes[np] = n
	}
}

// openFile reports whether c is a regular file that some handle holds
// open, and returns its node. Called with s.mu held.
func (s *Server) openFile(c string) *node {
	n := s.nodes[c]
	if n == nil || n.opens == 0 {
		return nil
	}
	if fi, err := s.backing.Stat(c); err != nil || fi.IsDir() {
		return nil // directories are not silly-renamed; errors are the caller's to meet
	}
	return n
}

// sillyRename renames the open file n at c to a fresh hidden name in the
// same directory. Called with s.mu held.
func (s *Server) sillyRename(n *node, c string) (string, error) {
	dir := path.Dir(c)
	for range 100 {
		s.seq++
		hidden := path.Join(dir, fmt.Sprintf(".nfs%016x", s.seq))
		if _, err := s.backing.Stat(hidden); !errors.Is(err, fs.ErrNotExist) {
			continue // taken, or unknowable: try another name
		}
		if err := s.backing.Rename(c, hidden); err != nil {
			return "", err
		}
		s.move(c, hidden)
		n.hidden = true
		return hidden, nil
	}
	return "", syscall.EBUSY
}

func pathErr(op, name string, err error) error {
	return &fs.PathError{Op: op, Path: name, Err: err}
}

// cause strips the *fs.PathError or *os.LinkError around an errno, so that
// it can be rewrapped with the name the caller used.
func cause(err error) error {
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		return pe.Err
	case errors.As(err, &le):
		return le.Err
	}
	return err
}

// Package probe checks that a directory honours the three promises kaas
// builds on (docs/design.md §1): atomic rename within a directory, atomic
// exclusive create, and close-to-open visibility, plus directory fsync.
//
// It writes and reads a few small files under <dir>/.kaas-probe-<random>
// and removes them when done. With Config.PeerDir (the same directory seen
// through a second mount of the volume) it also checks close-to-open and
// exclusive create across the two mounts, which is where client caching
// breaks the contract. It takes well under a second on a local disk.
package probe

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/kaas-dev/kaas/volume"
)

// Names of the checks, as Check.Name reports them.
const (
	CheckSetup       = "setup"
	CheckSameVolume  = "peer-same-volume"
	CheckRename      = "atomic-rename"
	CheckExclusive   = "exclusive-create"
	CheckCloseToOpen = "close-to-open"
	CheckDirSync     = "dir-fsync"
)

// Config says what to probe and how hard.
type Config struct {
	// Dir is the directory to probe; it must exist.
	Dir string
	// FS is the seam to probe it through (default volume.OS()).
	FS volume.FS
	// PeerDir, if set, is Dir seen through a second mount of the same
	// volume (another "host"); PeerFS reaches it (default FS).
	PeerDir string
	PeerFS  volume.FS
	// ChildCommand, if set, is the argv of a program that calls
	// ServeChildIfAsked (normally the running binary): the probe starts it
	// as a second process that reads and races from outside this one.
	ChildCommand []string

	// Renames is how many times the rename check replaces its file
	// (default 16); Races how many exclusive-create races it runs (default
	// 32); Rounds how many rewrites and appends each close-to-open pair
	// sees (default 3).
	Renames, Races, Rounds int
	// BlockSize is the size of the files replaced by rename (default 16 KiB).
	BlockSize int
}

// Check is the outcome of one check.
type Check struct {
	Name string `json:"name"`
	// Guarantee is the promise the check is about.
	Guarantee string `json:"guarantee"`
	OK        bool   `json:"ok"`
	// Counts holds what the check did and saw, including the tolerated
	// anomalies (ENOENT/ESTALE on open during a replace, races that nobody
	// won).
	Counts map[string]int `json:"counts,omitempty"`
	// Message explains a failure: which promise broke, how, and what to
	// change. On success it may note tolerated anomalies.
	Message  string        `json:"message,omitempty"`
	Duration time.Duration `json:"duration"`
}

// Result is the outcome of a probe.
type Result struct {
	Dir      string        `json:"dir"`
	PeerDir  string        `json:"peerDir,omitempty"`
	Checks   []Check       `json:"checks"`
	Duration time.Duration `json:"duration"`
}

// OK reports whether every check passed.
func (r Result) OK() bool {
	for _, c := range r.Checks {
		if !c.OK {
			return false
		}
	}
	return len(r.Checks) > 0
}

// Err returns nil if every check passed, else an error naming each failed
// guarantee with its message.
func (r Result) Err() error {
	var errs []error
	for _, c := range r.Checks {
		if !c.OK {
			errs = append(errs, errors.New(c.Message))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	where := r.Dir
	if r.PeerDir != "" {
		where += " and " + r.PeerDir
	}
	return fmt.Errorf("volume check of %s failed: %w", where, errors.Join(errs...))
}

// Hints appended to failure messages.
const (
	hintCache = "on GlusterFS turn client caching off (performance.quick-read, io-cache, read-ahead, stat-prefetch, write-behind, open-behind, readdir-ahead and nl-cache off; mount with --attribute-timeout=0 --entry-timeout=0 --negative-timeout=0 --fopen-keep-cache=off); on NFS do not mount with nocto; see docs/mount-options.md"
	hintDocs  = "see docs/mount-options.md"
)

// env is one probe run's state.
type env struct {
	cfg       Config
	fsA, fsB  volume.FS
	dirA      string // the probe directory through Dir
	dirB      string // the probe directory through PeerDir, or ""
	child     *child
	childDir  string // where the child works: dirB if there is a peer
	childNote string // why there is no child, if there should be
}

// Run probes cfg.Dir and returns one Check per guarantee. It never
// returns early on a failed check except when the probe directory cannot
// be set up, and it removes what it created.
func Run(ctx context.Context, cfg Config) Result {
	start := time.Now()
	if cfg.FS == nil {
		cfg.FS = volume.OS()
	}
	if cfg.PeerFS == nil {
		cfg.PeerFS = cfg.FS
	}
	if cfg.Renames <= 0 {
		cfg.Renames = 16
	}
	if cfg.Races <= 0 {
		cfg.Races = 32
	}
	if cfg.Rounds <= 0 {
		cfg.Rounds = 3
	}
	if cfg.BlockSize < minBlock {
		cfg.BlockSize = 16 << 10
	}
	res := Result{Dir: cfg.Dir, PeerDir: cfg.PeerDir}
	finish := func() Result {
		res.Duration = time.Since(start)
		return res
	}
	e := &env{cfg: cfg, fsA: cfg.FS, fsB: cfg.FS}
	setup := Check{Name: CheckSetup, Guarantee: "probe directory"}
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		setup.Message = fmt.Sprintf("setup: random name: %v", err)
		res.Checks = append(res.Checks, setup)
		return finish()
	}
	base := ".kaas-probe-" + hex.EncodeToString(rnd[:])
	e.dirA = path.Join(cfg.Dir, base)
	if err := e.fsA.MkdirAll(e.dirA, 0o755); err != nil {
		setup.Message = fmt.Sprintf("setup: cannot create the probe directory %s: %v", e.dirA, err)
		res.Checks = append(res.Checks, setup)
		return finish()
	}
	// Removal is idempotent: a second pass catches entries the first one
	// raced with (a late ESTALE, a slow listing).
	defer func() {
		if volume.RemoveAll(e.fsA, e.dirA) != nil {
			_ = volume.RemoveAll(e.fsA, e.dirA)
		}
	}()
	if cfg.PeerDir != "" {
		e.fsB, e.dirB = cfg.PeerFS, path.Join(cfg.PeerDir, base)
		c := e.sameVolume(ctx)
		res.Checks = append(res.Checks, c)
		if !c.OK {
			return finish()
		}
	}
	e.childDir = e.dirA
	if e.dirB != "" {
		e.childDir = e.dirB
	}
	if len(cfg.ChildCommand) > 0 {
		c, err := startChild(ctx, cfg.ChildCommand)
		if err != nil {
			e.childNote = err.Error()
		} else {
			e.child = c
			defer c.stop()
		}
	}
	for _, check := range []func(context.Context) Check{e.dirSync, e.rename, e.exclusive, e.closeToOpen} {
		if ctx.Err() != nil {
			break
		}
		t := time.Now()
		c := check(ctx)
		c.Duration = time.Since(t)
		res.Checks = append(res.Checks, c)
	}
	if err := ctx.Err(); err != nil {
		res.Checks = append(res.Checks, Check{Name: CheckSetup, Guarantee: "probe directory",
			Message: fmt.Sprintf("probe interrupted: %v", err)})
	}
	return finish()
}

// sameVolumeWait bounds how long a file written under Dir may take to show
// under PeerDir.
var sameVolumeWait = 2 * time.Second

// sameVolume checks that a file written under Dir shows under PeerDir.
// A fresh name's visibility can lag a little on a cached mount, so it
// retries for up to sameVolumeWait.
func (e *env) sameVolume(ctx context.Context) Check {
	t := time.Now()
	c := Check{Name: CheckSameVolume, Guarantee: "--peer is the same volume", Counts: map[string]int{}}
	name := "same-volume"
	if err := volume.WriteFileAtomic(e.fsA, path.Join(e.dirA, name), block(1, minBlock)); err != nil {
		c.Message = fmt.Sprintf("setup: write %s: %v", path.Join(e.dirA, name), err)
		return c
	}
	var err error
	for ; time.Since(t) < sameVolumeWait && ctx.Err() == nil; time.Sleep(20 * time.Millisecond) {
		c.Counts["attempts"]++
		var vs []uint64
		if vs, err = readBlocks(e.fsB, path.Join(e.dirB, name), minBlock); err == nil && len(vs) == 1 && vs[0] == 1 {
			c.OK = true
			break
		}
	}
	if !c.OK {
		c.Message = fmt.Sprintf("peer: %s does not show the file written as %s (last error: %v): --peer must be the same directory through another mount of the same volume",
			path.Join(e.dirB, name), path.Join(e.dirA, name), err)
	}
	c.Duration = time.Since(t)
	return c
}

// dirSync checks that a directory can be fsynced after a create and a
// rename in it.
func (e *env) dirSync(context.Context) Check {
	c := Check{Name: CheckDirSync, Guarantee: "directory fsync", Counts: map[string]int{}}
	name := path.Join(e.dirA, "dirsync")
	if err := volume.WriteFileAtomic(e.fsA, name, block(0, minBlock)); err != nil {
		c.Message = fmt.Sprintf("directory fsync: writing %s by temp file, fsync, rename and directory fsync failed: %v; %s", name, err, hintDocs)
		return c
	}
	c.Counts["syncs"]++
	dirs := []struct {
		fsys volume.FS
		dir  string
	}{{e.fsA, e.dirA}, {e.fsA, e.cfg.Dir}}
	if e.dirB != "" {
		dirs = append(dirs, struct {
			fsys volume.FS
			dir  string
		}{e.fsB, e.dirB})
	}
	for _, d := range dirs {
		if err := d.fsys.SyncDir(d.dir); err != nil {
			c.Message = fmt.Sprintf("directory fsync: fsync of directory %s failed: %v; kaas needs it to make renames and creates durable; %s", d.dir, err, hintDocs)
			return c
		}
		c.Counts["syncs"]++
	}
	c.OK = true
	return c
}

// joinNotes joins non-empty notes with "; ".
func joinNotes(notes ...string) string {
	var out []string
	for _, n := range notes {
		if n != "" {
			out = append(out, n)
		}
	}
	return strings.Join(out, "; ")
}

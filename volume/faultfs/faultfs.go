// Package faultfs wraps a volume.FS and injects faults described as data.
//
// Unlike pebble's errorfs, which only fails an operation before it runs,
// faultfs can also fail it after it was applied (the reply an NFS client
// lost, or a retransmit that hit the duplicate request cache) and can crash:
// from the crashing operation on, every call on the FS and on every file it
// opened returns ErrCrashed, as if the process had died. Pair it with
// memfs.CrashClone to see what such a crash leaves on disk.
//
// It can also slow the volume down: Delay holds one operation back, Stall
// holds it until the test releases it, and StallFor makes the whole volume
// stop answering for a while, as an NFS server does during a failover or a
// network partition (a hard mount then blocks every call). None of them
// holds the FS's lock while waiting, so other operations go on unless a
// StallFor holds them too.
//
// ParseSpec builds injectors from a text spec, for whole-process tests
// (kaas-broker --inject-faults); inject.go holds ready-made ones, such as
// ReplacedNameErrors for a reader racing a rename on another host.
//
// Every FS call and every File call except Seek and Name is an Op with a
// 0-based Index from one counter shared by the FS and its files, so a test
// can run a workload once to count its operations and then fault each one.
package faultfs

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/kaas-dev/kaas/volume"
)

// ErrCrashed is returned by every operation once the FS has crashed.
var ErrCrashed = errors.New("faultfs: crashed")

// OpKind is the kind of an operation.
type OpKind int

// The operation kinds. FS calls come first, then File calls.
const (
	OpCreate OpKind = iota
	OpCreateExclusive
	OpOpen
	OpOpenReadWrite
	OpRename
	OpRemove
	OpMkdirAll
	OpReadDir
	OpStat
	OpSyncDir
	OpRead
	OpReadAt
	OpWrite
	OpWriteAt
	OpSync
	OpTruncate
	OpClose
	OpFileStat
)

var opNames = [...]string{
	OpCreate:          "Create",
	OpCreateExclusive: "CreateExclusive",
	OpOpen:            "Open",
	OpOpenReadWrite:   "OpenReadWrite",
	OpRename:          "Rename",
	OpRemove:          "Remove",
	OpMkdirAll:        "MkdirAll",
	OpReadDir:         "ReadDir",
	OpStat:            "Stat",
	OpSyncDir:         "SyncDir",
	OpRead:            "Read",
	OpReadAt:          "ReadAt",
	OpWrite:           "Write",
	OpWriteAt:         "WriteAt",
	OpSync:            "Sync",
	OpTruncate:        "Truncate",
	OpClose:           "Close",
	OpFileStat:        "FileStat",
}

func (k OpKind) String() string {
	if k >= 0 && int(k) < len(opNames) {
		return opNames[k]
	}
	return fmt.Sprintf("OpKind(%d)", int(k))
}

// Mutating reports whether an operation of this kind can change what is on
// the volume: creates, renames, removes, mkdirs, directory syncs, writes,
// file syncs and truncates. Close is not counted, although an NFS close
// flushes, because kaas never relies on it for durability.
func (k OpKind) Mutating() bool {
	switch k {
	case OpCreate, OpCreateExclusive, OpRename, OpRemove, OpMkdirAll, OpSyncDir,
		OpWrite, OpWriteAt, OpSync, OpTruncate:
		return true
	}
	return false
}

// Op describes one operation, as an Injector sees it.
type Op struct {
	// Index counts every operation of the FS and its files, from 0.
	Index int
	Kind  OpKind
	// Path is the name passed to the FS call, or the name the file was
	// opened with; for a Rename, the old name.
	Path string
	// NewPath is the new name of a Rename, and empty otherwise.
	NewPath string
}

// Matches reports whether the operation is of the given kind and its path
// (or, for a Rename, its new path) matches pathGlob: path.Match syntax on the
// full path; a glob without a slash also matches the base name, and an empty
// glob matches every path.
func (o Op) Matches(kind OpKind, pathGlob string) bool {
	return o.Kind == kind && (matchPath(pathGlob, o.Path) || (o.NewPath != "" && matchPath(pathGlob, o.NewPath)))
}

func (o Op) String() string {
	if o.NewPath != "" {
		return fmt.Sprintf("#%d %s %s -> %s", o.Index, o.Kind, o.Path, o.NewPath)
	}
	return fmt.Sprintf("#%d %s %s", o.Index, o.Kind, o.Path)
}

type actionKind int

const (
	proceed actionKind = iota
	failBefore
	failAfter
	crashBefore
	crashAfter
	proceedThen
	delay
	stall
	stallFor
)

// Action is what an Injector decides for one Op. Actions are comparable.
type Action struct {
	kind    actionKind
	err     error
	then    *hook           // proceedThen only; a pointer keeps Action comparable
	dur     time.Duration   // delay and stallFor
	release <-chan struct{} // stall
}

type hook struct{ fn func() }

var (
	// Proceed runs the operation normally.
	Proceed = Action{kind: proceed}
	// CrashBefore crashes the FS without applying the operation: it and
	// every later operation return ErrCrashed.
	CrashBefore = Action{kind: crashBefore}
	// CrashAfter applies the operation, then crashes the FS: it and every
	// later operation return ErrCrashed.
	CrashAfter = Action{kind: crashAfter}
)

// FailBefore returns err without applying the operation.
func FailBefore(err error) Action { return Action{kind: failBefore, err: err} }

// ProceedThen applies the operation and then calls fn, before the caller
// gets the operation's own result: for a test that must act at the very
// moment an operation has reached the volume (a harness that kills the
// process after it, say). fn runs outside the FS's lock, so it may not
// assume that no other operation started meanwhile; it must not call back
// into the FS.
func ProceedThen(fn func()) Action { return Action{kind: proceedThen, then: &hook{fn}} }

// FailAfter applies the operation and returns err anyway, like a network
// filesystem whose reply was lost. An open or create that fails after is
// applied and its file closed, so the caller gets no handle.
func FailAfter(err error) Action { return Action{kind: failAfter, err: err} }

// Delay waits d (through the FS's sleep function, see SetSleep) and then
// applies the operation normally: a slow server or a congested network.
func Delay(d time.Duration) Action { return Action{kind: delay, dur: d} }

// Stall blocks the operation until release is closed and then applies it
// normally: a server that stopped answering this call, under a test's
// control. A nil release blocks forever.
func Stall(release <-chan struct{}) Action { return Action{kind: stall, release: release} }

// StallFor makes the whole volume stop answering for d, as a hard-mounted
// NFS client sees a server that is failing over: this operation and every
// operation that starts before d has passed (measured by the FS's sleep
// function) wait until then, and are then applied normally. A later
// StallFor starts a new stall for the operations after it.
func StallFor(d time.Duration) Action { return Action{kind: stallFor, dur: d} }

func (a Action) String() string {
	switch a.kind {
	case proceed:
		return "Proceed"
	case failBefore:
		return fmt.Sprintf("FailBefore(%v)", a.err)
	case failAfter:
		return fmt.Sprintf("FailAfter(%v)", a.err)
	case crashBefore:
		return "CrashBefore"
	case proceedThen:
		return "ProceedThen"
	case delay:
		return fmt.Sprintf("Delay(%v)", a.dur)
	case stall:
		return "Stall"
	case stallFor:
		return fmt.Sprintf("StallFor(%v)", a.dur)
	default:
		return "CrashAfter"
	}
}

// Injector decides the fate of each operation. The FS calls it once per
// Op, serially (under the FS's lock), so it may keep unsynchronised state
// as long as it serves one FS; it must not call back into the FS. A nil
// Injector proceeds with everything.
type Injector func(Op) Action

// FS wraps a volume.FS with fault injection. It is safe for concurrent use
// if the inner FS is.
type FS struct {
	inner volume.FS
	inj   Injector

	mu       sync.Mutex
	ops      int
	mutating int
	crashed  bool
	sleep    func(time.Duration)
	stalled  chan struct{} // closed when the current StallFor ends; nil if none
}

var _ volume.FS = (*FS)(nil)

// New wraps inner with the faults inj decides.
func New(inner volume.FS, inj Injector) *FS {
	return &FS{inner: inner, inj: inj, sleep: time.Sleep}
}

// SetSleep replaces the function Delay and StallFor wait with (time.Sleep
// by default), so that tests can record delays instead of sleeping, or
// block on a channel to hold a stall open for as long as they like.
func (f *FS) SetSleep(sleep func(time.Duration)) {
	if sleep == nil {
		sleep = time.Sleep
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sleep = sleep
}

// Ops returns the number of operations seen so far, failed ones included
// but not those refused after a crash.
func (f *FS) Ops() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ops
}

// MutatingOps returns the number of mutating operations seen so far. A
// crash sweep runs a workload once without faults to learn N, then crashes
// it at mutating operation i, before and after, for each i in [0, N).
func (f *FS) MutatingOps() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mutating
}

// Crashed reports whether the FS has crashed.
func (f *FS) Crashed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.crashed
}

func crashErr(kind OpKind, name string) error {
	return &fs.PathError{Op: kind.String(), Path: name, Err: ErrCrashed}
}

// decide numbers the op, asks the injector, records a crash, and then waits
// (without the lock) for any delay or stall that applies to the op. A crash
// is recorded before the operation runs even for CrashAfter, so that no
// other operation can start once the crashing one has been decided.
func (f *FS) decide(kind OpKind, name, newName string) (Action, error) {
	a, sleep, stalled, err := f.decideLocked(kind, name, newName)
	if err != nil {
		return a, err
	}
	if stalled != nil {
		<-stalled
	}
	switch a.kind {
	case delay:
		sleep(a.dur)
	case stall:
		<-a.release
	}
	return a, nil
}

// decideLocked is decide's part under the lock. It returns the action, the
// sleep function, and the channel of a volume-wide stall the op must wait
// for (nil if none).
func (f *FS) decideLocked(kind OpKind, name, newName string) (Action, func(time.Duration), chan struct{}, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, err := f.decideOp(kind, name, newName)
	if err != nil {
		return a, nil, nil, err
	}
	if a.kind == stallFor {
		ch, sleep, d := make(chan struct{}), f.sleep, a.dur
		f.stalled = ch
		go func() {
			sleep(d)
			f.mu.Lock()
			if f.stalled == ch {
				f.stalled = nil
			}
			f.mu.Unlock()
			close(ch)
		}()
	}
	return a, f.sleep, f.stalled, nil
}

// decideOp numbers the op and asks the injector. Called with f.mu held.
func (f *FS) decideOp(kind OpKind, name, newName string) (Action, error) {
	if f.crashed {
		return Action{}, crashErr(kind, name)
	}
	op := Op{Index: f.ops, Kind: kind, Path: name, NewPath: newName}
	f.ops++
	if kind.Mutating() {
		f.mutating++
	}
	a := Proceed
	if f.inj != nil {
		a = f.inj(op)
	}
	if a.kind == crashBefore || a.kind == crashAfter {
		f.crashed = true
	}
	if a.kind == crashBefore {
		return a, crashErr(kind, name)
	}
	return a, nil
}

// afterErr is the error an operation that ran returns under action a, given
// the error it returned itself. An operation that failed on its own keeps
// its own error. Every operation that ran passes through here, so this is
// also where a ProceedThen hook runs.
func afterErr(a Action, kind OpKind, name string, err error) error {
	if a.kind == proceedThen && a.then != nil && a.then.fn != nil {
		a.then.fn()
	}
	if err != nil {
		return err
	}
	switch a.kind {
	case failAfter:
		return &fs.PathError{Op: kind.String(), Path: name, Err: a.err}
	case crashAfter:
		return crashErr(kind, name)
	}
	return nil
}

// run performs an operation that returns only an error.
func (f *FS) run(kind OpKind, name, newName string, do func() error) error {
	a, err := f.decide(kind, name, newName)
	if err != nil {
		return err
	}
	if a.kind == failBefore {
		return &fs.PathError{Op: kind.String(), Path: name, Err: a.err}
	}
	return afterErr(a, kind, name, do())
}

// open performs an operation that returns a file, closing it when the
// caller is not to get it.
func (f *FS) open(kind OpKind, name string, do func() (volume.File, error)) (volume.File, error) {
	a, err := f.decide(kind, name, "")
	if err != nil {
		return nil, err
	}
	if a.kind == failBefore {
		return nil, &fs.PathError{Op: kind.String(), Path: name, Err: a.err}
	}
	inner, err := do()
	if err = afterErr(a, kind, name, err); err != nil {
		if inner != nil {
			_ = inner.Close()
		}
		return nil, err
	}
	return &file{fs: f, inner: inner}, nil
}

// Create implements volume.FS.
func (f *FS) Create(name string) (volume.File, error) {
	return f.open(OpCreate, name, func() (volume.File, error) { return f.inner.Create(name) })
}

// CreateExclusive implements volume.FS.
func (f *FS) CreateExclusive(name string) (volume.File, error) {
	return f.open(OpCreateExclusive, name, func() (volume.File, error) { return f.inner.CreateExclusive(name) })
}

// Open implements volume.FS.
func (f *FS) Open(name string) (volume.File, error) {
	return f.open(OpOpen, name, func() (volume.File, error) { return f.inner.Open(name) })
}

// OpenReadWrite implements volume.FS.
func (f *FS) OpenReadWrite(name string) (volume.File, error) {
	return f.open(OpOpenReadWrite, name, func() (volume.File, error) { return f.inner.OpenReadWrite(name) })
}

// Rename implements volume.FS.
func (f *FS) Rename(oldname, newname string) error {
	return f.run(OpRename, oldname, newname, func() error { return f.inner.Rename(oldname, newname) })
}

// Remove implements volume.FS.
func (f *FS) Remove(name string) error {
	return f.run(OpRemove, name, "", func() error { return f.inner.Remove(name) })
}

// MkdirAll implements volume.FS.
func (f *FS) MkdirAll(name string, perm fs.FileMode) error {
	return f.run(OpMkdirAll, name, "", func() error { return f.inner.MkdirAll(name, perm) })
}

// ReadDir implements volume.FS.
func (f *FS) ReadDir(name string) ([]fs.DirEntry, error) {
	var out []fs.DirEntry
	err := f.run(OpReadDir, name, "", func() (err error) {
		out, err = f.inner.ReadDir(name)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Stat implements volume.FS.
func (f *FS) Stat(name string) (fs.FileInfo, error) {
	var fi fs.FileInfo
	err := f.run(OpStat, name, "", func() (err error) {
		fi, err = f.inner.Stat(name)
		return err
	})
	if err != nil {
		return nil, err
	}
	return fi, nil
}

// SyncDir implements volume.FS.
func (f *FS) SyncDir(name string) error {
	return f.run(OpSyncDir, name, "", func() error { return f.inner.SyncDir(name) })
}

// file wraps an inner file; its operations share the FS's counter and
// crash state.
type file struct {
	fs    *FS
	inner volume.File
}

var _ volume.File = (*file)(nil)

func (fl *file) Name() string { return fl.inner.Name() }

// rw performs a read or write. Under FailAfter the bytes moved are reported
// alongside the injected error.
func (fl *file) rw(kind OpKind, do func() (int, error)) (int, error) {
	name := fl.inner.Name()
	a, err := fl.fs.decide(kind, name, "")
	if err != nil {
		return 0, err
	}
	if a.kind == failBefore {
		return 0, &fs.PathError{Op: kind.String(), Path: name, Err: a.err}
	}
	n, err := do()
	return n, afterErr(a, kind, name, err)
}

func (fl *file) Read(p []byte) (int, error) {
	return fl.rw(OpRead, func() (int, error) { return fl.inner.Read(p) })
}

func (fl *file) ReadAt(p []byte, off int64) (int, error) {
	return fl.rw(OpReadAt, func() (int, error) { return fl.inner.ReadAt(p, off) })
}

func (fl *file) Write(p []byte) (int, error) {
	return fl.rw(OpWrite, func() (int, error) { return fl.inner.Write(p) })
}

func (fl *file) WriteAt(p []byte, off int64) (int, error) {
	return fl.rw(OpWriteAt, func() (int, error) { return fl.inner.WriteAt(p, off) })
}

// Seek is not an Op (it never reaches the volume), but a crashed FS refuses
// it like everything else.
func (fl *file) Seek(offset int64, whence int) (int64, error) {
	if fl.fs.Crashed() {
		return 0, &fs.PathError{Op: "Seek", Path: fl.inner.Name(), Err: ErrCrashed}
	}
	return fl.inner.Seek(offset, whence)
}

func (fl *file) Sync() error {
	return fl.fs.run(OpSync, fl.inner.Name(), "", fl.inner.Sync)
}

func (fl *file) Truncate(size int64) error {
	return fl.fs.run(OpTruncate, fl.inner.Name(), "", func() error { return fl.inner.Truncate(size) })
}

func (fl *file) Close() error {
	return fl.fs.run(OpClose, fl.inner.Name(), "", fl.inner.Close)
}

func (fl *file) Stat() (fs.FileInfo, error) {
	var fi fs.FileInfo
	err := fl.fs.run(OpFileStat, fl.inner.Name(), "", func() (err error) {
		fi, err = fl.inner.Stat()
		return err
	})
	if err != nil {
		return nil, err
	}
	return fi, nil
}

// matchPath reports whether p matches glob (path.Match syntax). A glob
// without a slash is matched against the base name too, so "*.json"
// matches "a/b/x.json". An empty glob matches everything.
func matchPath(glob, p string) bool {
	if glob == "" {
		return true
	}
	if ok, _ := path.Match(glob, p); ok {
		return true
	}
	if !strings.Contains(glob, "/") {
		ok, _ := path.Match(glob, path.Base(p))
		return ok
	}
	return false
}

package faultfs

import (
	"path"
	"sync"
	"syscall"
)

// The helpers below return fresh Injectors. Those that count keep their own
// state, guarded so that sharing one between FSs is safe, though counting
// then spans them all: use a fresh Injector per run.

// CrashAtMutating crashes the FS at its i-th mutating operation (0-based,
// counting only ops whose Kind is Mutating): before that operation is
// applied, or after it when after is true.
func CrashAtMutating(i int, after bool) Injector {
	var mu sync.Mutex
	seen := 0
	return func(op Op) Action {
		if !op.Kind.Mutating() {
			return Proceed
		}
		mu.Lock()
		n := seen
		seen++
		mu.Unlock()
		if n != i {
			return Proceed
		}
		if after {
			return CrashAfter
		}
		return CrashBefore
	}
}

// FailMatching fails the first count operations of the given kind whose
// path (or, for a Rename, new path) matches pathGlob, with err, before or
// after applying them. A count of zero or less fails every match. The glob
// uses path.Match syntax; one without a slash also matches the base name,
// and an empty glob matches every path.
func FailMatching(kind OpKind, pathGlob string, err error, after bool, count int) Injector {
	var mu sync.Mutex
	failed := 0
	return func(op Op) Action {
		if !op.Matches(kind, pathGlob) {
			return Proceed
		}
		mu.Lock()
		defer mu.Unlock()
		if count > 0 && failed >= count {
			return Proceed
		}
		failed++
		if after {
			return FailAfter(err)
		}
		return FailBefore(err)
	}
}

// StickySyncError fails every file Sync on a path matching pathGlob with err
// (EIO if err is nil), without applying it. Fsync errors are final: a
// kernel that reported one may report success on the next try while the
// data is gone, so a sync that failed once never succeeds here either.
func StickySyncError(pathGlob string, err error) Injector {
	if err == nil {
		err = syscall.EIO
	}
	return func(op Op) Action {
		if op.Kind == OpSync && matchPath(pathGlob, op.Path) {
			return FailBefore(err)
		}
		return Proceed
	}
}

// Chain consults every injector, in order, for every operation (so that
// counting injectors see them all) and returns the first Action that is not
// Proceed. Nil injectors are skipped.
func Chain(injs ...Injector) Injector {
	return func(op Op) Action {
		out := Proceed
		for _, inj := range injs {
			if inj == nil {
				continue
			}
			if a := inj(op); a.kind != proceed && out.kind == proceed {
				out = a
			}
		}
		return out
	}
}

// ReplacedNameErrors models a reader on another host that races the
// replacement of a file by rename: after each Rename whose new path matches
// pathGlob, the next n Open, OpenReadWrite and Stat calls of exactly that
// new path fail with err (ESTALE if err is nil; ENOENT is the other answer
// real shared filesystems give) without being applied. Its lookup found the
// old inode, which the rename then removed. The rename is counted when it is
// decided, so it arms the errors even if it then fails.
func ReplacedNameErrors(pathGlob string, err error, n int) Injector {
	if err == nil {
		err = syscall.ESTALE
	}
	var mu sync.Mutex
	pending := map[string]int{} // cleaned new path -> errors still to give
	return func(op Op) Action {
		switch op.Kind {
		case OpRename:
			if n > 0 && matchPath(pathGlob, op.NewPath) {
				mu.Lock()
				pending[path.Clean(op.NewPath)] = n
				mu.Unlock()
			}
		case OpOpen, OpOpenReadWrite, OpStat:
			p := path.Clean(op.Path)
			mu.Lock()
			defer mu.Unlock()
			if left := pending[p]; left > 0 {
				if left == 1 {
					delete(pending, p)
				} else {
					pending[p] = left - 1
				}
				return FailBefore(err)
			}
		}
		return Proceed
	}
}

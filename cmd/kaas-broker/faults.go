package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/faultfs"
)

// Fault injection for tests of a whole broker process (--inject-faults,
// KAAS_INJECT_FAULTS). Never set in production. The spec is a
// comma-separated list of faults
//
//	[OP:GLOB[:N]>]...OP:GLOB:ACTION[:COUNT[@FIRST][:WHEN]]
//
// OP is a faultfs operation name (CreateExclusive, Rename, Remove, Sync,
// SyncDir, Write, Close, ...). GLOB uses path.Match syntax on the full path
// (for a Rename, on either the old or the new path); a glob without a slash
// also matches the base name. A glob cannot contain ':', ',' or '>'.
//
// ACTION is an errno name (EIO, EBUSY, ENOSPC, ESTALE, ENOENT, EEXIST,
// EACCES, ENOTEMPTY, EROFS) to fail the operation with, or KILL: the broker
// process sends itself SIGKILL at that operation, so that it dies with no
// deferred cleanup, no release and no graceful close, like a crashed host.
// Before dying it writes one line naming the operation to stderr
// ("kaas-broker: injected fault: KILL before #12 Rename ...").
//
// The matching operations are counted from 1 in the order the volume sees
// them. COUNT is how many consecutive matches are faulted (0, the default,
// faults every match); @FIRST (default 1) names the first match faulted. So
// COUNT@FIRST faults matches FIRST .. FIRST+COUNT-1, and 0@FIRST every match
// from FIRST on.
//
// WHEN is "before" (the default: the operation is not applied) or "after":
// the operation is applied and then fails anyway (a lost reply), or for KILL
// is applied and then the process dies before anyone learns its result.
//
// Optional arming prefixes OP:GLOB[:N]> make the fault count its matches
// only from the operation after the N-th (default 1st) match of OP:GLOB;
// several prefixes arm in turn, each counting from the operation after the
// previous one armed. They pick an operation by what happened before it:
// "the first assignment write after this broker first read broker 3's
// heartbeat", or the directory sync of WriteFileAtomic, which has only the
// directory's path, shared by every other file created in that directory.
//
// Examples:
//
//	Remove:/data/trash/*/*/*:EBUSY:6
//	    fail the first 6 removals of files under the trash with EBUSY
//	Rename:/data/__cluster/assignment.json:KILL:1@3:after
//	    die right after the third rename onto the assignment file
//	Rename:/data/__cluster/assignment.json:3>SyncDir:/data/__cluster:KILL:1
//	    die at the directory sync that follows that rename, before it
//	Open:/data/__cluster/brokers/3.json>Rename:/data/__cluster/assignment.json>SyncDir:/data/__cluster:KILL:1:after
//	    die after the directory sync of the first assignment written after
//	    this broker first read broker 3's heartbeat
func withFaults(fsys volume.FS, spec string) (volume.FS, error) {
	return withFaultsKill(fsys, spec, killSelf)
}

// withFaultsKill is withFaults with the KILL action replaced by kill (for
// tests). kill is called with the operation and "before" or "after".
func withFaultsKill(fsys volume.FS, spec string, kill func(op faultfs.Op, when string)) (volume.FS, error) {
	faults, err := parseFaults(spec)
	if err != nil {
		return nil, err
	}
	if len(faults) == 0 {
		return fsys, nil
	}
	injs := make([]faultfs.Injector, len(faults))
	for i, f := range faults {
		injs[i] = f.injector(kill)
	}
	return faultfs.New(fsys, faultfs.Chain(injs...)), nil
}

// fault is one parsed item of a fault spec.
type fault struct {
	kind  faultfs.OpKind
	glob  string
	errno syscall.Errno // the error to fail with; 0 for KILL
	kill  bool
	first int // 1-based index of the first match faulted
	count int // consecutive matches faulted from first; 0: all
	after bool
	// The fault counts matches only once every arming step has seen its
	// n-th match, in turn.
	arms []armStep
}

// armStep is one arming prefix: the n-th (1-based) match of kind on glob.
type armStep struct {
	kind faultfs.OpKind
	glob string
	n    int
}

// parseFaults parses a fault spec (see withFaults); an empty spec has no
// faults.
func parseFaults(spec string) ([]fault, error) {
	if spec == "" {
		return nil, nil
	}
	var out []fault
	for _, item := range strings.Split(spec, ",") {
		f, err := parseFault(item)
		if err != nil {
			return nil, fmt.Errorf("fault %q: %w", item, err)
		}
		out = append(out, f)
	}
	return out, nil
}

func parseFault(item string) (fault, error) {
	f := fault{first: 1}
	var ok bool
	steps := strings.Split(item, ">")
	for _, arm := range steps[:len(steps)-1] {
		parts := strings.Split(arm, ":")
		if len(parts) < 2 || len(parts) > 3 {
			return fault{}, fmt.Errorf("arming prefix %q: want OP:GLOB[:N]>", arm)
		}
		a := armStep{glob: parts[1], n: 1}
		if a.kind, ok = opKind(parts[0]); !ok {
			return fault{}, fmt.Errorf("arming prefix: unknown operation %q", parts[0])
		}
		if len(parts) == 3 {
			n, err := strconv.Atoi(parts[2])
			if err != nil || n < 1 {
				return fault{}, fmt.Errorf("arming prefix: match %q: want a number >= 1", parts[2])
			}
			a.n = n
		}
		f.arms = append(f.arms, a)
	}
	item = steps[len(steps)-1]
	parts := strings.Split(item, ":")
	if len(parts) < 3 || len(parts) > 5 {
		return fault{}, fmt.Errorf("want [OP:GLOB[:N]>]OP:GLOB:ACTION[:COUNT[@FIRST][:before|after]]")
	}
	f.glob = parts[1]
	if f.kind, ok = opKind(parts[0]); !ok {
		return fault{}, fmt.Errorf("unknown operation %q", parts[0])
	}
	if parts[2] == "KILL" {
		f.kill = true
	} else if f.errno, ok = errnos[parts[2]]; !ok {
		return fault{}, fmt.Errorf("unknown action %q: want KILL or an errno name", parts[2])
	}
	if len(parts) >= 4 {
		count, first, hasFirst := strings.Cut(parts[3], "@")
		n, err := strconv.Atoi(count)
		if err != nil || n < 0 {
			return fault{}, fmt.Errorf("count %q: want a number >= 0", count)
		}
		f.count = n
		if hasFirst {
			n, err := strconv.Atoi(first)
			if err != nil || n < 1 {
				return fault{}, fmt.Errorf("first match %q: want a number >= 1", first)
			}
			f.first = n
		}
	}
	if len(parts) == 5 {
		switch parts[4] {
		case "before":
		case "after":
			f.after = true
		default:
			return fault{}, fmt.Errorf("%q: want before or after", parts[4])
		}
	}
	return f, nil
}

// faulted reports whether the n-th match (1-based) is faulted.
func (f fault) faulted(n int) bool {
	return n >= f.first && (f.count == 0 || n < f.first+f.count)
}

// injector returns a fresh Injector for f, counting its own matches.
func (f fault) injector(kill func(op faultfs.Op, when string)) faultfs.Injector {
	var mu sync.Mutex
	armed, armMatches, matches := 0, 0, 0 // armed: arming steps done
	return func(op faultfs.Op) faultfs.Action {
		mu.Lock()
		if armed < len(f.arms) {
			if a := f.arms[armed]; op.Matches(a.kind, a.glob) {
				if armMatches++; armMatches == a.n {
					armed, armMatches = armed+1, 0
				}
			}
			mu.Unlock()
			return faultfs.Proceed
		}
		if !op.Matches(f.kind, f.glob) {
			mu.Unlock()
			return faultfs.Proceed
		}
		matches++
		n := matches
		mu.Unlock()
		switch {
		case !f.faulted(n):
			return faultfs.Proceed
		case f.kill && f.after:
			return faultfs.ProceedThen(func() { kill(op, "after") })
		case f.kill:
			// Called under the FS's lock: no other volume operation of
			// this process starts while it dies.
			kill(op, "before")
			return faultfs.Proceed
		case f.after:
			return faultfs.FailAfter(f.errno)
		default:
			return faultfs.FailBefore(f.errno)
		}
	}
}

// killSelf announces the injected crash on stderr and sends this process
// SIGKILL. It never returns: SIGKILL to oneself is delivered at once, and
// should the process linger this goroutine waits for it.
func killSelf(op faultfs.Op, when string) {
	fmt.Fprintf(os.Stderr, "kaas-broker: injected fault: KILL %s %v\n", when, op)
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	for {
		time.Sleep(time.Hour)
	}
}

func opKind(name string) (faultfs.OpKind, bool) {
	for k := faultfs.OpKind(0); k < 64; k++ {
		if k.String() == name {
			return k, true
		}
	}
	return 0, false
}

var errnos = map[string]syscall.Errno{
	"EIO": syscall.EIO, "EBUSY": syscall.EBUSY, "ENOSPC": syscall.ENOSPC, "ESTALE": syscall.ESTALE,
	"ENOENT": syscall.ENOENT, "EACCES": syscall.EACCES, "ENOTEMPTY": syscall.ENOTEMPTY,
	"EEXIST": syscall.EEXIST, "EROFS": syscall.EROFS,
}

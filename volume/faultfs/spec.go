package faultfs

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ParseSpec parses a text fault spec into an Injector, for tests of a whole
// process (kaas-broker --inject-faults). An empty spec has no faults and
// gives a nil Injector. The spec is a comma-separated list of faults
//
//	[OP:GLOB[:N]>]...OP:GLOB:ACTION[:COUNT[@FIRST][:WHEN]]
//
// OP is an operation name (CreateExclusive, Rename, Remove, Sync, SyncDir,
// Write, Close, ...: see OpKind). GLOB uses path.Match syntax on the full
// path (for a Rename, on either the old or the new path); a glob without a
// slash also matches the base name. A glob cannot contain ':', ',' or '>'.
//
// ACTION is one of
//   - an errno name (EIO, EBUSY, ENOSPC, ESTALE, ENOENT, EEXIST, EACCES,
//     ENOTEMPTY, EROFS) to fail the operation with;
//   - KILL: kill is called with the operation and "before" or "after". The
//     broker's kill sends the process SIGKILL, so that it dies with no
//     deferred cleanup, no release and no graceful close, like a crashed
//     host. A kill "before" is called under the FS's lock, so no other
//     operation starts while it runs; a kill "after" is called once the
//     operation was applied, before its caller learns the result;
//   - DELAY=<duration> (Go syntax: 200ms, 1.5s): the operation waits that
//     long and is then applied normally (see Delay);
//   - STALL=<duration>: the whole volume stops answering for that long, as
//     an NFS server does while it fails over: the operation and every
//     operation that starts meanwhile wait, and are then applied (see
//     StallFor).
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
// DELAY and STALL act before the operation only.
//
// Optional arming prefixes OP:GLOB[:N]> make the fault count its matches
// only from the operation after the N-th (default 1st) match of OP:GLOB;
// several prefixes arm in turn, each counting from the operation after the
// previous one armed. They pick an operation by what happened before it:
// "the first assignment write after this broker first read broker 3's
// heartbeat", or the directory sync of WriteFileAtomic, which has only the
// directory's path, shared by every other file created in that directory.
//
// Each fault counts its own matches; the faults are combined with Chain.
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
//	Sync:/data/*/*/*.log:DELAY=200ms
//	    make every fsync of a segment take 200ms longer
//	Rename:/data/__cluster/assignment.json:STALL=30s:1
//	    the volume stops answering for 30s from the first assignment write
//
// A nil kill makes KILL an error.
func ParseSpec(spec string, kill func(op Op, when string)) (Injector, error) {
	faults, err := parseSpecFaults(spec)
	if err != nil {
		return nil, err
	}
	if len(faults) == 0 {
		return nil, nil
	}
	injs := make([]Injector, len(faults))
	for i, f := range faults {
		if f.kill && kill == nil {
			return nil, fmt.Errorf("fault %d: KILL needs a kill function", i+1)
		}
		injs[i] = f.injector(kill)
	}
	return Chain(injs...), nil
}

// specFault is one parsed item of a fault spec.
type specFault struct {
	kind  OpKind
	glob  string
	errno syscall.Errno // the error to fail with; 0 for the other actions
	kill  bool
	delay time.Duration // DELAY=
	stall time.Duration // STALL=
	first int           // 1-based index of the first match faulted
	count int           // consecutive matches faulted from first; 0: all
	after bool
	// The fault counts matches only once every arming step has seen its
	// n-th match, in turn.
	arms []armStep
}

// armStep is one arming prefix: the n-th (1-based) match of kind on glob.
type armStep struct {
	kind OpKind
	glob string
	n    int
}

// parseSpecFaults parses a fault spec (see ParseSpec); an empty spec has no
// faults.
func parseSpecFaults(spec string) ([]specFault, error) {
	if spec == "" {
		return nil, nil
	}
	var out []specFault
	for _, item := range strings.Split(spec, ",") {
		f, err := parseSpecFault(item)
		if err != nil {
			return nil, fmt.Errorf("fault %q: %w", item, err)
		}
		out = append(out, f)
	}
	return out, nil
}

func parseSpecFault(item string) (specFault, error) {
	f := specFault{first: 1}
	var ok bool
	steps := strings.Split(item, ">")
	for _, arm := range steps[:len(steps)-1] {
		parts := strings.Split(arm, ":")
		if len(parts) < 2 || len(parts) > 3 {
			return specFault{}, fmt.Errorf("arming prefix %q: want OP:GLOB[:N]>", arm)
		}
		a := armStep{glob: parts[1], n: 1}
		if a.kind, ok = opKindNamed(parts[0]); !ok {
			return specFault{}, fmt.Errorf("arming prefix: unknown operation %q", parts[0])
		}
		if len(parts) == 3 {
			n, err := strconv.Atoi(parts[2])
			if err != nil || n < 1 {
				return specFault{}, fmt.Errorf("arming prefix: match %q: want a number >= 1", parts[2])
			}
			a.n = n
		}
		f.arms = append(f.arms, a)
	}
	item = steps[len(steps)-1]
	parts := strings.Split(item, ":")
	if len(parts) < 3 || len(parts) > 5 {
		return specFault{}, fmt.Errorf("want [OP:GLOB[:N]>]OP:GLOB:ACTION[:COUNT[@FIRST][:before|after]]")
	}
	f.glob = parts[1]
	if f.kind, ok = opKindNamed(parts[0]); !ok {
		return specFault{}, fmt.Errorf("unknown operation %q", parts[0])
	}
	if err := f.parseAction(parts[2]); err != nil {
		return specFault{}, err
	}
	if len(parts) >= 4 {
		count, first, hasFirst := strings.Cut(parts[3], "@")
		n, err := strconv.Atoi(count)
		if err != nil || n < 0 {
			return specFault{}, fmt.Errorf("count %q: want a number >= 0", count)
		}
		f.count = n
		if hasFirst {
			n, err := strconv.Atoi(first)
			if err != nil || n < 1 {
				return specFault{}, fmt.Errorf("first match %q: want a number >= 1", first)
			}
			f.first = n
		}
	}
	if len(parts) == 5 {
		switch parts[4] {
		case "before":
		case "after":
			if f.delay > 0 || f.stall > 0 {
				return specFault{}, fmt.Errorf("%q: DELAY and STALL act before the operation only", parts[4])
			}
			f.after = true
		default:
			return specFault{}, fmt.Errorf("%q: want before or after", parts[4])
		}
	}
	return f, nil
}

// parseAction sets f's action from its text.
func (f *specFault) parseAction(action string) error {
	if action == "KILL" {
		f.kill = true
		return nil
	}
	if name, arg, ok := strings.Cut(action, "="); ok && (name == "DELAY" || name == "STALL") {
		d, err := time.ParseDuration(arg)
		if err != nil || d <= 0 {
			return fmt.Errorf("%s duration %q: want a positive Go duration such as 200ms", name, arg)
		}
		if name == "DELAY" {
			f.delay = d
		} else {
			f.stall = d
		}
		return nil
	}
	var ok bool
	if f.errno, ok = specErrnos[action]; !ok {
		return fmt.Errorf("unknown action %q: want KILL, DELAY=<duration>, STALL=<duration> or an errno name", action)
	}
	return nil
}

// faulted reports whether the n-th match (1-based) is faulted.
func (f specFault) faulted(n int) bool {
	return n >= f.first && (f.count == 0 || n < f.first+f.count)
}

// injector returns a fresh Injector for f, counting its own matches.
func (f specFault) injector(kill func(op Op, when string)) Injector {
	var mu sync.Mutex
	armed, armMatches, matches := 0, 0, 0 // armed: arming steps done
	return func(op Op) Action {
		mu.Lock()
		if armed < len(f.arms) {
			if a := f.arms[armed]; op.Matches(a.kind, a.glob) {
				if armMatches++; armMatches == a.n {
					armed, armMatches = armed+1, 0
				}
			}
			mu.Unlock()
			return Proceed
		}
		if !op.Matches(f.kind, f.glob) {
			mu.Unlock()
			return Proceed
		}
		matches++
		n := matches
		mu.Unlock()
		switch {
		case !f.faulted(n):
			return Proceed
		case f.kill && f.after:
			return ProceedThen(func() { kill(op, "after") })
		case f.kill:
			// Called under the FS's lock: no other volume operation of
			// this process starts while it runs.
			kill(op, "before")
			return Proceed
		case f.delay > 0:
			return Delay(f.delay)
		case f.stall > 0:
			return StallFor(f.stall)
		case f.after:
			return FailAfter(f.errno)
		default:
			return FailBefore(f.errno)
		}
	}
}

// opKindNamed returns the OpKind whose String is name.
func opKindNamed(name string) (OpKind, bool) {
	for k := range OpKind(len(opNames)) {
		if k.String() == name {
			return k, true
		}
	}
	return 0, false
}

var specErrnos = map[string]syscall.Errno{
	"EIO": syscall.EIO, "EBUSY": syscall.EBUSY, "ENOSPC": syscall.ENOSPC, "ESTALE": syscall.ESTALE,
	"ENOENT": syscall.ENOENT, "EACCES": syscall.EACCES, "ENOTEMPTY": syscall.ENOTEMPTY,
	"EEXIST": syscall.EEXIST, "EROFS": syscall.EROFS,
}

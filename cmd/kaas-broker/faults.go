package main

import (
	"fmt"
	"os"
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
// parsed by faultfs.ParseSpec, whose doc describes it in full. ACTION is an
// errno name (EIO, EBUSY, ENOSPC, ESTALE, ENOENT, EEXIST, EACCES, ENOTEMPTY,
// EROFS) to fail the operation with, DELAY=<duration> to slow it down,
// STALL=<duration> to make the whole volume stop answering for that long,
// or KILL: the broker process sends itself SIGKILL at that operation, so
// that it dies with no deferred cleanup, no release and no graceful close,
// like a crashed host. Before dying it writes one line naming the operation
// to stderr ("kaas-broker: injected fault: KILL before #12 Rename ...").
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
func withFaults(fsys volume.FS, spec string) (volume.FS, error) {
	return withFaultsKill(fsys, spec, killSelf)
}

// withFaultsKill is withFaults with the KILL action replaced by kill (for
// tests). kill is called with the operation and "before" or "after".
func withFaultsKill(fsys volume.FS, spec string, kill func(op faultfs.Op, when string)) (volume.FS, error) {
	inj, err := faultfs.ParseSpec(spec, kill)
	if err != nil {
		return nil, err
	}
	if inj == nil {
		return fsys, nil
	}
	return faultfs.New(fsys, inj), nil
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

package main

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/faultfs"
)

// Fault injection for tests of a whole broker process (--inject-faults,
// KAAS_INJECT_FAULTS). Never set in production. The spec is a comma-separated
// list of OP:GLOB:ERRNO[:COUNT[:after]], for example
//
//	Remove:/data/trash/*/*/*:EBUSY:6
//
// fails the first 6 removals of files under the trash with EBUSY, before they
// are applied ("after" applies them and then fails: a lost reply). OP is a
// faultfs operation name (Remove, Rename, Sync, SyncDir, Write, ...); GLOB
// uses path.Match syntax on the full path; COUNT 0 fails every match.
func withFaults(fsys volume.FS, spec string) (volume.FS, error) {
	if spec == "" {
		return fsys, nil
	}
	var injs []faultfs.Injector
	for _, item := range strings.Split(spec, ",") {
		parts := strings.Split(item, ":")
		if len(parts) < 3 || len(parts) > 5 {
			return nil, fmt.Errorf("fault %q: want OP:GLOB:ERRNO[:COUNT[:after]]", item)
		}
		kind, ok := opKind(parts[0])
		if !ok {
			return nil, fmt.Errorf("fault %q: unknown operation %q", item, parts[0])
		}
		errno, ok := errnos[parts[2]]
		if !ok {
			return nil, fmt.Errorf("fault %q: unknown errno %q", item, parts[2])
		}
		count := 0
		if len(parts) >= 4 {
			n, err := strconv.Atoi(parts[3])
			if err != nil {
				return nil, fmt.Errorf("fault %q: count: %w", item, err)
			}
			count = n
		}
		after := len(parts) == 5 && parts[4] == "after"
		injs = append(injs, faultfs.FailMatching(kind, parts[1], errno, after, count))
	}
	return faultfs.New(fsys, faultfs.Chain(injs...)), nil
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
}

//go:build unix

package main

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// raiseFDLimit raises the soft RLIMIT_NOFILE to the hard limit and returns
// the soft limit before and after. The Go runtime (1.19 and later) has
// already raised it to hard−1 at start on Linux and the BSDs (package
// syscall's init; hard−1, not hard, so that it can tell a later prlimit
// apart); this takes the last descriptor too and, above all, reads the
// limit the budget is derived from.
func raiseFDLimit() (before, after uint64, err error) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return 0, 0, fmt.Errorf("read RLIMIT_NOFILE: %w", err)
	}
	before = lim.Cur
	if lim.Cur < lim.Max {
		raised := unix.Rlimit{Cur: lim.Max, Max: lim.Max}
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &raised); err != nil {
			return before, before, fmt.Errorf("raise RLIMIT_NOFILE from %d to %d: %w", lim.Cur, lim.Max, err)
		}
		lim = raised
	}
	return before, lim.Cur, nil
}

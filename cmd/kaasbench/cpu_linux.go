//go:build linux

package main

import (
	"fmt"
	"os"
	"syscall"
	"time"
)

// processCPU is the user and system CPU time this process has used.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}

// brokerCPU is the user and system CPU time process pid has used, from
// /proc/PID/stat (in clock ticks, which Linux fixes at 100 per second for
// user space). pid 0 is "not measured".
func brokerCPU(pid int) (time.Duration, bool) {
	if pid <= 0 {
		return 0, false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	return parseProcStatCPU(string(b))
}

package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// parseProcStatCPU reads utime and stime (fields 14 and 15) from a
// /proc/PID/stat line. The command name, field 2, is in parentheses and
// may hold spaces, so fields are counted after its closing one.
func parseProcStatCPU(stat string) (time.Duration, bool) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(stat[i+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, false
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	const tick = 10 * time.Millisecond // USER_HZ = 100
	return time.Duration(ut+st) * tick, true
}

// parseProcStatusRSS reads VmRSS (resident set size, in kB) from a
// /proc/PID/status file and returns it in bytes.
func parseProcStatusRSS(status string) (int64, bool) {
	for _, line := range strings.Split(status, "\n") {
		rest, ok := strings.CutPrefix(line, "VmRSS:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, false
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || kb < 0 {
			return 0, false
		}
		return kb << 10, true
	}
	return 0, false
}

// procRSS is process pid's resident set size in bytes.
func procRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	v, ok := parseProcStatusRSS(string(b))
	if !ok {
		return 0, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
	}
	return v, nil
}

// countFDs is how many file descriptors process pid holds open: the
// entries of /proc/PID/fd.
func countFDs(pid int) (int, error) { return countDirEntries(fmt.Sprintf("/proc/%d/fd", pid), 4096) }

// countDirEntries counts the entries of dir, reading batch names at a time.
func countDirEntries(dir string, batch int) (int, error) {
	f, err := os.Open(dir)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n := 0
	for {
		names, err := f.Readdirnames(batch)
		n += len(names)
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

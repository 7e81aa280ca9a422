package main

import (
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

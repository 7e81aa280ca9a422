package fusefs

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

var execLookPath = exec.LookPath

// runQuiet runs a helper program, returning its output in the error.
func runQuiet(prog string, args ...string) error {
	out, err := exec.Command(prog, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", prog, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// isMountPoint reports whether the absolute path dir is a mount point,
// from /proc/self/mountinfo rather than stat(2), which fails on a mount
// whose FUSE server is gone.
func isMountPoint(dir string) (bool, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false, fmt.Errorf("fusefs: %w", err)
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// Fields: id parent major:minor root mountpoint options ...
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		if unescapeMountinfo(fields[4]) == dir {
			return true, nil
		}
	}
	if err := sc.Err(); err != nil {
		return false, fmt.Errorf("fusefs: read mountinfo: %w", err)
	}
	return false, nil
}

// unescapeMountinfo undoes the kernel's octal escapes (\040 for a space,
// \011, \012, \134) in a mountinfo path.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

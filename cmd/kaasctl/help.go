package main

import (
	"fmt"
	"io"
	"strings"
)

// commandUsages are the commands with a usage text of their own.
var commandUsages = map[string]string{
	"acls":         aclsUsage,
	"quotas":       quotasUsage,
	"users":        usersUsage,
	"groups":       groupsUsage,
	"transactions": transactionsUsage,
	"check-volume": checkVolumeUsage,
}

// wantsHelp: -h, -help or --help before any "--".
func wantsHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help":
			return true
		}
	}
	return false
}

// commandHelp describes one command: its entries of the usage text's
// Commands, its own usage text if it has one, and the sources and output
// flags.
func commandHelp(cmd string, out io.Writer) error {
	entries := commandEntries(cmd)
	own, hasOwn := commandUsages[cmd]
	if entries == "" && !hasOwn {
		return fmt.Errorf("unknown command %q\n\n%s", cmd, usage)
	}
	fmt.Fprintf(out, "kaasctl %s\n\n%s", cmd, entries)
	if hasOwn {
		fmt.Fprintf(out, "\n%s\n", strings.TrimRight(own, "\n"))
	}
	if i := strings.Index(usage, "\nSources"); i >= 0 {
		fmt.Fprint(out, usage[i:])
	}
	return nil
}

// commandEntries are the lines of the usage text's Commands that describe
// cmd: an entry starts two spaces in, its continuation lines further.
func commandEntries(cmd string) string {
	var b strings.Builder
	in := false
	for _, line := range strings.Split(usage, "\n") {
		switch {
		case strings.HasPrefix(line, "  ") && !strings.HasPrefix(line, "   "):
			name := strings.Fields(line)[0]
			in = name == cmd
		case !strings.HasPrefix(line, "   "):
			in = false
		}
		if in {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/kaas-dev/kaas/volume/probe"
)

// The probe re-executes this binary as its second process.
func init() { probe.ServeChildIfAsked() }

const checkVolumeUsage = `usage: kaasctl check-volume --data DIR [--peer DIR2] [--json]

Checks that DIR keeps the promises kaas relies on: atomic rename, atomic
exclusive create, close-to-open visibility and directory fsync. With --peer,
DIR2 is the same directory through a second mount of the volume (as another
host sees it), and close-to-open and exclusive create are also checked
across the two mounts. Exits non-zero when a check fails.
`

// checkVolume runs the volume probe and prints one row per check.
func checkVolume(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("kaasctl check-volume", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), checkVolumeUsage); fs.PrintDefaults() }
	data := fs.String("data", os.Getenv("KAAS_DATA_DIR"), "directory to check (KAAS_DATA_DIR)")
	peer := fs.String("peer", "", "the same directory through another mount of the volume")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	noChild := fs.Bool("no-child", false, "do not start a second process")
	timeout := fs.Duration("timeout", time.Minute, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *data == "" || fs.NArg() > 0 {
		return errors.New(strings.TrimSpace(checkVolumeUsage))
	}
	cfg := probe.Config{Dir: *data, PeerDir: *peer}
	if !*noChild {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("check-volume: find this binary: %w", err)
		}
		cfg.ChildCommand = []string{exe}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	res := probe.Run(ctx, cfg)
	if *asJSON {
		if err := printJSON(out, res); err != nil {
			return err
		}
	} else if err := printChecks(out, res); err != nil {
		return err
	}
	return res.Err()
}

func printChecks(out io.Writer, res probe.Result) error {
	where := res.Dir
	if res.PeerDir != "" {
		where += " (peer " + res.PeerDir + ")"
	}
	fmt.Fprintf(out, "volume check of %s: %s in %v\n", where, verdict(res.OK()), res.Duration.Round(time.Millisecond))
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tGUARANTEE\tRESULT\tTIME\tCOUNTS")
	for _, c := range res.Checks {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%s\n", c.Name, c.Guarantee, verdict(c.OK), c.Duration.Round(time.Millisecond), counts(c.Counts))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, c := range res.Checks {
		switch {
		case c.Message == "":
		case c.OK: // a note
			fmt.Fprintf(out, "\n%s: %s\n", c.Name, c.Message)
		default: // the message names the guarantee
			fmt.Fprintf(out, "\n%s\n", c.Message)
		}
	}
	return nil
}

func verdict(ok bool) string {
	if ok {
		return "pass"
	}
	return "FAIL"
}

func counts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k, v := range m {
		if v != 0 {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	return strings.Join(parts, " ")
}

package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/kaas-dev/kaas/engine/auth"
	"github.com/kaas-dev/kaas/volume"
)

const usersUsage = `usage:
  kaasctl users set NAME --password-file FILE [--mechanism SCRAM-SHA-512] [--iterations 4096] --data DIR
  kaasctl users list [-o table|json] --data DIR
  kaasctl users delete NAME [--mechanism M] --data DIR

Writes and reads SCRAM credentials on the volume with no broker running
(--cluster-dir instead of --data if the cluster directory is elsewhere).
The password file holds the password (one trailing newline is dropped;
- reads standard input); kaas stores only the salted keys`

// usersCmd manages the SCRAM credentials on the volume, as Kafka's
// kafka-storage format --add-scram does before a cluster starts.
func usersCmd(args []string, out io.Writer, stdin io.Reader) error {
	if len(args) == 0 {
		return errors.New(usersUsage)
	}
	verb, args := args[0], args[1:]
	var names []string
	for len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		names, args = append(names, args[0]), args[1:]
	}
	var src source
	fs := flag.NewFlagSet("kaasctl users "+verb, flag.ContinueOnError)
	src.volumeFlags(fs)
	mechanism := fs.String("mechanism", "", "SCRAM-SHA-512 or SCRAM-SHA-256 (set: SCRAM-SHA-512; delete: every one)")
	passwordFile := fs.String("password-file", "", "file holding the password (- for standard input)")
	iterations := fs.Int("iterations", auth.DefaultIterations, fmt.Sprintf("SCRAM iterations (%d to %d)", auth.MinIterations, auth.MaxIterations))
	if err := fs.Parse(args); err != nil {
		return err
	}
	names = append(names, fs.Args()...)
	clusterDir, err := src.clusterToWrite()
	if err != nil {
		return err
	}
	fsys := volume.OS()
	mechs := auth.Mechanisms
	if *mechanism != "" {
		m, ok := auth.MechanismNamed(*mechanism)
		if !ok {
			return fmt.Errorf("unknown mechanism %q: SCRAM-SHA-512 or SCRAM-SHA-256", *mechanism)
		}
		mechs = []auth.Mechanism{m}
	}
	switch {
	case verb == "set" && len(names) == 1:
		if *passwordFile == "" {
			return errors.New("users set needs --password-file FILE (- for standard input): a password on the command line ends up in shell histories")
		}
		password, err := readPassword(*passwordFile, stdin)
		if err != nil {
			return err
		}
		m := auth.ScramSHA512
		if *mechanism != "" {
			m = mechs[0]
		}
		c, err := m.FromPassword(names[0], password, *iterations)
		if err != nil {
			return err
		}
		if err := auth.SaveCredential(fsys, clusterDir, c); err != nil {
			return err
		}
		fmt.Fprintf(out, "user %s: %s credential set (%d iterations)\n", names[0], m.Name, c.Iterations)
		return nil
	case verb == "list" && len(names) == 0:
		creds, err := auth.ListCredentials(fsys, clusterDir)
		if err != nil {
			return err
		}
		return printUsers(out, src.output, creds)
	case verb == "delete" && len(names) == 1:
		deleted := 0
		for _, m := range mechs {
			existed, err := auth.DeleteCredential(fsys, clusterDir, names[0], m)
			if err != nil {
				return err
			}
			if existed {
				deleted++
				fmt.Fprintf(out, "user %s: %s credential deleted\n", names[0], m.Name)
			}
		}
		if deleted == 0 {
			return fmt.Errorf("user %s has no credential to delete", names[0])
		}
		return nil
	}
	return errors.New(usersUsage)
}

// readPassword reads the password file (or stdin for -), dropping one
// trailing newline.
func readPassword(file string, stdin io.Reader) (string, error) {
	var b []byte
	var err error
	if file == "-" {
		b, err = io.ReadAll(io.LimitReader(stdin, 1<<16))
	} else {
		b, err = os.ReadFile(file)
	}
	if err != nil {
		return "", fmt.Errorf("read the password: %w", err)
	}
	p := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if p == "" {
		return "", errors.New("the password file is empty")
	}
	return p, nil
}

// userRow is what users list shows of a credential: never its keys.
type userRow struct {
	User       string `json:"user"`
	Mechanism  string `json:"mechanism"`
	Iterations int    `json:"iterations"`
}

func printUsers(out io.Writer, output string, creds []auth.Credential) error {
	rows := make([]userRow, 0, len(creds))
	for _, c := range creds {
		rows = append(rows, userRow{User: c.User, Mechanism: c.Mechanism, Iterations: c.Iterations})
	}
	if output == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "USER\tMECHANISM\tITERATIONS")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%d\n", r.User, r.Mechanism, r.Iterations)
	}
	return tw.Flush()
}

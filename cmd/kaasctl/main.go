// Command kaasctl inspects a kaas cluster, either straight from the volume
// (no broker needed) or by asking a broker's admin endpoint.
//
//	kaasctl reconcile-status --data ./kaas-data [-o table|json]
//	kaasctl reconcile-status --admin 127.0.0.1:9644 --watch [--interval 2s] [-o json]
//	kaasctl brokers --data ./kaas-data [--watch]
//	kaasctl top --admin 127.0.0.1:9644,127.0.0.1:9645 [--watch]
//	kaasctl topics [list] --data ./kaas-data
//	kaasctl topics describe NAME --admin http://127.0.0.1:9644
//	kaasctl topics --admin https://127.0.0.1:9644 --admin-ca-file ca.crt --admin-token-file token
//	kaasctl groups [list | describe GROUP] --bootstrap 127.0.0.1:9092
//	kaasctl transactions [list | describe TXN_ID | producers TOPIC] --bootstrap 127.0.0.1:9092
//	kaasctl acls [list | add | remove] --allow-principal User:alice --operation Read --topic orders --bootstrap 127.0.0.1:9092
//	kaasctl quotas [list | set] --user alice --add producer_byte_rate=1048576 --bootstrap 127.0.0.1:9092
//	kaasctl machines [KIND...] [-o mermaid|dot|markdown]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/kaas-dev/kaas/engine"
	"github.com/kaas-dev/kaas/engine/desired"
	"github.com/kaas-dev/kaas/volume"
)

const usage = `kaasctl inspects a kaas cluster.

Commands:
  reconcile-status   every state machine: object, desired end state, state, attempts, outcome, last error;
                     from a broker (--admin), also its reconcile keys that wait or fail;
                     --watch refreshes every --interval (default 2s) until Ctrl-C: redrawn in place
                     on a terminal, one JSON object per line per refresh with -o json
  topics [list]      topics and their partition counts
  topics describe T  one topic's partitions: leader epoch, log start/end offsets, size on disk
  brokers            brokers from their heartbeats: live (counter moving while kaasctl watches,
                     up to --window, default 2s), controller, addresses, zone, partitions owned
                     and open; --watch [--interval D] as reconcile-status
  top                throughput per topic and per broker (bytes in/out and records in per second,
                     sorted by bytes in) from two scrapes of the brokers' /metrics --interval apart
                     (default 2s); --admin A[,B...] or --data (every broker's admin address);
                     --watch keeps refreshing
  assignment         each partition's owner and leader epoch, as the controller assigned them
  check-volume       check that --data keeps kaas's volume promises (--peer DIR2: a second mount; --json)
  groups [list]      consumer groups: coordinator, state, protocol type, members (needs --bootstrap)
  groups describe G  one group's members and assignments, and each partition's committed
                     offset, log end offset and lag (needs --bootstrap)
  transactions [list]
                     transactional IDs: coordinator, producer ID and epoch, state, timeout,
                     start, duration, partitions (needs --bootstrap)
  transactions describe TXN_ID
                     one transactional ID's state, producer ID and epoch, timeout, start,
                     coordinator and partitions (needs --bootstrap)
  transactions producers TOPIC
                     each partition's active producers: ID, epoch, last sequence and timestamp,
                     coordinator epoch, open transaction's first offset (needs --bootstrap)
  users set NAME --password-file FILE [--mechanism SCRAM-SHA-512|SCRAM-SHA-256]
                     write a user's SCRAM credential on the volume (no broker needed)
  users list         users and their SCRAM mechanisms (never the keys)
  users delete NAME [--mechanism M]
                     remove a user's credentials
  acls list|add|remove
                     ACL bindings through the Kafka APIs, with kafka-acls.sh's flags
                     (--allow-principal, --operation, --topic, ...; kaasctl acls for more; needs --bootstrap)
  quotas list|set    client quotas through the Kafka APIs: --user/--client-id (or their
                     -default), --add KEY=VALUE, --delete KEY (kaasctl quotas for more; needs --bootstrap)
  machines [KIND...]  every state machine drawn from its definition, with its retry and
                     resume edges: -o mermaid (default, stateDiagram-v2), -o dot (Graphviz),
                     -o markdown (docs/machines.md); needs no source

Sources (one of):
  --data DIR         read the volume directly (no broker needed); --cluster-dir if not <data>/__cluster
  --admin URL        ask a running broker (e.g. http://127.0.0.1:9644, or 127.0.0.1:9644: http://, or
                     https:// when a TLS flag below is given); an https:// URL uses TLS:
                     --admin-ca-file FILE (KAAS_ADMIN_CA_FILE) CAs to verify it against (default the
                     system's), --admin-server-name NAME (KAAS_ADMIN_SERVER_NAME) the name to verify
                     it for (default the URL's host); --admin-token-file FILE (KAAS_ADMIN_TOKEN_FILE)
                     sends its bearer token
  --bootstrap H:P    ask a running cluster with a Kafka client (groups, transactions, acls, quotas;
                     KAAS_BOOTSTRAP); acls and quotas also take --sasl-mechanism, --sasl-username,
                     --sasl-password-file, --tls, --tls-ca-file (KAAS_SASL_*, KAAS_TLS*)

Output: -o table (default) or -o json. kaasctl COMMAND --help describes one command.
`

type source struct {
	data, clusterDir, output string
	admin                    adminFlags
}

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "kaasctl:", err)
		os.Exit(1)
	}
}

func run(args []string, out io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(out, usage)
		return nil
	}
	cmd, rest := args[0], args[1:]
	if wantsHelp(rest) {
		return commandHelp(cmd, out)
	}
	if cmd == "check-volume" {
		return checkVolume(rest, out)
	}
	if cmd == "groups" {
		return groupsCmd(rest, out)
	}
	if cmd == "transactions" {
		return transactionsCmd(rest, out)
	}
	if cmd == "machines" {
		return machinesCmd(rest, out)
	}
	if cmd == "users" {
		return usersCmd(rest, out, os.Stdin)
	}
	if cmd == "acls" {
		return aclsCmd(rest, out)
	}
	if cmd == "quotas" {
		return quotasCmd(rest, out)
	}
	var sub []string
	for len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		sub, rest = append(sub, rest[0]), rest[1:]
	}
	var src source
	fs := flag.NewFlagSet("kaasctl "+cmd, flag.ContinueOnError)
	src.volumeFlags(fs)
	src.admin.register(fs)
	window := fs.Duration("window", 2*time.Second, "brokers: how long to watch heartbeats for progress")
	watch := fs.Bool("watch", false, "reconcile-status, brokers, top: refresh every --interval until interrupted")
	interval := fs.Duration("interval", 2*time.Second, "with --watch: time between refreshes; top: between its two scrapes")
	if err := fs.Parse(rest); err != nil {
		return err
	}
	sub = append(sub, fs.Args()...)
	if src.output != "table" && src.output != "json" {
		return fmt.Errorf("-o must be table or json, not %q", src.output)
	}
	ctx, stop := interruptContext()
	defer stop()
	wo := newWatchOptions(*watch, *interval, src.output, out)
	switch cmd {
	case "reconcile-status":
		return runWatch(ctx, out, wo, reconcileStatusFrames(src))
	case "top":
		return runWatch(ctx, out, wo, topFrames(src, wo.now))
	case "brokers", "assignment":
		if src.admin.url != "" {
			return fmt.Errorf("%s reads the volume: give --data DIR (or --cluster-dir DIR)", cmd)
		}
		if cmd == "brokers" {
			return runWatch(ctx, out, wo, brokersFrames(src, *window))
		}
		return assignment(src, out)
	case "topics":
		if len(sub) == 0 || sub[0] == "list" {
			return topicsList(src, out)
		}
		if sub[0] == "describe" && len(sub) == 2 {
			return topicsDescribe(src, sub[1], out)
		}
		return fmt.Errorf("usage: kaasctl topics [list | describe NAME]")
	default:
		return fmt.Errorf("unknown command %q\n\n%s", cmd, usage)
	}
}

// interruptContext ends on SIGINT or SIGTERM: a --watch stops there.
var interruptContext = func() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// volumeFlags are the flags of a command that reads the volume directly.
func (s *source) volumeFlags(fs *flag.FlagSet) {
	fs.StringVar(&s.data, "data", os.Getenv("KAAS_DATA_DIR"), "data directory (KAAS_DATA_DIR)")
	fs.StringVar(&s.clusterDir, "cluster-dir", os.Getenv("KAAS_CLUSTER_DIR"), "cluster directory (KAAS_CLUSTER_DIR)")
	fs.StringVar(&s.output, "o", "table", "output: table or json")
}

// cluster is the cluster directory to read: --cluster-dir, or <--data>/__cluster.
// A directory that does not exist is an error, never an empty table.
func (s source) cluster() (string, error) {
	if s.clusterDir != "" {
		return s.clusterDir, mustBeDir("--cluster-dir", s.clusterDir)
	}
	if s.data == "" {
		return "", errors.New("give --data DIR (or --cluster-dir DIR) to read the volume, or --admin URL to ask a broker")
	}
	if err := mustBeDir("--data", s.data); err != nil {
		return "", err
	}
	dir := filepath.Join(s.data, "__cluster")
	if err := mustBeDir("--data", dir); err != nil {
		return "", fmt.Errorf("%s holds no kaas cluster (no __cluster directory): is it a broker's --data? (%w)", s.data, err)
	}
	return dir, nil
}

// clusterToWrite is the cluster directory a command writes to (users set
// before the first broker start): neither --data nor its __cluster need
// exist yet (the write creates them, as the first broker would), but a
// --data that is not a directory is an error.
func (s source) clusterToWrite() (string, error) {
	if s.clusterDir != "" {
		return s.clusterDir, nil
	}
	if s.data != "" {
		if st, err := os.Stat(s.data); err == nil && !st.IsDir() {
			return "", fmt.Errorf("--data %s is not a directory", s.data)
		}
		return filepath.Join(s.data, "__cluster"), nil
	}
	return s.cluster()
}

func mustBeDir(flagName, dir string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("%s %s: %w", flagName, dir, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("%s %s is not a directory", flagName, dir)
	}
	return nil
}

// adminJSON decodes a broker admin address's answer to GET path.
func (s source) adminJSON(path string, v any) error {
	c, err := s.admin.client()
	if err != nil {
		return err
	}
	return c.getJSON(path, v)
}

func printJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// reconcileStatusFrames reads every machine's row, from a broker or the
// volume, once per refresh.
func reconcileStatusFrames(src source) nextFrame {
	return func(context.Context) (frame, bool, error) {
		rows, err := reconcileStatusRows(src)
		if err != nil {
			return frame{}, false, err
		}
		return frame{rows: rows, table: func(w io.Writer) error { return reconcileStatusTable(w, rows) }}, true, nil
	}
}

func reconcileStatusRows(src source) ([]engine.StatusRow, error) {
	var rows []engine.StatusRow
	if src.admin.url != "" {
		if err := src.adminJSON("/reconcile-status", &rows); err != nil {
			return nil, err
		}
	} else {
		dir, err := src.cluster()
		if err != nil {
			return nil, err
		}
		if rows, err = engine.ReadStatusRows(volume.OS(), dir); err != nil {
			return nil, err
		}
	}
	if rows == nil {
		rows = []engine.StatusRow{}
	}
	for i := range rows {
		if rows[i].Outcome == "" { // a broker that does not name it
			rows[i].Outcome = engine.RecordOutcome(rows[i].Record)
		}
	}
	return rows, nil
}

func reconcileStatusTable(out io.Writer, rows []engine.StatusRow) error {
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tOBJECT\tDESIRED\tSTATE\tATTEMPTS\tSINCE\tOWNER\tOUTCOME\tLAST ERROR")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", r.Kind, r.Object, r.Desired, r.State, r.Attempts,
			r.Since.Format(time.RFC3339), r.Owner, tableOutcome(r), tableLastError(r))
	}
	return tw.Flush()
}

// tableOutcome is a row's outcome without the error the LAST ERROR column
// shows anyway: "failed (terminal)", "waiting: <reason>", "done".
func tableOutcome(r engine.StatusRow) string {
	if r.LastError != "" {
		return strings.TrimSuffix(r.Outcome, ": "+r.LastError)
	}
	return r.Outcome
}

// tableLastError is a row's last error, none for a machine that waits: the
// OUTCOME column says what it waits for.
func tableLastError(r engine.StatusRow) string {
	if r.IsWaiting() {
		return ""
	}
	return r.LastError
}

func topicsList(src source, out io.Writer) error {
	type row struct {
		Name       string `json:"name"`
		ID         string `json:"id"`
		Partitions int32  `json:"partitions"`
		Deleted    bool   `json:"deleted,omitempty"`
	}
	var rows []row
	if src.admin.url != "" {
		var st engine.BrokerStatus
		if err := src.adminJSON("/status", &st); err != nil {
			return err
		}
		for _, t := range st.Topics {
			rows = append(rows, row{Name: t.Name, ID: t.ID, Partitions: int32(len(t.Partitions))})
		}
	} else {
		dir, err := src.cluster()
		if err != nil {
			return err
		}
		specs, err := desired.ListTopicSpecs(volume.OS(), dir)
		if err != nil {
			return err
		}
		for _, s := range specs {
			rows = append(rows, row{Name: s.Name, ID: s.ID, Partitions: s.Partitions, Deleted: s.Deleted})
		}
	}
	if rows == nil {
		rows = []row{}
	}
	if src.output == "json" {
		return printJSON(out, rows)
	}
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tID\tPARTITIONS\tSTATE")
	for _, r := range rows {
		state := "live"
		if r.Deleted {
			state = "deleting"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", r.Name, r.ID, r.Partitions, state)
	}
	return tw.Flush()
}

func topicsDescribe(src source, name string, out io.Writer) error {
	var ts engine.TopicStatus
	if src.admin.url != "" {
		var st engine.BrokerStatus
		if err := src.adminJSON("/status", &st); err != nil {
			return err
		}
		found := false
		for _, t := range st.Topics {
			if t.Name == name {
				ts, found = t, true
			}
		}
		if !found {
			return fmt.Errorf("topic %q is not served by that broker", name)
		}
	} else {
		dir, err := src.cluster()
		if err != nil {
			return err
		}
		if src.data == "" {
			return errors.New("topics describe reads the data volume: give --data DIR")
		}
		ts, err = engine.InspectTopic(volume.OS(), src.data, dir, name)
		if err != nil {
			return err
		}
	}
	fromCheckpoint := src.admin.url == ""
	if src.output == "json" {
		if fromCheckpoint {
			return printJSON(out, struct {
				engine.TopicStatus
				OffsetsFrom string `json:"offsetsFrom"`
			}{ts, "checkpoint"})
		}
		return printJSON(out, ts)
	}
	fmt.Fprintf(out, "topic %s  id %s  partitions %d\n", ts.Name, ts.ID, len(ts.Partitions))
	if fromCheckpoint {
		fmt.Fprintln(out, "offsets as of each partition's last checkpoint on the volume (a serving broker may be ahead; --admin for its live offsets)")
	}
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tEPOCH\tLOG START\tHIGH WATERMARK\tLOG END\tSEGMENTS\tSIZE")
	for _, p := range ts.Partitions {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t%s\n", p.Partition, p.LeaderEpoch, p.LogStartOffset, p.HighWatermark,
			p.LogEndOffset, p.Segments, humanBytes(p.SizeBytes))
	}
	return tw.Flush()
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

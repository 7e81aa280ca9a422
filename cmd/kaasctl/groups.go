package main

// `kaasctl groups`: consumer groups of a running cluster, asked with a Kafka
// client (a group's members live only in its coordinator's memory, so the
// volume cannot answer).

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const groupsUsage = "usage: kaasctl groups [list | describe GROUP] --bootstrap HOST:PORT[,HOST:PORT] [-o table|json]"

// groupRow is one line of `kaasctl groups list`.
type groupRow struct {
	Group        string `json:"group"`
	Coordinator  int32  `json:"coordinator"`
	State        string `json:"state"`
	ProtocolType string `json:"protocolType"`
	Members      int    `json:"members"`
}

// groupMember is one member of `kaasctl groups describe`.
type groupMember struct {
	MemberID   string             `json:"memberId"`
	InstanceID string             `json:"instanceId,omitempty"`
	ClientID   string             `json:"clientId"`
	Host       string             `json:"host"`
	Assigned   map[string][]int32 `json:"assigned"`
}

// groupPartition is one partition line of `kaasctl groups describe`.
type groupPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Committed int64  `json:"committed"` // -1: nothing committed
	LogEnd    int64  `json:"logEnd"`
	Lag       int64  `json:"lag"`              // -1: unknown (see error)
	Member    string `json:"member,omitempty"` // the member it is assigned to, if any
	Error     string `json:"error,omitempty"`
}

// groupDetail is `kaasctl groups describe`.
type groupDetail struct {
	Group        string           `json:"group"`
	Coordinator  int32            `json:"coordinator"`
	State        string           `json:"state"`
	ProtocolType string           `json:"protocolType"`
	Protocol     string           `json:"protocol"`
	Members      []groupMember    `json:"members"`
	Partitions   []groupPartition `json:"partitions"`
}

// groupsCmd runs `kaasctl groups ARGS`.
func groupsCmd(args []string, out io.Writer) error {
	var sub []string
	for len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		sub, args = append(sub, args[0]), args[1:]
	}
	fs := flag.NewFlagSet("kaasctl groups", flag.ContinueOnError)
	bootstrap := fs.String("bootstrap", os.Getenv("KAAS_BOOTSTRAP"), "Kafka listener(s) of the cluster, HOST:PORT[,HOST:PORT] (KAAS_BOOTSTRAP)")
	output := fs.String("o", "table", "output: table or json")
	timeout := fs.Duration("timeout", 15*time.Second, "how long to wait for the cluster's answers")
	if err := fs.Parse(args); err != nil {
		return err
	}
	sub = append(sub, fs.Args()...)
	if *output != "table" && *output != "json" {
		return fmt.Errorf("-o must be table or json, not %q", *output)
	}
	if *bootstrap == "" {
		return errors.New("groups asks a running cluster: give --bootstrap HOST:PORT")
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(*bootstrap, ",")...), kgo.ClientID("kaasctl"))
	if err != nil {
		return fmt.Errorf("kafka client for %s: %w", *bootstrap, err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	switch {
	case len(sub) == 0 || len(sub) == 1 && sub[0] == "list":
		rows, err := listGroups(ctx, adm)
		if err != nil {
			return err
		}
		if *output == "json" {
			return printJSON(out, rows)
		}
		return printGroupRows(out, rows)
	case len(sub) == 2 && sub[0] == "describe":
		d, err := describeGroup(ctx, adm, sub[1])
		if err != nil {
			return err
		}
		if *output == "json" {
			return printJSON(out, d)
		}
		return printGroupDetail(out, d)
	default:
		return errors.New(groupsUsage)
	}
}

// listGroups lists every group (ListGroups to every broker) and counts
// each one's members (DescribeGroups to its coordinator).
func listGroups(ctx context.Context, adm *kadm.Client) ([]groupRow, error) {
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		return nil, fmt.Errorf("ListGroups: %w", err)
	}
	rows := []groupRow{}
	if len(listed) == 0 {
		return rows, nil
	}
	described, err := adm.DescribeGroups(ctx, listed.Groups()...)
	if err != nil && len(described) == 0 {
		return nil, fmt.Errorf("DescribeGroups: %w", err)
	}
	for _, l := range listed.Sorted() {
		r := groupRow{Group: l.Group, Coordinator: l.Coordinator, State: l.State, ProtocolType: l.ProtocolType, Members: -1}
		if d, ok := described[l.Group]; ok && d.Err == nil {
			r.Members = len(d.Members)
			if r.State == "" { // ListGroups before v4 carries no state
				r.State = d.State
			}
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// describeGroup describes group, with each member's assignment and each
// committed partition's lag (kadm.Lag: DescribeGroups, OffsetFetch,
// ListOffsets).
func describeGroup(ctx context.Context, adm *kadm.Client, group string) (groupDetail, error) {
	lags, err := adm.Lag(ctx, group)
	if err != nil {
		return groupDetail{}, fmt.Errorf("describing group %s: %w", group, err)
	}
	l, ok := lags[group]
	if !ok {
		return groupDetail{}, fmt.Errorf("group %s: no answer", group)
	}
	if err := l.Error(); err != nil {
		return groupDetail{}, fmt.Errorf("group %s: %w", group, err)
	}
	d := groupDetail{Group: group, Coordinator: l.Coordinator.NodeID, State: l.State,
		ProtocolType: l.ProtocolType, Protocol: l.Protocol, Members: []groupMember{}, Partitions: []groupPartition{}}
	for _, m := range l.Members {
		gm := groupMember{MemberID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost, Assigned: map[string][]int32{}}
		if m.InstanceID != nil {
			gm.InstanceID = *m.InstanceID
		}
		if c, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range c.Topics {
				ps := append([]int32(nil), t.Partitions...)
				sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
				gm.Assigned[t.Topic] = ps
			}
		}
		d.Members = append(d.Members, gm)
	}
	for _, ml := range l.Lag.Sorted() {
		p := groupPartition{Topic: ml.Topic, Partition: ml.Partition, Committed: ml.Commit.At,
			LogEnd: ml.End.Offset, Lag: ml.Lag}
		if ml.Member != nil {
			p.Member = ml.Member.MemberID
		}
		if ml.Err != nil {
			p.Error = ml.Err.Error()
		}
		d.Partitions = append(d.Partitions, p)
	}
	return d, nil
}

func printGroupRows(out io.Writer, rows []groupRow) error {
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tCOORDINATOR\tSTATE\tPROTOCOL TYPE\tMEMBERS")
	for _, r := range rows {
		members := "?"
		if r.Members >= 0 {
			members = fmt.Sprint(r.Members)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", r.Group, r.Coordinator, r.State, r.ProtocolType, members)
	}
	return tw.Flush()
}

func printGroupDetail(out io.Writer, d groupDetail) error {
	fmt.Fprintf(out, "group %s  coordinator %d  state %s  protocol type %q  protocol %q  members %d\n",
		d.Group, d.Coordinator, d.State, d.ProtocolType, d.Protocol, len(d.Members))
	if len(d.Members) > 0 {
		fmt.Fprintln(out)
		tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "MEMBER ID\tINSTANCE ID\tCLIENT ID\tHOST\tASSIGNED")
		for _, m := range d.Members {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", m.MemberID, orDash(m.InstanceID), m.ClientID, m.Host, assignedString(m.Assigned))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tCOMMITTED\tLOG END\tLAG\tMEMBER")
	for _, p := range d.Partitions {
		committed, lag := fmt.Sprint(p.Committed), fmt.Sprint(p.Lag)
		if p.Committed < 0 {
			committed = "-"
		}
		if p.Error != "" {
			lag = "? (" + p.Error + ")"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%s\n", p.Topic, p.Partition, committed, p.LogEnd, lag, orDash(p.Member))
	}
	return tw.Flush()
}

// assignedString spells an assignment as topic:0,1,2 topic2:0.
func assignedString(a map[string][]int32) string {
	topics := make([]string, 0, len(a))
	for t := range a {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	var parts []string
	for _, t := range topics {
		var ps []string
		for _, p := range a[t] {
			ps = append(ps, fmt.Sprint(p))
		}
		parts = append(parts, t+":"+strings.Join(ps, ","))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

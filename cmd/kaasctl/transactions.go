package main

// `kaasctl transactions`: transactional IDs and partitions' producers of a
// running cluster, asked with a Kafka client (a transaction's state lives in
// its coordinator, a partition's producers in its owner; ListTransactions,
// DescribeTransactions and DescribeProducers ask them).

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

const transactionsUsage = "usage: kaasctl transactions [list | describe TXN_ID | producers TOPIC] --bootstrap HOST:PORT[,HOST:PORT] [-o table|json]"

// txnRow is one line of `kaasctl transactions list`. The fields after State
// come from DescribeTransactions; if that failed for the ID, Partitions is -1
// and Error says why.
type txnRow struct {
	TransactionalID string `json:"transactionalId"`
	Coordinator     int32  `json:"coordinator"`
	ProducerID      int64  `json:"producerId"`
	State           string `json:"state"`
	ProducerEpoch   int16  `json:"producerEpoch"`
	TimeoutMs       int32  `json:"timeoutMs"`
	StartTimestamp  int64  `json:"startTimestamp"` // ms since the Unix epoch; -1: no transaction open
	DurationMs      int64  `json:"durationMs"`     // how long the open transaction has run; -1: none open
	Partitions      int    `json:"partitions"`     // partitions in the transaction; -1: unknown (see error)
	Error           string `json:"error,omitempty"`
}

// txnDetail is `kaasctl transactions describe`.
type txnDetail struct {
	TransactionalID string             `json:"transactionalId"`
	Coordinator     int32              `json:"coordinator"`
	State           string             `json:"state"`
	ProducerID      int64              `json:"producerId"`
	ProducerEpoch   int16              `json:"producerEpoch"`
	TimeoutMs       int32              `json:"timeoutMs"`
	StartTimestamp  int64              `json:"startTimestamp"` // ms since the Unix epoch; -1: no transaction open
	DurationMs      int64              `json:"durationMs"`     // -1: no transaction open
	Partitions      map[string][]int32 `json:"partitions"`     // topic: partitions in the transaction
}

// producerState is one active producer of a partition, as its owner has it.
type producerState struct {
	ProducerID            int64 `json:"producerId"`
	ProducerEpoch         int16 `json:"producerEpoch"`
	LastSequence          int32 `json:"lastSequence"`
	LastTimestamp         int64 `json:"lastTimestamp"` // ms since the Unix epoch; -1: unknown
	CoordinatorEpoch      int32 `json:"coordinatorEpoch"`
	CurrentTxnStartOffset int64 `json:"currentTxnStartOffset"` // first offset of its open transaction; -1: none open
}

// producerPartition is one partition of `kaasctl transactions producers`.
type producerPartition struct {
	Topic     string          `json:"topic"`
	Partition int32           `json:"partition"`
	Leader    int32           `json:"leader"`
	Producers []producerState `json:"producers"`
	Error     string          `json:"error,omitempty"`
}

// transactionsCmd runs `kaasctl transactions ARGS`.
func transactionsCmd(args []string, out io.Writer) error {
	var sub []string
	for len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		sub, args = append(sub, args[0]), args[1:]
	}
	fs := flag.NewFlagSet("kaasctl transactions", flag.ContinueOnError)
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
		return errors.New("transactions asks a running cluster: give --bootstrap HOST:PORT")
	}
	list := len(sub) == 0 || len(sub) == 1 && sub[0] == "list"
	describe := len(sub) == 2 && sub[0] == "describe"
	producers := len(sub) == 2 && sub[0] == "producers"
	if !list && !describe && !producers {
		return errors.New(transactionsUsage)
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
	case list:
		rows, err := listTransactions(ctx, adm, time.Now())
		if err != nil {
			return err
		}
		if *output == "json" {
			return printJSON(out, rows)
		}
		return printTxnRows(out, rows)
	case describe:
		d, err := describeTransaction(ctx, adm, sub[1], time.Now())
		if err != nil {
			return err
		}
		if *output == "json" {
			return printJSON(out, d)
		}
		return printTxnDetail(out, d)
	default:
		ps, err := describeProducers(ctx, adm, sub[1])
		if err != nil {
			return err
		}
		if *output == "json" {
			return printJSON(out, ps)
		}
		return printProducers(out, sub[1], ps)
	}
}

// listTransactions lists every transactional ID (ListTransactions to every
// broker) and describes them all (DescribeTransactions, one request to each
// coordinator) for their epoch, timeout, start and partitions.
func listTransactions(ctx context.Context, adm *kadm.Client, now time.Time) ([]txnRow, error) {
	listed, err := adm.ListTransactions(ctx, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("ListTransactions: %w", err)
	}
	rows := []txnRow{}
	if len(listed) == 0 {
		return rows, nil
	}
	described, err := adm.DescribeTransactions(ctx, listed.TransactionalIDs()...)
	if err != nil && len(described) == 0 {
		return nil, fmt.Errorf("DescribeTransactions: %w", err)
	}
	for _, l := range listed.Sorted() {
		r := txnRow{TransactionalID: l.TxnID, Coordinator: l.Coordinator, ProducerID: l.ProducerID, State: l.State,
			ProducerEpoch: -1, TimeoutMs: -1, StartTimestamp: -1, DurationMs: -1, Partitions: -1}
		d, ok := described[l.TxnID]
		switch {
		case !ok:
			r.Error = "not described"
			if err != nil {
				r.Error = err.Error()
			}
		case d.Err != nil:
			r.Error = d.Err.Error()
		default:
			r.ProducerEpoch, r.TimeoutMs, r.StartTimestamp = d.ProducerEpoch, d.TimeoutMillis, d.StartTimestamp
			r.DurationMs = txnDuration(d.StartTimestamp, now)
			r.Partitions = 0
			for _, ps := range d.Topics {
				r.Partitions += len(ps)
			}
			if d.State != "" { // described after listed: the fresher state
				r.State = d.State
			}
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// describeTransaction describes one transactional ID (DescribeTransactions
// to its coordinator).
func describeTransaction(ctx context.Context, adm *kadm.Client, id string, now time.Time) (txnDetail, error) {
	described, err := adm.DescribeTransactions(ctx, id)
	if err != nil {
		return txnDetail{}, fmt.Errorf("describing transaction %s: %w", id, err)
	}
	t, err := described.On(id, nil)
	if err == nil {
		err = t.Err
	}
	if err != nil {
		return txnDetail{}, fmt.Errorf("transaction %s: %w", id, err)
	}
	d := txnDetail{TransactionalID: id, Coordinator: t.Coordinator, State: t.State, ProducerID: t.ProducerID,
		ProducerEpoch: t.ProducerEpoch, TimeoutMs: t.TimeoutMillis, StartTimestamp: t.StartTimestamp,
		DurationMs: txnDuration(t.StartTimestamp, now), Partitions: map[string][]int32{}}
	for topic, ps := range t.Topics {
		parts := make([]int32, 0, len(ps))
		for p := range ps {
			parts = append(parts, p)
		}
		sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
		d.Partitions[topic] = parts
	}
	return d, nil
}

// describeProducers describes the producers of every partition of topic
// (Metadata, then DescribeProducers to each partition's leader).
func describeProducers(ctx context.Context, adm *kadm.Client, topic string) ([]producerPartition, error) {
	topics, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("metadata of %s: %w", topic, err)
	}
	td, ok := topics[topic]
	if !ok {
		return nil, fmt.Errorf("topic %s: no answer", topic)
	}
	if td.Err != nil {
		return nil, fmt.Errorf("topic %s: %w", topic, td.Err)
	}
	parts := []producerPartition{}
	if len(td.Partitions) == 0 {
		return parts, nil // (an empty set would ask about every topic)
	}
	described, err := adm.DescribeProducers(ctx, topics.TopicsSet())
	if err != nil && len(described) == 0 {
		return nil, fmt.Errorf("DescribeProducers: %w", err)
	}
	dps := described[topic].Partitions
	for _, tp := range td.Partitions.Sorted() {
		pp := producerPartition{Topic: topic, Partition: tp.Partition, Leader: tp.Leader, Producers: []producerState{}}
		dp, ok := dps[tp.Partition]
		switch {
		case !ok:
			pp.Error = "not described"
			if err != nil {
				pp.Error = err.Error()
			}
		case dp.Err != nil:
			pp.Leader, pp.Error = dp.Leader, dp.Err.Error()
			if dp.ErrMessage != "" {
				pp.Error += ": " + dp.ErrMessage
			}
		default:
			pp.Leader = dp.Leader
			for _, p := range dp.ActiveProducers.Sorted() {
				pp.Producers = append(pp.Producers, producerState{ProducerID: p.ProducerID, ProducerEpoch: p.ProducerEpoch,
					LastSequence: p.LastSequence, LastTimestamp: p.LastTimestamp, CoordinatorEpoch: p.CoordinatorEpoch,
					CurrentTxnStartOffset: p.CurrentTxnStartOffset})
			}
		}
		parts = append(parts, pp)
	}
	return parts, nil
}

// txnDuration is how long a transaction started at startMs (ms since the
// Unix epoch, -1 if none is open) has run at now, in ms; -1 if none is open.
func txnDuration(startMs int64, now time.Time) int64 {
	if startMs < 0 {
		return -1
	}
	return max(now.UnixMilli()-startMs, 0) // the coordinator's clock may be ahead of ours
}

func printTxnRows(out io.Writer, rows []txnRow) error {
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TRANSACTIONAL ID\tCOORDINATOR\tPRODUCER ID\tEPOCH\tSTATE\tTIMEOUT\tSTARTED\tDURATION\tPARTITIONS")
	for _, r := range rows {
		epoch, timeout, started, duration, partitions := "?", "?", "?", "?", "?"
		if r.Partitions >= 0 {
			epoch, timeout, partitions = fmt.Sprint(r.ProducerEpoch), msString(int64(r.TimeoutMs)), fmt.Sprint(r.Partitions)
			started, duration = timestampString(r.StartTimestamp), "-"
			if r.DurationMs >= 0 {
				duration = msString(r.DurationMs)
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.TransactionalID, r.Coordinator, r.ProducerID, epoch,
			r.State, timeout, started, duration, partitions)
	}
	return tw.Flush()
}

func printTxnDetail(out io.Writer, d txnDetail) error {
	fmt.Fprintf(out, "transaction %s  coordinator %d  state %s  producer ID %d  epoch %d  timeout %s\n",
		d.TransactionalID, d.Coordinator, d.State, d.ProducerID, d.ProducerEpoch, msString(int64(d.TimeoutMs)))
	if d.StartTimestamp < 0 {
		fmt.Fprintln(out, "no transaction open")
	} else {
		fmt.Fprintf(out, "started %s  running %s\n", timestampString(d.StartTimestamp), msString(d.DurationMs))
	}
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITIONS")
	topics := make([]string, 0, len(d.Partitions))
	for t := range d.Partitions {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	for _, t := range topics {
		var ps []string
		for _, p := range d.Partitions[t] {
			ps = append(ps, fmt.Sprint(p))
		}
		fmt.Fprintf(tw, "%s\t%s\n", t, strings.Join(ps, ","))
	}
	return tw.Flush()
}

func printProducers(out io.Writer, topic string, parts []producerPartition) error {
	producers, open := 0, 0
	for _, p := range parts {
		producers += len(p.Producers)
		for _, s := range p.Producers {
			if s.CurrentTxnStartOffset >= 0 {
				open++
			}
		}
	}
	fmt.Fprintf(out, "topic %s  partitions %d  active producers %d  open transactions %d\n", topic, len(parts), producers, open)
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tLEADER\tPRODUCER ID\tEPOCH\tLAST SEQUENCE\tLAST TIMESTAMP\tCOORDINATOR EPOCH\tTXN START OFFSET")
	for _, p := range parts {
		if p.Error != "" {
			fmt.Fprintf(tw, "%d\t%d\t?\t\t\t\t\t? (%s)\n", p.Partition, p.Leader, p.Error)
			continue
		}
		for _, s := range p.Producers {
			start := "-"
			if s.CurrentTxnStartOffset >= 0 {
				start = fmt.Sprint(s.CurrentTxnStartOffset)
			}
			fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%s\t%d\t%s\n", p.Partition, p.Leader, s.ProducerID, s.ProducerEpoch,
				s.LastSequence, timestampString(s.LastTimestamp), s.CoordinatorEpoch, start)
		}
	}
	return tw.Flush()
}

// timestampString spells ms since the Unix epoch as RFC 3339; "-" if negative.
func timestampString(ms int64) string {
	if ms < 0 {
		return "-"
	}
	return time.UnixMilli(ms).Format(time.RFC3339)
}

// msString spells a count of ms as a duration, to the second from a minute
// up (1m30s, 2h0m5s), to the ms below (1.5s, 250ms).
func msString(ms int64) string {
	d := time.Duration(ms) * time.Millisecond
	if d >= time.Minute {
		d = d.Round(time.Second)
	}
	return d.String()
}

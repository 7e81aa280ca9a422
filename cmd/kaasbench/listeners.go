package main

// --listeners: the same load against several listeners of one broker, side
// by side. Each round runs every listener in turn, the order rotating by
// one each round (A B C, B C A, C A B ...: on a shared machine,
// interleaving spreads outside load over all of them, and rotating spreads
// the place in the round), each a full load (produce, catch-up consume, count check) on the
// same topic, then, with --connect N, the connect measurement (connect.go).
// The tables give each round and the medians over the rounds, with ratios
// to the PLAINTEXT listener (or the first one, if none is PLAINTEXT).
//
//	kaasbench --listeners PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093,SASL_SSL://127.0.0.1:9094 \
//	    --tls-ca-file ca.crt --sasl-mechanism SCRAM-SHA-512 --sasl-user bench --sasl-password pw \
//	    --rounds 3 --connect 200 [--broker-pid PID]

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/kaas-dev/kaas/wire/listeners"
)

// benchListener is one listener to measure.
type benchListener struct {
	Name     string `json:"name"`
	Protocol string `json:"protocol"`
	Addr     string `json:"addr"`

	sec security // the client side of Protocol
}

// parseBenchListeners reads --listeners (NAME://HOST:PORT,..., the name
// being the security protocol, as the broker's --listeners) and derives
// each one's client security from sec.
func parseBenchListeners(spec string, sec security) ([]benchListener, error) {
	ls, err := listeners.Parse(spec, "", "")
	if err != nil {
		return nil, fmt.Errorf("--listeners: %w", err)
	}
	var out []benchListener
	for _, l := range ls {
		if strings.HasPrefix(l.Bind, ":") {
			return nil, fmt.Errorf("--listeners: %s needs a host", l.Name)
		}
		s, err := sec.forProtocol(string(l.Protocol))
		if err != nil {
			return nil, fmt.Errorf("--listeners: %s: %w", l.Name, err)
		}
		out = append(out, benchListener{Name: l.Name, Protocol: string(l.Protocol), Addr: l.Bind, sec: s})
	}
	return out, nil
}

// roundOrder is the order listeners run in round (from 1): the order
// given, rotated by one more each round (A B C, B C A, C A B, A B C ...), so
// that every listener takes every place in a round equally often over
// rounds that are a multiple of their count; the first place of a round
// measured lower on a shared machine.
func roundOrder(ls []benchListener, round int) []benchListener {
	k := (round - 1) % len(ls)
	return append(slices.Clone(ls[k:]), ls[:k]...)
}

// listenerRun is one listener's measurement in one round.
type listenerRun struct {
	Round    int            `json:"round"`
	Listener string         `json:"listener"`
	Load     *targetResult  `json:"load,omitempty"`
	Connect  *connectResult `json:"connect,omitempty"`
}

// listenerSummary is one listener's medians over the rounds.
type listenerSummary struct {
	Listener             string  `json:"listener"`
	Rounds               int     `json:"rounds"`
	ProduceMBPerSec      float64 `json:"produce_mb_per_sec"`
	ProduceRecordsPerSec float64 `json:"produce_records_per_sec"`
	ConsumeMBPerSec      float64 `json:"consume_mb_per_sec"`
	ConsumeRecordsPerSec float64 `json:"consume_records_per_sec"`
	ConnsPerSec          float64 `json:"conns_per_sec"`
	ConnectP50Ms         float64 `json:"connect_p50_ms"`
	ConnectP99Ms         float64 `json:"connect_p99_ms"`
	TLSP50Ms             float64 `json:"tls_handshake_p50_ms"`
	SASLP50Ms            float64 `json:"sasl_login_p50_ms"`
	ClientCPUMs          float64 `json:"client_cpu_ms_per_conn"`
	BrokerCPUMs          float64 `json:"broker_cpu_ms_per_conn"`
	// CPU milliseconds per MB of record values, by phase and process.
	ProduceClientCPUPerMB float64 `json:"produce_client_cpu_ms_per_mb"`
	ProduceBrokerCPUPerMB float64 `json:"produce_broker_cpu_ms_per_mb"`
	ConsumeClientCPUPerMB float64 `json:"consume_client_cpu_ms_per_mb"`
	ConsumeBrokerCPUPerMB float64 `json:"consume_broker_cpu_ms_per_mb"`
}

// cpuPerMB is CPU milliseconds per MB (10^6 bytes); ok is false when
// either is missing.
func cpuPerMB(seconds float64, bytes int64) (float64, bool) {
	if seconds <= 0 || bytes <= 0 {
		return 0, false
	}
	return seconds * 1e3 / (float64(bytes) / 1e6), true
}

// median is the median of vs (the mean of the middle two for an even
// count), 0 for none.
func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

// summarizeListeners takes the medians of every listener's runs, in the
// order of ls. A metric is the median over the rounds that measured it.
func summarizeListeners(ls []benchListener, runs []listenerRun) []listenerSummary {
	var out []listenerSummary
	for _, l := range ls {
		vals := map[string][]float64{}
		add := func(k string, v float64, ok bool) {
			if ok {
				vals[k] = append(vals[k], v)
			}
		}
		addCPU := func(k string, seconds float64, bytes int64) {
			if v, ok := cpuPerMB(seconds, bytes); ok {
				add(k, v, true)
			}
		}
		rounds := 0
		for _, r := range runs {
			if r.Listener != l.Name {
				continue
			}
			rounds++
			if p := r.Load; p != nil && p.Produce != nil {
				add("pmb", p.Produce.MBPerSec, true)
				add("prec", p.Produce.RecordsPerSec, true)
				addCPU("pccpu", p.Produce.CPU.ClientSeconds, p.Produce.Bytes)
				addCPU("pbcpu", p.Produce.CPU.BrokerSeconds, p.Produce.Bytes)
			}
			if c := r.Load; c != nil && c.Consume != nil {
				add("cmb", c.Consume.MBPerSec, true)
				add("crec", c.Consume.RecordsPerSec, true)
				addCPU("cccpu", c.Consume.CPU.ClientSeconds, c.Consume.Bytes)
				addCPU("cbcpu", c.Consume.CPU.BrokerSeconds, c.Consume.Bytes)
			}
			if c := r.Connect; c != nil && c.Conns > 0 {
				add("cps", c.ConnsPerSec, true)
				add("p50", c.Total.P50Ms, true)
				add("p99", c.Total.P99Ms, true)
				add("tls", c.TLS.P50Ms, c.TLS.Count > 0)
				add("sasl", c.SASL.P50Ms, c.SASL.Count > 0)
				add("ccpu", c.ClientCPUMs, c.ClientCPUMs > 0)
				add("bcpu", c.BrokerCPUMs, c.BrokerCPUMs > 0)
			}
		}
		m := func(k string) float64 { return median(vals[k]) }
		out = append(out, listenerSummary{Listener: l.Name, Rounds: rounds,
			ProduceMBPerSec: m("pmb"), ProduceRecordsPerSec: m("prec"),
			ConsumeMBPerSec: m("cmb"), ConsumeRecordsPerSec: m("crec"),
			ConnsPerSec: m("cps"), ConnectP50Ms: m("p50"), ConnectP99Ms: m("p99"),
			TLSP50Ms: m("tls"), SASLP50Ms: m("sasl"), ClientCPUMs: m("ccpu"), BrokerCPUMs: m("bcpu"),
			ProduceClientCPUPerMB: m("pccpu"), ProduceBrokerCPUPerMB: m("pbcpu"),
			ConsumeClientCPUPerMB: m("cccpu"), ConsumeBrokerCPUPerMB: m("cbcpu")})
	}
	return out
}

// cpuTable has one row per listener: median CPU milliseconds per MB of
// record values produced and consumed, the clients' (this process) and the
// broker's, with the broker's ratio to the baseline listener.
func cpuTable(sum []listenerSummary, base int) table {
	b := sum[base].Listener
	t := table{header: []string{"listener", "produce client", "produce broker", "broker / " + b,
		"consume client", "consume broker", "broker / " + b}}
	for _, s := range sum {
		t.rows = append(t.rows, []string{s.Listener,
			cellOr(s.ProduceClientCPUPerMB, 2), cellOr(s.ProduceBrokerCPUPerMB, 2), fmtRatio(s.ProduceBrokerCPUPerMB, sum[base].ProduceBrokerCPUPerMB),
			cellOr(s.ConsumeClientCPUPerMB, 2), cellOr(s.ConsumeBrokerCPUPerMB, 2), fmtRatio(s.ConsumeBrokerCPUPerMB, sum[base].ConsumeBrokerCPUPerMB)})
	}
	return t
}

// baseline is the index of the listener ratios are taken to: the first
// PLAINTEXT one, else the first.
func baseline(ls []benchListener) int {
	for i, l := range ls {
		if l.Protocol == string(listeners.Plaintext) {
			return i
		}
	}
	return 0
}

// cellOr formats v, or leaves the cell empty when v is 0 (not measured).
func cellOr(v float64, prec int) string {
	if v == 0 {
		return ""
	}
	return fmtNum(v, prec)
}

// roundsTable has one row per listener and round.
func roundsTable(runs []listenerRun, withConnect bool) table {
	t := table{header: []string{"round", "listener", "produce MB/s", "produce records/s", "consume MB/s", "consume records/s"}, left: 2}
	if withConnect {
		t.header = append(t.header, "conns/s", "connect p50 ms", "connect p99 ms")
	}
	for _, r := range runs {
		row := []string{fmt.Sprint(r.Round), r.Listener, "", "", "", ""}
		if r.Load != nil && r.Load.Produce != nil {
			row[2], row[3] = fmtNum(r.Load.Produce.MBPerSec, 1), fmtNum(r.Load.Produce.RecordsPerSec, 0)
		}
		if r.Load != nil && r.Load.Consume != nil {
			row[4], row[5] = fmtNum(r.Load.Consume.MBPerSec, 1), fmtNum(r.Load.Consume.RecordsPerSec, 0)
		}
		if withConnect && r.Connect != nil {
			row = append(row, fmtNum(r.Connect.ConnsPerSec, 0), fmtNum(r.Connect.Total.P50Ms, 3), fmtNum(r.Connect.Total.P99Ms, 3))
		}
		t.rows = append(t.rows, row)
	}
	return t
}

// throughputTable has one row per listener: median produce and consume
// throughput and their ratios to the baseline listener.
func throughputTable(sum []listenerSummary, base int) table {
	b := sum[base].Listener
	t := table{header: []string{"listener", "produce MB/s", "produce records/s", "produce / " + b,
		"consume MB/s", "consume records/s", "consume / " + b}}
	for _, s := range sum {
		t.rows = append(t.rows, []string{s.Listener,
			cellOr(s.ProduceMBPerSec, 1), cellOr(s.ProduceRecordsPerSec, 0), fmtRatio(s.ProduceMBPerSec, sum[base].ProduceMBPerSec),
			cellOr(s.ConsumeMBPerSec, 1), cellOr(s.ConsumeRecordsPerSec, 0), fmtRatio(s.ConsumeMBPerSec, sum[base].ConsumeMBPerSec)})
	}
	return t
}

// connectTable has one row per listener: median connect figures.
func connectTable(sum []listenerSummary) table {
	t := table{header: []string{"listener", "conns/s", "connect p50 ms", "connect p99 ms", "TLS handshake p50 ms",
		"SASL login p50 ms", "client CPU ms/conn", "broker CPU ms/conn"}}
	for _, s := range sum {
		t.rows = append(t.rows, []string{s.Listener, cellOr(s.ConnsPerSec, 0), cellOr(s.ConnectP50Ms, 3), cellOr(s.ConnectP99Ms, 3),
			cellOr(s.TLSP50Ms, 3), cellOr(s.SASLP50Ms, 3), cellOr(s.ClientCPUMs, 3), cellOr(s.BrokerCPUMs, 3)})
	}
	return t
}

// listenersReport is the JSON output of --listeners.
type listenersReport struct {
	Config  config            `json:"config"`
	Runs    []listenerRun     `json:"runs"`
	Summary []listenerSummary `json:"summary"`
	OK      bool              `json:"ok"`
	Failure []string          `json:"failures,omitempty"`
}

// runListeners is kaasbench with --listeners; it returns the exit code.
func runListeners(ctx context.Context, cfg config, stdout, stderr io.Writer) int {
	logf := func(format string, a ...any) { fmt.Fprintf(stderr, "kaasbench: "+format+"\n", a...) }
	rep := listenersReport{Config: cfg}
	for round := 1; round <= cfg.Rounds && ctx.Err() == nil; round++ {
		for _, l := range roundOrder(cfg.Listeners, round) {
			if ctx.Err() != nil {
				break
			}
			run := listenerRun{Round: round, Listener: l.Name}
			lcfg := cfg
			lcfg.Security, lcfg.Brokers = l.sec, []string{l.Addr}
			name := fmt.Sprintf("%s %s (round %d)", l.Name, l.Addr, round)
			res, err := runTarget(ctx, lcfg, name, lcfg.Brokers, logf)
			run.Load = res
			if res != nil {
				for _, f := range res.Failures {
					rep.Failure = append(rep.Failure, name+": "+f)
				}
			}
			if err != nil {
				rep.Failure = append(rep.Failure, name+": "+err.Error())
			}
			if cfg.Connect > 0 && ctx.Err() == nil {
				logf("%s: %d connections, %d at a time", name, cfg.Connect, cfg.ConnectParallel)
				cr, err := measureConnect(ctx, l.Addr, l.sec, cfg.Connect, cfg.ConnectParallel, cfg.BrokerPID)
				run.Connect = cr
				if err != nil {
					rep.Failure = append(rep.Failure, name+": connect: "+err.Error())
				}
			}
			rep.Runs = append(rep.Runs, run)
		}
	}
	if err := ctx.Err(); err != nil {
		rep.Failure = append(rep.Failure, "kaasbench: interrupted: "+err.Error())
	}
	rep.OK = len(rep.Failure) == 0
	rep.Summary = summarizeListeners(cfg.Listeners, rep.Runs)
	return printReport(stdout, stderr, cfg.JSON, rep, rep.Failure, func() {
		fmt.Fprintln(stdout, "each round")
		fmt.Fprint(stdout, roundsTable(rep.Runs, cfg.Connect > 0).render())
		fmt.Fprintf(stdout, "\nthroughput, medians over %d rounds\n", cfg.Rounds)
		fmt.Fprint(stdout, throughputTable(rep.Summary, baseline(cfg.Listeners)).render())
		fmt.Fprintf(stdout, "\nCPU ms per MB of record values, medians over %d rounds (broker: --broker-pid)\n", cfg.Rounds)
		fmt.Fprint(stdout, cpuTable(rep.Summary, baseline(cfg.Listeners)).render())
		if cfg.Connect > 0 {
			fmt.Fprintf(stdout, "\nconnect (%d connections, %d at a time: handshake + ApiVersions + SASL login), medians over %d rounds\n",
				cfg.Connect, cfg.ConnectParallel, cfg.Rounds)
			fmt.Fprint(stdout, connectTable(rep.Summary).render())
		}
	})
}

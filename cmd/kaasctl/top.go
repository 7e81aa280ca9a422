package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/kaas-dev/kaas/engine/cluster"
	"github.com/kaas-dev/kaas/volume"
)

// The counter families kaasctl top reads from each broker's /metrics.
const (
	bytesInFamily   = "kaas_bytes_in_total"
	bytesOutFamily  = "kaas_bytes_out_total"
	recordsInFamily = "kaas_records_in_total"
)

// topicCounters are one topic's throughput counters on one broker.
type topicCounters struct{ bytesIn, bytesOut, recordsIn float64 }

// scrape is one broker's counters at one instant, by topic.
type scrape struct {
	at     time.Time
	topics map[string]topicCounters
	err    error
}

// topTarget is one broker kaasctl top scrapes.
type topTarget struct {
	name  string // how the tables name it
	admin adminFlags
}

// throughput is the rates of one topic or one broker.
type throughput struct {
	Name            string  `json:"name"`
	BytesInPerSec   float64 `json:"bytesInPerSec"`
	BytesOutPerSec  float64 `json:"bytesOutPerSec"`
	RecordsInPerSec float64 `json:"recordsInPerSec"`
	Error           string  `json:"error,omitempty"`
	IntervalSeconds float64 `json:"intervalSeconds,omitempty"`
}

// topRows is one refresh of kaasctl top.
type topRows struct {
	Topics  []throughput `json:"topics"`
	Brokers []throughput `json:"brokers"`
}

// topTargets are the brokers to scrape: each --admin (comma-separated), or
// every broker's admin address in the volume's heartbeats.
func topTargets(src source) ([]topTarget, error) {
	if src.admin.url != "" {
		var ts []topTarget
		for _, u := range strings.Split(src.admin.url, ",") {
			a := src.admin
			a.url = strings.TrimSpace(u)
			ts = append(ts, topTarget{name: a.url, admin: a})
		}
		return ts, nil
	}
	dir, err := src.cluster()
	if err != nil {
		return nil, fmt.Errorf("top: %w", err)
	}
	hbs, err := cluster.ReadHeartbeats(volume.OS(), dir)
	if err != nil && hbs == nil {
		return nil, err
	}
	sort.Slice(hbs, func(i, j int) bool { return hbs[i].BrokerID < hbs[j].BrokerID })
	var ts []topTarget
	for _, hb := range hbs {
		if hb.AdminAddr == "" || hb.Leaving {
			continue
		}
		a := src.admin
		a.url = hb.AdminAddr
		ts = append(ts, topTarget{name: fmt.Sprintf("%d (%s)", hb.BrokerID, hb.AdminAddr), admin: a})
	}
	if len(ts) == 0 {
		return nil, fmt.Errorf("no broker in %s's heartbeats has an admin address: give --admin HOST:PORT", dir)
	}
	return ts, nil
}

// topFrames scrapes every broker once per refresh and shows the rates
// since the scrape before; the first call only scrapes.
func topFrames(src source, now func() time.Time) nextFrame {
	var prev []scrape
	return func(context.Context) (frame, bool, error) {
		targets, err := topTargets(src)
		if err != nil {
			return frame{}, false, err
		}
		cur := make([]scrape, len(targets))
		failed := 0
		for i, t := range targets {
			cur[i] = scrapeBroker(t.admin, now)
			if cur[i].err != nil {
				failed++
			}
		}
		if failed == len(targets) {
			return frame{}, false, cur[0].err
		}
		if prev == nil || len(prev) != len(cur) {
			prev = cur
			return frame{}, false, nil
		}
		rows := topRates(targets, prev, cur)
		prev = cur
		return frame{rows: rows, table: func(w io.Writer) error { return topTable(w, rows) }}, true, nil
	}
}

// scrapeBroker reads one broker's throughput counters.
func scrapeBroker(a adminFlags, now func() time.Time) scrape {
	s := scrape{at: now(), topics: map[string]topicCounters{}}
	c, err := a.client()
	if err != nil {
		s.err = err
		return s
	}
	body, err := c.get("/metrics")
	if err != nil {
		s.err = err
		return s
	}
	defer body.Close()
	s.topics, s.err = parseThroughput(body)
	return s
}

// parseThroughput sums the throughput counters of a /metrics answer (the
// Prometheus text format) by topic.
func parseThroughput(r io.Reader) (map[string]topicCounters, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parse /metrics: %w", err)
	}
	out := map[string]topicCounters{}
	add := func(family string, set func(*topicCounters, float64)) {
		f := fams[family]
		if f == nil {
			return
		}
		for _, m := range f.GetMetric() {
			topic := labelValue(m, "topic")
			c := out[topic]
			set(&c, counterValue(m))
			out[topic] = c
		}
	}
	add(bytesInFamily, func(c *topicCounters, v float64) { c.bytesIn += v })
	add(bytesOutFamily, func(c *topicCounters, v float64) { c.bytesOut += v })
	add(recordsInFamily, func(c *topicCounters, v float64) { c.recordsIn += v })
	return out, nil
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func counterValue(m *dto.Metric) float64 {
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.GetUntyped().GetValue()
}

// topRates are the per-topic (summed over brokers) and per-broker rates
// between two scrapes, each sorted by bytes in.
func topRates(targets []topTarget, prev, cur []scrape) topRows {
	topics := map[string]*throughput{}
	rows := topRows{Topics: []throughput{}, Brokers: []throughput{}}
	for i, t := range targets {
		b := throughput{Name: t.name}
		dt := cur[i].at.Sub(prev[i].at).Seconds()
		switch {
		case cur[i].err != nil:
			b.Error = cur[i].err.Error()
		case prev[i].err != nil:
			b.Error = "no earlier scrape: " + prev[i].err.Error()
		case dt <= 0:
			b.Error = "no time between scrapes"
		default:
			b.IntervalSeconds = dt
			for name, c := range cur[i].topics {
				p := prev[i].topics[name]
				r := throughput{
					BytesInPerSec:   counterRate(p.bytesIn, c.bytesIn, dt),
					BytesOutPerSec:  counterRate(p.bytesOut, c.bytesOut, dt),
					RecordsInPerSec: counterRate(p.recordsIn, c.recordsIn, dt),
				}
				b.BytesInPerSec += r.BytesInPerSec
				b.BytesOutPerSec += r.BytesOutPerSec
				b.RecordsInPerSec += r.RecordsInPerSec
				tp := topics[name]
				if tp == nil {
					tp = &throughput{Name: name}
					topics[name] = tp
				}
				tp.BytesInPerSec += r.BytesInPerSec
				tp.BytesOutPerSec += r.BytesOutPerSec
				tp.RecordsInPerSec += r.RecordsInPerSec
			}
		}
		rows.Brokers = append(rows.Brokers, b)
	}
	for _, tp := range topics {
		rows.Topics = append(rows.Topics, *tp)
	}
	sortByBytesIn(rows.Topics)
	sortByBytesIn(rows.Brokers)
	return rows
}

// counterRate is a counter's rate over dt seconds; a counter that went
// down restarted (a broker restart) and counts from zero.
func counterRate(prev, cur, dt float64) float64 {
	if cur < prev {
		prev = 0
	}
	return (cur - prev) / dt
}

func sortByBytesIn(ts []throughput) {
	sort.SliceStable(ts, func(i, j int) bool {
		if ts[i].BytesInPerSec != ts[j].BytesInPerSec {
			return ts[i].BytesInPerSec > ts[j].BytesInPerSec
		}
		return ts[i].Name < ts[j].Name
	})
}

func topTable(out io.Writer, rows topRows) error {
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tBYTES IN/S\tBYTES OUT/S\tRECORDS IN/S")
	for _, t := range rows.Topics {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f\n", t.Name, humanRate(t.BytesInPerSec), humanRate(t.BytesOutPerSec), t.RecordsInPerSec)
	}
	fmt.Fprintln(tw, "")
	fmt.Fprintln(tw, "BROKER\tBYTES IN/S\tBYTES OUT/S\tRECORDS IN/S\tERROR")
	for _, b := range rows.Brokers {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f\t%s\n", b.Name, humanRate(b.BytesInPerSec), humanRate(b.BytesOutPerSec), b.RecordsInPerSec, b.Error)
	}
	return tw.Flush()
}

// humanRate is a byte rate in binary units.
func humanRate(bps float64) string {
	return humanBytes(int64(bps + 0.5))
}

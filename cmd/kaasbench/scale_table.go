package main

// The tables of `kaasbench scale`: the targets table in the shape of issue
// 20's, one row per broker, and the steps in more detail.

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// fmtCount formats n with thousands separators: 100000 → "100,000".
func fmtCount(n int) string {
	s := strconv.Itoa(max(n, -n))
	var b strings.Builder
	if n < 0 {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// fmtKB formats a file size in decimal kilobytes, as the issue does:
// "512 B", "3.2 KB", "178 KB", "8.3 MB".
func fmtKB(n int64) string {
	switch {
	case n < 1000:
		return fmt.Sprintf("%d B", n)
	case n < 10_000:
		return fmt.Sprintf("%.1f KB", float64(n)/1e3)
	case n < 1_000_000:
		return fmt.Sprintf("%.0f KB", float64(n)/1e3)
	}
	return fmt.Sprintf("%.1f MB", float64(n)/1e6)
}

// fmtSecs formats seconds with two decimals below 10 s, one above.
func fmtSecs(v float64) string {
	if v < 10 {
		return fmt.Sprintf("%.2f s", v)
	}
	return fmt.Sprintf("%.1f s", v)
}

// fmtMiB formats bytes in binary megabytes, no unit.
func fmtMiB(n int64) string { return fmt.Sprintf("%.0f", float64(n)/(1<<20)) }

// perBroker joins one value per broker, "a / b / c", "-" where one is
// missing; "" when none is there.
func perBroker(bs []brokerSample, unit string, get func(brokerSample) (string, bool)) string {
	var parts []string
	any := false
	for _, b := range bs {
		v, ok := get(b)
		if !ok {
			v = "-"
		}
		any = any || ok
		parts = append(parts, v)
	}
	if !any {
		return ""
	}
	return strings.Join(parts, " / ") + unit
}

func idleBrokers(r *scaleResult) []brokerSample {
	if r == nil || r.Idle == nil {
		return nil
	}
	return r.Idle.Brokers
}

// createCell: how long until every partition had a leader everywhere.
func createCell(r *scaleResult) string {
	if r == nil || r.Create == nil {
		return ""
	}
	c := r.Create
	switch {
	case c.TopicErrors > 0:
		return fmt.Sprintf("failed: %d topics refused (%s)", c.TopicErrors, c.FirstError)
	case c.Leaders.Complete:
		return fmt.Sprintf("%s (CreateTopics answered at %s)", fmtSecs(c.Leaders.Seconds), fmtSecs(c.AnswerSeconds))
	}
	return fmt.Sprintf("%s of %s with a leader after %.0f s", fmtCount(c.Leaders.Served), fmtCount(r.Partitions), c.Leaders.Seconds)
}

// killCell: how long until every partition served and acked again.
func killCell(r *scaleResult) string {
	if r == nil || r.Kill == nil {
		return ""
	}
	k := r.Kill
	switch {
	case k.PID == 0:
		return "not run"
	case !k.Leaders.Complete:
		return fmt.Sprintf("%s never served (after %.0f s)", fmtCount(r.Partitions-k.Leaders.Served), k.Leaders.Seconds)
	case k.Acked:
		return fmt.Sprintf("%s (leaders at %s)", fmtSecs(k.AckedSeconds), fmtSecs(k.Leaders.Seconds))
	case k.Produce != nil:
		return fmt.Sprintf("leaders at %s; %s produces failed", fmtSecs(k.Leaders.Seconds), fmtCount(k.Produce.Failed))
	}
	return "leaders at " + fmtSecs(k.Leaders.Seconds)
}

// worksCell: created, all serving, each took a produce.
func worksCell(r *scaleResult) string {
	if r == nil || r.Create == nil {
		return ""
	}
	c := r.Create
	if c.TopicErrors > 0 {
		return "not created"
	}
	parts := []string{"created"}
	if c.Leaders.Complete {
		parts = append(parts, "all serving")
	} else {
		parts = append(parts, fmtCount(c.Leaders.Served)+" serving")
	}
	if p := r.Produce; p != nil {
		parts = append(parts, fmt.Sprintf("%s/%s acked (in %s)", fmtCount(p.Acked), fmtCount(p.Partitions), fmtSecs(p.Seconds)))
	}
	return strings.Join(parts, ", ")
}

func metadataCell(r *scaleResult) string {
	if r == nil || r.Metadata == nil || r.Metadata.Latency.Count == 0 {
		return ""
	}
	l := r.Metadata.Latency
	return fmt.Sprintf("%.1f ms (p99 %.1f ms, %d requests)", l.P50Ms, l.P99Ms, l.Count)
}

// scaleTargetsTable is issue 20's targets table filled in: one column per
// target run, then the target.
func scaleTargetsTable(cfg scaleConfig, kaas, kfake *scaleResult) table {
	n := fmtCount(cfg.total())
	brokers := len(cfg.Brokers)
	if brokers == 0 && kfake != nil {
		brokers = kfake.Brokers
	}
	var rs []*scaleResult
	t := table{header: []string{"measure"}}
	for _, r := range []*scaleResult{kaas, kfake} {
		if r != nil {
			rs = append(rs, r)
			t.header = append(t.header, fmt.Sprintf("%s (%d brokers)", r.Name, r.Brokers))
		}
	}
	t.header = append(t.header, "target")
	t.left = len(t.header)
	kaasOnly := func(f func(*scaleResult) string) func(*scaleResult) string {
		return func(r *scaleResult) string {
			if r == kaas {
				return f(r)
			}
			return ""
		}
	}
	rows := []struct {
		label, target string
		cell          func(*scaleResult) string
	}{
		{n + " partitions: CreateTopics → leader in Metadata for all", "≤ 10 s", createCell},
		{"idle CPU per broker at " + n + " partitions", "≤ 3 %", kaasOnly(func(r *scaleResult) string {
			return perBroker(idleBrokers(r), " %", func(b brokerSample) (string, bool) {
				return fmtPtr(b.CPUPercent, func(v float64) string { return fmt.Sprintf("%.1f", v) })
			})
		})},
		{"heartbeat file size at " + n + " partitions", "≤ 16 KB, independent of partitions", kaasOnly(func(r *scaleResult) string {
			return perBroker(idleBrokers(r), "", func(b brokerSample) (string, bool) { return fmtPtr(b.HeartbeatBytes, fmtKB) })
		})},
		{"open fds per owned partition, idle", "≤ 1.5", kaasOnly(func(r *scaleResult) string {
			return perBroker(idleBrokers(r), "", func(b brokerSample) (string, bool) {
				v, ok := b.fdsPerOwned()
				return fmt.Sprintf("%.2f", v), ok
			})
		})},
		{fmt.Sprintf("kill -9 of 1 of %d brokers at %s partitions → every partition serving and acked again", brokers, n), "≤ 10 s", killCell},
		{fmt.Sprintf("%s partitions on %d brokers: created, all serving, each takes a produce", n, brokers), "works; figures reported", worksCell},
		{"Metadata for all " + n + " partitions, p50", "reported; ≤ 200 ms", metadataCell},
		{"RSS per broker at " + n + " partitions", "reported", kaasOnly(func(r *scaleResult) string {
			return perBroker(idleBrokers(r), " MiB", func(b brokerSample) (string, bool) { return fmtPtr(b.RSSBytes, fmtMiB) })
		})},
		{"assignment.json size at " + n + " partitions", "", kaasOnly(func(r *scaleResult) string {
			if r.Idle == nil {
				return ""
			}
			s, _ := fmtPtr(r.Idle.AssignmentBytes, fmtKB)
			return s
		})},
	}
	for _, row := range rows {
		cells := []string{row.label}
		for _, r := range rs {
			cells = append(cells, row.cell(r))
		}
		t.rows = append(t.rows, append(cells, row.target))
	}
	return t
}

// fmtPtr formats *p with f; ok is false for nil.
func fmtPtr[T any](p *T, f func(T) string) (string, bool) {
	if p == nil {
		return "", false
	}
	return f(*p), true
}

// brokerTable has a row per broker sample; withCPU adds the idle CPU.
func brokerTable(bs []brokerSample, withCPU bool) table {
	t := table{header: []string{"broker", "address", "pid", "owned", "open"}, left: 2}
	if withCPU {
		t.header = append(t.header, "CPU %")
	}
	t.header = append(t.header, "RSS MiB", "fds", "fds/owned", "heartbeat")
	for _, b := range bs {
		cell := func(s string, ok bool) string {
			if !ok {
				return "-"
			}
			return s
		}
		pid := "-"
		if b.PID > 0 {
			pid = strconv.Itoa(b.PID)
		}
		row := []string{strconv.Itoa(int(b.ID)), b.Addr, pid, fmtCount(b.Owned),
			cell(fmtPtr(b.PartitionsOpen, func(v int64) string { return fmtCount(int(v)) }))}
		if withCPU {
			row = append(row, cell(fmtPtr(b.CPUPercent, func(v float64) string { return fmt.Sprintf("%.1f", v) })))
		}
		fpo, ok := b.fdsPerOwned()
		row = append(row,
			cell(fmtPtr(b.RSSBytes, fmtMiB)),
			cell(fmtPtr(b.FDs, fmtCount)),
			cell(fmt.Sprintf("%.2f", fpo), ok),
			cell(fmtPtr(b.HeartbeatBytes, fmtKB)))
		t.rows = append(t.rows, row)
	}
	return t
}

// scaleStepsTable gives each step's figures in more detail, a column per
// target.
func scaleStepsTable(kaas, kfake *scaleResult) table {
	var rs []*scaleResult
	t := table{header: []string{"step"}}
	for _, r := range []*scaleResult{kaas, kfake} {
		if r != nil {
			rs = append(rs, r)
			t.header = append(t.header, r.Name)
		}
	}
	secs := func(v float64) string { return fmt.Sprintf("%.2f", v) }
	rows := []struct {
		label string
		cell  func(*scaleResult) string
	}{
		{"CreateTopics answered after (s)", func(r *scaleResult) string {
			return valOr(r.Create, func(c *createResult) string { return secs(c.AnswerSeconds) })
		}},
		{"every leader in each broker's Metadata after (s)", func(r *scaleResult) string {
			return valOr(r.Create, func(c *createResult) string { return fmtWait(c.Leaders) })
		}},
		{"  Metadata polls sent to each broker meanwhile", func(r *scaleResult) string {
			return valOr(r.Create, func(c *createResult) string {
				return perWait(c.Leaders, func(b brokerWait) (string, bool) { return fmtCount(b.Polls), true })
			})
		}},
		{"  each broker's CPU % meanwhile (polls included)", func(r *scaleResult) string {
			return valOr(r.Create, func(c *createResult) string {
				return perWait(c.Leaders, func(b brokerWait) (string, bool) {
					return fmtPtr(b.CPUPercent, func(v float64) string { return fmt.Sprintf("%.0f", v) })
				})
			})
		}},
		{"produce to every partition: acked / failed", func(r *scaleResult) string { return fmtRound(r.Produce) }},
		{"produce to every partition took (s)", func(r *scaleResult) string {
			return valOr(r.Produce, func(p *produceRound) string { return secs(p.Seconds) })
		}},
		{"Metadata for all: requests / errors", func(r *scaleResult) string {
			return valOr(r.Metadata, func(m *metadataResult) string { return fmt.Sprintf("%d / %d", m.Requests, m.Errors) })
		}},
		{"Metadata for all: p50 / p99 / max ms", func(r *scaleResult) string {
			if r.Metadata == nil || r.Metadata.Latency.Count == 0 {
				return ""
			}
			l := r.Metadata.Latency
			return fmt.Sprintf("%.1f / %.1f / %.1f", l.P50Ms, l.P99Ms, l.MaxMs)
		}},
		{"kill: every leader on a survivor after (s)", func(r *scaleResult) string {
			if r.Kill == nil || r.Kill.PID == 0 {
				return ""
			}
			return fmtWait(r.Kill.Leaders)
		}},
		{"kill: producing to every partition from the kill on: acked / failed", func(r *scaleResult) string {
			return valOr(r.Kill, func(k *killResult) string { return fmtRound(k.Produce) })
		}},
		{"kill: every partition acked again after (s)", func(r *scaleResult) string {
			if r.Kill == nil || !r.Kill.Acked {
				return ""
			}
			return secs(r.Kill.AckedSeconds)
		}},
	}
	for _, row := range rows {
		cells := []string{row.label}
		filled := false
		for _, r := range rs {
			c := row.cell(r)
			cells = append(cells, c)
			filled = filled || c != ""
		}
		if filled { // rows of steps that did not run are left out
			t.rows = append(t.rows, cells)
		}
	}
	// The reasons partitions stayed unserved, a row each.
	if kaas != nil && kaas.Kill != nil && len(kaas.Kill.Problems) > 0 {
		keys := slices.Sorted(maps.Keys(kaas.Kill.Problems))
		for _, k := range keys {
			t.rows = append(t.rows, []string{"kill: reconcile error: " + k, fmtCount(kaas.Kill.Problems[k])})
		}
	}
	return t
}

// fmtWait: the seconds, per broker when they differ, or how far it got.
func fmtWait(w leaderWait) string {
	if !w.Complete {
		return fmt.Sprintf("incomplete after %.1f (fewest served %s)", w.Seconds, fmtCount(w.Served))
	}
	if len(w.PerBroker) == 0 {
		return fmt.Sprintf("%.2f", w.Seconds)
	}
	var per []string
	for _, b := range w.PerBroker {
		per = append(per, fmt.Sprintf("%d: %.2f", b.ID, b.Seconds))
	}
	return fmt.Sprintf("%.2f (%s)", w.Seconds, strings.Join(per, ", "))
}

// perWait is "id: value, ..." over the brokers of w that have a value.
func perWait(w leaderWait, get func(brokerWait) (string, bool)) string {
	var parts []string
	for _, b := range w.PerBroker {
		if v, ok := get(b); ok {
			parts = append(parts, fmt.Sprintf("%d: %s", b.ID, v))
		}
	}
	return strings.Join(parts, ", ")
}

func fmtRound(p *produceRound) string {
	if p == nil {
		return ""
	}
	return fmt.Sprintf("%s / %s", fmtCount(p.Acked), fmtCount(p.Failed))
}

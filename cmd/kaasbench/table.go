package main

import (
	"fmt"
	"math"
	"strings"
)

// table is a plain-text table: the first column (or the first left columns,
// if left > 1) is left-aligned, all others are right-aligned (values).
type table struct {
	header []string
	rows   [][]string
	left   int
}

// columns is the number of columns: of the header or the longest row.
func (t table) columns() int {
	ncol := len(t.header)
	for _, r := range t.rows {
		ncol = max(ncol, len(r))
	}
	return ncol
}

// render returns the table as text, columns separated by two spaces, with a
// dashed rule under the header. Short rows are padded with empty cells.
func (t table) render() string {
	ncol := t.columns()
	if ncol == 0 {
		return ""
	}
	width := make([]int, ncol)
	cell := func(r []string, i int) string {
		if i < len(r) {
			return r[i]
		}
		return ""
	}
	all := append([][]string{t.header}, t.rows...)
	for _, r := range all {
		for i := 0; i < ncol; i++ {
			width[i] = max(width[i], len([]rune(cell(r, i))))
		}
	}
	var b strings.Builder
	line := func(r []string) {
		var sb strings.Builder
		for i := 0; i < ncol; i++ {
			c := cell(r, i)
			pad := strings.Repeat(" ", width[i]-len([]rune(c)))
			if i > 0 {
				sb.WriteString("  ")
			}
			if i < max(t.left, 1) {
				sb.WriteString(c)
				sb.WriteString(pad)
			} else {
				sb.WriteString(pad)
				sb.WriteString(c)
			}
		}
		b.WriteString(strings.TrimRight(sb.String(), " "))
		b.WriteByte('\n')
	}
	line(t.header)
	total := 0
	for _, w := range width {
		total += w
	}
	b.WriteString(strings.Repeat("-", total+2*(ncol-1)))
	b.WriteByte('\n')
	for _, r := range t.rows {
		line(r)
	}
	return b.String()
}

// fmtRatio formats a/b with two decimals followed by "x", or "-" when the
// ratio is undefined (b == 0, or either value missing or not finite).
func fmtRatio(a, b float64) string {
	if b == 0 || math.IsNaN(a) || math.IsNaN(b) || math.IsInf(a, 0) || math.IsInf(b, 0) {
		return "-"
	}
	return fmt.Sprintf("%.2fx", a/b)
}

// metricRow describes one row of a target's results.
type metricRow struct {
	label string
	// value returns the metric for a target; ok=false leaves the cell blank.
	value func(*targetResult) (v float64, ok bool)
	// text, if set, overrides how the value is formatted.
	text  func(*targetResult) string
	prec  int  // decimals when formatting value
	ratio bool // whether a kaas/kfake ratio makes sense
}

func produceOK(r *targetResult) bool { return r.Produce != nil }
func consumeOK(r *targetResult) bool { return r.Consume != nil }

func latRow(label string, get func(latencySummary) float64) metricRow {
	return metricRow{
		label: label,
		value: func(r *targetResult) (float64, bool) {
			if !produceOK(r) || r.Produce.Latency.Count == 0 {
				return 0, false
			}
			return get(r.Produce.Latency), true
		},
		prec:  3,
		ratio: true,
	}
}

var targetRows = []metricRow{
	{label: "produce records (acked)", prec: 0, value: func(r *targetResult) (float64, bool) {
		return float64(valOr(r.Produce, func(p *produceResult) int64 { return p.Records })), produceOK(r)
	}},
	{label: "produce errors", prec: 0, value: func(r *targetResult) (float64, bool) {
		return float64(valOr(r.Produce, func(p *produceResult) int64 { return p.Errors })), produceOK(r)
	}},
	{label: "produce records/s", prec: 0, ratio: true, value: func(r *targetResult) (float64, bool) {
		return valOr(r.Produce, func(p *produceResult) float64 { return p.RecordsPerSec }), produceOK(r)
	}},
	{label: "produce MB/s", prec: 1, ratio: true, value: func(r *targetResult) (float64, bool) {
		return valOr(r.Produce, func(p *produceResult) float64 { return p.MBPerSec }), produceOK(r)
	}},
	latRow("produce latency p50 ms", func(l latencySummary) float64 { return l.P50Ms }),
	latRow("produce latency p90 ms", func(l latencySummary) float64 { return l.P90Ms }),
	latRow("produce latency p99 ms", func(l latencySummary) float64 { return l.P99Ms }),
	latRow("produce latency p99.9 ms", func(l latencySummary) float64 { return l.P999Ms }),
	latRow("produce latency max ms", func(l latencySummary) float64 { return l.MaxMs }),
	{label: "consume records", prec: 0, value: func(r *targetResult) (float64, bool) {
		return float64(valOr(r.Consume, func(c *consumeResult) int64 { return c.Records })), consumeOK(r)
	}},
	{label: "consume records/s", prec: 0, ratio: true, value: func(r *targetResult) (float64, bool) {
		return valOr(r.Consume, func(c *consumeResult) float64 { return c.RecordsPerSec }), consumeOK(r)
	}},
	{label: "consume MB/s", prec: 1, ratio: true, value: func(r *targetResult) (float64, bool) {
		return valOr(r.Consume, func(c *consumeResult) float64 { return c.MBPerSec }), consumeOK(r)
	}},
	{label: "consume count check", text: func(r *targetResult) string {
		switch {
		case r.Consume == nil:
			return ""
		case r.Consume.Verified:
			return "ok"
		default:
			return fmt.Sprintf("MISMATCH %d!=%d", r.Consume.Records, r.Consume.Expected)
		}
	}},
}

func valOr[T any, V any](p *T, f func(*T) V) V {
	var zero V
	if p == nil {
		return zero
	}
	return f(p)
}

func fmtNum(v float64, prec int) string { return fmt.Sprintf("%.*f", prec, v) }

// buildTable lays out results side by side: one row per metric, one column
// per present target (kaas, kfake, disk), then a kaas/kfake ratio column when
// both ran. When disk ran, it adds the disk fsync rows and a "produce MB/s ÷
// disk fsync MB/s" row for each produce target. Any argument may be nil.
func buildTable(kaas, kfake *targetResult, disk *diskResult) table {
	var targets []*targetResult
	var t table
	t.header = []string{"metric"}
	if kaas != nil {
		targets = append(targets, kaas)
		t.header = append(t.header, kaas.Name)
	}
	if kfake != nil {
		targets = append(targets, kfake)
		t.header = append(t.header, kfake.Name)
	}
	if disk != nil {
		t.header = append(t.header, "disk")
	}
	withRatio := kaas != nil && kfake != nil
	if withRatio {
		t.header = append(t.header, "kaas/kfake")
	}
	ncol := len(t.header)
	newRow := func(label string) []string {
		r := make([]string, ncol)
		r[0] = label
		return r
	}
	if len(targets) > 0 {
		for _, m := range targetRows {
			row := newRow(m.label)
			for i, tr := range targets {
				if m.text != nil {
					row[1+i] = m.text(tr)
				} else if v, ok := m.value(tr); ok {
					row[1+i] = fmtNum(v, m.prec)
				}
			}
			if withRatio && m.ratio {
				a, aok := m.value(kaas)
				b, bok := m.value(kfake)
				if aok && bok {
					row[ncol-1] = fmtRatio(a, b)
				} else {
					row[ncol-1] = "-"
				}
			}
			t.rows = append(t.rows, row)
		}
	}
	if disk != nil {
		diskCol := 1 + len(targets)
		for _, d := range disk.Runs {
			row := newRow(fmt.Sprintf("disk fsync MB/s (%s chunks)", fmtSize(int64(d.ChunkBytes))))
			row[diskCol] = fmtNum(d.MBPerSec, 1)
			t.rows = append(t.rows, row)
		}
		if ref, ok := disk.reference(); ok && len(targets) > 0 {
			row := newRow(fmt.Sprintf("produce MB/s / disk fsync (%s)", fmtSize(int64(ref.ChunkBytes))))
			for i, tr := range targets {
				if tr.Produce != nil {
					row[1+i] = fmtRatio(tr.Produce.MBPerSec, ref.MBPerSec)
				}
			}
			t.rows = append(t.rows, row)
		}
	}
	return t
}

// markdown returns the table as a Markdown table, aligned as render
// aligns it; a "|" in a cell is escaped.
func (t table) markdown() string {
	ncol := t.columns()
	if ncol == 0 {
		return ""
	}
	var b strings.Builder
	line := func(cells []string) {
		b.WriteString("|")
		for i := 0; i < ncol; i++ {
			c := ""
			if i < len(cells) {
				c = strings.ReplaceAll(cells[i], "|", `\|`)
			}
			b.WriteString(" " + c + " |")
		}
		b.WriteByte('\n')
	}
	line(t.header)
	b.WriteString("|")
	for i := 0; i < ncol; i++ {
		if i < max(t.left, 1) {
			b.WriteString("---|")
		} else {
			b.WriteString("---:|")
		}
	}
	b.WriteByte('\n')
	for _, r := range t.rows {
		line(r)
	}
	return b.String()
}

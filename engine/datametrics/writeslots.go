package datametrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kaas-dev/kaas/volume/partlog"
)

var (
	writeSlotsDesc = prometheus.NewDesc("kaas_write_slots",
		"Partitions that may hold appends not yet fsynced at once (state=\"max\", 0: no bound), those that do (\"held\"), and produce appends waiting for a slot (\"waiting\").",
		[]string{"state"}, nil)
	writeSlotWaitsDesc = prometheus.NewDesc("kaas_write_slot_waits_total",
		"Produce appends that had to wait for a write slot: the broker held as many partitions with appends not yet fsynced as its file descriptors allow.", nil, nil)
	writeSlotOverflowsDesc = prometheus.NewDesc("kaas_write_slot_overflows_total",
		"Appends made without a write slot because a round gave theirs back between the reservation and the append.", nil, nil)
)

// WriteSlots collects a partlog.WriteSlots at scrape time.
type WriteSlots struct{ s *partlog.WriteSlots }

// NewWriteSlots returns the collector of kaas_write_slots,
// kaas_write_slot_waits_total and kaas_write_slot_overflows_total.
func NewWriteSlots(s *partlog.WriteSlots) *WriteSlots { return &WriteSlots{s: s} }

// Describe implements prometheus.Collector.
func (w *WriteSlots) Describe(ch chan<- *prometheus.Desc) {
	ch <- writeSlotsDesc
	ch <- writeSlotWaitsDesc
	ch <- writeSlotOverflowsDesc
}

// Collect implements prometheus.Collector.
func (w *WriteSlots) Collect(ch chan<- prometheus.Metric) {
	st := w.s.Stats()
	ch <- prometheus.MustNewConstMetric(writeSlotsDesc, prometheus.GaugeValue, float64(st.Max), "max")
	ch <- prometheus.MustNewConstMetric(writeSlotsDesc, prometheus.GaugeValue, float64(st.Held), "held")
	ch <- prometheus.MustNewConstMetric(writeSlotsDesc, prometheus.GaugeValue, float64(st.Waiting), "waiting")
	ch <- prometheus.MustNewConstMetric(writeSlotWaitsDesc, prometheus.CounterValue, float64(st.Waits))
	ch <- prometheus.MustNewConstMetric(writeSlotOverflowsDesc, prometheus.CounterValue, float64(st.Overflows))
}

package engine

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kaas-dev/kaas/engine/desired"
)

// cleanerConfigs are the log cleaner's broker configs (kaas-broker
// --log-cleaner-*), for DescribeConfigs.
func (e *Engine) cleanerConfigs() []brokerConfig {
	c := e.cfg.Cleaner
	return []brokerConfig{
		{name: "log.cleaner.enable", value: strconv.FormatBool(!c.Disable), def: "true", typ: desired.ConfigTypeBoolean,
			doc: "Whether the broker compacts the topics whose cleanup.policy includes compact (kaas-broker --log-cleaner-enable)."},
		{name: "log.cleaner.threads", value: strconv.Itoa(c.Threads), def: strconv.Itoa(DefaultCleanerThreads), typ: desired.ConfigTypeInt,
			doc: "Partitions cleaned at once (kaas-broker --log-cleaner-threads)."},
		{name: "log.cleaner.dedupe.buffer.size", value: strconv.FormatInt(c.DedupeBufferSize, 10), def: strconv.Itoa(DefaultCleanerDedupeBufferSize), typ: desired.ConfigTypeLong,
			doc: "Memory of the cleaner threads' key maps together (kaas-broker --log-cleaner-dedupe-buffer-size)."},
		{name: "log.cleaner.io.max.bytes.per.second", value: ioRate(c.IOMaxBytesPerSecond), def: ioRate(0), typ: desired.ConfigTypeDouble,
			doc: "Bytes per second the cleaner threads read and write together (kaas-broker --log-cleaner-io-max-bytes-per-second; unlimited by default)."},
		{name: "log.cleaner.backoff.ms", value: msString(c.Backoff), def: msString(DefaultCleanerBackoff), typ: desired.ConfigTypeLong,
			doc: "How long an idle cleaner thread waits before looking again (kaas-broker --log-cleaner-backoff)."},
	}
}

// ioRate is the I/O limit as Kafka shows it: the largest double when none.
func ioRate(v float64) string {
	if v <= 0 {
		return "1.7976931348623157E308"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

var (
	descCleanerPasses = prometheus.NewDesc("kaas_log_cleaner_passes_total",
		"Log cleaning passes over a compacted partition, by result (ok, error).", []string{"result"}, nil)
	descCleanerBytes = prometheus.NewDesc("kaas_log_cleaner_bytes_total",
		"Bytes the log cleaner read from the segments it cleaned (direction read) and wrote into cleaned segments (direction written).", []string{"direction"}, nil)
	descCleanerRemoved = prometheus.NewDesc("kaas_log_cleaner_records_removed_total",
		"Records the log cleaner removed, by reason: superseded by a later record of their key, tombstone past its delete horizon, aborted transaction, keyless, and transaction markers.", []string{"reason"}, nil)
	descCleanerSegments = prometheus.NewDesc("kaas_log_cleaner_segments_total",
		"Segments the log cleaner replaced (direction in) and cleaned segments it swapped in (direction out).", []string{"direction"}, nil)
	descCleanerUndecodable = prometheus.NewDesc("kaas_log_cleaner_batches_kept_undecodable_total",
		"Batches the log cleaner kept as they were because their records inflate beyond its decode limit.", nil, nil)
	descCleanerBusy = prometheus.NewDesc("kaas_log_cleaner_busy_seconds_total",
		"Seconds the log cleaner threads spent in passes (bytes read over this is the cleaner's throughput).", nil, nil)
)

// cleanerCollector is the log cleaner's prometheus.Collector.
type cleanerCollector struct{ c *cleaner }

// CleanerCollector returns the collector of the log cleaner's families.
func (e *Engine) CleanerCollector() prometheus.Collector { return cleanerCollector{e.cleaner} }

func (c cleanerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descCleanerPasses, descCleanerBytes, descCleanerRemoved, descCleanerSegments,
		descCleanerUndecodable, descCleanerBusy} {
		ch <- d
	}
}

func (c cleanerCollector) Collect(ch chan<- prometheus.Metric) {
	s := &c.c.stats
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	counter(descCleanerPasses, s.passes.Load(), "ok")
	counter(descCleanerPasses, s.failed.Load(), "error")
	counter(descCleanerBytes, s.bytesRead.Load(), "read")
	counter(descCleanerBytes, s.bytesWritten.Load(), "written")
	counter(descCleanerRemoved, s.superseded.Load(), "superseded")
	counter(descCleanerRemoved, s.tombstones.Load(), "tombstone")
	counter(descCleanerRemoved, s.aborted.Load(), "aborted")
	counter(descCleanerRemoved, s.keyless.Load(), "keyless")
	counter(descCleanerRemoved, s.markers.Load(), "marker")
	counter(descCleanerSegments, s.segmentsIn.Load(), "in")
	counter(descCleanerSegments, s.segmentsOut.Load(), "out")
	counter(descCleanerUndecodable, s.undecodable.Load())
	ch <- prometheus.MustNewConstMetric(descCleanerBusy, prometheus.CounterValue, float64(s.busyNanos.Load())/1e9)
}

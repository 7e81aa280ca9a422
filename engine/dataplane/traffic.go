package dataplane

import "sync/atomic"

// Traffic counts what clients produced to and fetched from a partition
// while this broker served it. The Kafka front end adds to it on the
// produce and fetch paths, which already hold the partition: plain
// atomics, no lookup per request or record. Metrics read and sum them per
// topic when scraped.
type Traffic struct {
	bytesIn, recordsIn, bytesOut atomic.Int64
}

// TrafficCounts is a snapshot of Traffic.
type TrafficCounts struct {
	BytesIn, RecordsIn, BytesOut int64
}

// Produced counts an appended batch of n bytes holding records records.
func (t *Traffic) Produced(n, records int64) {
	t.bytesIn.Add(n)
	t.recordsIn.Add(records)
}

// Fetched counts n bytes of records answered to a fetch.
func (t *Traffic) Fetched(n int64) { t.bytesOut.Add(n) }

// Counts reads the counters.
func (t *Traffic) Counts() TrafficCounts {
	return TrafficCounts{BytesIn: t.bytesIn.Load(), RecordsIn: t.recordsIn.Load(), BytesOut: t.bytesOut.Load()}
}

// Add sums o into c.
func (c *TrafficCounts) Add(o TrafficCounts) {
	c.BytesIn += o.BytesIn
	c.RecordsIn += o.RecordsIn
	c.BytesOut += o.BytesOut
}

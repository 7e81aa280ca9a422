package wire

import (
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/engine"
	"github.com/kaas-dev/kaas/wire/sasl"
)

// metrics counts what the Kafka front end serves (docs/metrics.md). The
// request path only adds to atomics found by index (API key, version,
// error code) or held by the connection (its listener's); Collect reads
// them at scrape time. Labels are bounded whatever clients send: requests
// outside the dispatch table are refused before they are counted, and
// error codes outside errSlots fold into UNKNOWN_SERVER_ERROR.
type metrics struct {
	// apis is indexed by API key; nil where kaas serves no such key.
	apis []*apiStats

	lmu       sync.Mutex
	listeners []*listenerStats

	amu   sync.Mutex
	auths map[authKey]int64

	// throttleNanos is the throttle time each quota asked for, by quota.
	throttleNanos [numQuotaKinds]atomic.Int64
}

// errSlots bounds the error codes counted apart: -1 (UNKNOWN_SERVER_ERROR)
// to errSlots-2, well above Kafka's highest code today.
const errSlots = 160

// apiStats are one API key's counters: requests by version and error code
// (allocated on the first request of a version), and its latency.
type apiStats struct {
	name     string
	min      int16
	versions []atomic.Pointer[[errSlots]atomic.Int64] // index: version-min
	duration prometheus.Histogram
	used     atomic.Bool // duration has an observation to report
}

// listenerStats are one listener's connection counters.
type listenerStats struct {
	name        string
	open, total atomic.Int64
}

type authKey struct{ listener, mechanism, result string }

// quotaKind names a quota whose throttles are counted.
type quotaKind int

const (
	quotaProducerByteRate quotaKind = iota
	quotaConsumerByteRate
	quotaRequestPercentage
	quotaBrokerProduceRate
	numQuotaKinds
)

var quotaNames = [numQuotaKinds]string{"producer_byte_rate", "consumer_byte_rate", "request_percentage", "max_produce_bytes_per_second"}

// requestBuckets span a sub-millisecond Metadata to a 30 s long poll.
var requestBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

var (
	requestsDesc = prometheus.NewDesc("kaas_requests_total",
		"Kafka requests answered, by API, version and the answer's top-level or first error (none: no error).",
		[]string{"api", "version", "error"}, nil)
	connectionsDesc = prometheus.NewDesc("kaas_connections",
		"Client connections open now, by listener.", []string{"listener"}, nil)
	connectionsTotalDesc = prometheus.NewDesc("kaas_connections_total",
		"Client connections accepted, by listener.", []string{"listener"}, nil)
	rejectedDesc = prometheus.NewDesc("kaas_connections_rejected_total",
		"Connections closed at once because they were over max.connections or max.connections.per.ip.", nil, nil)
	queueWaitsDesc = prometheus.NewDesc("kaas_connection_queue_waits_total",
		"Request reads that waited for their connection's share of the request memory budget.", nil, nil)
	authDesc = prometheus.NewDesc("kaas_authentications_total",
		"SASL authentications that ended, by listener, mechanism and result (success, failure).",
		[]string{"listener", "mechanism", "result"}, nil)
	throttleDesc = prometheus.NewDesc("kaas_throttle_seconds_total",
		"Throttle time quotas gave answers, by quota; two quotas throttling one answer both count.",
		[]string{"quota"}, nil)
	bytesInDesc = prometheus.NewDesc("kaas_bytes_in_total",
		"Record batch bytes produced to partitions served here, by topic (capped: the rest is topic=\"other\").",
		[]string{"topic"}, nil)
	bytesOutDesc = prometheus.NewDesc("kaas_bytes_out_total",
		"Record batch bytes answered to fetches from partitions served here, by topic (capped: the rest is topic=\"other\").",
		[]string{"topic"}, nil)
	recordsInDesc = prometheus.NewDesc("kaas_records_in_total",
		"Records produced to partitions served here, by topic (capped: the rest is topic=\"other\").",
		[]string{"topic"}, nil)
)

// versionLabels are the version label values, by version.
var versionLabels = func() []string {
	out := make([]string, 64)
	for i := range out {
		out[i] = strconv.Itoa(i)
	}
	return out
}()

func newMetrics() *metrics {
	m := &metrics{auths: map[authKey]int64{}}
	var top kmsg.Key
	for k := range handlers {
		top = max(top, k)
	}
	m.apis = make([]*apiStats, int(top)+1)
	for k, h := range handlers {
		name := kmsg.NameForKey(int16(k))
		m.apis[k] = &apiStats{name: name, min: h.min, versions: make([]atomic.Pointer[[errSlots]atomic.Int64], h.max-h.min+1),
			duration: prometheus.NewHistogram(prometheus.HistogramOpts{
				Name:        "kaas_request_duration_seconds",
				Help:        "Time from a request's dispatch to its answer written, by API.",
				ConstLabels: prometheus.Labels{"api": name},
				Buckets:     requestBuckets,
			})}
	}
	return m
}

// listener returns the counters of the listener named name.
func (m *metrics) listener(name string) *listenerStats {
	m.lmu.Lock()
	defer m.lmu.Unlock()
	for _, l := range m.listeners {
		if l.name == name {
			return l
		}
	}
	l := &listenerStats{name: name}
	m.listeners = append(m.listeners, l)
	return l
}

// answered counts a request once its answer is written (or dropped: the
// connection broke) and, for a Fetch written whole, its bytes per topic.
func (m *metrics) answered(r *reply, written bool) {
	if written && r.refs != nil {
		for i, ref := range r.refs {
			if ref.Len > 0 && i < len(r.parts) && r.parts[i] != nil {
				r.parts[i].Traffic.Fetched(int64(ref.Len))
			}
		}
	}
	if int(r.key) >= len(m.apis) || r.key < 0 {
		return
	}
	a := m.apis[r.key]
	if a == nil {
		return
	}
	vi := int(r.version - a.min)
	if vi < 0 || vi >= len(a.versions) {
		return
	}
	code := int16(-1) // a handler that failed (panicked) closes the connection
	if r.fatal == nil {
		code = firstErrorCode(r.resp)
	}
	slot := int(code) + 1
	if slot < 0 || slot >= errSlots {
		slot = 0
	}
	counts := a.versions[vi].Load()
	if counts == nil {
		a.versions[vi].CompareAndSwap(nil, new([errSlots]atomic.Int64))
		counts = a.versions[vi].Load()
	}
	counts[slot].Add(1)
	a.duration.Observe(time.Since(r.start).Seconds())
	a.used.Store(true)
}

// authenticated counts a SASL exchange that ended on listener l.
func (m *metrics) authenticated(l *Listener, mechanism string, ok bool) {
	if l.SASL == nil || !slices.Contains(l.SASL.Mechanisms, mechanism) {
		mechanism = "unknown" // an exchange refused before one began
	}
	result := "success"
	if !ok {
		result = "failure"
	}
	m.amu.Lock()
	m.auths[authKey{l.Name, mechanism, result}]++
	m.amu.Unlock()
}

// throttled counts ms of throttle time asked for by quota q.
func (m *metrics) throttled(q quotaKind, ms int64) {
	if ms > 0 {
		m.throttleNanos[q].Add(ms * int64(time.Millisecond))
	}
}

// errorName is the label of an error code: Kafka's name for it.
func errorName(code int16) string {
	if code == 0 {
		return "none"
	}
	var ke *kerr.Error
	if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
		ke = e
	} else {
		ke = kerr.UnknownServerError
	}
	return ke.Message
}

// collector exposes a Server's metrics to Prometheus; traffic per topic is
// summed over the engine's partitions when scraped, capped to
// maxTopicSeries topics (topicCap).
type collector struct {
	s      *Server
	m      *metrics
	topics *topicCap
}

// Collector returns the Prometheus collector of the server's metrics (the
// families of docs/metrics.md this package owns), with at most
// maxTopicSeries topics in the per-topic families. Nil when the server
// was configured with DisableMetrics.
func (s *Server) Collector(maxTopicSeries int) prometheus.Collector {
	if s.metrics == nil {
		return nil
	}
	return &collector{s: s, m: s.metrics, topics: newTopicCap(maxTopicSeries)}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{requestsDesc, connectionsDesc, connectionsTotalDesc, rejectedDesc, queueWaitsDesc,
		authDesc, throttleDesc, bytesInDesc, bytesOutDesc, recordsInDesc} {
		ch <- d
	}
	for _, a := range c.m.apis {
		if a != nil {
			a.duration.Describe(ch)
		}
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	m := c.m
	for _, a := range m.apis {
		if a == nil {
			continue
		}
		for vi := range a.versions {
			counts := a.versions[vi].Load()
			if counts == nil {
				continue
			}
			for slot := range counts {
				if n := counts[slot].Load(); n > 0 {
					ch <- prometheus.MustNewConstMetric(requestsDesc, prometheus.CounterValue, float64(n),
						a.name, versionLabels[int(a.min)+vi], errorName(int16(slot-1)))
				}
			}
		}
		if a.used.Load() {
			a.duration.Collect(ch)
		}
	}
	m.lmu.Lock()
	ls := slices.Clone(m.listeners)
	m.lmu.Unlock()
	for _, l := range ls {
		ch <- prometheus.MustNewConstMetric(connectionsDesc, prometheus.GaugeValue, float64(l.open.Load()), l.name)
		ch <- prometheus.MustNewConstMetric(connectionsTotalDesc, prometheus.CounterValue, float64(l.total.Load()), l.name)
	}
	ch <- prometheus.MustNewConstMetric(rejectedDesc, prometheus.CounterValue, float64(c.s.rejectedConns.Load()))
	ch <- prometheus.MustNewConstMetric(queueWaitsDesc, prometheus.CounterValue, float64(c.s.connQueueWaits.Load()))
	m.amu.Lock()
	for k, n := range m.auths {
		ch <- prometheus.MustNewConstMetric(authDesc, prometheus.CounterValue, float64(n), k.listener, k.mechanism, k.result)
	}
	m.amu.Unlock()
	for q := range numQuotaKinds {
		ch <- prometheus.MustNewConstMetric(throttleDesc, prometheus.CounterValue,
			time.Duration(m.throttleNanos[q].Load()).Seconds(), quotaNames[q])
	}
	if c.s.eng != nil {
		c.collectTraffic(ch, c.s.eng.Traffic())
	}
}

// collectTraffic sends the per-topic families, folded by the topic cap.
func (c *collector) collectTraffic(ch chan<- prometheus.Metric, traffic []engine.TopicTraffic) {
	for _, t := range c.topics.fold(traffic) {
		ch <- prometheus.MustNewConstMetric(bytesInDesc, prometheus.CounterValue, float64(t.BytesIn), t.Topic)
		ch <- prometheus.MustNewConstMetric(bytesOutDesc, prometheus.CounterValue, float64(t.BytesOut), t.Topic)
		ch <- prometheus.MustNewConstMetric(recordsInDesc, prometheus.CounterValue, float64(t.RecordsIn), t.Topic)
	}
}

// countAuth counts a SASL exchange once it has ended.
func (c *conn) countAuth(res sasl.Result) {
	if m := c.s.metrics; m != nil && (res.Done || res.ErrCode != 0) {
		m.authenticated(c.listener, res.Mechanism, res.ErrCode == 0)
	}
}

// countThrottle counts ms of throttle time quota q gave an answer.
func (c *conn) countThrottle(q quotaKind, ms int64) {
	if m := c.s.metrics; m != nil {
		m.throttled(q, ms)
	}
}

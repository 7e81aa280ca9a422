package wire

import (
	"strings"
	"time"

	"github.com/kaas-dev/kaas/engine/quota"
	"github.com/kaas-dev/kaas/engine/throttle"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Client quotas are enforced as Kafka's quota managers do: each handled
// request is recorded on its client's sensors (produce bytes, fetched
// bytes, request time), and when a rate is over its quota the response
// says for how long in ThrottleTimeMs and the connection is held that long
// (KIP-219: clients of a version that waits out the throttle themselves
// get the answer at once and the broker stops reading from them; older
// ones get the answer late). A client over its quota is slowed, never
// refused, and no other connection waits for it.

// quotaMeters are the sensors of the client quotas, one set per quota kind
// as in Kafka, and the broker-wide produce guard
// (Config.MaxProduceBytesPerSecond), all clients sharing its one sensor.
type quotaMeters struct {
	source                  clientQuotas
	produce, fetch, request *throttle.Sensors
	broker                  *throttle.Sensors
	brokerLimit             float64
}

// brokerSensor is the one sensor of the broker-wide produce guard.
const brokerSensor = "broker"

func newQuotaMeters(source clientQuotas, brokerLimit float64, nowMs func() int64) *quotaMeters {
	sensors := func() *throttle.Sensors {
		return throttle.NewSensors(throttle.DefaultConfig, throttle.DefaultIdleMs, throttle.DefaultMaxSensors, nowMs)
	}
	q := &quotaMeters{
		source:  source,
		produce: sensors(), fetch: sensors(), request: sensors(),
		broker:      throttle.NewSensors(throttle.DefaultConfig, throttle.DefaultIdleMs, 1, nowMs),
		brokerLimit: brokerLimit,
	}
	// Kafka caps a request-time throttle at one quota window.
	q.request.MaxThrottleMs = throttle.DefaultConfig.WindowMs
	return q
}

// clientQuotas answers the quota that applies to a client (the engine).
type clientQuotas interface {
	ClientQuota(k quota.Key, user, clientID string) (limit float64, sensor string, ok bool)
}

// quotaUser is the quota entity of a principal: its name without the type
// ("User:ANONYMOUS" is "ANONYMOUS", Kafka's entity for anonymous clients).
func quotaUser(principal string) string { return strings.TrimPrefix(principal, "User:") }

// recordProduce adds a handled produce of size bytes and answers its
// throttle time: the longer of the client quota's and the broker guard's.
func (q *quotaMeters) recordProduce(user, clientID string, size int64) int64 {
	client, broker := q.recordProduceEach(user, clientID, size)
	return throttle.Longer(client, broker)
}

// recordProduceEach is recordProduce with the client quota's and the
// broker guard's throttle times apart.
func (q *quotaMeters) recordProduceEach(user, clientID string, size int64) (client, broker int64) {
	if limit, sensor, ok := q.source.ClientQuota(quota.ProducerByteRate, user, clientID); ok {
		client = q.produce.Record(sensor, float64(size), limit)
	}
	if q.brokerLimit > 0 {
		broker = q.broker.Record(brokerSensor, float64(size), q.brokerLimit)
	}
	return client, broker
}

// fetchCap is the most record bytes one Fetch of this client may answer:
// its consumer_byte_rate over one quota window, as Kafka bounds a fetch
// by the quota's window, so a single answer never puts a client far over
// its quota (whose answer would then be thrown away, again and again).
// 0 is no cap.
func (q *quotaMeters) fetchCap(user, clientID string) int {
	limit, _, ok := q.source.ClientQuota(quota.ConsumerByteRate, user, clientID)
	if !ok {
		return 0
	}
	return max(1, int(limit*float64(throttle.DefaultConfig.WindowMs)/1000))
}

// requestPercent is a request's handler time as Kafka records it on the
// request_percentage sensor: percent of one thread for one second.
func requestPercent(d time.Duration) float64 { return float64(d) * 100 / float64(time.Second) }

// applyQuotas meters a handled request for the client quotas and applies
// the longest throttle time that results: in the response's
// ThrottleTimeMs, and as a delay before the response or a mute of the
// connection after it. A Fetch that is throttled is answered without
// records, its bytes unrecorded, as Kafka does (the client fetches them
// again once the throttle is over). False means the connection closed
// while delaying.
func (c *conn) applyQuotas(r *reply) bool {
	q := c.s.quotas
	var ms int64
	var fetchSensor string
	switch kmsg.Key(r.key) {
	case kmsg.Produce:
		client, broker := q.recordProduceEach(r.quotaUser, r.clientID, r.size)
		c.countThrottle(quotaProducerByteRate, client)
		c.countThrottle(quotaBrokerProduceRate, broker)
		ms = throttle.Longer(client, broker)
	case kmsg.Fetch:
		if limit, sensor, ok := q.source.ClientQuota(quota.ConsumerByteRate, r.quotaUser, r.clientID); ok && r.resp != nil {
			fetchSensor = sensor
			ms = q.fetch.Record(sensor, float64(r.size), limit)
			c.countThrottle(quotaConsumerByteRate, ms)
		}
	}
	if !r.exempt {
		if limit, sensor, ok := q.source.ClientQuota(quota.RequestPercentage, r.quotaUser, r.clientID); ok {
			rms := q.request.Record(sensor, requestPercent(r.spent), limit)
			c.countThrottle(quotaRequestPercentage, rms)
			ms = throttle.Longer(ms, rms)
		}
	}
	if ms <= 0 {
		return true
	}
	if fr, ok := r.resp.(*kmsg.FetchResponse); ok {
		if fetchSensor != "" {
			q.fetch.Unrecord(fetchSensor, float64(r.size))
		}
		r.resp, r.refs = throttledFetch(fr), nil // r.release still frees the refs
	}
	delay, mute := throttleResponse(r, ms)
	if mute > 0 {
		c.muteUntil.Store(c.s.now().Add(mute).UnixNano())
	}
	return delay <= 0 || c.holdBack(delay)
}

// throttledFetch is the answer to a throttled Fetch: no partitions, no
// session (Kafka's throttled response of a sessionless fetch).
func throttledFetch(fr *kmsg.FetchResponse) *kmsg.FetchResponse {
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = fr.Version
	return resp
}

// throttleResponse sets ms as r's ThrottleTimeMs and says how it is
// served: by a delay before the answer, for versions whose clients do not
// wait out a throttle themselves, or by a mute of the connection after it
// (KIP-219; also for an answer without the field, and an acks=0 produce,
// which has no answer).
func throttleResponse(r *reply, ms int64) (delay, mute time.Duration) {
	d := time.Duration(ms) * time.Millisecond
	tr, ok := r.resp.(kmsg.ThrottleResponse)
	if !ok {
		return 0, d
	}
	r.resp.SetVersion(r.version)
	r.resp.(kmsg.SetThrottleResponse).SetThrottle(int32(min(ms, int64(1<<31-1))))
	if _, clientWaits := tr.Throttle(); !clientWaits {
		return d, 0
	}
	return 0, d
}

// quotaExempt reports whether a request is left off the request_percentage
// sensor: the version and authentication handshakes (which Kafka serves
// before the principal is known) and the inter-broker APIs, as Kafka
// exempts a broker's cluster actions.
func quotaExempt(req kmsg.Request) bool {
	switch kmsg.Key(req.Key()) {
	case kmsg.ApiVersions, kmsg.SASLHandshake, kmsg.SASLAuthenticate:
		return true
	}
	return interBrokerOnly(req)
}

// waitUnmuted holds the read loop while the connection is muted; false
// means the connection closed meanwhile.
func (c *conn) waitUnmuted() bool {
	until := c.muteUntil.Load()
	if until == 0 {
		return true
	}
	d := time.Duration(until - c.s.now().UnixNano())
	if d <= 0 {
		return true
	}
	return c.holdBack(d)
}

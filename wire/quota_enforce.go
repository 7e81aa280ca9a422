package wire

import (
	"strings"
	"time"

	"github.com/kaas-dev/kaas/engine/quota"
	"github.com/kaas-dev/kaas/engine/throttle"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// produceQuotas meters handled produce requests: per client quota entity
// (producer_byte_rate) and, when Config.MaxProduceBytesPerSecond is set,
// broker-wide, all clients sharing one sensor.
type produceQuotas struct {
	client      *throttle.Sensors
	broker      *throttle.Sensors
	brokerLimit float64
}

// brokerSensor is the one sensor of the broker-wide produce guard.
const brokerSensor = "broker"

func newProduceQuotas(brokerLimit float64, nowMs func() int64) *produceQuotas {
	return &produceQuotas{
		client:      throttle.NewSensors(throttle.DefaultConfig, throttle.DefaultIdleMs, throttle.DefaultMaxSensors, nowMs),
		broker:      throttle.NewSensors(throttle.DefaultConfig, throttle.DefaultIdleMs, 1, nowMs),
		brokerLimit: brokerLimit,
	}
}

// quotaUser is the quota entity of a principal: its name without the type
// ("User:ANONYMOUS" is "ANONYMOUS", Kafka's entity for anonymous clients).
func quotaUser(principal string) string { return strings.TrimPrefix(principal, "User:") }

// record adds a handled produce of size bytes from user/clientID and
// answers its throttle time: the longer of the client quota's and the
// broker-wide guard's.
func (q *produceQuotas) record(quotas clientQuotas, user, clientID string, size int64) int64 {
	var ms int64
	if limit, sensor, ok := quotas.ClientQuota(quota.ProducerByteRate, user, clientID); ok {
		ms = q.client.Record(sensor, float64(size), limit)
	}
	if q.brokerLimit > 0 {
		ms = throttle.Longer(ms, q.broker.Record(brokerSensor, float64(size), q.brokerLimit))
	}
	return ms
}

// clientQuotas answers the quota that applies to a client (the engine).
type clientQuotas interface {
	ClientQuota(k quota.Key, user, clientID string) (limit float64, sensor string, ok bool)
}

// kip219Since is the first version of each metered API whose clients wait
// out ThrottleTimeMs themselves (KIP-219); Kafka answers older versions
// late instead of muting the connection.
var kip219Since = map[kmsg.Key]int16{kmsg.Produce: 6, kmsg.Fetch: 8}

// throttleAction is how a response throttled for ms is served: delayed
// (older clients) or sent at once with reads muted for ms afterwards.
func throttleAction(key int16, version int16, ms int64) (delay, mute time.Duration) {
	if ms <= 0 {
		return 0, 0
	}
	d := time.Duration(ms) * time.Millisecond
	if since, ok := kip219Since[kmsg.Key(key)]; ok && version < since {
		return d, 0
	}
	return 0, d
}

// throttleProduce meters a handled produce and applies its throttle time:
// in the response's ThrottleMillis, and as a delay before it or a mute
// after it. False means the connection closed while delaying.
func (c *conn) throttleProduce(r *reply) bool {
	ms := c.s.produce.record(c.s.eng, r.quotaUser, r.clientID, r.size)
	if ms <= 0 {
		return true
	}
	if pr, ok := r.resp.(*kmsg.ProduceResponse); ok {
		pr.ThrottleMillis = int32(min(ms, int64(1<<31-1)))
	}
	delay, mute := throttleAction(r.key, r.version, ms)
	if mute > 0 {
		c.muteUntil.Store(c.s.now().Add(mute).UnixNano())
	}
	return delay <= 0 || c.holdBack(delay)
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

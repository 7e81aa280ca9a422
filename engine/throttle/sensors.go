package throttle

import (
	"sync"
	"time"
)

// Kafka expires an idle quota sensor after an hour
// (inactiveSensorExpirationTimeSeconds) and sweeps every 30 s.
const (
	DefaultIdleMs     = int64(time.Hour / time.Millisecond)
	DefaultMaxSensors = 10000
	sweepEveryMs      = int64(30 * time.Second / time.Millisecond)
)

type sensor struct {
	rate   *Rate
	lastMs int64
}

// Sensors is a bounded set of named Rates, one per quota entity. An idle
// sensor expires; when the set is full a new sensor evicts the least
// recently used one, so no client can grow the broker's memory without
// bound. Recording on an existing sensor does not allocate.
type Sensors struct {
	cfg    Config
	idleMs int64
	max    int
	nowMs  func() int64
	// MaxThrottleMs caps a throttle time when > 0 (Kafka caps the
	// request quota's at one window).
	MaxThrottleMs int64

	mu        sync.Mutex
	byName    map[string]*sensor
	lastSweep int64
}

// NewSensors returns an empty set; nowMs is the clock in milliseconds.
func NewSensors(cfg Config, idleMs int64, max int, nowMs func() int64) *Sensors {
	return &Sensors{cfg: cfg, idleMs: idleMs, max: max, nowMs: nowMs, byName: make(map[string]*sensor), lastSweep: nowMs()}
}

// WallClockMs is the real clock for NewSensors.
func WallClockMs() int64 { return time.Now().UnixMilli() }

// Record adds v to the named sensor and answers its throttle time against
// limit (0 when within it), as Kafka's recordAndGetThrottleTimeMs: the
// value is recorded first, then the rate including it is checked.
func (s *Sensors) Record(name string, v, limit float64) int64 {
	now := s.nowMs()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maybeSweep(now)
	sn := s.byName[name]
	if sn == nil {
		sn = s.add(name, now)
	}
	sn.lastMs = now
	sn.rate.Record(v, now)
	window := sn.rate.WindowMs(now)
	return ThrottleMs(sn.rate.Measure(now), limit, window, s.MaxThrottleMs)
}

// Unrecord takes v back off the named sensor, without a check (Kafka's
// unrecordQuotaSensor): for a recorded answer that was then not sent.
func (s *Sensors) Unrecord(name string, v float64) {
	now := s.nowMs()
	s.mu.Lock()
	defer s.mu.Unlock()
	if sn := s.byName[name]; sn != nil {
		sn.rate.Record(-v, now)
	}
}

// Len is the number of live sensors.
func (s *Sensors) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byName)
}

func (s *Sensors) add(name string, now int64) *sensor {
	if len(s.byName) >= s.max {
		s.sweep(now)
	}
	if len(s.byName) >= s.max {
		s.evictLeastRecent()
	}
	sn := &sensor{rate: NewRate(s.cfg, now), lastMs: now}
	s.byName[name] = sn
	return sn
}

func (s *Sensors) maybeSweep(now int64) {
	if now-s.lastSweep >= sweepEveryMs {
		s.sweep(now)
	}
}

func (s *Sensors) sweep(now int64) {
	s.lastSweep = now
	for name, sn := range s.byName {
		if now-sn.lastMs >= s.idleMs {
			delete(s.byName, name)
		}
	}
}

func (s *Sensors) evictLeastRecent() {
	var oldest string
	var oldestMs int64
	first := true
	for name, sn := range s.byName {
		if first || sn.lastMs < oldestMs {
			oldest, oldestMs, first = name, sn.lastMs, false
		}
	}
	delete(s.byName, oldest)
}

// Package throttle measures client rates as Kafka's quota sensors do (a
// windowed Rate of quota.window.num samples of quota.window.size.seconds
// each) and turns a rate over its limit into a throttle time.
package throttle

import "math"

// Config is the sampling of every Rate: Samples windows of WindowMs each
// (Kafka's quota.window.num, 11, and quota.window.size.seconds, 1 s).
type Config struct {
	Samples  int
	WindowMs int64
}

// DefaultConfig is Kafka's quota sampling.
var DefaultConfig = Config{Samples: 11, WindowMs: 1000}

type sample struct {
	value   float64
	startMs int64 // Kafka's lastWindowMs: when the sample began
}

// Rate is Kafka's Rate over a SampledTotal: the sum of the live samples
// divided by the elapsed window, padded to Samples-1 full windows while the
// rate is young. It is not safe for concurrent use; Sensors serializes it.
type Rate struct {
	cfg     Config
	samples []sample // fixed capacity Samples; len grows as Kafka's list does
	current int
}

// NewRate returns a Rate whose first sample starts at nowMs.
func NewRate(cfg Config, nowMs int64) *Rate {
	r := &Rate{cfg: cfg, samples: make([]sample, 1, cfg.Samples)}
	r.samples[0].startMs = nowMs
	return r
}

// Record adds v at nowMs, starting a new sample when the current one is
// a window old.
func (r *Rate) Record(v float64, nowMs int64) {
	s := &r.samples[r.current]
	if nowMs-s.startMs >= r.cfg.WindowMs {
		s = r.advance(nowMs)
	}
	s.value += v
}

func (r *Rate) advance(nowMs int64) *sample {
	r.current = (r.current + 1) % r.cfg.Samples
	if r.current >= len(r.samples) {
		r.samples = r.samples[:r.current+1]
	}
	s := &r.samples[r.current]
	*s = sample{startMs: nowMs}
	return s
}

// purge resets the samples older than the whole window, as Kafka's
// purgeObsoleteSamples does.
func (r *Rate) purge(nowMs int64) {
	expireAge := int64(r.cfg.Samples) * r.cfg.WindowMs
	for i := range r.samples {
		if nowMs-r.samples[i].startMs >= expireAge {
			r.samples[i] = sample{startMs: nowMs}
		}
	}
}

// WindowMs is the length the rate is measured over at nowMs (Kafka's
// Rate.windowSize): the time since the oldest sample began, at least
// Samples-1 full windows.
func (r *Rate) WindowMs(nowMs int64) int64 {
	r.purge(nowMs)
	oldest := r.samples[0].startMs
	for _, s := range r.samples[1:] {
		if s.startMs < oldest {
			oldest = s.startMs
		}
	}
	elapsed := nowMs - oldest
	full := elapsed / r.cfg.WindowMs
	if minFull := int64(r.cfg.Samples - 1); full < minFull {
		elapsed += (minFull - full) * r.cfg.WindowMs
	}
	return elapsed
}

// Measure is the rate per second at nowMs.
func (r *Rate) Measure(nowMs int64) float64 {
	window := r.WindowMs(nowMs) // purges first, as Kafka measures
	var total float64
	for _, s := range r.samples {
		total += s.value
	}
	return total / (float64(window) / 1000)
}

// ThrottleMs is how long a client measured at observed against limit waits
// (Kafka's QuotaUtils.throttleTime, KIP-124/KIP-219): the excess over the
// limit, as a share of the limit, of the window the rate was measured
// over. It is 0 within the limit, and capped at maxMs when maxMs > 0.
func ThrottleMs(observed, limit float64, windowMs, maxMs int64) int64 {
	if limit <= 0 || observed <= limit {
		return 0
	}
	ms := int64(math.Round((observed - limit) / limit * float64(windowMs)))
	if maxMs > 0 && ms > maxMs {
		ms = maxMs
	}
	return ms
}

// Longer is the throttle time that applies when two quotas (a client's and
// the broker-wide guard) throttle one response: the larger wins.
func Longer(a, b int64) int64 { return max(a, b) }

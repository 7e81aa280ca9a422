package cluster

import (
	"cmp"
	"slices"
	"sync"
	"time"
)

// Default timings. A broker writes a heartbeat every DefaultHeartbeatInterval;
// it is declared dead after DefaultLease without observed progress, that is
// after about eight missed beats, which rides out an fsync or GC stall of
// well over a second without flapping while keeping failover (lease + one
// poll + takeover) within the 3 s target of issue 3.
const (
	DefaultHeartbeatInterval = 250 * time.Millisecond
	DefaultLease             = 2 * time.Second
)

// Clock returns the time elapsed since an arbitrary origin on a monotonic
// clock of this process. Only differences between its readings mean
// anything; they are never compared with another host's.
type Clock func() time.Duration

// MonotonicClock returns a Clock that reads this process's monotonic clock
// (time.Since keeps to the monotonic reading).
func MonotonicClock() Clock {
	start := time.Now()
	return func() time.Duration { return time.Since(start) }
}

// LiveBroker is a broker an Observer currently holds live.
type LiveBroker struct {
	ID          int32
	KafkaAddr   string
	AdminAddr   string
	Zone        string
	Incarnation string
}

// Observer decides liveness from observed progress (docs/design.md §2): a broker
// is live while its heartbeat counter has advanced (or its incarnation
// changed) within the lease period, as measured on the observer's own
// monotonic clock. It never looks at a time written by another host, nor at
// file modification times.
//
// First sighting: a broker seen for the first time is live at once, and that
// sighting starts its lease; it stays live only if its counter advances
// within the lease. So a freshly started observer treats a dead broker whose
// file is still there as live for at most one lease, exactly as if that
// broker had died the moment the observer started. The alternative (not
// live until a second, advanced sighting) would make a fresh observer see
// nobody, and a fresh broker would at once unseat a live controller.
//
// A broker whose heartbeat says Leaving is not live, whatever its counter.
// A broker absent from an observation keeps its state: a listing can be
// stale, so absence is just no progress.
//
// Observer is safe for concurrent use.
type Observer struct {
	now   Clock
	lease time.Duration

	mu   sync.Mutex
	seen map[int32]*sighting

	// wallNow, when set, is the unsafe wall-clock lease (a negative
	// control): liveness compares this host's wall clock with the time the
	// heartbeat's writer put in it.
	wallNow func() time.Time
}

type sighting struct {
	hb         Heartbeat     // the latest heartbeat that counted as progress
	progressAt time.Duration // when, on the observer's clock
}

// NewObserver returns an Observer with the given lease (DefaultLease if not
// positive) and clock (MonotonicClock() if nil).
func NewObserver(lease time.Duration, clock Clock) *Observer {
	if lease <= 0 {
		lease = DefaultLease
	}
	if clock == nil {
		clock = MonotonicClock()
	}
	return &Observer{now: clock, lease: lease, seen: map[int32]*sighting{}}
}

// Lease returns the lease period.
func (o *Observer) Lease() time.Duration { return o.lease }

// Now reads the observer's clock.
func (o *Observer) Now() time.Duration { return o.now() }

// Observe records heartbeats just read (ReadHeartbeats). A heartbeat counts
// as progress when it is the first of its broker, comes from a different
// incarnation than the last one, or has a higher counter than the last one
// of the same incarnation. A lower or equal counter changes nothing.
func (o *Observer) Observe(hbs []Heartbeat) {
	now := o.now()
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, hb := range hbs {
		s, ok := o.seen[hb.BrokerID]
		switch {
		case !ok:
			o.seen[hb.BrokerID] = &sighting{hb: hb, progressAt: now}
		case hb.Incarnation != s.hb.Incarnation || hb.Counter > s.hb.Counter:
			s.hb, s.progressAt = hb, now
		}
	}
}

// UnsafeCompareWallClocks makes liveness compare now with the wall time
// each heartbeat's writer put in it, which is what docs/design.md §2 forbids: a
// clock jump on either host then kills or revives brokers. Only the chaos
// tests' negative control sets it, to show their checks catch the
// spurious failovers that follow.
func (o *Observer) UnsafeCompareWallClocks(now func() time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.wallNow = now
}

// liveLocked reports whether s is live at now.
func (o *Observer) liveLocked(s *sighting, now time.Duration) bool {
	if o.wallNow != nil {
		return !s.hb.Leaving && o.wallNow().UnixMilli()-s.hb.WrittenAt < o.lease.Milliseconds()
	}
	return !s.hb.Leaving && now-s.progressAt < o.lease
}

// Live returns the live brokers, sorted by ID.
func (o *Observer) Live() []LiveBroker {
	now := o.now()
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []LiveBroker
	for _, s := range o.seen {
		if o.liveLocked(s, now) {
			out = append(out, LiveBroker{
				ID: s.hb.BrokerID, KafkaAddr: s.hb.KafkaAddr, AdminAddr: s.hb.AdminAddr,
				Zone: s.hb.Zone, Incarnation: s.hb.Incarnation,
			})
		}
	}
	slices.SortFunc(out, func(a, b LiveBroker) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// Known reports whether the observer has ever seen broker id.
func (o *Observer) Known(id int32) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, ok := o.seen[id]
	return ok
}

// IsLive reports whether broker id is live in the given incarnation. A
// broker that restarted is not live in its old incarnation.
func (o *Observer) IsLive(id int32, incarnation string) bool {
	now := o.now()
	o.mu.Lock()
	defer o.mu.Unlock()
	s, ok := o.seen[id]
	return ok && s.hb.Incarnation == incarnation && o.liveLocked(s, now)
}

// ProgressAge is how long ago, on the observer's clock, a broker's
// heartbeat last counted as progress.
type ProgressAge struct {
	ID  int32
	Age time.Duration
}

// ProgressAges returns, for every broker seen and not leaving, how long
// ago its heartbeat last advanced, sorted by ID (the metrics' heartbeat
// age: one that keeps growing is a broker not beating).
func (o *Observer) ProgressAges() []ProgressAge {
	now := o.now()
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]ProgressAge, 0, len(o.seen))
	for id, s := range o.seen {
		if !s.hb.Leaving {
			out = append(out, ProgressAge{ID: id, Age: now - s.progressAt})
		}
	}
	slices.SortFunc(out, func(a, b ProgressAge) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

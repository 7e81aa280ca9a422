package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/kaas-dev/kaas/engine/dataplane"
	"github.com/kaas-dev/kaas/engine/desired"
	"github.com/kaas-dev/kaas/states"
	"github.com/kaas-dev/kaas/volume/partlog"
)

// The log cleaner (cleanup.policy=compact), with Kafka's semantics
// (docs/topics.md, Compaction). Each of CleanerConfig.Threads workers
// picks, among the compacted partitions this broker serves, the one most
// worth cleaning (the highest dirty ratio above min.cleanable.dirty.ratio,
// one due by max.compaction.lag.ms, or one whose kept tombstones have
// reached their delete horizon) and drives its segment-compact machine
// (states.SegmentCompact) once: plan, map, clean, retire. The partition's
// owner is its only writer, so it is also its only cleaner; the swap of
// each cleaned segment is fenced (partlog.SwapCleaned). Picking reads
// only memory: a broker whose compacted partitions do not change does no
// volume I/O for them.

// Defaults of the cleaner's broker flags, Kafka's.
const (
	DefaultCleanerThreads          = 1
	DefaultCleanerDedupeBufferSize = 128 << 20
	DefaultCleanerBackoff          = 15 * time.Second
)

// CleanerConfig configures the log cleaner (Kafka's log.cleaner.*).
type CleanerConfig struct {
	// Disable leaves compacted topics uncleaned (log.cleaner.enable=false).
	Disable bool
	// Threads is how many partitions are cleaned at once
	// (log.cleaner.threads). Default 1.
	Threads int
	// DedupeBufferSize is the memory of the key maps of all threads
	// together (log.cleaner.dedupe.buffer.size). Default 128 MiB.
	DedupeBufferSize int64
	// IOMaxBytesPerSecond bounds what all threads read and write together
	// (log.cleaner.io.max.bytes.per.second); 0 is unlimited.
	IOMaxBytesPerSecond float64
	// Backoff is how long a thread sleeps when no partition needs
	// cleaning (log.cleaner.backoff.ms). Default 15s.
	Backoff time.Duration
}

func (c CleanerConfig) withDefaults() CleanerConfig {
	if c.Threads <= 0 {
		c.Threads = DefaultCleanerThreads
	}
	if c.DedupeBufferSize <= 0 {
		c.DedupeBufferSize = DefaultCleanerDedupeBufferSize
	}
	if c.Backoff <= 0 {
		c.Backoff = DefaultCleanerBackoff
	}
	return c
}

// check refuses a dedupe buffer too small for a key per thread, as
// Kafka's cleaner refuses to start.
func (c CleanerConfig) check() error {
	if c.Disable {
		return nil
	}
	if _, err := dataplane.NewOffsetMap(int(min(c.DedupeBufferSize/int64(c.Threads), 64<<10))); err != nil {
		return fmt.Errorf("log cleaner: --log-cleaner-dedupe-buffer-size %d over %d threads: %w", c.DedupeBufferSize, c.Threads, err)
	}
	return nil
}

// compactPolicy is what a compacted topic's configs ask of the cleaner.
type compactPolicy struct {
	minDirtyRatio   float64
	minLag, maxLag  time.Duration
	deleteRetention time.Duration
	segmentBytes    int64
	segmentAge      time.Duration // segment.ms, capped by max.compaction.lag.ms
	decodeLimit     int
}

// compactPolicyOf returns the topic's compaction policy, and false when
// its cleanup.policy does not include compact.
func compactPolicyOf(spec desired.TopicSpec) (compactPolicy, bool) {
	if !spec.Compacted() {
		return compactPolicy{}, false
	}
	p := compactPolicy{
		minDirtyRatio:   spec.ConfigFloat("min.cleanable.dirty.ratio"),
		minLag:          msDuration(spec.ConfigInt("min.compaction.lag.ms")),
		maxLag:          msDuration(spec.ConfigInt("max.compaction.lag.ms")),
		deleteRetention: msDuration(spec.ConfigInt("delete.retention.ms")),
		segmentBytes:    spec.ConfigInt("segment.bytes"),
		decodeLimit:     dataplane.DecodeLimit(int(spec.ConfigInt("max.message.bytes"))),
	}
	if p.maxLag <= 0 {
		p.maxLag = math.MaxInt64
	}
	p.segmentAge = min(msDuration(spec.ConfigInt("segment.ms")), p.maxLag)
	return p, true
}

// msDuration is a config in milliseconds as a duration, saturating.
func msDuration(ms int64) time.Duration {
	if ms >= math.MaxInt64/int64(time.Millisecond) {
		return math.MaxInt64
	}
	return time.Duration(ms) * time.Millisecond
}

// cleaner is the engine's log cleaner: its threads, the partitions they
// hold, the shared rate limit and the counters.
type cleaner struct {
	e       *Engine
	cfg     CleanerConfig
	limiter *rate.Limiter // nil: unlimited
	// dropLatest is the negative control compact-drop-latest.
	dropLatest bool

	mu   sync.Mutex
	busy map[string]bool // partitions a thread is cleaning
	// retryAt: a partition whose pass failed is not picked again before
	// then.
	retryAt map[string]time.Time
	// horizons: the earliest delete horizon (Unix ms) a pass kept, per
	// partition: the partition is due again then.
	horizons map[string]int64

	stats cleanerStats
}

// cleanerStats are the cleaner's counters (kaas_log_cleaner_*).
type cleanerStats struct {
	passes, failed            atomic.Int64
	bytesRead, bytesWritten   atomic.Int64
	superseded, tombstones    atomic.Int64
	aborted, markers, keyless atomic.Int64
	busyNanos                 atomic.Int64
	segmentsIn, segmentsOut   atomic.Int64
	undecodable               atomic.Int64
}

func newCleaner(e *Engine, cfg CleanerConfig) *cleaner {
	c := &cleaner{e: e, cfg: cfg, busy: map[string]bool{}, retryAt: map[string]time.Time{}, horizons: map[string]int64{},
		dropLatest: e.negative.CompactDropLatest}
	if cfg.IOMaxBytesPerSecond > 0 {
		c.limiter = rate.NewLimiter(rate.Limit(cfg.IOMaxBytesPerSecond), cleanerBurst)
	}
	return c
}

// cleanerBurst is the most bytes one charge to the rate limiter takes.
const cleanerBurst = 1 << 20

// throttle charges n bytes to the shared rate limit, in chunks the
// limiter's burst allows.
func (c *cleaner) throttle(ctx context.Context, n int) error {
	if c.limiter == nil {
		return nil
	}
	for n > 0 {
		k := min(n, cleanerBurst)
		if err := c.limiter.WaitN(ctx, k); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// run runs the cleaner's threads until ctx ends.
func (c *cleaner) run(ctx context.Context) {
	var wg sync.WaitGroup
	for range c.cfg.Threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.thread(ctx)
		}()
	}
	wg.Wait()
}

// thread cleans one partition after another, sleeping Backoff whenever
// none needs it. Its key map is allocated at its first pass and kept.
func (c *cleaner) thread(ctx context.Context) {
	var m *dataplane.OffsetMap
	for ctx.Err() == nil {
		sp, ok := c.pick()
		if !ok {
			t := time.NewTimer(c.cfg.Backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			continue
		}
		var err error
		m, err = c.clean(ctx, sp, m)
		c.done(sp, err)
		if err != nil && ctx.Err() == nil {
			c.e.log.Info("log cleaning pass failed", "topic", sp.spec.Name, "partition", sp.p.Index, "err", err)
		}
	}
}

// cleanerKey names a partition in the cleaner's maps. It leaves the
// topic ID out, so that a release can forget it knowing only the name; an
// entry a recreated topic inherits costs at most one early pass.
func cleanerKey(p *dataplane.Partition) string { return partitionKey(p.Topic, p.Index) }

func partitionKey(topic string, index int32) string { return topic + "/" + strconv.Itoa(int(index)) }

// forget drops what the cleaner remembers of a partition this broker let
// go of.
func (c *cleaner) forget(topic string, index int32) {
	if c == nil {
		return // an engine built by hand in a test
	}
	key := partitionKey(topic, index)
	c.mu.Lock()
	delete(c.retryAt, key)
	delete(c.horizons, key)
	c.mu.Unlock()
}

// pick chooses the served compacted partition most worth cleaning now and
// marks it busy; false if none needs cleaning.
func (c *cleaner) pick() (servedPartition, bool) {
	now := c.e.cfg.Now()
	var best servedPartition
	bestScore := -1.0
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, sp := range c.e.routes.servedWhere(desired.TopicSpec.Compacted) {
		pol, _ := compactPolicyOf(sp.spec)
		key := cleanerKey(sp.p)
		if c.busy[key] || now.Before(c.retryAt[key]) {
			continue
		}
		score, due := c.score(sp.p, pol, now, key)
		if due && score > bestScore {
			best, bestScore = sp, score
		}
	}
	if bestScore < 0 {
		return servedPartition{}, false
	}
	c.busy[cleanerKey(best.p)] = true
	return best, true
}

// score rates a compacted partition for cleaning: its dirty ratio, and
// whether it is due (Kafka's LogCleanerManager.grabFilthiestCompactedLog,
// plus the delete horizon of tombstones it kept). A quiet active segment
// old enough is rolled first, so the tail of a partition nobody writes to
// becomes cleanable.
func (c *cleaner) score(p *dataplane.Partition, pol compactPolicy, now time.Time, key string) (float64, bool) {
	lg := p.Log()
	if lg.Err() != nil {
		return 0, false
	}
	if _, err := lg.RollIfQuiet(pol.segmentAge); err != nil {
		return 0, false
	}
	plan := lg.CleanablePlan(now, pol.minLag, p.LastStableOffset())
	if h := c.horizons[key]; h > 0 && now.UnixMilli() >= h && len(plan.Segments) > 0 {
		return 1, true
	}
	if plan.DirtyBytes == 0 {
		return 0, false
	}
	ratio := float64(plan.DirtyBytes) / float64(plan.DirtyBytes+plan.CleanBytes)
	lagDue := pol.maxLag < math.MaxInt64 && plan.DirtyTime > 0 && now.Sub(time.UnixMilli(plan.DirtyTime)) >= pol.maxLag
	return ratio, ratio >= pol.minDirtyRatio || lagDue
}

// done gives a partition back after its pass; one that failed waits a
// backoff before it is tried again.
func (c *cleaner) done(sp servedPartition, err error) {
	key := cleanerKey(sp.p)
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.busy, key)
	if err != nil {
		c.retryAt[key] = c.e.cfg.Now().Add(c.cfg.Backoff)
	} else {
		delete(c.retryAt, key)
	}
}

// noteHorizon remembers when a partition's kept tombstones and markers
// may go (0: none kept).
func (c *cleaner) noteHorizon(p *dataplane.Partition, horizon int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if horizon == 0 {
		delete(c.horizons, cleanerKey(p))
		return
	}
	c.horizons[cleanerKey(p)] = horizon
}

// clean drives one pass of sp's segment-compact machine with the key map
// m (allocated, or grown, as the dirty range needs and the thread's share
// of the dedupe buffer allows) and returns the map for the next pass.
func (c *cleaner) clean(ctx context.Context, sp servedPartition, m *dataplane.OffsetMap) (*dataplane.OffsetMap, error) {
	e := c.e
	start := time.Now()
	defer func() { c.stats.busyNanos.Add(int64(time.Since(start))) }()
	pol, _ := compactPolicyOf(sp.spec)
	obj := states.PartitionObject(sp.spec.Name, sp.p.Index)
	rec, err := states.Load(e.fsys, e.cfg.ClusterDir, states.SegmentCompact.Kind, obj)
	if err != nil {
		return m, err
	}
	switch {
	case rec == nil || rec.TopicID != sp.spec.ID:
		rec = states.SegmentCompact.NewRecord(obj, sp.spec.ID, e.owner, e.cfg.Now())
	case rec.State == states.SegmentCompact.End:
		rec.State, rec.Compact = states.SegmentCompact.Initial, nil
	default:
		rec.State = states.SegmentCompact.Resume(rec.State, false)
	}
	rec.Owner, rec.Desired = e.owner, states.SegmentCompact.End
	h := &cleanerHost{c: c, p: sp.p, pol: pol, m: m}
	err = e.drive(ctx, states.SegmentCompact, rec, states.SegmentCompactActions(rec, h))
	if err != nil {
		c.stats.failed.Add(1)
		return h.m, err
	}
	c.stats.passes.Add(1)
	return h.m, nil
}

// cleanerHost does the steps of one segment-compact pass on an open
// partition (states.SegmentCompactHost).
type cleanerHost struct {
	c   *cleaner
	p   *dataplane.Partition
	pol compactPolicy

	plan    partlog.CleanablePlan
	m       *dataplane.OffsetMap
	mapped  bool
	mapEnd  int64
	aborted []dataplane.AbortedTxn
	live    map[int64]dataplane.LastRecord
}

func (h *cleanerHost) usable(rec *states.Record) (*partlog.Log, error) {
	lg := h.p.Log()
	if err := lg.Err(); err != nil {
		return nil, err
	}
	rec.Epoch = lg.Epoch()
	return lg, nil
}

// Plan rolls a quiet tail, sweeps what earlier passes left, and takes the
// cleanable range with what the filter needs of the partition's state at
// this moment: its aborted transactions and its producers' last batches.
func (h *cleanerHost) Plan(ctx context.Context, rec *states.Record) error {
	lg, err := h.usable(rec)
	if err != nil {
		return err
	}
	if _, err := lg.RollIfQuiet(h.pol.segmentAge); err != nil {
		return fmt.Errorf("roll quiet tail: %w", err)
	}
	if err := lg.BeginClean(); err != nil {
		return fmt.Errorf("sweep unlisted files: %w", err)
	}
	lg.EndClean() // sweeps
	now := h.c.e.cfg.Now()
	h.plan = lg.CleanablePlan(now, h.pol.minLag, h.p.LastStableOffset())
	h.live = h.p.LastRecords()
	h.aborted = h.p.AbortedTransactions(h.plan.LogStart, h.plan.FirstUncleanable, nil)
	h.mapped = false
	rec.Compact = &states.CompactProgress{From: h.plan.FirstDirty, End: h.plan.FirstUncleanable,
		GroupsPlanned: len(h.plan.Groups(h.groupBytes(), h.plan.FirstUncleanable))}
	return lg.Err()
}

// groupBytes is the most input one cleaned segment replaces.
func (h *cleanerHost) groupBytes() int64 {
	if h.pol.segmentBytes > 0 {
		return h.pol.segmentBytes
	}
	return partlog.DefaultSegmentBytes
}

// Map builds the key map of the dirty range.
func (h *cleanerHost) Map(ctx context.Context, rec *states.Record) error {
	if rec.Compact == nil {
		return errors.New("map without a plan: the pass resumes at pending")
	}
	h.mapEnd = h.plan.FirstDirty
	if err := h.ensureMap(h.plan.FirstUncleanable - h.plan.FirstDirty); err != nil {
		return err
	}
	h.m.Clear() // an empty range (a pass for delete horizons) maps nothing
	if h.plan.FirstDirty < h.plan.FirstUncleanable {
		set, err := h.p.Log().PinSealed(h.plan.FirstDirty, h.plan.FirstUncleanable)
		if err != nil {
			return fmt.Errorf("pin dirty range: %w", err)
		}
		src := newSetIter(ctx, set, h.c.throttle)
		res, err := dataplane.BuildOffsetMap(h.m, src, h.plan.FirstDirty, h.plan.FirstUncleanable, h.aborted, h.pol.decodeLimit)
		src.stop()
		set.Release()
		if err != nil {
			return fmt.Errorf("build offset map: %w", err)
		}
		h.mapEnd = res.End
		h.c.stats.undecodable.Add(res.Undecodable)
	}
	h.mapped = true
	rec.Compact.MapEnd = h.mapEnd
	return nil
}

// ensureMap makes h.m able to hold the keys of span offsets, within the
// thread's share of the dedupe buffer: a small partition gets a small
// map, so a broker with only small compacted topics never holds the
// whole buffer.
func (h *cleanerHost) ensureMap(span int64) error {
	share := h.c.cfg.DedupeBufferSize / int64(h.c.cfg.Threads)
	want := min(share, (span+16)*28) // 24-byte slots at 0.9 load
	if h.m != nil && int64(h.m.Slots())*24 >= want {
		return nil
	}
	if h.m != nil {
		want = min(share, max(want, 2*int64(h.m.Slots())*24))
	}
	m, err := dataplane.NewOffsetMap(int(want))
	if err != nil {
		return fmt.Errorf("key map: %w", err)
	}
	if h.c.dropLatest {
		m.UnsafeDropLatest()
	}
	h.m = m
	return nil
}

// Clean filters the plan's groups below the map's end into cleaned
// segments and swaps each in; the progress record is saved after each.
func (h *cleanerHost) Clean(ctx context.Context, rec *states.Record) error {
	if !h.mapped {
		return errors.New("clean without a map: the pass resumes at pending")
	}
	lg, err := h.usable(rec)
	if err != nil {
		return err
	}
	if err := lg.BeginClean(); err != nil {
		return err
	}
	defer lg.EndClean()
	f := dataplane.NewFilter(dataplane.FilterConfig{MapEnd: h.mapEnd, End: h.plan.FirstUncleanable,
		Now: h.c.e.cfg.Now().UnixMilli(), DeleteRetentionMs: h.pol.deleteRetention.Milliseconds(), DecodeLimit: h.pol.decodeLimit},
		h.m, h.aborted, h.live)
	defer f.Close()
	groups := h.plan.Groups(h.groupBytes(), h.mapEnd)
	rec.Compact.GroupsPlanned = len(groups)
	dropped := 0
	var prev dataplane.CleanStats
	for i, g := range groups {
		cleanerOffset := int64(-1)
		if i == len(groups)-1 {
			cleanerOffset = h.mapEnd
		}
		set, out, err := dataplane.WriteCleaned(ctx, lg, f, g, h.c.throttle)
		if err != nil {
			return fmt.Errorf("group %d of %d at offset %d: %w", i+1, len(groups), g[0].Base, err)
		}
		// Entries whose abort markers this group drops leave the aborted
		// list before the segment without them is read.
		removed := f.RemovedAborts()
		h.p.DropAborted(removed[dropped:])
		dropped = len(removed)
		err = lg.SwapCleaned(set, out, cleanerOffset)
		set.Release()
		if errors.Is(err, partlog.ErrCleanStale) {
			continue // retention got there first: nothing to swap
		}
		if err != nil {
			return fmt.Errorf("group %d of %d at offset %d: %w", i+1, len(groups), g[0].Base, err)
		}
		st := f.Stats()
		h.count(prev, st, len(g))
		prev = st
		p := rec.Compact
		p.GroupsSwapped++
		p.BytesRead, p.BytesWritten, p.BytesReclaimed = st.BytesRead, st.BytesWritten, st.BytesRead-st.BytesWritten
		p.Superseded, p.Tombstones, p.Aborted, p.Markers = st.Superseded, st.Tombstones, st.Aborted, st.Markers
		for _, s := range lg.Segments() {
			if s.Base == g[0].Base && s.Gen > 0 {
				p.Gens = append(p.Gens, s.Gen)
			}
		}
		if err := h.c.e.save(rec); err != nil {
			return fmt.Errorf("save progress: %w", err)
		}
	}
	h.c.noteHorizon(h.p, f.Stats().NextHorizon)
	return nil
}

// count adds what one group's swap cleaned to the cleaner's counters.
func (h *cleanerHost) count(prev, st dataplane.CleanStats, inputs int) {
	s := &h.c.stats
	s.bytesRead.Add(st.BytesRead - prev.BytesRead)
	s.bytesWritten.Add(st.BytesWritten - prev.BytesWritten)
	s.superseded.Add(st.Superseded - prev.Superseded)
	s.tombstones.Add(st.Tombstones - prev.Tombstones)
	s.aborted.Add(st.Aborted - prev.Aborted)
	s.markers.Add(st.Markers - prev.Markers)
	s.keyless.Add(st.Keyless - prev.Keyless)
	s.segmentsIn.Add(int64(inputs))
	s.segmentsOut.Add(1)
}

// Retire waits for the pass's inputs to be unpinned (the swaps retired
// them; a reader may still send from one), sweeps, and makes a producer
// snapshot due so the next load does not name removed abort markers.
func (h *cleanerHost) Retire(ctx context.Context, rec *states.Record) error {
	lg, err := h.usable(rec)
	if err != nil {
		return err
	}
	if err := lg.BeginClean(); err != nil {
		return fmt.Errorf("sweep unlisted files: %w", err)
	}
	lg.EndClean()
	if rec.Compact != nil && rec.Compact.GroupsSwapped > 0 {
		h.p.SnapshotAtEnd()
	}
	return lg.Err()
}

// setIter reads a pinned segment set as a dataplane.BatchIter.
type setIter struct {
	next func() ([]byte, bool)
	stop func()
	cur  []byte
	err  error
}

func newSetIter(ctx context.Context, set *partlog.SegmentSet, throttle partlog.Throttle) *setIter {
	s := &setIter{}
	errStop := errors.New("stopped")
	seq := func(yield func([]byte) bool) {
		err := set.Walk(ctx, throttle, func(b []byte) error {
			if !yield(b) {
				return errStop
			}
			return nil
		})
		if err != nil && !errors.Is(err, errStop) {
			s.err = err
		}
	}
	s.next, s.stop = iter.Pull(iter.Seq[[]byte](seq))
	return s
}

func (s *setIter) Next() bool {
	b, ok := s.next()
	s.cur = b
	return ok
}

func (s *setIter) Batch() (int64, []byte) { return int64(binary.BigEndian.Uint64(s.cur)), s.cur }
func (s *setIter) Err() error             { return s.err }

package groupstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/partlog"
)

// Record is one key/value of the log; a nil Value is a tombstone. It is an
// alias of the same unnamed type as groups.Record, so slices of either are
// one type and neither package imports the other.
type Record = struct{ Key, Value []byte }

// Defaults for Config fields left zero.
const (
	DefaultSnapshotEveryBytes = 4 << 20
	// DefaultMaxBatchBytes bounds one Append's batch: a large group's
	// metadata (every member's subscription and assignment) can outgrow
	// Kafka's default 1 MiB message size.
	DefaultMaxBatchBytes = 16 << 20
	// DefaultSegmentBytes keeps segments small enough that deleting the
	// ones below the newest snapshot (future work) frees disk in steps.
	DefaultSegmentBytes = 64 << 20
)

// ErrClosed is returned by calls on a closed Store.
var ErrClosed = errors.New("groupstore: store closed")

// Config configures Open.
type Config struct {
	FS    volume.FS
	Dir   string // states.ShardDir(clusterDir, index)
	Index int32
	// Epoch is the leader epoch the caller already claimed in the shard's
	// fence (partlog.ClaimFence); PreviousEpochs as partlog.Config.
	Epoch          int32
	PreviousEpochs []int32
	// SnapshotEveryBytes is how many log bytes may follow the newest
	// snapshot before the next is written. Default 4 MiB.
	SnapshotEveryBytes int64
	CheckpointInterval time.Duration
	Now                func() time.Time
	Logger             logr.Logger
	// OnFailure is called (once) when the log fails for good (an fsync
	// error, or fenced by a newer owner) or an Append is refused for a full
	// volume (see Store.Err).
	OnFailure func()
	// MaxBatchBytes and SegmentBytes as partlog.Config; zero takes the
	// defaults above.
	MaxBatchBytes int32
	SegmentBytes  int64
}

func (c Config) withDefaults() Config {
	if c.SnapshotEveryBytes <= 0 {
		c.SnapshotEveryBytes = DefaultSnapshotEveryBytes
	}
	if c.MaxBatchBytes <= 0 {
		c.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if c.SegmentBytes <= 0 {
		c.SegmentBytes = DefaultSegmentBytes
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// LoadStats describes what Open read.
type LoadStats struct {
	SnapshotOffset  int64 // -1: no valid snapshot
	SnapshotRecords int
	ReplayedRecords int
	LogEnd          int64
	Took            time.Duration
}

// Store is one shard's storage, open for writing by its owner. It is safe
// for concurrent use.
type Store struct {
	cfg    Config
	log    *partlog.Log
	logger logr.Logger

	// mu is the append lock: it orders log appends and table updates (so
	// the table is always the log's prefix up to next) and guards the
	// fields below. Nobody waits for an fsync while holding it.
	mu        sync.Mutex
	tbl       table
	next      int64  // log end offset the table covers
	buf       []byte // batch encode buffer, reused by every Append
	sinceSnap int64  // log bytes appended since the newest snapshot's offset
	lastSnap  int64  // offset of the newest snapshot loaded or written, -1 none
	closed    bool

	// snapSem is held by whoever writes a snapshot (one at a time, in
	// offset order): a background write Append started, Snapshot, or
	// Close, which so waits for the one in flight.
	snapSem chan struct{}
	closing atomic.Bool // Close began: failures are no news to the owner
	// noSpace is the first Append refused for a full volume. The log stays
	// usable, but the coordinator above may already have changed state the
	// refused records were to make durable, and the Journal contract says
	// the shard is then failed and reloaded from the volume: so the store
	// counts as failed from then on (Err), refuses further Appends, and
	// tells OnFailure. The reload (a new epoch) succeeds once space returns.
	noSpace   atomic.Pointer[error]
	failOnce  sync.Once
	closeOnce sync.Once
	closeErr  error
}

// Open opens the shard's log at cfg.Epoch (recovering the tail the previous
// owner left) and loads the compacted table: the newest valid snapshot plus
// the records after it. The caller has claimed the fence at cfg.Epoch and
// created cfg.Dir (states.CoordinatorOpen's fence and make-dir steps).
//
// Deleting log segments below the newest snapshot is future work (partlog
// has no API for it yet): until then the log grows and a snapshot only
// shortens the replay.
//
// logOpts go to the shard's partition log: partlog's negative controls,
// for tests only.
func Open(cfg Config, logOpts ...partlog.Option) (*Store, LoadStats, error) {
	start := time.Now()
	cfg = cfg.withDefaults()
	stats := LoadStats{SnapshotOffset: -1}
	logger := cfg.Logger.WithValues("epoch", cfg.Epoch)
	lg, err := partlog.Open(cfg.FS, cfg.Dir, partlog.Config{
		Epoch:              cfg.Epoch,
		PreviousEpochs:     cfg.PreviousEpochs,
		SegmentBytes:       cfg.SegmentBytes,
		MaxBatchBytes:      cfg.MaxBatchBytes,
		CheckpointInterval: cfg.CheckpointInterval,
		Now:                cfg.Now,
		// The log's own start-up lines (its leader epoch) at V(1): a broker
		// opens every coordinator shard at start and logs one summary.
		Logger: cfg.Logger.WithName("partlog").V(1),
	}, logOpts...)
	if err != nil {
		return nil, stats, fmt.Errorf("open group store shard %d: %w", cfg.Index, err)
	}
	s := &Store{cfg: cfg, log: lg, logger: logger, lastSnap: -1, snapSem: make(chan struct{}, 1)}
	if err := s.load(&stats); err != nil {
		_ = lg.Close()
		return nil, stats, fmt.Errorf("open group store shard %d: %w", cfg.Index, err)
	}
	stats.Took = time.Since(start)
	logger.V(1).Info("group store loaded", "snapshotOffset", stats.SnapshotOffset,
		"snapshotRecords", stats.SnapshotRecords, "replayedRecords", stats.ReplayedRecords,
		"logEnd", stats.LogEnd, "took", stats.Took)
	return s, stats, nil
}

// load builds the table: snapshot, then the log after it.
func (s *Store) load(stats *LoadStats) error {
	tbl, from, err := s.loadSnapshot()
	if err != nil {
		return err
	}
	stats.SnapshotOffset, stats.SnapshotRecords = from, len(tbl.m)
	s.lastSnap = from
	from = max(from, s.log.LogStartOffset())
	replayed, bytes, err := replay(s.log, from, &tbl)
	if err != nil {
		return err
	}
	s.tbl, s.next, s.sinceSnap = tbl, s.log.HighWatermark(), bytes
	stats.ReplayedRecords, stats.LogEnd = replayed, s.next
	return nil
}

// Records calls fn with every live record of the table (tombstones
// dropped), in the log order of their last write. fn runs without the
// append lock; it must not modify the slices.
func (s *Store) Records(fn func(Record) error) error {
	s.mu.Lock()
	recs := s.tbl.sorted()
	s.mu.Unlock()
	for _, r := range recs {
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

// Append writes recs as one batch (see groups.Journal) and applies them to
// the table in log order. The returned wait blocks until the batch is
// durable and the fence re-checked; concurrent Appends share one round.
// An empty recs writes nothing.
func (s *Store) Append(recs []Record) (int64, func(context.Context) error, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return 0, nil, ErrClosed
	}
	if len(recs) == 0 {
		next := s.next
		s.mu.Unlock()
		return next, func(context.Context) error { return s.Err() }, nil
	}
	if s.noSpace.Load() != nil {
		s.mu.Unlock()
		return 0, nil, s.Err()
	}
	s.buf = encodeBatch(s.buf, recs, s.cfg.Now().UnixMilli())
	res, err := s.log.Append(s.buf)
	if err != nil {
		s.mu.Unlock()
		s.noteFailure(err)
		return 0, nil, fmt.Errorf("group store shard %d: append: %w", s.cfg.Index, err)
	}
	// One copy of every value of the batch; the table keeps sub-slices.
	var arena []byte
	if n := valuesLen(recs); n > 0 {
		arena = make([]byte, 0, n)
	}
	for i, r := range recs {
		var v []byte
		if r.Value != nil {
			at := len(arena)
			arena = append(arena, r.Value...)
			v = arena[at:len(arena):len(arena)]
			if v == nil {
				v = []byte{} // empty is a value, nil a tombstone
			}
		}
		s.tbl.put(r.Key, v, res.BaseOffset+int64(i))
	}
	s.next = res.LastOffset + 1
	s.sinceSnap += int64(len(s.buf))
	var snap *pendingSnapshot
	if s.sinceSnap > s.cfg.SnapshotEveryBytes {
		select {
		case s.snapSem <- struct{}{}:
			snap = s.takeSnapshotLocked()
		default: // one is being written; the next Append tries again
		}
	}
	s.mu.Unlock()
	if snap != nil {
		go func() {
			defer func() { <-s.snapSem }()
			if err := s.writeSnapshot(context.Background(), snap); err != nil {
				s.logger.Error(err, "background snapshot failed; the next one retries", "offset", snap.offset)
			}
		}()
	}
	last := res.LastOffset
	return res.BaseOffset, func(ctx context.Context) error { return s.wait(ctx, last) }, nil
}

func valuesLen(recs []Record) int {
	n := 0
	for _, r := range recs {
		n += len(r.Value)
	}
	return n
}

// wait is Append's wait: the log's group commit through last.
func (s *Store) wait(ctx context.Context, last int64) error {
	if err := s.log.Sync(ctx, last); err != nil {
		s.noteFailure(err)
		return fmt.Errorf("group store shard %d: sync through offset %d: %w", s.cfg.Index, last, err)
	}
	return nil
}

// noteFailure calls OnFailure once if the log has failed for good (err
// itself may be only a cancelled wait) or err is a full volume, and the
// owner is not closing it.
func (s *Store) noteFailure(err error) {
	if s.closing.Load() {
		return
	}
	if s.log.Err() == nil {
		if !errors.Is(err, partlog.ErrNoSpace) {
			return
		}
		s.noSpace.CompareAndSwap(nil, &err)
	}
	s.failOnce.Do(func() {
		switch err := s.Err(); {
		case errors.Is(err, partlog.ErrFenced):
			s.logger.Info("group store fenced by a newer owner")
		case errors.Is(err, partlog.ErrNoSpace):
			s.logger.Error(err, "group store volume full; the shard is reloaded from the volume once space returns")
		default:
			s.logger.Error(err, "group store log failed; it must be reopened")
		}
		if s.cfg.OnFailure != nil {
			s.cfg.OnFailure()
		}
	})
}

// Epoch is the leader epoch the store writes at.
func (s *Store) Epoch() int32 { return s.cfg.Epoch }

// Err is the log's failure, nil while healthy.
func (s *Store) Err() error {
	if err := s.log.Err(); err != nil {
		return fmt.Errorf("group store shard %d: %w", s.cfg.Index, err)
	}
	if p := s.noSpace.Load(); p != nil {
		return fmt.Errorf("group store shard %d: failed: %w", s.cfg.Index, *p)
	}
	return nil
}

// LogEnd is the log end offset the table covers.
func (s *Store) LogEnd() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.next
}

// Close writes a final snapshot if the log is healthy and closes the log's
// handles. It waits for a background snapshot in flight. It is idempotent.
func (s *Store) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.close() })
	return s.closeErr
}

// Snapshot writes a snapshot of the table as of the log end now, unless the
// newest one already covers it. It returns once the snapshot is durable
// (or failed); like every snapshot, it first waits until the log is
// durable through its offset.
func (s *Store) Snapshot(ctx context.Context) error {
	select {
	case s.snapSem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.snapSem }()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	var snap *pendingSnapshot
	if s.next > 0 && s.next != s.lastSnap {
		snap = s.takeSnapshotLocked()
	}
	s.mu.Unlock()
	if snap == nil {
		return nil
	}
	if err := s.writeSnapshot(ctx, snap); err != nil {
		return fmt.Errorf("group store shard %d: %w", s.cfg.Index, err)
	}
	return nil
}

func (s *Store) close() error {
	s.closing.Store(true)
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.snapSem <- struct{}{} // waits for a snapshot in flight
	defer func() { <-s.snapSem }()
	var errs []error
	if s.log.Err() == nil {
		s.mu.Lock()
		var snap *pendingSnapshot
		if s.next > 0 && s.next != s.lastSnap {
			snap = s.takeSnapshotLocked()
		}
		s.mu.Unlock()
		if snap != nil {
			if err := s.writeSnapshot(context.Background(), snap); err != nil {
				errs = append(errs, fmt.Errorf("final snapshot: %w", err))
			}
		}
	}
	if err := s.log.Close(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("close group store shard %d: %w", s.cfg.Index, errors.Join(errs...))
	}
	return nil
}

// Package groupstore is the durable storage of one group-coordinator shard
// (engine/groups): an append-only log on the cluster volume (a partlog,
// fenced by the shard's leader epoch like a partition) holding records in
// the format of Kafka's __consumer_offsets topic, the compacted table of
// those records in memory, and periodic snapshots of that table so that a
// new owner loads a snapshot and replays only the tail after it.
package groupstore

// STUB: the storage helper replaces this file. The exported surface below
// is the contract the engine builds against.

import (
	"context"
	"time"

	"github.com/go-logr/logr"

	"github.com/kaas-dev/kaas/volume"
)

// Record is one key/value of the log; a nil Value is a tombstone. It is an
// alias of the same unnamed type as groups.Record, so slices of either are
// one type and neither package imports the other.
type Record = struct{ Key, Value []byte }

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
	SnapshotEveryBytes     int64
	CheckpointInterval     time.Duration
	UnsafeSkipFenceRecheck bool
	Now                    func() time.Time
	Logger                 logr.Logger
	// OnFailure is called (once) when the log fails for good (an fsync
	// error, or fenced by a newer owner).
	OnFailure func()
}

// LoadStats describes what Open read.
type LoadStats struct {
	SnapshotOffset  int64 // -1: no valid snapshot
	SnapshotRecords int
	ReplayedRecords int
	LogEnd          int64
	Took            time.Duration
}

// Store is one shard's storage, open for writing by its owner.
type Store struct{ epoch int32 }

// Open opens the shard's log at cfg.Epoch (recovering the tail the previous
// owner left) and loads the compacted table: the newest valid snapshot plus
// the records after it.
func Open(cfg Config) (*Store, LoadStats, error) { return &Store{epoch: cfg.Epoch}, LoadStats{}, nil }

// Records calls fn with every live record of the table (tombstones
// dropped), in the log order of their last write.
func (s *Store) Records(fn func(Record) error) error { return nil }

// Append writes recs as one batch (see groups.Journal).
func (s *Store) Append(recs []Record) (int64, func(context.Context) error, error) {
	return 0, func(context.Context) error { return nil }, nil
}

func (s *Store) Epoch() int32 { return s.epoch }

// Err is the log's failure, nil while healthy.
func (s *Store) Err() error { return nil }

// Close writes a final snapshot if the log is healthy and closes the log's
// handles.
func (s *Store) Close() error { return nil }

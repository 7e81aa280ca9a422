package groups

// STUB: the storage helper replaces this file. The exported surface below
// is the contract the engine builds against.

import (
	"time"

	"github.com/go-logr/logr"

	"github.com/kaas-dev/kaas/volume"
)

// ShardConfig configures OpenShard.
type ShardConfig struct {
	FS    volume.FS
	Dir   string // states.ShardDir(clusterDir, index)
	Index int32
	// Epoch is the leader epoch the caller already claimed in the shard's
	// fence (partlog.ClaimFence); PreviousEpochs as partlog.Config.
	Epoch          int32
	PreviousEpochs []int32
	// Coordinator configures the loaded coordinator; OpenShard sets its
	// Shard and Journal.
	Coordinator Config
	// SnapshotEveryBytes is how many log bytes may follow the newest
	// snapshot before the next is written. Default 4 MiB.
	SnapshotEveryBytes     int64
	CheckpointInterval     time.Duration
	UnsafeSkipFenceRecheck bool
	Now                    func() time.Time
	Logger                 logr.Logger
	// OnFailure is called (once) when the shard's log fails for good (an
	// fsync error, or fenced by a newer owner).
	OnFailure func()
}

// LoadStats describes what OpenShard read.
type LoadStats struct {
	SnapshotOffset  int64 // -1: no valid snapshot
	SnapshotRecords int
	ReplayedRecords int
	LogEnd          int64
	Took            time.Duration
}

// Shard is one coordinator shard this broker owns: its log and the
// Coordinator loaded from it.
type Shard struct {
	coord *Coordinator
	epoch int32
}

// OpenShard opens the shard's log at cfg.Epoch (recovering the tail the
// previous owner left), loads the newest valid snapshot and the records
// after it into a new Coordinator, and starts it.
func OpenShard(cfg ShardConfig) (*Shard, LoadStats, error) {
	return &Shard{coord: New(cfg.Coordinator), epoch: cfg.Epoch}, LoadStats{}, nil
}

func (s *Shard) Coordinator() *Coordinator { return s.coord }
func (s *Shard) Epoch() int32              { return s.epoch }

// Err is the log's failure, nil while healthy.
func (s *Shard) Err() error { return nil }

// Close stops the coordinator, writes a final snapshot if the log is
// healthy, and closes the log's handles.
func (s *Shard) Close() error { return nil }

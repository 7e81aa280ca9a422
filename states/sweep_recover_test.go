package states_test

import (
	"fmt"

	"github.com/go-logr/logr"

	"github.com/kaas-dev/kaas/engine/dataplane"
	"github.com/kaas-dev/kaas/states"
	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/partlog"
)

// sweepOpenOptions are the options the engine's openPartition passes to
// dataplane.Open, for a topic with no configs of its own (zero log limits
// take partlog's defaults, as the topic defaults do) on a broker with the
// default config: the log opens at the epoch the fence step claimed and
// also reads the manifests of the epoch it fenced from; the producer
// state is bounded at the default and never expired.
func sweepOpenOptions(rec *states.Record) dataplane.OpenOptions {
	var previous []int32
	if rec.FencedFrom != nil {
		previous = append(previous, *rec.FencedFrom)
	}
	return dataplane.OpenOptions{
		Topic: sweepTopic, Index: 0, TopicID: sweepTopicID,
		Log: partlog.Config{
			Epoch:              rec.Epoch,
			CheckpointInterval: partlog.DefaultCheckpointInterval,
			PreviousEpochs:     previous,
			FenceNotDurable:    states.FenceDeferred(rec),
			Now:                sweepNow,
			Logger:             logr.Discard(),
		},
		MaxProducers: dataplane.DefaultMaxProducersPerPartition,
		Now:          sweepNow,
		Logger:       logr.Discard(),
	}
}

// recoverPartition is partition-open's recover step as the engine runs
// it: dataplane.Open opens the log and rebuilds the producer state from
// the newest snapshot plus the log after it.
func recoverPartition(fsys volume.FS, rec *states.Record) (*dataplane.Partition, error) {
	dir := states.PartitionDir(sweepData, sweepTopic, 0)
	p, _, err := dataplane.Open(fsys, dir, sweepOpenOptions(rec))
	if err != nil {
		return nil, fmt.Errorf("recover %s at epoch %d: %w", dir, rec.Epoch, err)
	}
	return p, nil
}

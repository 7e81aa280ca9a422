package engine

import (
	"fmt"

	"github.com/kaas-dev/kaas/engine/desired"
	"github.com/kaas-dev/kaas/states"
	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/partlog"
)

// InspectTopic describes a topic from the volume alone (kaasctl with no
// broker running). Offsets are as of each log's last durable checkpoint.
func InspectTopic(fsys volume.FS, dataDir, clusterDir, name string) (TopicStatus, error) {
	spec, err := desired.ReadTopicSpec(fsys, clusterDir, name)
	if err != nil {
		return TopicStatus{}, fmt.Errorf("topic %q: %w", name, err)
	}
	ts := TopicStatus{Name: spec.Name, ID: spec.ID, Configs: spec.Configs}
	for p := int32(0); p < spec.Partitions; p++ {
		ps := PartitionStatus{Partition: p, LeaderEpoch: -1}
		info, err := partlog.Inspect(fsys, states.PartitionDir(dataDir, spec.Name, p))
		if err != nil {
			ps.Error = err.Error()
		} else {
			ps.LeaderEpoch = info.Epoch
			ps.LogStartOffset = info.LogStartOffset
			ps.HighWatermark = info.CheckpointEnd
			ps.LogEndOffset = info.CheckpointEnd
			ps.SizeBytes = info.SizeBytes
			ps.Segments = info.Segments
		}
		ts.Partitions = append(ts.Partitions, ps)
	}
	return ts, nil
}

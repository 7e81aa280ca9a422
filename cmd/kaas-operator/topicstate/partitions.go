package topicstate

import (
	"fmt"
	"strings"

	"github.com/kaas-dev/kaas/engine/desired"
	"github.com/kaas-dev/kaas/states"
	"github.com/kaas-dev/kaas/volume"
)

// statePending is a partition no broker has recorded progress on for this
// topic ID (the partition-open machine's initial state).
var statePending = states.PartitionOpen.Initial

// progress is every partition of one topic incarnation, from the
// partition-open records.
type progress struct {
	all     []Partition
	serving int
}

// loadProgress reads the partition-open record of each partition of spec.
// Only records of spec's topic ID count: a record of an earlier
// incarnation of the name says nothing about this one.
func loadProgress(fsys volume.FS, clusterDir string, spec desired.TopicSpec) (progress, error) {
	p := progress{all: make([]Partition, 0, spec.Partitions)}
	for i := int32(0); i < spec.Partitions; i++ {
		rec, err := states.Load(fsys, clusterDir, states.PartitionOpen.Kind, states.PartitionObject(spec.Name, i))
		if err != nil {
			return progress{}, fmt.Errorf("read progress of topic %s: %w", spec.Name, err)
		}
		part := Partition{Partition: i, State: string(statePending)}
		if rec != nil && rec.TopicID == spec.ID {
			part = Partition{Partition: i, State: string(rec.State), LeaderEpoch: rec.Epoch, Owner: rec.Owner, LastError: rec.LastError}
		}
		if part.State == string(states.PartitionOpen.End) {
			p.serving++
		}
		p.all = append(p.all, part)
	}
	return p, nil
}

func (p progress) allServing() bool { return p.serving == len(p.all) && len(p.all) > 0 }

// observed is the status of incarnation spec with this progress.
func (p progress) observed(spec desired.TopicSpec) *Observed {
	listed := p.all
	if len(listed) > MaxListedPartitions {
		listed = nil
		for _, part := range p.all {
			if part.State != string(states.PartitionOpen.End) && len(listed) < MaxListedPartitions {
				listed = append(listed, part)
			}
		}
	}
	return &Observed{TopicID: spec.ID, TopicName: spec.Name, Partitions: listed,
		PartitionsServing: fmt.Sprintf("%d/%d", p.serving, len(p.all))}
}

// waitingFor describes the first few partitions not serving yet.
func (p progress) waitingFor() string {
	const most = 3
	var parts []string
	left := len(p.all) - p.serving
	for _, part := range p.all {
		if part.State == string(states.PartitionOpen.End) {
			continue
		}
		if len(parts) == most {
			parts = append(parts, fmt.Sprintf("and %d more", left-most))
			break
		}
		s := fmt.Sprintf("partition %d (%s", part.Partition, part.State)
		if part.Owner != "" {
			s += " on " + part.Owner
		}
		if part.LastError != "" {
			s += ", last error: " + part.LastError
		}
		parts = append(parts, s+")")
	}
	return strings.Join(parts, ", ")
}

package engine

import (
	"github.com/google/uuid"

	"github.com/kaas-dev/kaas/engine/desired"
	"github.com/kaas-dev/kaas/engine/groups"
)

// OffsetsTopic is Kafka's internal topic of committed offsets. kaas keeps
// that state in its coordinator shards; Metadata presents the shards as the
// topic's partitions, as Kafka lists it (regex consumers skip it as
// internal, tools and UIs expect it). Clients cannot create, delete,
// produce to or fetch from it.
const OffsetsTopic = "__consumer_offsets"

// offsetsTopicNamespace derives the topic ID that __consumer_offsets shows
// from the cluster ID, so that every broker shows the same one.
var offsetsTopicNamespace = uuid.MustParse("6f3c1d0e-5a8b-4c39-9e2f-0b7d4a1c8e55")

// OffsetsTopicView is the coordinator shards seen as the partitions of
// __consumer_offsets: shard i is partition i, led by its owner at the
// shard's leader epoch while that broker is live and serves the shard (this
// broker: has it open at that epoch), else without a leader.
func (e *Engine) OffsetsTopicView() TopicView {
	shards := e.shards.all()
	v := TopicView{
		Spec: desired.TopicSpec{
			Name:       OffsetsTopic,
			ID:         uuid.NewSHA1(offsetsTopicNamespace, []byte(e.ClusterID())).String(),
			Partitions: groups.Shards,
		},
		Epochs:  make([]int32, groups.Shards),
		Leaders: make([]int32, groups.Shards),
	}
	cv := e.clusterView()
	for i := range int32(groups.Shards) {
		v.Epochs[i], v.Leaders[i] = -1, -1
		o, mine, ok := cv.owner(GroupsTopicID, i)
		switch {
		case !ok:
		case mine:
			if shards[i] != nil && shards[i].epoch == o.LeaderEpoch && shards[i].store.Err() == nil {
				v.Epochs[i], v.Leaders[i] = o.LeaderEpoch, o.Broker
			}
		case cv.leader(o, GroupsTopicID, i, func() string { return shardKey(i) }) >= 0:
			v.Epochs[i], v.Leaders[i] = o.LeaderEpoch, o.Broker
		}
	}
	return v
}

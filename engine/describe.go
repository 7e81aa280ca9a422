package engine

// BrokerStatus is what /status reports and `kaasctl topics --admin` reads.
type BrokerStatus struct {
	BrokerID  int32  `json:"brokerID"`
	ClusterID string `json:"clusterID"`
	Ready     bool   `json:"ready"`
	// NotReady says why the broker is not ready (Engine.Readiness).
	NotReady string `json:"notReady,omitempty"`
	// PartitionBudget is how many partitions this broker holds open at
	// most (--max-partitions-per-broker; 0: no budget), PartitionsOpen how
	// many hold log handles now.
	PartitionBudget int           `json:"partitionBudget,omitempty"`
	PartitionsOpen  int64         `json:"partitionsOpen"`
	Topics          []TopicStatus `json:"topics"`
	// CoordinatorShards are the group-coordinator shards this broker
	// serves.
	CoordinatorShards []ShardStatus `json:"coordinatorShards,omitempty"`
}

// ShardStatus describes one coordinator shard this broker serves.
type ShardStatus struct {
	Shard       int32  `json:"shard"`
	LeaderEpoch int32  `json:"leaderEpoch"`
	Groups      int    `json:"groups"`
	LogEnd      int64  `json:"logEnd"`
	Error       string `json:"error,omitempty"`
}

// TopicStatus describes one live topic.
type TopicStatus struct {
	Name       string            `json:"name"`
	ID         string            `json:"id"`
	Configs    map[string]string `json:"configs,omitempty"`
	Partitions []PartitionStatus `json:"partitions"`
}

// PartitionStatus describes one partition as this broker serves it.
type PartitionStatus struct {
	Partition      int32  `json:"partition"`
	Serving        bool   `json:"serving"`
	LeaderEpoch    int32  `json:"leaderEpoch"`
	LogStartOffset int64  `json:"logStartOffset"`
	HighWatermark  int64  `json:"highWatermark"`
	LogEndOffset   int64  `json:"logEndOffset"`
	SizeBytes      int64  `json:"sizeBytes"`
	Segments       int    `json:"segments"`
	Error          string `json:"error,omitempty"`
}

// Describe reports the broker's live topics and partitions.
func (e *Engine) Describe() BrokerStatus {
	st := BrokerStatus{BrokerID: e.cfg.BrokerID, ClusterID: e.clusterID,
		PartitionBudget: e.cfg.MaxPartitionsPerBroker, PartitionsOpen: e.openSlots.Load()}
	st.Ready, st.NotReady = e.Readiness()
	shards := e.shards.all()
	for _, sh := range shards {
		if sh == nil {
			continue
		}
		ss := ShardStatus{Shard: sh.index, LeaderEpoch: sh.epoch, Groups: len(sh.coord.ListGroups(nil)), LogEnd: sh.store.LogEnd()}
		if err := sh.store.Err(); err != nil {
			ss.Error = err.Error()
		}
		st.CoordinatorShards = append(st.CoordinatorShards, ss)
	}
	for _, v := range e.routes.all() {
		if v.spec.Deleted {
			continue
		}
		ts := TopicStatus{Name: v.spec.Name, ID: v.spec.ID, Configs: v.spec.Configs}
		for i, p := range v.parts {
			ps := PartitionStatus{Partition: int32(i), LeaderEpoch: -1}
			if p != nil {
				lg := p.Log()
				ps.Serving = true
				ps.LeaderEpoch = lg.Epoch()
				ps.LogStartOffset, ps.HighWatermark, ps.LogEndOffset = lg.LogStartOffset(), lg.HighWatermark(), lg.LogEndOffset()
				ps.SizeBytes = lg.Size()
				ps.Segments = len(lg.Segments())
				if err := lg.Err(); err != nil {
					ps.Error = err.Error()
				}
			} else {
				// Assigned here and not served: why its last open failed.
				if f, ok := e.opens.failure(openKey(v.spec.Name, int32(i), v.spec.ID)); ok {
					ps.Error = f.err
				}
			}
			ts.Partitions = append(ts.Partitions, ps)
		}
		st.Topics = append(st.Topics, ts)
	}
	return st
}

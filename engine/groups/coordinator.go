package groups

// STUB: the protocol helper replaces this file (and adds group.go,
// offsets.go, records.go, …). The exported surface below is the contract
// that package wire, the engine and shard.go build against.

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Config configures a Coordinator. Zero durations take the defaults.
type Config struct {
	Shard   int32
	Journal Journal
	Clock   Clock
	Logger  logr.Logger

	InitialRebalanceDelay time.Duration
	MinSessionTimeout     time.Duration
	MaxSessionTimeout     time.Duration
	OffsetsRetention      time.Duration
	RetentionCheck        time.Duration
	MaxGroupSize          int
	MaxMetadataBytes      int
}

// Coordinator serves the groups of one shard.
type Coordinator struct{ cfg Config }

// New returns a coordinator with no groups. Replay records into it, then
// Start it.
func New(cfg Config) *Coordinator { return &Coordinator{cfg: cfg} }

// Replay applies one record of the shard's log (or snapshot), in log order,
// while loading. Unknown record versions are an error.
func (c *Coordinator) Replay(r Record) error { return nil }

// Start begins serving after loading: session timers for the members of
// loaded groups, and the periodic offset expiry.
func (c *Coordinator) Start() {}

// Close stops timers and answers every waiting request with
// NOT_COORDINATOR. Nothing is written.
func (c *Coordinator) Close() {}

func (c *Coordinator) JoinGroup(ctx context.Context, req *kmsg.JoinGroupRequest) *kmsg.JoinGroupResponse {
	return nil
}
func (c *Coordinator) SyncGroup(ctx context.Context, req *kmsg.SyncGroupRequest) *kmsg.SyncGroupResponse {
	return nil
}
func (c *Coordinator) Heartbeat(req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse { return nil }
func (c *Coordinator) LeaveGroup(ctx context.Context, req *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse {
	return nil
}
func (c *Coordinator) OffsetCommit(ctx context.Context, req *kmsg.OffsetCommitRequest) *kmsg.OffsetCommitResponse {
	return nil
}

// OffsetFetch answers one group (OffsetFetch v8 form; wire converts older
// versions). Nil Topics means every committed partition.
func (c *Coordinator) OffsetFetch(req kmsg.OffsetFetchRequestGroup, requireStable bool) kmsg.OffsetFetchResponseGroup {
	return kmsg.OffsetFetchResponseGroup{}
}
func (c *Coordinator) DescribeGroup(group string) kmsg.DescribeGroupsResponseGroup {
	return kmsg.DescribeGroupsResponseGroup{}
}

// ListGroups lists the shard's groups, filtered by state when states is not
// empty (ListGroups v4).
func (c *Coordinator) ListGroups(states []string) []kmsg.ListGroupsResponseGroup { return nil }

// DeleteGroup deletes an empty group and its offsets (error code, 0 on
// success: GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, ...).
func (c *Coordinator) DeleteGroup(ctx context.Context, group string) int16 { return 0 }
func (c *Coordinator) OffsetDelete(ctx context.Context, req *kmsg.OffsetDeleteRequest) *kmsg.OffsetDeleteResponse {
	return nil
}

// Package groups is kaas's group coordinator: the classic consumer-group
// protocol (join, sync, heartbeat, leave) and committed offsets, for the
// groups of one coordinator shard.
//
// Groups are spread over a fixed number of shards (ShardOf); each shard is
// owned by one broker at a time, chosen and fenced like a partition (the
// assignment gives it an owner and a leader epoch). A shard's durable state
// is one append-only log on the cluster volume, in the record format of
// Kafka's __consumer_offsets topic (kmsg.OffsetCommitKey/Value,
// kmsg.GroupMetadataKey/Value), plus periodic snapshots of the compacted
// records (shard.go). A new owner fences the log, loads the newest valid
// snapshot and replays the tail after it, and serves.
//
// The Coordinator (coordinator.go) is the protocol: it keeps every group of
// its shard in memory, makes each change durable through its Journal
// before it answers, and rebuilds itself from records (Replay). It takes
// and returns kmsg request and response values for one group; package wire
// splits multi-group requests and routes each group to its coordinator.
package groups

import (
	"context"
	"hash/fnv"
	"time"
)

// Shards is how many coordinator shards a cluster has. It is part of the
// volume format: changing it would move groups to other shards' logs.
const Shards = 16

// ShardOf is the shard of a group: FNV-1a of its ID, a fixed function on
// every host.
func ShardOf(group string) int32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(group))
	return int32(h.Sum32() % Shards)
}

// Record is one key/value of a shard's log in Kafka's __consumer_offsets
// format. A nil Value is a tombstone: the key is deleted. It is an alias of
// the unnamed struct type that engine/groupstore.Record also names, so the
// store implements Journal without either package importing the other.
type Record = struct{ Key, Value []byte }

// Journal makes a coordinator's records durable. Append writes recs as one
// batch, in the order of calls, and returns the log offset of the first
// record and a wait function that returns nil once the batch is durable and
// the shard's fence re-checked (group commit: concurrent appends share one
// fsync). Callers must not hold locks that other appends need while they
// wait. After any error the shard is failed and will be reloaded from the
// volume by a new owner or epoch.
type Journal interface {
	Append(recs []Record) (offset int64, wait func(context.Context) error, err error)
}

// Clock is the coordinator's time: real in brokers, fake in tests.
type Clock interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc.
type Timer interface {
	Stop() bool
}

type realClock struct{}

func (realClock) Now() time.Time                            { return time.Now() }
func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// RealClock is the wall clock with runtime timers.
func RealClock() Clock { return realClock{} }

// Defaults, as Kafka's broker configs of the same meaning.
const (
	DefaultInitialRebalanceDelay = 3 * time.Second    // group.initial.rebalance.delay.ms
	DefaultMinSessionTimeout     = 6 * time.Second    // group.min.session.timeout.ms
	DefaultMaxSessionTimeout     = 30 * time.Minute   // group.max.session.timeout.ms
	DefaultOffsetsRetention      = 7 * 24 * time.Hour // offsets.retention.minutes
	DefaultRetentionCheck        = 10 * time.Minute   // offsets.retention.check.interval.ms
	DefaultMaxGroupSize          = 1<<31 - 1          // group.max.size
	DefaultMaxMetadataBytes      = 4096               // offset.metadata.max.bytes
)

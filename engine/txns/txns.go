// Package txns is kaas's transaction coordinator: the transactional IDs of
// one coordinator shard, their producer IDs and epochs, and the two-phase
// end of each transaction (a durable decision, then commit or abort markers
// written by every partition's owner, then a durable completion).
//
// A transactional ID hashes to a coordinator shard with the same function as
// a group ID (groups.ShardOf), and the shard's owner serves both: they share
// the shard's log, its fence and its fsync rounds. Transaction records are
// told apart from group records by their key version (RecordKeyVersion);
// the value is Kafka's __transaction_state value (kmsg.TxnMetadataValue v1,
// with the KIP-890 fields). A new owner replays them (Replay) and finishes
// what the previous owner left: transactions it finds in PrepareCommit or
// PrepareAbort get their markers (again: writing a marker twice is a no-op
// at the partition) and their completion; Ongoing ones keep their timeout.
//
// The Coordinator takes and returns plain values; package wire turns Kafka
// requests into calls and routes each transactional ID to its coordinator.
package txns

import (
	"context"
	"time"

	"github.com/go-logr/logr"

	"github.com/kaas-dev/kaas/engine/groups"
)

// RecordKeyVersion is the key version of transaction records in a shard's
// log: int16 RecordKeyVersion, then the transactional ID as a Kafka
// string (int16 length, bytes). Kafka's __consumer_offsets uses key
// versions 0 to 2 (and the next group coordinator a few more), so a high
// value keeps the two kinds apart.
const RecordKeyVersion int16 = 1000

// Record is one key/value of the shard log (see groups.Record).
type Record = groups.Record

// Journal makes records durable (groups.Journal: one batch per Append, in
// order; wait returns once durable and fence-checked).
type Journal = groups.Journal

// Clock is the coordinator's time (groups.Clock).
type Clock = groups.Clock

// ProducerIDs issues producer IDs never issued before (engine.ProducerIDs).
type ProducerIDs interface {
	Next() (int64, error)
}

// TopicPartition names one partition of a transaction.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Markers is one transaction end to be written: a commit or abort marker
// for ProducerID at ProducerEpoch into every partition, and the completion
// of its transactional offset commits in every group.
type Markers struct {
	TransactionalID  string
	ProducerID       int64
	ProducerEpoch    int16
	Commit           bool
	CoordinatorEpoch int32 // the shard's leader epoch
	Partitions       []TopicPartition
	Groups           []string
}

// MarkerWriter writes markers through each partition's current owner and
// each group's coordinator. WriteMarkers returns nil once every marker is
// durable; an error means some were not written yet and the coordinator
// calls again (after a backoff) until ctx ends. A partition that no longer
// exists (its topic deleted) counts as written.
type MarkerWriter interface {
	WriteMarkers(ctx context.Context, m Markers) error
}

// Config configures a Coordinator. Zero durations take the defaults; a nil
// Clock is the wall clock.
type Config struct {
	Shard int32
	// Epoch is the shard's leader epoch: the coordinator epoch of the
	// markers this coordinator writes.
	Epoch   int32
	Journal Journal
	IDs     ProducerIDs
	Markers MarkerWriter
	Clock   Clock
	Logger  logr.Logger

	// MaxTimeout bounds the transaction timeout a producer may ask for
	// (transaction.max.timeout.ms).
	MaxTimeout time.Duration
	// AbortCheck is how often timed-out transactions are looked for
	// (transaction.abort.timed.out.transaction.cleanup.interval.ms).
	AbortCheck time.Duration
	// IDExpiration removes a transactional ID idle (no transaction) this
	// long (transactional.id.expiration.ms).
	IDExpiration time.Duration
	// Counts, when set, counts the transactions this coordinator ends
	// (shared by every shard of a broker: the counts outlive a shard).
	Counts *Counts
	// MarkerRetry is the backoff between attempts to write markers.
	MarkerRetry time.Duration
	// EndWait is how long AddPartitionsToTxn and AddOffsetsToTxn wait for
	// the previous transaction's end (markers, completion) before they
	// answer CONCURRENT_TRANSACTIONS. Clients retry that after a backoff
	// (tens of milliseconds), far longer than an end usually takes, so a
	// short wait here makes back-to-back transactions much faster. Zero
	// answers at once, as Kafka does.
	EndWait time.Duration
}

// Defaults, as Kafka's broker configs of the same meaning.
const (
	DefaultMaxTimeout   = 15 * time.Minute
	DefaultAbortCheck   = 10 * time.Second
	DefaultIDExpiration = 7 * 24 * time.Hour
	DefaultMarkerRetry  = 100 * time.Millisecond
	// DefaultEndWait is what brokers use for Config.EndWait.
	DefaultEndWait = time.Second
)

package main

// The file-descriptor budget (issue 15, finding 1). A broker holds fds for
// three things: its volume and control plane (listeners, heartbeats and
// assignment reads, temp files of atomic writes, directory fsyncs, the
// coordinator shards' logs, connections to peer brokers), its client
// connections, and its partitions. Running out of them for any one of the
// three starves the others, so the limit is divided once, here, at start:
//
//	reserve     = fdReserveBase + coordinator shards × fdsPerPartition
//	connections = (limit − reserve) / connectionShare   (--max-connections)
//	partitions  = (limit − reserve − connections) / fdsPerPartition
//	                                       (--max-partitions-per-broker)
//
// A flag given explicitly replaces its derived value (and the partitions'
// share is derived from what the connections leave). A partition holds
// four fds for its active segment (the append handle, a read handle, the
// offset and time index files) and one read handle per sealed segment;
// fdsPerPartition counts one sealed segment on average. A partition with
// many sealed segments takes more: the reserve and the OS's EMFILE, which
// the engine treats as an ordinary, retried open failure, absorb that.

import (
	"flag"
	"fmt"
	"math"

	"github.com/go-logr/logr"

	"github.com/kaas-dev/kaas/engine/dataplane"
	"github.com/kaas-dev/kaas/engine/groups"
)

const (
	// fdReserveBase is measured: an idle single broker holds 75 fds, 64
	// of them its 16 coordinator shards' logs and 11 besides (stdio, the
	// listeners, epoll, the runtime's pipe); parallel partition opens (16
	// per topic and worker, each with a directory or temp file open) and
	// control-plane writes hold a few dozen more for moments. 256 leaves
	// room for peer connections and admin HTTP clients.
	fdReserveBase = 256
	// fdsPerPartition: the active segment's four handles plus one sealed
	// segment's read handle.
	fdsPerPartition = 5
	// connectionShare: client connections get a quarter of what the
	// reserve leaves. Kafka's max.connections is unlimited by default;
	// a quarter keeps a flood of sockets from taking what partitions need
	// while leaving tens of thousands of connections at common limits
	// (262,060 at a limit of 2^20).
	connectionShare = 4
	// maxDerivedLimit caps the limit the budget is derived from (an
	// "unlimited" RLIMIT_NOFILE).
	maxDerivedLimit = 1 << 24
)

// fdReserve is what the volume and control plane keep.
const fdReserve = fdReserveBase + groups.Shards*fdsPerPartition

// fdBudget is the division of the fd limit.
type fdBudget struct {
	Limit       uint64 // RLIMIT_NOFILE (soft) the division is of
	Reserve     int    // volume and control plane
	Connections int    // client connections (--max-connections)
	Partitions  int    // open partitions (--max-partitions-per-broker)
	// Overcommitted is set when explicit flags ask for more than the
	// limit holds (Reserve + Connections + Partitions × fdsPerPartition).
	Overcommitted bool
}

// deriveFDBudget divides limit; connections and partitions are explicit
// values of their flags, 0 to derive them.
func deriveFDBudget(limit uint64, connections, partitions int) fdBudget {
	l := int64(min(limit, maxDerivedLimit))
	b := fdBudget{Limit: limit, Reserve: fdReserve}
	avail := max(l-int64(fdReserve), 0)
	c := int64(connections)
	if c <= 0 {
		c = max(avail/connectionShare, 1)
	}
	p := int64(partitions)
	if p <= 0 {
		p = max((avail-c)/fdsPerPartition, 1)
	}
	b.Connections, b.Partitions = int(min(c, math.MaxInt32)), int(min(p, math.MaxInt32))
	b.Overcommitted = int64(fdReserve)+c+p*fdsPerPartition > l
	return b
}

// budgetOptions are the flags of the partition and producer budgets.
type budgetOptions struct {
	maxPartitionsPerBroker   int
	maxProducersPerPartition int
}

func (b *budgetOptions) register(fs *flag.FlagSet) {
	fs.IntVar(&b.maxPartitionsPerBroker, "max-partitions-per-broker", 0,
		fmt.Sprintf("partitions this broker holds open at most; CreateTopics/CreatePartitions beyond the live brokers' sum are refused (KAAS_MAX_PARTITIONS_PER_BROKER; 0: derived from the fd limit, (limit − %d − connections) / %d)", fdReserve, fdsPerPartition))
	fs.IntVar(&b.maxProducersPerPartition, "max-producers-per-partition", dataplane.DefaultMaxProducersPerPartition,
		"producer IDs whose deduplication state a partition keeps; at the cap the least recently used idle one is evicted (KAAS_MAX_PRODUCERS_PER_PARTITION)")
}

// fallbackFDLimit is assumed when the limit cannot be read.
const fallbackFDLimit = 1024

// startFDBudget raises the fd limit, divides it, and logs the division.
// connections is --max-connections (0: derived).
func (b *budgetOptions) startFDBudget(log logr.Logger, connections int) fdBudget {
	before, limit, err := raiseFDLimit()
	if err != nil {
		log.Error(err, "file-descriptor limit; the budget assumes the fallback", "fallback", fallbackFDLimit)
		if limit == 0 {
			limit = fallbackFDLimit
		}
	}
	fb := deriveFDBudget(limit, connections, b.maxPartitionsPerBroker)
	kv := []any{"limit", fb.Limit, "softLimitAtStart", before, "reserve", fb.Reserve,
		"maxConnections", fb.Connections, "maxPartitionsPerBroker", fb.Partitions, "fdsPerPartition", fdsPerPartition}
	if fb.Overcommitted {
		log.Info("file-descriptor budget overcommitted: the flags ask for more than RLIMIT_NOFILE holds; opens beyond it fail with EMFILE and are retried", kv...)
	} else {
		log.Info("file-descriptor budget", kv...)
	}
	return fb
}

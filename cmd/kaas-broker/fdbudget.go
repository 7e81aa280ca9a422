package main

// The file-descriptor budget. A broker holds fds for four things: its
// control plane (listeners, heartbeats and assignment reads, records,
// peer and admin connections), transient opens on the data path
// (partitions being opened, and each sync round's fence check and
// manifest or index write), its client connections, and the files of
// its partitions, which it keeps in a cache of open handles with a cap
// (volume/handles). Running out for any one starves the others, so the
// limit is divided once, here, at start:
//
//	reserve     = fdReserve
//	transient   = min(openParallel × 4 + sync workers × 2, (limit − reserve) / 4)
//	connections = (limit − reserve − transient) / 4        (--max-connections)
//	handles     = limit − reserve − transient − connections (the cache's cap)
//
// When the transient share is cut to a quarter (a low limit), the opens
// run at once and the sync workers are cut in the same proportion, so that
// what they hold at once fits in it (fdBudget.OpenParallel, SyncWorkers).
//
// Partitions take no share: an idle partition holds no fd, an active one
// its append handle and its segment's read handle while the cache has
// room, and the cache closes the least recently used ones when it has
// not. The one pair it cannot close is a partition's with appends not yet
// fsynced, so at most a third of the cap's worth of partitions may hold
// such appends at once (writeSlots = handles / 3, two handles each);
// a produce beyond that waits for a round to end (partlog.WriteSlots). The number of partitions a broker holds is bounded by memory
// instead: --max-partitions-per-broker defaults to half the memory limit
// (cgroup memory.max, GOMEMLIMIT) over partitionMemory, and to no bound
// without a memory limit. An explicit --max-connections replaces its
// derived value, and the cache takes what it leaves.
import (
	"flag"
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"github.com/kaas-dev/kaas/engine/dataplane"
	"github.com/kaas-dev/kaas/volume/handles"
	"github.com/kaas-dev/kaas/volume/partlog"
)

const (
	// fdReserve is measured: an idle single broker holds 75 fds (stdio,
	// the listeners, epoll, the runtime's pipe, the coordinator shards'
	// files before the cache took them); control-plane writes hold a few
	// more for moments. 256 leaves room for peer connections and admin
	// HTTP clients.
	fdReserve = 256
	// openParallel is how many partition opens a broker runs at once
	// (an upper bound of the engine's), each holding up to 4 fds for a
	// moment (a listing, a temp file, a fence or manifest read).
	openParallel = 64
	// connectionShare: client connections get a quarter of what the
	// reserve and the transient share leave. Kafka's max.connections is
	// unlimited by default; a quarter keeps a flood of sockets from
	// taking what partitions need while leaving tens of thousands of
	// connections at common limits.
	connectionShare = 4
	// minHandles is the least cap the handle cache gets, whatever the
	// flags ask.
	minHandles = 64
	// maxDerivedLimit caps the limit the budget is derived from (an
	// "unlimited" RLIMIT_NOFILE).
	maxDerivedLimit = 1 << 24
	// partitionMemory is what an open partition is reckoned to cost in
	// memory: its log, producer state and bookkeeping (a few KiB idle,
	// measured), and the sparse index of an active segment (up to 2 MiB
	// for a full 1 GiB segment) on average over busy and idle ones.
	partitionMemory = 64 << 10
)

// fdBudget is the division of the fd limit.
type fdBudget struct {
	Limit       uint64 // RLIMIT_NOFILE (soft) the division is of
	Reserve     int    // control plane
	Transient   int    // opens in flight on the data path
	Connections int    // client connections (--max-connections)
	Handles     int    // the partition files' cache's cap
	// WriteSlots is how many partitions may hold appends not yet fsynced
	// at once (each keeps two of Handles open until its round).
	WriteSlots int
	// OpenParallel and SyncWorkers are the partition opens run at once
	// and the sync pool's workers, cut to fit Transient.
	OpenParallel, SyncWorkers int
	// Overcommitted is set when an explicit --max-connections leaves the
	// cache less than minHandles (it gets minHandles anyway).
	Overcommitted bool
}

// deriveFDBudget divides limit; connections is --max-connections, 0 to
// derive it; syncWorkers is the sync pool's size.
func deriveFDBudget(limit uint64, connections, syncWorkers int) fdBudget {
	l := int64(min(limit, maxDerivedLimit))
	b := fdBudget{Limit: limit, Reserve: fdReserve}
	avail := max(l-fdReserve, 0)
	want := int64(openParallel*4 + syncWorkers*2)
	transient := min(want, avail/4)
	b.OpenParallel, b.SyncWorkers = openParallel, syncWorkers
	if transient < want {
		b.OpenParallel = int(max(int64(openParallel)*transient/want, 1))
		b.SyncWorkers = int(max(int64(syncWorkers)*transient/want, 1))
	}
	c := int64(connections)
	if c <= 0 {
		c = max((avail-transient)/connectionShare, 1)
	}
	h := avail - transient - c
	b.Overcommitted = h < minHandles
	b.Transient = int(transient)
	b.Connections = int(min(c, math.MaxInt32))
	b.Handles = int(min(max(h, minHandles), math.MaxInt32))
	b.WriteSlots = max(b.Handles/3, 1)
	return b
}

// derivePartitionBudget is --max-partitions-per-broker: explicit (> 0), or
// half of memLimit (0: none) over partitionMemory, or 0, no bound.
func derivePartitionBudget(explicit int, memLimit uint64) int {
	if explicit > 0 {
		return explicit
	}
	if memLimit == 0 {
		return 0
	}
	return int(min(max(memLimit/2/partitionMemory, 1), math.MaxInt32))
}

// memoryLimit is the process's memory limit, 0 if it has none: the lower
// of GOMEMLIMIT and the cgroup's (v2 memory.max, v1 memory.limit_in_bytes).
func memoryLimit() uint64 {
	var lim uint64
	note := func(v uint64) {
		if v > 0 && (lim == 0 || v < lim) {
			lim = v
		}
	}
	if v := debug.SetMemoryLimit(-1); v > 0 && v < math.MaxInt64 {
		note(uint64(v))
	}
	for _, f := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		if err == nil && v < 1<<60 { // "max", or v1's "unlimited" page-rounded MaxInt64
			note(v)
		}
	}
	return lim
}

// budgetOptions are the flags of the partition and producer budgets and of
// the partition files' cache.
type budgetOptions struct {
	maxPartitionsPerBroker   int
	maxProducersPerPartition int
	syncWorkers              int
	handleIdle               time.Duration
}

func (b *budgetOptions) register(fs *flag.FlagSet) {
	fs.IntVar(&b.maxPartitionsPerBroker, "max-partitions-per-broker", 0,
		fmt.Sprintf("partitions this broker holds open at most; CreateTopics/CreatePartitions beyond the live brokers' sum are refused (KAAS_MAX_PARTITIONS_PER_BROKER; 0: half the memory limit (cgroup, GOMEMLIMIT) / %d KiB, no bound without one)", partitionMemory>>10))
	fs.IntVar(&b.maxProducersPerPartition, "max-producers-per-partition", dataplane.DefaultMaxProducersPerPartition,
		"producer IDs whose deduplication state a partition keeps; at the cap the least recently used idle one is evicted (KAAS_MAX_PRODUCERS_PER_PARTITION)")
	fs.IntVar(&b.syncWorkers, "sync-workers", partlog.DefaultSyncWorkers,
		"goroutines that run the partitions' group-commit rounds (fsync and fence check) at once (KAAS_SYNC_WORKERS)")
	fs.DurationVar(&b.handleIdle, "handle-idle", handles.DefaultIdle,
		"a partition file unused this long is closed (KAAS_HANDLE_IDLE; 0: only when the cache needs room)")
}

// fallbackFDLimit is assumed when the limit cannot be read.
const fallbackFDLimit = 1024

// partitionBudget is what startFDBudget decided besides the fds.
type partitionBudget struct {
	fdBudget
	Partitions int // --max-partitions-per-broker (0: no bound)
}

// startFDBudget raises the fd limit, divides it, sizes the process-wide
// handle cache and sync pool, derives the partition budget and logs it
// all. connections is --max-connections (0: derived).
func (b *budgetOptions) startFDBudget(log logr.Logger, connections int) partitionBudget {
	before, limit, err := raiseFDLimit()
	if err != nil {
		log.Error(err, "file-descriptor limit; the budget assumes the fallback", "fallback", fallbackFDLimit)
		if limit == 0 {
			limit = fallbackFDLimit
		}
	}
	fb := deriveFDBudget(limit, connections, b.syncWorkers)
	partlog.DefaultSyncPool().SetWorkers(fb.SyncWorkers)
	hc := handles.Default()
	hc.SetCap(fb.Handles)
	hc.SetIdle(b.handleIdle)
	partlog.DefaultWriteSlots().SetMax(fb.WriteSlots)
	mem := memoryLimit()
	pb := partitionBudget{fdBudget: fb, Partitions: derivePartitionBudget(b.maxPartitionsPerBroker, mem)}
	kv := []any{"limit", fb.Limit, "softLimitAtStart", before, "reserve", fb.Reserve, "transient", fb.Transient,
		"maxConnections", fb.Connections, "partitionFileHandles", fb.Handles, "writeSlots", fb.WriteSlots, "syncWorkers", fb.SyncWorkers, "parallelOpens", fb.OpenParallel,
		"memoryLimit", mem, "maxPartitionsPerBroker", pb.Partitions}
	if fb.Overcommitted {
		log.Info("file-descriptor budget overcommitted: --max-connections leaves the partition files' cache less than its minimum; opens beyond the limit fail with EMFILE and are retried", kv...)
	} else {
		log.Info("file-descriptor budget", kv...)
	}
	return pb
}

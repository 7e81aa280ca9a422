package main

import (
	"fmt"
	"math"

	"github.com/kaas-dev/kaas/cmd/internal/envdefault"
)

// rangeRule is one check of the parsed options: flag is the flag an
// error names, ok reports whether the value is in range and must says
// what it must be.
type rangeRule struct {
	flag string
	ok   func(o *options) bool
	must func(o *options) string
}

func must(s string) func(*options) string { return func(*options) string { return s } }

// rangeRules are the ranges of every numeric and duration flag. A value
// out of range is refused at start (exit status 2) rather than run with or
// silently replaced: a broker ID past int32 would never heartbeat under
// its own name, a zero frame limit would refuse every request.
var rangeRules = []rangeRule{
	{"id", func(o *options) bool { return o.id >= 0 && o.id <= math.MaxInt32 },
		must("must be a broker ID from 0 to 2147483647")},
	{"default-partitions", func(o *options) bool { return o.defaultPartitions >= 1 && o.defaultPartitions <= math.MaxInt32 },
		must("must be from 1 to 2147483647")},
	{"max-request-bytes", func(o *options) bool { return o.maxRequestBytes >= 1 && o.maxRequestBytes <= math.MaxInt32 },
		must("must be from 1 to 2147483647 bytes")},
	{"max-queued-request-bytes", func(o *options) bool { return o.maxQueuedBytes >= int64(o.maxRequestBytes) },
		func(o *options) string {
			return fmt.Sprintf("must be at least --max-request-bytes (%d): one request must fit", o.maxRequestBytes)
		}},
	{"shutdown-timeout", func(o *options) bool { return o.shutdownTimeout >= 0 }, must("must not be negative")},
	{"heartbeat-interval", func(o *options) bool { return o.heartbeatInterval > 0 }, must("must be positive")},
	{"lease", func(o *options) bool { return o.lease > o.heartbeatInterval },
		func(o *options) string {
			return fmt.Sprintf("must be longer than --heartbeat-interval (%v)", o.heartbeatInterval)
		}},
	{"v", func(o *options) bool { return o.verbosity >= 0 }, must("must not be negative")},

	{"group-initial-rebalance-delay", func(o *options) bool { return o.groups.initialRebalanceDelay >= 0 }, must("must not be negative")},
	{"group-min-session-timeout", func(o *options) bool { return o.groups.minSession > 0 }, must("must be positive")},
	{"group-max-session-timeout", func(o *options) bool { return o.groups.maxSession >= o.groups.minSession },
		func(o *options) string {
			return fmt.Sprintf("must be at least --group-min-session-timeout (%v)", o.groups.minSession)
		}},
	{"offsets-retention", func(o *options) bool { return o.groups.retention > 0 }, must("must be positive")},
	{"offsets-retention-check-interval", func(o *options) bool { return o.groups.check > 0 }, must("must be positive")},
	{"group-max-size", func(o *options) bool { return o.groups.maxSize >= 1 && o.groups.maxSize <= math.MaxInt32 },
		must("must be from 1 to 2147483647")},
	{"transaction-max-timeout", func(o *options) bool { return o.txns.maxTimeout > 0 }, must("must be positive")},
	{"transaction-abort-check-interval", func(o *options) bool { return o.txns.abortCheck > 0 }, must("must be positive")},
	{"transactional-id-expiration", func(o *options) bool { return o.txns.idExpiration > 0 }, must("must be positive")},
	{"producer-id-expiration", func(o *options) bool { return o.txns.producerIDExpiration > 0 }, must("must be positive")},
	{"retention-check-interval", func(o *options) bool { return o.retention.checkInterval > 0 }, must("must be positive")},
	{"log-cleaner-threads", func(o *options) bool { return o.cleaner.threads >= 1 && o.cleaner.threads <= 64 }, must("must be 1 to 64")},
	{"log-cleaner-dedupe-buffer-size", func(o *options) bool { return o.cleaner.dedupe >= 1<<10 }, must("must be at least 1024")},
	{"log-cleaner-io-max-bytes-per-second", func(o *options) bool { return o.cleaner.ioMaxBytes >= 0 }, must("must not be negative")},
	{"log-cleaner-backoff", func(o *options) bool { return o.cleaner.backoff > 0 }, must("must be positive")},
	{"max-partitions-per-broker", func(o *options) bool {
		return o.budgets.maxPartitionsPerBroker >= 0 && o.budgets.maxPartitionsPerBroker <= math.MaxInt32
	}, must("must be from 0 (derived from the memory limit) to 2147483647")},
	{"sync-workers", func(o *options) bool { return o.budgets.syncWorkers >= 1 && o.budgets.syncWorkers <= 1<<16 },
		must("must be from 1 to 65536")},
	{"handle-idle", func(o *options) bool { return o.budgets.handleIdle >= 0 }, must("must not be negative")},
	{"max-producers-per-partition", func(o *options) bool {
		return o.budgets.maxProducersPerPartition >= 1 && o.budgets.maxProducersPerPartition <= math.MaxInt32
	}, must("must be from 1 to 2147483647")},
	{"max-connections", func(o *options) bool { return o.conns.maxConnections >= 0 && o.conns.maxConnections <= math.MaxInt32 },
		must("must be from 0 (derived from the fd limit) to 2147483647")},
	{"max-connections-per-ip", func(o *options) bool {
		return o.conns.maxConnectionsPerIP >= 0 && o.conns.maxConnectionsPerIP <= math.MaxInt32
	}, must("must be from 0 (unlimited) to 2147483647")},
	{"fetch-max-bytes", func(o *options) bool { return o.conns.fetchMaxBytes >= 1 && o.conns.fetchMaxBytes <= math.MaxInt32 },
		must("must be from 1 to 2147483647 bytes")},
	{"max-produce-bytes-per-second", func(o *options) bool { return o.conns.maxProduceBytesPerSecond >= 0 },
		must("must be 0 (off) or positive")},
}

// validate checks the parsed options: every range rule, then the flags
// whose values are small languages of their own. Errors name where the
// value came from (a flag or its KAAS_* variable).
func (o *options) validate(src envdefault.Sources) error {
	for _, r := range rangeRules {
		if !r.ok(o) {
			return src.Invalid(r.flag, r.must(o))
		}
	}
	if o.logFormat != "text" && o.logFormat != "json" {
		return src.Invalid("log-format", "must be text or json")
	}
	if _, err := o.authz.config(o.listeners.interBrokerAuth.superUsers); err != nil {
		return src.Invalid("authorizer", err.Error())
	}
	if err := o.volumeCheck.validate(); err != nil {
		return err
	}
	if err := o.adminSec.validate(); err != nil {
		return err
	}
	if o.crashAtStep != "" {
		if _, _, _, err := parseCrashAtStep(o.crashAtStep); err != nil {
			return fmt.Errorf("%s: %w", src.Origin("crash-at-step"), err)
		}
	}
	if _, err := o.unsafe.controls(); err != nil {
		return fmt.Errorf("%s: %w", src.Origin("unsafe-negative-control"), err)
	}
	return nil
}

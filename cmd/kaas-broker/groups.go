package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/kaas-dev/kaas/cmd/internal/envdefault"
	"github.com/kaas-dev/kaas/engine/groups"
)

// groupOptions are the group coordinator's settings, named after Kafka's
// broker configs of the same meaning.
type groupOptions struct {
	initialRebalanceDelay  time.Duration
	minSession, maxSession time.Duration
	retention, check       time.Duration
	maxSize                int
}

func (g *groupOptions) register(fs *flag.FlagSet) {
	fs.DurationVar(&g.initialRebalanceDelay, "group-initial-rebalance-delay", envdefault.Duration("KAAS_GROUP_INITIAL_REBALANCE_DELAY", groups.DefaultInitialRebalanceDelay),
		"how long the first rebalance of an empty group waits for more members (group.initial.rebalance.delay.ms)")
	fs.DurationVar(&g.minSession, "group-min-session-timeout", envdefault.Duration("KAAS_GROUP_MIN_SESSION_TIMEOUT", groups.DefaultMinSessionTimeout),
		"shortest session timeout a member may ask for (group.min.session.timeout.ms)")
	fs.DurationVar(&g.maxSession, "group-max-session-timeout", envdefault.Duration("KAAS_GROUP_MAX_SESSION_TIMEOUT", groups.DefaultMaxSessionTimeout),
		"longest session timeout a member may ask for (group.max.session.timeout.ms)")
	fs.DurationVar(&g.retention, "offsets-retention", envdefault.Duration("KAAS_OFFSETS_RETENTION", groups.DefaultOffsetsRetention),
		"how long the committed offsets of a group without members are kept (offsets.retention.minutes)")
	fs.DurationVar(&g.check, "offsets-retention-check-interval", envdefault.Duration("KAAS_OFFSETS_RETENTION_CHECK_INTERVAL", groups.DefaultRetentionCheck),
		"how often expired offsets and empty groups are removed (offsets.retention.check.interval.ms)")
	fs.IntVar(&g.maxSize, "group-max-size", envdefault.Int("KAAS_GROUP_MAX_SIZE", groups.DefaultMaxGroupSize),
		"most members a group may have (group.max.size)")
}

func (g *groupOptions) validate() error {
	switch {
	case g.initialRebalanceDelay < 0:
		return fmt.Errorf("--group-initial-rebalance-delay must not be negative")
	case g.minSession <= 0 || g.maxSession < g.minSession:
		return fmt.Errorf("--group-min-session-timeout (%v) must be positive and at most --group-max-session-timeout (%v)", g.minSession, g.maxSession)
	case g.retention <= 0 || g.check <= 0:
		return fmt.Errorf("--offsets-retention and --offsets-retention-check-interval must be positive")
	case g.maxSize < 1:
		return fmt.Errorf("--group-max-size must be at least 1")
	}
	return nil
}

func (g *groupOptions) config() groups.Config {
	delay := g.initialRebalanceDelay
	if delay == 0 {
		delay = -1 // groups.Config: zero is the default, negative is none
	}
	return groups.Config{
		InitialRebalanceDelay: delay,
		MinSessionTimeout:     g.minSession, MaxSessionTimeout: g.maxSession,
		OffsetsRetention: g.retention, RetentionCheck: g.check,
		MaxGroupSize: g.maxSize,
	}
}

package main

import (
	"flag"
	"time"

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
	fs.DurationVar(&g.initialRebalanceDelay, "group-initial-rebalance-delay", groups.DefaultInitialRebalanceDelay,
		"how long the first rebalance of an empty group waits for more members (group.initial.rebalance.delay.ms)")
	fs.DurationVar(&g.minSession, "group-min-session-timeout", groups.DefaultMinSessionTimeout,
		"shortest session timeout a member may ask for (group.min.session.timeout.ms)")
	fs.DurationVar(&g.maxSession, "group-max-session-timeout", groups.DefaultMaxSessionTimeout,
		"longest session timeout a member may ask for (group.max.session.timeout.ms)")
	fs.DurationVar(&g.retention, "offsets-retention", groups.DefaultOffsetsRetention,
		"how long the committed offsets of a group without members are kept (offsets.retention.minutes)")
	fs.DurationVar(&g.check, "offsets-retention-check-interval", groups.DefaultRetentionCheck,
		"how often expired offsets and empty groups are removed (offsets.retention.check.interval.ms)")
	fs.IntVar(&g.maxSize, "group-max-size", groups.DefaultMaxGroupSize,
		"most members a group may have (group.max.size)")
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

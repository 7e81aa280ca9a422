package main

import (
	"flag"
	"time"

	"github.com/kaas-dev/kaas/engine"
)

// retentionOptions are the log retention settings, named after Kafka's
// broker configs of the same meaning. The retention limits themselves are
// topic configs (retention.ms, retention.bytes).
type retentionOptions struct {
	checkInterval time.Duration
}

func (r *retentionOptions) register(fs *flag.FlagSet) {
	fs.DurationVar(&r.checkInterval, "retention-check-interval", engine.DefaultRetentionCheckInterval,
		"how often each broker deletes the segments of its partitions that retention.ms or retention.bytes expire (log.retention.check.interval.ms; KAAS_RETENTION_CHECK_INTERVAL)")
}

package main

import (
	"flag"
	"time"

	"github.com/kaas-dev/kaas/engine"
)

// cleanerOptions are the log cleaner's settings (topics with
// cleanup.policy=compact), named after Kafka's log.cleaner.* broker
// configs. What a topic keeps is its own configs (delete.retention.ms,
// min.cleanable.dirty.ratio, the compaction lags).
type cleanerOptions struct {
	enable     bool
	threads    int
	dedupe     int64
	ioMaxBytes float64
	backoff    time.Duration
}

func (c *cleanerOptions) register(fs *flag.FlagSet) {
	fs.BoolVar(&c.enable, "log-cleaner-enable", true,
		"compact the topics whose cleanup.policy includes compact (log.cleaner.enable; KAAS_LOG_CLEANER_ENABLE)")
	fs.IntVar(&c.threads, "log-cleaner-threads", engine.DefaultCleanerThreads,
		"partitions cleaned at once (log.cleaner.threads; KAAS_LOG_CLEANER_THREADS)")
	fs.Int64Var(&c.dedupe, "log-cleaner-dedupe-buffer-size", engine.DefaultCleanerDedupeBufferSize,
		"bytes of key maps shared by the cleaner threads; a pass over more keys than a thread's share cleans in several passes (log.cleaner.dedupe.buffer.size; KAAS_LOG_CLEANER_DEDUPE_BUFFER_SIZE)")
	fs.Float64Var(&c.ioMaxBytes, "log-cleaner-io-max-bytes-per-second", 0,
		"bytes per second the cleaner threads read and write together, 0 for no limit (log.cleaner.io.max.bytes.per.second; KAAS_LOG_CLEANER_IO_MAX_BYTES_PER_SECOND)")
	fs.DurationVar(&c.backoff, "log-cleaner-backoff", engine.DefaultCleanerBackoff,
		"how long an idle cleaner thread waits before looking for a partition to clean again (log.cleaner.backoff.ms; KAAS_LOG_CLEANER_BACKOFF)")
}

func (c cleanerOptions) config() engine.CleanerConfig {
	return engine.CleanerConfig{Disable: !c.enable, Threads: c.threads, DedupeBufferSize: c.dedupe,
		IOMaxBytesPerSecond: c.ioMaxBytes, Backoff: c.backoff}
}

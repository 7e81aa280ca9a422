package main

import (
	"flag"
	"time"

	"github.com/kaas-dev/kaas/engine/txns"
)

// txnOptions are the transaction coordinator's settings, named after
// Kafka's broker configs of the same meaning.
type txnOptions struct {
	maxTimeout           time.Duration
	abortCheck           time.Duration
	idExpiration         time.Duration
	producerIDExpiration time.Duration
}

func (t *txnOptions) register(fs *flag.FlagSet) {
	fs.DurationVar(&t.maxTimeout, "transaction-max-timeout", txns.DefaultMaxTimeout,
		"longest transaction timeout a producer may ask for (transaction.max.timeout.ms)")
	fs.DurationVar(&t.abortCheck, "transaction-abort-check-interval", txns.DefaultAbortCheck,
		"how often transactions past their timeout are looked for and aborted (transaction.abort.timed.out.transaction.cleanup.interval.ms)")
	fs.DurationVar(&t.idExpiration, "transactional-id-expiration", txns.DefaultIDExpiration,
		"how long a transactional ID without transactions is kept (transactional.id.expiration.ms)")
	fs.DurationVar(&t.producerIDExpiration, "producer-id-expiration", 24*time.Hour,
		"how long a partition remembers an idle producer's sequence numbers (producer.id.expiration.ms)")
}

func (t *txnOptions) config() txns.Config {
	return txns.Config{MaxTimeout: t.maxTimeout, AbortCheck: t.abortCheck, IDExpiration: t.idExpiration, EndWait: txns.DefaultEndWait}
}

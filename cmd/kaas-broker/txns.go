package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/kaas-dev/kaas/cmd/internal/envdefault"
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
	fs.DurationVar(&t.maxTimeout, "transaction-max-timeout", envdefault.Duration("KAAS_TRANSACTION_MAX_TIMEOUT", txns.DefaultMaxTimeout),
		"longest transaction timeout a producer may ask for (transaction.max.timeout.ms)")
	fs.DurationVar(&t.abortCheck, "transaction-abort-check-interval", envdefault.Duration("KAAS_TRANSACTION_ABORT_CHECK_INTERVAL", txns.DefaultAbortCheck),
		"how often transactions past their timeout are looked for and aborted (transaction.abort.timed.out.transaction.cleanup.interval.ms)")
	fs.DurationVar(&t.idExpiration, "transactional-id-expiration", envdefault.Duration("KAAS_TRANSACTIONAL_ID_EXPIRATION", txns.DefaultIDExpiration),
		"how long a transactional ID without transactions is kept (transactional.id.expiration.ms)")
	fs.DurationVar(&t.producerIDExpiration, "producer-id-expiration", envdefault.Duration("KAAS_PRODUCER_ID_EXPIRATION", 24*time.Hour),
		"how long a partition remembers an idle producer's sequence numbers (producer.id.expiration.ms)")
}

func (t *txnOptions) validate() error {
	if t.maxTimeout <= 0 || t.abortCheck <= 0 || t.idExpiration <= 0 || t.producerIDExpiration <= 0 {
		return fmt.Errorf("--transaction-max-timeout, --transaction-abort-check-interval, --transactional-id-expiration and --producer-id-expiration must be positive")
	}
	return nil
}

func (t *txnOptions) config() txns.Config {
	return txns.Config{MaxTimeout: t.maxTimeout, AbortCheck: t.abortCheck, IDExpiration: t.idExpiration, EndWait: txns.DefaultEndWait}
}

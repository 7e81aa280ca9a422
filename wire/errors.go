package wire

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kaas-dev/kaas/engine"
	"github.com/kaas-dev/kaas/engine/dataplane"
	"github.com/kaas-dev/kaas/engine/desired"
	"github.com/kaas-dev/kaas/volume/partlog"
)

const unsupportedVersion = 35 // kerr.UnsupportedVersion.Code

// errorCode is the single place where engine and volume errors become Kafka
// error codes. Unknown errors are KAFKA_STORAGE_ERROR: retriable, and the
// engine reopens a failed partition by itself.
func errorCode(err error) int16 {
	var (
		ce *codedError
		ke *kerr.Error
	)
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ce):
		return ce.code
	case errors.Is(err, engine.ErrUnknownTopic):
		return kerr.UnknownTopicOrPartition.Code
	case errors.Is(err, engine.ErrNotServing), errors.Is(err, dataplane.ErrPartitionClosed):
		return kerr.NotLeaderForPartition.Code
	case errors.Is(err, engine.ErrNotCoordinator):
		return kerr.NotCoordinator.Code
	case errors.Is(err, engine.ErrCoordinatorLoading):
		return kerr.CoordinatorLoadInProgress.Code
	case errors.Is(err, engine.ErrCoordinatorNotAvailable):
		return kerr.CoordinatorNotAvailable.Code
	case errors.Is(err, engine.ErrTopicExists), errors.Is(err, desired.ErrTopicDeleting):
		return kerr.TopicAlreadyExists.Code
	case errors.Is(err, desired.ErrInvalidTopic):
		return kerr.InvalidTopicException.Code
	case errors.Is(err, desired.ErrInvalidPartitions):
		return kerr.InvalidPartitions.Code
	case errors.Is(err, desired.ErrInvalidConfig):
		return kerr.InvalidConfig.Code
	case errors.Is(err, desired.ErrTopicManaged), errors.Is(err, engine.ErrPartitionBudget):
		return kerr.PolicyViolation.Code
	case errors.Is(err, dataplane.ErrOutOfOrderSequence):
		return kerr.OutOfOrderSequenceNumber.Code
	case errors.Is(err, dataplane.ErrInvalidProducerEpoch):
		return kerr.InvalidProducerEpoch.Code
	case errors.Is(err, dataplane.ErrInvalidTxnState):
		return kerr.InvalidTxnState.Code
	case errors.Is(err, dataplane.ErrTxnCoordinatorFenced):
		return kerr.TransactionCoordinatorFenced.Code
	case errors.Is(err, dataplane.ErrInvalidTimestamp):
		return kerr.InvalidTimestamp.Code
	case errors.Is(err, dataplane.ErrInvalidRecord):
		return kerr.InvalidRecord.Code
	case errors.Is(err, partlog.ErrBatchTooLarge):
		return kerr.MessageTooLarge.Code
	case errors.Is(err, partlog.ErrCorruptBatch):
		return kerr.CorruptMessage.Code
	case errors.Is(err, partlog.ErrOffsetOutOfRange):
		return kerr.OffsetOutOfRange.Code
	case errors.Is(err, partlog.ErrFenced), errors.Is(err, partlog.ErrClosed):
		// Another writer took over, or the partition was released: the
		// client refreshes metadata and retries.
		return kerr.NotLeaderForPartition.Code
	case errors.Is(err, partlog.ErrNoSpace):
		// The volume is full: retriable, and the log stays open (fetches go
		// on); the append works again once space is freed.
		return kerr.KafkaStorageError.Code
	case errors.Is(err, partlog.ErrNoWriteSlot), errors.Is(err, context.DeadlineExceeded):
		return kerr.RequestTimedOut.Code
	case errors.As(err, &ke):
		return ke.Code // another broker's answer, passed on
	default:
		return kerr.KafkaStorageError.Code
	}
}

// codedError carries the Kafka code an answer needs with its cause.
type codedError struct {
	code int16
	err  error
}

func (e *codedError) Error() string { return e.err.Error() }
func (e *codedError) Unwrap() error { return e.err }

// errMessage is the message to send with a code (nil when none).
func errMessage(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	return &s
}

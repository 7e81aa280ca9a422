package partlog

import "errors"

var (
	// ErrFenced means a writer with a higher leader epoch has claimed the
	// partition (or the fence no longer holds this writer's epoch). It is
	// sticky: a fenced Log never acknowledges another write.
	ErrFenced = errors.New("partlog: fenced by another leader epoch")
	// ErrOffsetOutOfRange means a read asked for an offset below the log
	// start offset or above the high watermark.
	ErrOffsetOutOfRange = errors.New("partlog: offset out of range")
	// ErrCorruptBatch means bytes are not one well-formed RecordBatch v2.
	// Wrapping errors say which check failed.
	ErrCorruptBatch = errors.New("partlog: corrupt record batch")
	// ErrBatchTooLarge means a batch exceeds Config.MaxBatchBytes.
	ErrBatchTooLarge = errors.New("partlog: record batch too large")
	// ErrLogFailed means the log hit an error it cannot recover from in
	// place (a failed write or fsync): it refuses every later call until it
	// is reopened and its tail re-verified. It wraps the first cause.
	ErrLogFailed = errors.New("partlog: log failed")
	// ErrClosed is returned by calls on a closed Log.
	ErrClosed = errors.New("partlog: log closed")
	// ErrCorruptLog means the durable state contradicts itself (for example,
	// the manifest checkpoint lies beyond the end of the segment it names):
	// Open refuses to guess what was lost.
	ErrCorruptLog = errors.New("partlog: corrupt log state")
)

// failedError is the sticky error of a failed Log: errors.Is matches both
// ErrLogFailed and the cause (which may be ErrFenced).
type failedError struct{ cause error }

func (e *failedError) Error() string   { return ErrLogFailed.Error() + ": " + e.cause.Error() }
func (e *failedError) Unwrap() []error { return []error{ErrLogFailed, e.cause} }

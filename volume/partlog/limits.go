package partlog

import (
	"errors"
	"time"
)

// Limits are the Config fields a topic's configuration can change while the
// log is open (segment.bytes, segment.ms, max.message.bytes,
// message.timestamp.type). Zero fields take the defaults.
type Limits struct {
	SegmentBytes  int64
	SegmentAge    time.Duration
	MaxBatchBytes int32
	// LogAppendTime stamps every appended batch with the writer's clock
	// (message.timestamp.type=LogAppendTime).
	LogAppendTime bool
}

// Reconfigure applies new limits to the open log; appends after it see them.
func (l *Log) Reconfigure(lim Limits) error {
	return errors.New("partlog: Reconfigure not implemented yet")
}

// ErrNoSpace means the volume had no room for an append (ENOSPC). The log is
// unchanged and stays usable: the append may be retried once space is freed.
var ErrNoSpace = errors.New("no space left on the data volume")

// DeleteRecordsBefore raises the log start offset to offset (at most the
// high watermark; -1 means the high watermark), durably, and removes the
// segments wholly below it. It returns the new log start offset.
func (l *Log) DeleteRecordsBefore(offset int64) (int64, error) {
	return 0, errors.New("partlog: DeleteRecordsBefore not implemented yet")
}

// RetentionPolicy is retention.ms and retention.bytes (-1: unlimited).
type RetentionPolicy struct {
	Ms    int64
	Bytes int64
}

// RetentionResult reports what EnforceRetention removed.
type RetentionResult struct {
	Segments       int   // segments deleted
	Bytes          int64 // their bytes
	LogStartOffset int64 // the log start offset after the pass
}

// EnforceRetention deletes the oldest segments that retention expires.
func (l *Log) EnforceRetention(now time.Time, p RetentionPolicy) (RetentionResult, error) {
	return RetentionResult{}, errors.New("partlog: EnforceRetention not implemented yet")
}

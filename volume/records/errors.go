package records

import "errors"

// The three ways a batch's records are refused. Errors wrap one of them and
// say which record and field are wrong.
var (
	// ErrCorrupt: the records cannot be decoded at all: an unknown codec,
	// a broken, truncated or over-long compressed stream. Kafka answers
	// CORRUPT_MESSAGE.
	ErrCorrupt = errors.New("corrupt records")
	// ErrInvalid: the records decode but break the record format: a bad
	// varint or length, an offset delta out of sequence, a bad header, a
	// record count that disagrees with the records, bytes after the last
	// record. Kafka answers INVALID_RECORD (DefaultRecord's and
	// LogValidator's InvalidRecordException).
	ErrInvalid = errors.New("invalid record")
	// ErrTooLarge: the records inflate past the caller's limit.
	ErrTooLarge = errors.New("records inflate past the size limit")
)

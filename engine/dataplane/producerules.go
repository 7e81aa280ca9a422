package dataplane

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/kaas-dev/kaas/volume/partlog"
	"github.com/kaas-dev/kaas/volume/records"
)

// ProduceRules are the topic configs that decide, record by record, what a
// produce may append and in which form. NoProduceRules are Kafka's
// defaults; a topic's configs change them.
type ProduceRules struct {
	// TimestampBefore and TimestampAfter bound a CreateTime record's
	// timestamp to [now-TimestampBefore, now+TimestampAfter] milliseconds
	// of the owner's clock (message.timestamp.before.max.ms,
	// message.timestamp.after.max.ms); math.MaxInt64 is no bound. They
	// are not checked when CreateTime is false (LogAppendTime topics).
	CreateTime                      bool
	TimestampBefore, TimestampAfter int64
	// Codec is compression.type: Producer keeps each batch's own codec,
	// any other re-encodes a batch of another codec with it, at Level
	// (records.DefaultLevel: the codec's default).
	Codec records.Codec
	Level int
	// RequireKeys refuses a batch holding a record whose key is null, as
	// Kafka does on a topic whose cleanup.policy includes compact (the
	// cleaner could never drop such a record).
	RequireKeys bool
}

// Producer is the ProduceRules.Codec that keeps the producer's codec
// (compression.type=producer).
const Producer records.Codec = -1

// NoProduceRules are Kafka's defaults: no timestamp bounds, the
// producer's codec.
var NoProduceRules = ProduceRules{CreateTime: true, TimestampBefore: math.MaxInt64, TimestampAfter: math.MaxInt64, Codec: Producer}

// SetProduceRules applies a topic's produce rules to the partition;
// produces checked after it see them.
func (p *Partition) SetProduceRules(r ProduceRules) { p.rules.Store(&r) }

func (p *Partition) produceRules() ProduceRules {
	if r := p.rules.Load(); r != nil {
		return *r
	}
	return NoProduceRules
}

// ErrInvalidTimestamp refuses a batch with a record outside the topic's
// timestamp bounds (Kafka's INVALID_TIMESTAMP).
var ErrInvalidTimestamp = errors.New("invalid timestamp")

// RecordError is one refused record of a batch: its index in the batch and
// why (a Produce v8+ RecordErrors entry).
type RecordError struct {
	Index   int32
	Message string
}

// RecordsRefusedError refuses a whole batch for the records it lists, as
// Kafka's RecordValidationException: Err is the kind (ErrInvalidTimestamp),
// Message the partition-level message Kafka answers.
type RecordsRefusedError struct {
	Err     error
	Message string
	Records []RecordError
}

func (e *RecordsRefusedError) Error() string { return e.Message }
func (e *RecordsRefusedError) Unwrap() error { return e.Err }

// Prepare checks every record of c, decompressing at most limit bytes
// (volume/records, as Kafka's LogValidator), and the topic's produce
// rules, and returns the batch to append: c itself, or c re-encoded with
// the topic's codec. Errors are volume/records' or a *RecordsRefusedError.
//
// Unless it re-encodes or refuses, it allocates nothing: without timestamp
// bounds or required keys it is the records check alone, with them the
// same walk checks each record's key and timestamp on the way.
func (p *Partition) Prepare(c partlog.Checked, limit int) (partlog.Checked, error) {
	r := p.produceRules()
	h := c.Header()
	v := records.Acquire()
	defer v.Release()
	bounded := r.CreateTime && !h.LogAppendTime() && (r.TimestampBefore != math.MaxInt64 || r.TimestampAfter != math.MaxInt64)
	if !bounded && !r.RequireKeys {
		if err := v.Validate(c.Bytes(), limit); err != nil {
			return c, err
		}
	} else if err := p.checkRecords(v, c, limit, r, bounded); err != nil {
		return c, err
	}
	// Kafka never recompresses a batch to the codec it has, nor a control
	// batch (clients may not write those; AppendChecked refuses them).
	if r.Codec == Producer || int8(r.Codec) == h.Compression() || h.IsControl() {
		return c, nil
	}
	e := records.AcquireEncoder()
	defer e.Release()
	out, err := e.Recompress(make([]byte, 0, len(c.Bytes())), v, c.Bytes(), r.Codec, r.Level, limit)
	if err != nil {
		return c, fmt.Errorf("recompress %s/%d: %w", p.Topic, p.Index, err)
	}
	rc, err := partlog.Check(out)
	if err != nil {
		return c, fmt.Errorf("recompress %s/%d: the new batch: %w", p.Topic, p.Index, err)
	}
	return rc, nil
}

// checkRecords validates c's records as Validate does and checks each
// record against the topic's rules, as Kafka's LogValidator: with
// r.RequireKeys a record with a null key is refused (INVALID_RECORD), and
// when bounded a CreateTime timestamp outside the bounds at the owner's
// clock is refused (INVALID_TIMESTAMP); a record without a timestamp (-1)
// never is. Every record is checked and each refused one listed, under
// its key error if it has both; one timestamp error makes the whole batch
// INVALID_TIMESTAMP.
func (p *Partition) checkRecords(v *records.Validator, c partlog.Checked, limit int, r ProduceRules, bounded bool) error {
	var ms int64
	if bounded {
		now := time.Now
		if p.now != nil {
			now = p.now
		}
		ms = now().UnixMilli()
	}
	base := c.Header().BaseOffset
	var bad []RecordError
	var keyless string // the message, made at the first keyless record
	badTimestamp := false
	err := v.Each(c.Bytes(), limit, func(delta int32, ts int64) bool {
		if r.RequireKeys && v.NullKey() {
			if keyless == "" {
				keyless = fmt.Sprintf("Compacted topic cannot accept message without key in topic partition %s-%d", p.Topic, p.Index)
			}
			bad = append(bad, RecordError{Index: delta, Message: keyless})
			return true
		}
		// Kafka's arithmetic, overflow included: diff beyond either bound.
		if diff := ms - ts; bounded && ts != -1 && (diff > r.TimestampBefore || -diff > r.TimestampAfter) {
			badTimestamp = true
			bad = append(bad, RecordError{Index: delta, Message: fmt.Sprintf(
				"Timestamp %d of message with offset %d is out of range. The timestamp should be within [%d, %d]",
				ts, base+int64(delta), ms-r.TimestampBefore, ms+r.TimestampAfter)})
		}
		return true
	})
	switch {
	case err != nil:
		return err
	case badTimestamp:
		return &RecordsRefusedError{Err: ErrInvalidTimestamp, Records: bad,
			Message: "One or more records have been rejected due to invalid timestamp"}
	case len(bad) > 0:
		return &RecordsRefusedError{Err: ErrInvalidRecord, Records: bad, Message: recordErrorsMessage(bad)}
	}
	return nil
}

// recordErrorsMessage is Kafka's partition-level message for records
// refused as INVALID_RECORD: the count, then the first three errors as
// Kafka's RecordError prints them.
func recordErrorsMessage(bad []RecordError) string {
	var b strings.Builder
	fmt.Fprintf(&b, "One or more records have been rejected due to %d record errors in total, and only showing the first three errors at most: [", len(bad))
	for i, e := range bad[:min(len(bad), 3)] {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "RecordError(batchIndex=%d, message='%s')", e.Index, e.Message)
	}
	b.WriteString("]")
	return b.String()
}

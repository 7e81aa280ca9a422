package partlog

import (
	"encoding/binary"
	"fmt"

	"github.com/kaas-dev/kaas/volume/records"
)

// RecordSetFault says how a produced record set fails to be exactly one
// RecordBatch v2.
type RecordSetFault int8

const (
	// NoBatch: the set is too short to hold a batch.
	NoBatch RecordSetFault = iota + 1
	// OtherMagic: the first batch is of another message format.
	OtherMagic
	// SeveralBatches: a second batch follows the first.
	SeveralBatches
)

// RecordSetError refuses a produced record set that is not exactly one
// RecordBatch v2 (Kafka's rule for Produce v3 and later). The front end
// words it for its request; a broken batch is ErrCorruptBatch instead.
type RecordSetError struct {
	Fault RecordSetFault
	Magic int8 // the first batch's magic, for OtherMagic
}

func (e *RecordSetError) Error() string {
	switch e.Fault {
	case NoBatch:
		return "no record batch"
	case OtherMagic:
		return fmt.Sprintf("a record batch of magic %d, only %d is supported", e.Magic, supportedMagic)
	default:
		return "more than one record batch"
	}
}

// CheckProduced checks a produced record set: it must be exactly one
// batch (else a *RecordSetError), whose framing, header and CRC are sound
// (else ErrCorruptBatch), as Check. The set is parsed and checksummed
// once; the Checked carries its header to the records check and the
// append.
//
// The order of the checks is Kafka's: the magic byte (at the same place
// in every message format) before the length, and a second batch is named
// as one (not as corruption) when its length fits what follows.
func CheckProduced(recs []byte) (Checked, error) {
	if len(recs) < batchLengthOverhead {
		return Checked{}, &RecordSetError{Fault: NoBatch}
	}
	if len(recs) > offMagic && recs[offMagic] != supportedMagic {
		return Checked{}, &RecordSetError{Fault: OtherMagic, Magic: int8(recs[offMagic])}
	}
	size := framedSize(recs)
	if size < BatchHeaderSize || size > int64(len(recs)) {
		return Checked{}, fmt.Errorf("%w: batch length %d does not fit the %d bytes sent", ErrCorruptBatch, size-batchLengthOverhead, len(recs))
	}
	if rest := recs[size:]; len(rest) > 0 {
		if len(rest) >= batchLengthOverhead && framedSize(rest) <= int64(len(rest)) {
			return Checked{}, &RecordSetError{Fault: SeveralBatches}
		}
		return Checked{}, fmt.Errorf("%w: %d bytes after the batch are not a batch", ErrCorruptBatch, len(rest))
	}
	return Check(recs)
}

// framedSize is the whole size the batch at the start of b claims (its
// batch length plus the fields before it); b holds at least those fields.
func framedSize(b []byte) int64 {
	return int64(int32(binary.BigEndian.Uint32(b[offBatchLength:]))) + batchLengthOverhead
}

// CheckRecords checks every record of the batch (volume/records, as
// Kafka's LogValidator), decompressing at most limit bytes. Its errors
// are volume/records' (ErrCorrupt, ErrInvalid, ErrTooLarge).
func (c Checked) CheckRecords(limit int) error {
	v := records.Acquire()
	err := v.Validate(c.bytes, limit)
	v.Release()
	return err
}

// Package partlogtest builds Kafka RecordBatch v2 bytes for tests of
// partlog and of the packages above it.
package partlogtest

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/twmb/franz-go/pkg/kmsg"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// MakeBatch returns an uncompressed RecordBatch v2 as a producer would send
// it: base offset 0, partition leader epoch -1, numRecords records each with
// a nil key and a valueSize-byte value, all timestamped ts (so the batch's
// first and max timestamps are ts), and a valid CRC-32C. Pass producerID -1,
// producerEpoch -1 and baseSeq -1 for a non-idempotent producer.
func MakeBatch(numRecords, valueSize int, ts int64, producerID int64, producerEpoch int16, baseSeq int32) []byte {
	return Make(Options{
		NumRecords: numRecords, ValueSize: valueSize, Timestamp: ts,
		ProducerID: producerID, ProducerEpoch: producerEpoch, BaseSequence: baseSeq,
	})
}

// Options describes a batch for Make.
type Options struct {
	NumRecords    int
	ValueSize     int
	Timestamp     int64 // first timestamp; record i is Timestamp + i*TimestampStep
	TimestampStep int64
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32
	Attributes    int16 // e.g. 0x10 transactional, 0x20 control (compression bits are not applied)
	// Keys, if set, are the records' keys (a nil key is keyless); Values,
	// if set, their values (a nil value is a tombstone).
	Keys, Values [][]byte
}

// Make returns an uncompressed RecordBatch v2 described by o. Record i's
// value is ValueSize bytes of byte(i).
func Make(o Options) []byte {
	var records []byte
	for i := 0; i < o.NumRecords; i++ {
		value := make([]byte, o.ValueSize)
		for j := range value {
			value[j] = byte(i)
		}
		if o.Values != nil {
			value = o.Values[i]
		}
		r := kmsg.Record{
			TimestampDelta64: int64(i) * o.TimestampStep,
			OffsetDelta:      int32(i),
			Value:            value,
		}
		if o.Keys != nil {
			r.Key = o.Keys[i]
		}
		// Length counts everything after itself: encode once with a
		// one-byte zero varint to measure, then for real.
		r.Length = int32(len(r.AppendTo(nil)) - 1)
		records = r.AppendTo(records)
	}
	maxTS := o.Timestamp
	if o.NumRecords > 0 {
		maxTS += int64(o.NumRecords-1) * o.TimestampStep
	}
	b := kmsg.RecordBatch{
		FirstOffset:          0,
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           o.Attributes,
		LastOffsetDelta:      int32(o.NumRecords - 1),
		FirstTimestamp:       o.Timestamp,
		MaxTimestamp:         maxTS,
		ProducerID:           o.ProducerID,
		ProducerEpoch:        o.ProducerEpoch,
		FirstSequence:        o.BaseSequence,
		NumRecords:           int32(o.NumRecords),
		Records:              records,
	}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], castagnoli))
	return out
}

// Records decodes the records of an uncompressed batch made by Make (or any
// uncompressed v2 batch). It is for assertions, not for production use.
func Records(batch []byte) ([]kmsg.Record, error) {
	var b kmsg.RecordBatch
	if err := b.ReadFrom(batch); err != nil {
		return nil, err
	}
	out := make([]kmsg.Record, 0, b.NumRecords)
	rest := b.Records
	for len(rest) > 0 {
		var r kmsg.Record
		if err := r.ReadFrom(rest); err != nil {
			return nil, err
		}
		// ReadFrom does not say how much it consumed: re-encode to step.
		n := len(r.AppendTo(nil))
		out = append(out, r)
		rest = rest[n:]
	}
	return out, nil
}

package records

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestBatchHeaderDecode reads every header field as franz-go's own decoder
// of a RecordBatch does, for batches of every codec and kind.
func TestBatchHeaderDecode(t *testing.T) {
	for name, b := range validBatches(t) {
		var want kmsg.RecordBatch
		if err := want.ReadFrom(b); err != nil {
			t.Fatalf("%s: kmsg: %v", name, err)
		}
		var h BatchHeader
		h.Decode(b)
		got := kmsg.RecordBatch{
			FirstOffset: h.BaseOffset, Length: h.BatchLength, PartitionLeaderEpoch: h.PartitionLeaderEpoch,
			Magic: h.Magic, CRC: int32(h.CRC), Attributes: h.Attributes, LastOffsetDelta: h.LastOffsetDelta,
			FirstTimestamp: h.FirstTimestamp, MaxTimestamp: h.MaxTimestamp, ProducerID: h.ProducerID,
			ProducerEpoch: h.ProducerEpoch, FirstSequence: h.BaseSequence, NumRecords: h.NumRecords,
		}
		want.Records = nil
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: decoded %+v, want %+v", name, got, want)
		}
		if h.Size() != int64(len(b)) || h.NextOffset() != h.BaseOffset+int64(h.NumRecords) ||
			int16(h.Compression()) != want.Attributes&0x07 || h.IsControl() != (want.Attributes&0x20 != 0) ||
			h.IsTransactional() != (want.Attributes&0x10 != 0) || h.LogAppendTime() != (want.Attributes&0x08 != 0) {
			t.Errorf("%s: header %+v: size %d, next offset %d, compression %d, control %v, transactional %v, log append time %v",
				name, h, h.Size(), h.NextOffset(), h.Compression(), h.IsControl(), h.IsTransactional(), h.LogAppendTime())
		}
	}
}

package recordstest

import (
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var franzDecompressor = kgo.DefaultDecompressor()

// FranzDecode decodes batch the way a franz-go consumer does, with nothing
// of volume/records: kmsg's batch and record decoders and kgo's
// decompressor. It fails unless every record the header promises is there
// and nothing follows them. A produced batch's records are numbered 0, 1,
// 2...; a stored one's (the log cleaner may have left it sparse) need only
// increase up to the last offset delta, and an empty stored batch's
// records section is not read (consumers skip it).
func FranzDecode(batch []byte, stored bool) error {
	var b kmsg.RecordBatch
	if err := b.ReadFrom(batch); err != nil {
		return fmt.Errorf("batch: %w", err)
	}
	if stored && b.NumRecords == 0 {
		return nil
	}
	raw, err := franzDecompressor.Decompress(b.Records, kgo.CompressionCodecType(b.Attributes&7))
	if err != nil {
		return fmt.Errorf("decompress: %w", err)
	}
	prev := int32(-1)
	// As kgo's readRawRecords: a length varint, then that many bytes.
	for i := range b.NumRecords {
		length, n := binary.Varint(raw)
		if n <= 0 || length < 0 || int64(len(raw)-n) < length {
			return fmt.Errorf("record %d: length %d of %d bytes", i, length, len(raw))
		}
		var r kmsg.Record
		if err := r.ReadFrom(raw[:n+int(length)]); err != nil {
			return fmt.Errorf("record %d: %w", i, err)
		}
		if (!stored && r.OffsetDelta != i) || r.OffsetDelta <= prev || r.OffsetDelta > b.LastOffsetDelta {
			return fmt.Errorf("record %d: offset delta %d after %d, last %d", i, r.OffsetDelta, prev, b.LastOffsetDelta)
		}
		prev = r.OffsetDelta
		raw = raw[n+int(length):]
	}
	if len(raw) != 0 {
		return fmt.Errorf("%d bytes after the records", len(raw))
	}
	return nil
}

package recordstest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// StrictDecode checks the record batches of one fetched partition the way
// a franz-go consumer reads them (kgo.ProcessFetchPartition), and more
// strictly: each must yield exactly the records its header announces, at
// contiguous offsets from its first offset. No batch may inflate past
// limit bytes, so a stored compression bomb is a finding, not the test's
// memory. It returns the offset after the last whole batch (from, if
// there is none) and the problems found.
func StrictDecode(topic string, rp *kmsg.FetchResponseTopicPartition, from, limit int64) (int64, []string) {
	var problems []string
	next := from
	in := rp.RecordBatches
	for len(in) >= 61 {
		length := int64(int32(binary.BigEndian.Uint32(in[8:])))
		if length < 49 || int64(len(in)) < 12+length {
			break // a partial batch at the end of a fetch
		}
		raw := in[:12+length]
		in = in[12+length:]
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(raw); err != nil {
			problems = append(problems, fmt.Sprintf("%s/%d batch at %d: %v", topic, rp.Partition, next, err))
			continue
		}
		one := *rp
		one.RecordBatches = raw
		fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{KeepControlRecords: true, Offset: rb.FirstOffset,
			Topic: topic, Partition: rp.Partition}, &one, boundedDecompressor{limit: limit}, nil)
		switch want := int(rb.NumRecords); {
		case fp.Err != nil:
			problems = append(problems, fmt.Sprintf("%s/%d batch at %d: franz-go: %v", topic, rp.Partition, rb.FirstOffset, fp.Err))
		case len(fp.Records) != want || int64(want) != int64(rb.LastOffsetDelta)+1:
			problems = append(problems, fmt.Sprintf("%s/%d batch at %d: header says %d records (last delta %d), franz-go decoded %d",
				topic, rp.Partition, rb.FirstOffset, want, rb.LastOffsetDelta, len(fp.Records)))
		default:
			for i, r := range fp.Records {
				if r.Offset != rb.FirstOffset+int64(i) {
					problems = append(problems, fmt.Sprintf("%s/%d batch at %d: record %d at offset %d", topic, rp.Partition, rb.FirstOffset, i, r.Offset))
					break
				}
			}
		}
		next = rb.FirstOffset + int64(rb.LastOffsetDelta) + 1
	}
	return next, problems
}

// boundedDecompressor is franz-go's decompression with gzip and zstd
// bounded at limit bytes.
type boundedDecompressor struct{ limit int64 }

func (d boundedDecompressor) Decompress(src []byte, codec kgo.CompressionCodecType) ([]byte, error) {
	var r io.Reader
	switch codec {
	case kgo.CodecGzip:
		zr, err := gzip.NewReader(bytes.NewReader(src))
		if err != nil {
			return nil, err
		}
		r = zr
	case kgo.CodecZstd:
		zr, err := zstd.NewReader(bytes.NewReader(src), zstd.WithDecoderMaxMemory(uint64(d.limit)), zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, err
		}
		defer zr.Close()
		r = zr
	default:
		return kgo.DefaultDecompressor().Decompress(src, codec)
	}
	out, err := io.ReadAll(io.LimitReader(r, d.limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(out)) > d.limit {
		return nil, fmt.Errorf("batch inflates past %d bytes", d.limit)
	}
	return out, nil
}

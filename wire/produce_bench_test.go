package wire

import (
	"testing"

	"github.com/kaas-dev/kaas/engine/dataplane"
	"github.com/kaas-dev/kaas/volume/records/recordstest"
)

// BenchmarkProduceValidation compares the produce path's appends with and
// without record validation, per codec, in one run: validate=off is what
// appendBatch did before volume/records (split, then Append, which
// checks the header and CRC), validate=on is appendBatch now, and
// validate=keys is appendBatch on a compacted topic, whose records walk
// also checks every record has a key. The batch is 100 keyed records of
// 1 KiB compressible text; bytes/s counts the uncompressed records. Run
// with -benchtime to taste and compare the triples: the ratios are the
// validation's cost and the key check's.
func BenchmarkProduceValidation(b *testing.B) {
	br := startBroker(b, nil)
	limits := map[string]string{"retention.bytes": "67108864", "segment.bytes": "16777216"}
	br.createTopic(b, "bench", 1, limits)
	limits["cleanup.policy"] = "compact"
	br.createTopic(b, "bench-compact", 1, limits)
	part, err := br.eng.Partition("bench", 0)
	if err != nil {
		b.Fatal(err)
	}
	compacted, err := br.eng.Partition("bench-compact", 0)
	if err != nil {
		b.Fatal(err)
	}
	recs := recordstest.Text(100, 1024)
	raw := int64(len(recordstest.EncodeRecords(recs)))
	for _, codec := range recordstest.Codecs {
		batch := recordstest.Batch{Codec: codec, Records: recs}.Bytes()
		for _, validate := range []string{"off", "on", "keys"} {
			b.Run(codec.String()+"/validate="+validate, func(b *testing.B) {
				b.SetBytes(raw)
				b.ReportAllocs()
				for b.Loop() {
					switch validate {
					case "on", "keys":
						p := part
						if validate == "keys" {
							p = compacted
						}
						if _, _, err := appendBatch(p, batch, 9, false, 100<<20); err != nil {
							b.Fatal(err)
						}
					default:
						// The path before record validation: one batch,
						// checked (header and CRC) by Append alone.
						if _, _, err := part.Append(batch); err != nil {
							b.Fatal(err)
						}
					}
				}
			})
		}
	}
}

// BenchmarkProduceMultiPartition is the per-partition work of one produce
// request that carries a small uncompressed batch (10 records of 100
// bytes) for each of 8 partitions: framing, header, CRC, the client rules,
// the records and the append, for every partition. Small batches make the
// per-batch cost (parsing and checksumming) stand out.
func BenchmarkProduceMultiPartition(b *testing.B) {
	const partitions = 8
	br := startBroker(b, nil)
	br.createTopic(b, "multi", partitions, map[string]string{"retention.bytes": "67108864", "segment.bytes": "16777216"})
	parts := make([]*dataplane.Partition, partitions)
	batches := make([][]byte, partitions)
	recs := recordstest.Text(10, 100)
	for i := range parts {
		part, err := br.eng.Partition("multi", int32(i))
		if err != nil {
			b.Fatal(err)
		}
		parts[i] = part
		batches[i] = recordstest.Batch{Records: recs}.Bytes()
	}
	b.SetBytes(int64(partitions * len(batches[0])))
	b.ReportAllocs()
	for b.Loop() {
		for i, part := range parts {
			if _, _, err := appendBatch(part, batches[i], 9, false, 100<<20); err != nil {
				b.Fatal(err)
			}
		}
	}
}

package wire

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/volume/records/recordstest"
)

// wantCode is the Kafka error a poison batch of that kind must get.
func wantCode(w recordstest.Want) int16 {
	switch w {
	case recordstest.Corrupt:
		return kerr.CorruptMessage.Code
	case recordstest.Invalid:
		return kerr.InvalidRecord.Code
	case recordstest.TooLarge:
		return kerr.MessageTooLarge.Code
	}
	return 0
}

// TestProducePoisonBatches (issue 15 finding 3): a batch whose header and
// CRC are fine but whose records are not (bad varints or lengths, offset
// deltas out of order or repeated, headers, a count that lies, unknown
// codecs, broken, truncated or bomb-sized compressed streams) is refused
// with the code Kafka gives and a message naming the fault, and nothing of
// the request is stored, for every codec.
func TestProducePoisonBatches(t *testing.T) {
	const frameLimit = 1 << 20 // startBroker's MaxFrameBytes: the decompression bound
	b := startBroker(t, nil)
	b.createTopic(t, "poison", 1, nil)
	c := b.dial(t)
	good := recordstest.Batch{Records: recordstest.Values("ok")}.Bytes()
	for _, tc := range recordstest.Poison(frameLimit) {
		t.Run(tc.Name, func(t *testing.T) {
			// Alone, and after a good batch: a record set holds one
			// batch (Kafka's rule), so the pair is INVALID_RECORD and
			// the good one is not stored either.
			for i, records := range [][]byte{tc.Batch, append(append([]byte(nil), good...), tc.Batch...)} {
				p := c.produce(9, "poison", records)
				want := wantCode(tc.Want)
				if i == 1 {
					want = kerr.InvalidRecord.Code
				}
				if p.ErrorCode != want {
					t.Fatalf("error %d (%v), want %d (%s); message %q", p.ErrorCode, kerr.ErrorForCode(p.ErrorCode), want, tc.Want, deref(p.ErrorMessage))
				}
				if p.ErrorMessage == nil || *p.ErrorMessage == "" {
					t.Fatal("no error message")
				}
			}
		})
	}
	// Kafka's LogValidator.validateBatch, for clients.
	for _, tc := range []struct {
		name  string
		batch []byte
		code  int16
	}{
		{"idempotent batch without a sequence", makeBatch(batchOpts{pid: 5, epoch: 0, seq: -1}), kerr.InvalidRecord.Code},
		{"LogAppendTime set by the producer", makeBatch(batchOpts{attrs: 0x08}), kerr.InvalidTimestamp.Code},
	} {
		if p := c.produce(9, "poison", tc.batch); p.ErrorCode != tc.code || p.ErrorMessage == nil {
			t.Errorf("%s: error %d, message %q; want %d", tc.name, p.ErrorCode, deref(p.ErrorMessage), tc.code)
		}
	}
	part, err := b.eng.Partition("poison", 0)
	if err != nil {
		t.Fatal(err)
	}
	if end := part.Log().LogEndOffset(); end != 0 {
		t.Fatalf("log end %d: poison was stored", end)
	}
}

// TestProduceValidCodecs: valid batches of every codec, built the way
// clients build them (raw snappy as librdkafka and franz-go's Compress,
// xerial snappy as the Java client), are stored, and a franz-go consumer
// reads every record back.
func TestProduceValidCodecs(t *testing.T) {
	b := startBroker(t, nil)
	b.createTopic(t, "codecs", 1, nil)
	c := b.dial(t)
	want := 0
	for _, codec := range recordstest.Codecs {
		for _, recs := range [][]recordstest.Record{recordstest.Values("a"), recordstest.Text(100, 1024)} {
			recs[0].Headers = []kmsg.Header{{Key: "h", Value: []byte("v")}, {Key: "null", Value: nil}}
			batch := recordstest.Batch{Codec: codec, Records: recs, FirstTS: 1000}.Bytes()
			if p := c.produce(9, "codecs", batch); p.ErrorCode != 0 {
				t.Fatalf("%s, %d records: error %d, %q", codec, len(recs), p.ErrorCode, deref(p.ErrorMessage))
			}
			want += len(recs)
		}
	}
	// franz-go's own producer, every codec.
	for _, cc := range []kgo.CompressionCodec{kgo.NoCompression(), kgo.GzipCompression(), kgo.SnappyCompression(), kgo.Lz4Compression(), kgo.ZstdCompression()} {
		cl := b.client(t, kgo.ProducerBatchCompression(cc), kgo.DefaultProduceTopic("codecs"))
		var rs []*kgo.Record
		for i := range 50 {
			rs = append(rs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: []byte("some value that compresses some value that compresses")})
		}
		if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
			t.Fatalf("kgo produce: %v", err)
		}
		want += len(rs)
	}
	cl := b.client(t, kgo.ConsumeTopics("codecs"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	got := 0
	for got < want {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("consume after %d of %d records: %v", got, want, err)
		}
		got += fs.NumRecords()
	}
	if got != want {
		t.Fatalf("consumed %d records, want %d", got, want)
	}
}

// TestProduceInvalidRequiredAcks (issue 15 finding 9a): acks other than
// -1, 0 and 1 is INVALID_REQUIRED_ACKS for every partition that exists, as
// Kafka answers, and nothing is stored.
func TestProduceInvalidRequiredAcks(t *testing.T) {
	b := startBroker(t, nil)
	b.createTopic(t, "acks", 1, nil)
	c := b.dial(t)
	for _, acks := range []int16{2, -2, 3, 100, -100} {
		req := produceReq(9, acks, "acks", 0, makeBatch(batchOpts{}))
		two := kmsg.NewProduceRequestTopicPartition()
		two.Partition = 7
		two.Records = makeBatch(batchOpts{})
		req.Topics[0].Partitions = append(req.Topics[0].Partitions, two)
		resp := c.do(req).(*kmsg.ProduceResponse)
		// Kafka finds unknown partitions before it checks acks.
		for _, p := range resp.Topics[0].Partitions {
			want := kerr.InvalidRequiredAcks.Code
			if p.Partition == 7 {
				want = kerr.UnknownTopicOrPartition.Code
			}
			if p.ErrorCode != want || p.BaseOffset != -1 || p.ErrorMessage == nil {
				t.Fatalf("acks=%d partition %d: error %d, base offset %d, message %q; want %d, -1", acks, p.Partition, p.ErrorCode, p.BaseOffset, deref(p.ErrorMessage), want)
			}
		}
	}
	part, err := b.eng.Partition("acks", 0)
	if err != nil {
		t.Fatal(err)
	}
	if end := part.Log().LogEndOffset(); end != 0 {
		t.Fatalf("log end %d after requests with invalid acks", end)
	}
}

// TestListOffsetsRecordTimestamp (issue 15 finding 10d): ListOffsets by
// timestamp answers the first record whose timestamp is at or after the
// target, with that record's timestamp, inside multi-record batches of
// every codec; a LogAppendTime batch answers its first record at the
// append time.
func TestListOffsetsRecordTimestamp(t *testing.T) {
	b := startBroker(t, nil)
	for _, codec := range recordstest.Codecs {
		topic := "ts-" + codec.String()
		b.createTopic(t, topic, 1, nil)
		c := b.dial(t)
		// Offsets 0-3 at 1000, 1010, 1040, 1020 (not monotonic); 4-5 at 5000, 5005.
		first := recordstest.Values("a", "b", "c", "d")
		for i, d := range []int64{0, 10, 40, 20} {
			first[i].TimestampDelta = d
		}
		second := recordstest.Values("e", "f")
		second[1].TimestampDelta = 5
		for _, bt := range []recordstest.Batch{{Codec: codec, Records: first, FirstTS: 1000}, {Codec: codec, Records: second, FirstTS: 5000}} {
			if p := c.produce(9, topic, bt.Bytes()); p.ErrorCode != 0 {
				t.Fatalf("%s: produce: %d %q", codec, p.ErrorCode, deref(p.ErrorMessage))
			}
		}
		for _, tc := range []struct{ ts, offset, timestamp int64 }{
			{0, 0, 1000},
			{1000, 0, 1000},
			{1001, 1, 1010},
			{1010, 1, 1010},
			{1011, 2, 1040},
			{1025, 2, 1040},
			{1040, 2, 1040},
			{1041, 4, 5000},
			{5001, 5, 5005},
			{5006, -1, -1},
		} {
			for _, version := range []int16{1, 7} {
				p := c.do(listOffsetsReq(version, topic, tc.ts)).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
				if p.ErrorCode != 0 || p.Offset != tc.offset || p.Timestamp != tc.timestamp {
					t.Errorf("%s v%d: timestamp %d: error %d, offset %d at %d; want offset %d at %d", codec, version, tc.ts, p.ErrorCode, p.Offset, p.Timestamp, tc.offset, tc.timestamp)
				}
			}
		}
	}

	b.createTopic(t, "ts-append", 1, map[string]string{"message.timestamp.type": "LogAppendTime"})
	c := b.dial(t)
	if p := c.produce(9, "ts-append", recordstest.Batch{Codec: recordstest.Zstd, Records: recordstest.Values("a", "b", "c"), FirstTS: 1000}.Bytes()); p.ErrorCode != 0 {
		t.Fatalf("produce: %d", p.ErrorCode)
	}
	maxTS := c.do(listOffsetsReq(7, "ts-append", -3)).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].Timestamp
	p := c.do(listOffsetsReq(7, "ts-append", 1001)).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	if p.Offset != 0 || p.Timestamp != maxTS {
		t.Fatalf("LogAppendTime: offset %d at %d, want 0 at the append time %d", p.Offset, p.Timestamp, maxTS)
	}
}

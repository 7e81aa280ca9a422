package wire

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/volume/records/recordstest"
)

// stampedBatch is an uncompressed batch whose records carry the given
// absolute timestamps.
func stampedBatch(ts ...int64) []byte {
	recs := make([]recordstest.Record, len(ts))
	for i, v := range ts {
		recs[i] = recordstest.Record{OffsetDelta: int32(i), TimestampDelta: v - ts[0], Value: []byte("v")}
	}
	return recordstest.Batch{Records: recs, FirstTS: ts[0]}.Bytes()
}

// outOfRange is Kafka's record error for a timestamp out of bounds; the
// bounds move with the broker's clock, so they are matched, not spelled
// (an unbounded side wraps, as in Kafka's long arithmetic).
var outOfRange = regexp.MustCompile(`^Timestamp 1000 of message with offset 1 is out of range\. The timestamp should be within \[-?\d+, -?\d+\]$`)

// TestProduceTimestampBounds: on a CreateTime topic a record older than
// message.timestamp.before.max.ms (or the deprecated difference key
// standing in for it) refuses its batch with INVALID_TIMESTAMP, Kafka's
// message, and from v8 a record error with the record's index; nothing is
// stored. A LogAppendTime topic is not checked, and a bound set by
// IncrementalAlterConfigs applies to the partition already served. The
// exact bounds at a fixed clock are dataplane's TestPrepareTimestamps; the
// records here are decades away from any clock's now.
func TestProduceTimestampBounds(t *testing.T) {
	b := startBroker(t, nil)
	hour := "3600000"
	b.createTopic(t, "before", 1, map[string]string{"message.timestamp.before.max.ms": hour})
	b.createTopic(t, "difference", 1, map[string]string{"message.timestamp.difference.max.ms": hour})
	b.createTopic(t, "appendtime", 1, map[string]string{"message.timestamp.before.max.ms": hour, "message.timestamp.type": "LogAppendTime"})
	b.createTopic(t, "later", 1, nil)
	c := b.dial(t)
	now := time.Now().UnixMilli()
	refused := func(topic string) {
		t.Helper()
		p := c.produce(9, topic, stampedBatch(now, 1000, now))
		if p.ErrorCode != kerr.InvalidTimestamp.Code {
			t.Fatalf("%s: error %d (%q), want INVALID_TIMESTAMP", topic, p.ErrorCode, deref(p.ErrorMessage))
		}
		if got := deref(p.ErrorMessage); got != "One or more records have been rejected due to invalid timestamp" {
			t.Errorf("%s: message %q", topic, got)
		}
		if len(p.ErrorRecords) != 1 || p.ErrorRecords[0].RelativeOffset != 1 || !outOfRange.MatchString(deref(p.ErrorRecords[0].ErrorMessage)) {
			t.Errorf("%s: record errors %+v (%q)", topic, p.ErrorRecords, recordMessages(p.ErrorRecords))
		}
		if p7 := c.produce(7, topic, stampedBatch(1000)); p7.ErrorCode != kerr.InvalidTimestamp.Code || p7.ErrorMessage != nil || p7.ErrorRecords != nil {
			t.Errorf("%s, v7: %+v", topic, p7)
		}
		part, err := b.eng.Partition(topic, 0)
		if err != nil {
			t.Fatal(err)
		}
		if end := part.Log().LogEndOffset(); end != 0 {
			t.Errorf("%s: log end %d after refused batches", topic, end)
		}
	}
	refused("before")
	refused("difference")
	for _, topic := range []string{"before", "appendtime", "later"} {
		if p := c.produce(9, topic, stampedBatch(now, -1, now+1000)); p.ErrorCode != 0 {
			t.Fatalf("%s: in-range batch refused: %d %q", topic, p.ErrorCode, deref(p.ErrorMessage))
		}
	}
	if p := c.produce(9, "appendtime", stampedBatch(1000)); p.ErrorCode != 0 {
		t.Fatalf("LogAppendTime topic checked a producer's timestamp: %d %q", p.ErrorCode, deref(p.ErrorMessage))
	}

	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	adm := kadm.NewClient(b.client(t))
	alt, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "message.timestamp.after.max.ms", Value: strp(hour)}}, "later")
	if err != nil || len(alt) != 1 || alt[0].Err != nil {
		t.Fatalf("AlterTopicConfigs: %v %+v", err, alt)
	}
	future := now + 10*24*3600*1000
	if p := c.produce(9, "later", stampedBatch(now, future)); p.ErrorCode != kerr.InvalidTimestamp.Code || len(p.ErrorRecords) != 1 {
		t.Fatalf("after.max.ms set by IncrementalAlterConfigs: %+v", p)
	}
}

// TestProduceRecompress: on a topic whose compression.type names a codec,
// batches of any other codec, from franz-go's producer and by hand, are
// stored and fetched with the topic's codec, and a franz-go consumer reads
// every record back unchanged; producer keeps each batch's codec.
func TestProduceRecompress(t *testing.T) {
	b := startBroker(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	for _, tc := range []struct {
		compression string
		codec       int16 // the stored codec; -1: the producer's
	}{
		{"uncompressed", 0}, {"gzip", 1}, {"snappy", 2}, {"lz4", 3}, {"zstd", 4}, {"producer", -1},
	} {
		t.Run(tc.compression, func(t *testing.T) {
			topic := "recompress-" + tc.compression
			b.createTopic(t, topic, 1, map[string]string{"compression.type": tc.compression})
			var want []string
			producers := []kgo.CompressionCodec{kgo.NoCompression(), kgo.GzipCompression(), kgo.SnappyCompression(), kgo.Lz4Compression(), kgo.ZstdCompression()}
			for pi, cc := range producers {
				cl := b.client(t, kgo.ProducerBatchCompression(cc), kgo.DefaultProduceTopic(topic))
				var rs []*kgo.Record
				for i := range 20 {
					v := fmt.Sprintf("producer %d record %d %s", pi, i, strings.Repeat("compressible ", 20))
					rs = append(rs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: []byte(v),
						Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("v")}}})
					want = append(want, v)
				}
				if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
					t.Fatalf("produce with %v: %v", cc, err)
				}
			}
			c := b.dial(t)
			fp := c.fetch(fetchReq(12, topic, 0, -1, 0, 1))
			var codecs []int16
			for recs := fp.RecordBatches; len(recs) > 0; {
				var rb kmsg.RecordBatch
				if err := rb.ReadFrom(recs); err != nil {
					t.Fatalf("fetched batch: %v", err)
				}
				codecs = append(codecs, rb.Attributes&7)
				recs = recs[12+int(rb.Length):]
			}
			if len(codecs) != len(producers) {
				t.Fatalf("%d batches fetched, want %d", len(codecs), len(producers))
			}
			for i, got := range codecs {
				wantCodec := tc.codec
				if wantCodec < 0 {
					wantCodec = []int16{0, 1, 2, 3, 4}[i]
				}
				if got != wantCodec {
					t.Errorf("batch %d stored with codec %d, want %d (all: %v)", i, got, wantCodec, codecs)
				}
			}
			cons := b.client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			var got []string
			for len(got) < len(want) {
				fs := cons.PollFetches(ctx)
				if err := fs.Err(); err != nil {
					t.Fatalf("consume after %d of %d: %v", len(got), len(want), err)
				}
				fs.EachRecord(func(r *kgo.Record) {
					if len(r.Headers) != 1 || r.Headers[0].Key != "h" {
						t.Errorf("record %d: headers %+v", r.Offset, r.Headers)
					}
					got = append(got, string(r.Value))
				})
			}
			if !slices.Equal(got, want) {
				t.Fatalf("records read back differ from those produced")
			}
		})
	}
}

// TestCreateTopicCopiedConfigs: a topic created with every key an IaC tool
// copies from a Kafka 3.x topic at its default is accepted, DescribeConfigs
// says why the moot ones are moot, and the values that would be a lie are
// refused with the reason.
func TestCreateTopicCopiedConfigs(t *testing.T) {
	b := startBroker(t, nil)
	copied := map[string]string{
		"cleanup.policy": "delete", "compression.type": "producer", "compression.gzip.level": "-1",
		"compression.lz4.level": "9", "compression.zstd.level": "3", "file.delete.delay.ms": "60000",
		"flush.messages": "9223372036854775807", "flush.ms": "9223372036854775807",
		"follower.replication.throttled.replicas": "", "leader.replication.throttled.replicas": "",
		"local.retention.bytes": "-2", "local.retention.ms": "-2", "max.message.bytes": "1048588",
		"message.downconversion.enable": "true", "message.format.version": "3.0-IV1",
		"message.timestamp.after.max.ms": "9223372036854775807", "message.timestamp.before.max.ms": "9223372036854775807",
		"message.timestamp.difference.max.ms": "9223372036854775807", "message.timestamp.type": "CreateTime",
		"min.insync.replicas": "1", "preallocate": "false", "remote.storage.enable": "false",
		"remote.log.copy.disable": "false", "remote.log.delete.on.disable": "false",
		"retention.bytes": "-1", "retention.ms": "604800000", "segment.bytes": "1073741824", "segment.ms": "604800000",
		"unclean.leader.election.enable": "false", "delete.retention.ms": "86400000", "min.compaction.lag.ms": "0",
		"max.compaction.lag.ms": "9223372036854775807", "min.cleanable.dirty.ratio": "0.5",
	}
	b.createTopic(t, "copied", 1, copied)
	c := b.dial(t)
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.Version, req.IncludeDocumentation = 4, true
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, "copied"
	req.Resources = append(req.Resources, res)
	resp := c.do(req).(*kmsg.DescribeConfigsResponse)
	if len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("describe: %+v", resp.Resources)
	}
	docs := map[string]string{}
	for _, cfg := range resp.Resources[0].Configs {
		docs[cfg.Name] = deref(cfg.Documentation)
		if cfg.Source != kmsg.ConfigSourceDynamicTopicConfig || deref(cfg.Value) != copied[cfg.Name] {
			t.Errorf("%s: %q from source %v, want %q set on the topic", cfg.Name, deref(cfg.Value), cfg.Source, copied[cfg.Name])
		}
	}
	for _, k := range []string{"flush.ms", "flush.messages", "file.delete.delay.ms", "message.downconversion.enable"} {
		if !strings.HasPrefix(docs[k], "Moot") {
			t.Errorf("%s documented as %q, want it to say it is moot", k, docs[k])
		}
	}
	for _, tc := range []struct{ key, value, reason string }{
		{"preallocate", "true", "does not preallocate"},
		{"remote.storage.enable", "true", "no tiered storage"},
		{"local.retention.ms", "3600000", "no tiered storage"},
		{"leader.replication.throttled.replicas", "0:1", "no replication"},
		{"message.format.version", "0.10.2", "record batch v2 only"},
		{"segment.jitter.ms", "100", "does not jitter"},
	} {
		resp := c.do(createTopicsReq(7, false, "lie", 1, map[string]string{tc.key: tc.value})).(*kmsg.CreateTopicsResponse)
		tr := resp.Topics[0]
		if tr.ErrorCode != kerr.InvalidConfig.Code || !strings.Contains(deref(tr.ErrorMessage), tc.reason) {
			t.Errorf("%s=%s: error %d %q, want INVALID_CONFIG saying %q", tc.key, tc.value, tr.ErrorCode, deref(tr.ErrorMessage), tc.reason)
		}
	}
}

func recordMessages(errs []kmsg.ProduceResponseTopicPartitionErrorRecord) []string {
	var out []string
	for _, e := range errs {
		out = append(out, deref(e.ErrorMessage))
	}
	return out
}

// TestRecompressedReadByRealClients: the batches kaas re-encodes for a
// topic's compression.type (gzip, xerial snappy, LZ4 and zstd as Kafka's
// broker writes them) are read in full by sarama, segmentio/kafka-go and
// librdkafka (kcat, when installed), not only by franz-go.
func TestRecompressedReadByRealClients(t *testing.T) {
	b := startBroker(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	const n = 50
	value := func(i int) string { return fmt.Sprintf("value %03d %s", i, strings.Repeat("compress me ", 20)) }
	for _, codec := range []string{"gzip", "snappy", "lz4", "zstd"} {
		t.Run(codec, func(t *testing.T) {
			topic := "reencoded-" + codec
			b.createTopic(t, topic, 1, map[string]string{"compression.type": codec})
			cl := b.client(t, kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.DefaultProduceTopic(topic))
			var rs []*kgo.Record
			for i := range n {
				rs = append(rs, &kgo.Record{Value: []byte(value(i))})
			}
			if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
			check := func(client string, got []string) {
				t.Helper()
				if len(got) != n {
					t.Fatalf("%s read %d records, want %d", client, len(got), n)
				}
				for i, v := range got {
					if v != value(i) {
						t.Fatalf("%s: record %d is %q", client, i, v)
					}
				}
			}

			cfg := sarama.NewConfig()
			cfg.Version = sarama.V2_1_0_0
			cons, err := sarama.NewConsumer([]string{b.addr}, cfg)
			if err != nil {
				t.Fatalf("sarama: %v", err)
			}
			defer cons.Close()
			pc, err := cons.ConsumePartition(topic, 0, sarama.OffsetOldest)
			if err != nil {
				t.Fatalf("sarama: %v", err)
			}
			defer pc.Close()
			var got []string
			for len(got) < n {
				select {
				case m := <-pc.Messages():
					got = append(got, string(m.Value))
				case err := <-pc.Errors():
					t.Fatalf("sarama: %v", err)
				case <-ctx.Done():
					t.Fatalf("sarama: %d of %d records: %v", len(got), n, ctx.Err())
				}
			}
			check("sarama", got)

			r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{b.addr}, Topic: topic, Partition: 0, MaxWait: 100 * time.Millisecond})
			defer r.Close()
			got = got[:0]
			for len(got) < n {
				m, err := r.ReadMessage(ctx)
				if err != nil {
					t.Fatalf("kafka-go: %d of %d records: %v", len(got), n, err)
				}
				got = append(got, string(m.Value))
			}
			check("kafka-go", got)

			kcat, err := exec.LookPath("kcat")
			if err != nil {
				return
			}
			out, err := exec.CommandContext(ctx, kcat, "-b", b.addr, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%s\n").Output()
			if err != nil {
				t.Fatalf("kcat: %v", err)
			}
			check("kcat", strings.Split(strings.TrimSuffix(string(out), "\n"), "\n"))
		})
	}
}

// keyedBatch is an uncompressed batch whose records have the given keys
// (nil: null).
func keyedBatch(keys ...[]byte) []byte {
	recs := make([]recordstest.Record, len(keys))
	for i, k := range keys {
		recs[i] = recordstest.Record{OffsetDelta: int32(i), TimestampDelta: int64(i), Key: k, Value: []byte("v")}
	}
	return recordstest.Batch{Records: recs, FirstTS: time.Now().UnixMilli()}.Bytes()
}

// TestProduceKeylessCompacted: on a topic whose cleanup.policy includes
// compact, a batch holding a record without a key is refused whole with
// INVALID_RECORD, Kafka's message and, from v8, a record error naming the
// record; nothing is stored. A policy changed by IncrementalAlterConfigs
// applies to the partition already served; delete topics take keyless
// records. franz-go and sarama producers see INVALID_RECORD.
func TestProduceKeylessCompacted(t *testing.T) {
	b := startBroker(t, nil)
	for _, topic := range []string{"compact", "compact-delete", "delete", "altered"} {
		policy := strings.ReplaceAll(topic, "-", ",")
		if topic == "altered" {
			policy = "delete"
		}
		b.createTopic(t, topic, 1, map[string]string{"cleanup.policy": policy})
	}
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	adm := kadm.NewClient(b.client(t))
	alt, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: strp("compact")}}, "altered")
	if err != nil || len(alt) != 1 || alt[0].Err != nil {
		t.Fatalf("AlterTopicConfigs: %v %+v", err, alt)
	}
	c := b.dial(t)
	k := []byte("k")
	for _, tc := range []struct {
		topic   string
		batch   []byte
		refused []int32 // the record errors' indexes; nil: accepted
	}{
		{"compact", keyedBatch(k, []byte{}, k), nil},
		{"compact", keyedBatch(k, nil, k), []int32{1}},
		{"compact-delete", keyedBatch(nil), []int32{0}},
		{"altered", keyedBatch(nil, nil), []int32{0, 1}},
		{"delete", keyedBatch(nil, k), nil},
	} {
		part, err := b.eng.Partition(tc.topic, 0)
		if err != nil {
			t.Fatal(err)
		}
		before := part.Log().LogEndOffset()
		p := c.produce(9, tc.topic, tc.batch)
		if tc.refused == nil {
			if p.ErrorCode != 0 {
				t.Fatalf("%s: refused: %d %q", tc.topic, p.ErrorCode, deref(p.ErrorMessage))
			}
			continue
		}
		want := "Compacted topic cannot accept message without key in topic partition " + tc.topic + "-0"
		if p.ErrorCode != kerr.InvalidRecord.Code || !strings.HasPrefix(deref(p.ErrorMessage), fmt.Sprintf("One or more records have been rejected due to %d record errors", len(tc.refused))) {
			t.Fatalf("%s: error %d %q, want INVALID_RECORD", tc.topic, p.ErrorCode, deref(p.ErrorMessage))
		}
		if len(p.ErrorRecords) != len(tc.refused) {
			t.Fatalf("%s: record errors %+v", tc.topic, recordMessages(p.ErrorRecords))
		}
		for i, r := range p.ErrorRecords {
			if r.RelativeOffset != tc.refused[i] || deref(r.ErrorMessage) != want {
				t.Errorf("%s: record error %d: %d %q, want %d %q", tc.topic, i, r.RelativeOffset, deref(r.ErrorMessage), tc.refused[i], want)
			}
		}
		if p7 := c.produce(7, tc.topic, tc.batch); p7.ErrorCode != kerr.InvalidRecord.Code || p7.ErrorMessage != nil || p7.ErrorRecords != nil {
			t.Errorf("%s, v7: %+v", tc.topic, p7)
		}
		if end := part.Log().LogEndOffset(); end != before {
			t.Errorf("%s: log end %d after refused batches, was %d", tc.topic, end, before)
		}
	}

	cl := b.client(t, kgo.DefaultProduceTopic("compact"))
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("no key")}).FirstErr(); !errors.Is(err, kerr.InvalidRecord) {
		t.Errorf("franz-go keyless produce: %v, want INVALID_RECORD", err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Key: k, Value: []byte("keyed")}).FirstErr(); err != nil {
		t.Errorf("franz-go keyed produce: %v", err)
	}
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_1_0_0
	cfg.Producer.Return.Successes = true
	cfg.Producer.Retry.Max = 0
	sp, err := sarama.NewSyncProducer([]string{b.addr}, cfg)
	if err != nil {
		t.Fatalf("sarama: %v", err)
	}
	defer sp.Close()
	if _, _, err := sp.SendMessage(&sarama.ProducerMessage{Topic: "compact", Value: sarama.StringEncoder("no key")}); !errors.Is(err, sarama.ErrInvalidRecord) {
		t.Errorf("sarama keyless produce: %v, want INVALID_RECORD", err)
	}
	if _, _, err := sp.SendMessage(&sarama.ProducerMessage{Topic: "compact", Key: sarama.StringEncoder("k"), Value: sarama.StringEncoder("keyed")}); err != nil {
		t.Errorf("sarama keyed produce: %v", err)
	}
}

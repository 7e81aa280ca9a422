package wire

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestProduceCompressedRealClients: the batches sarama, segmentio/kafka-go
// and librdkafka (kcat, when installed) write with every codec pass record
// validation, and a franz-go consumer reads every record back. (franz-go's
// own producer is in TestProduceValidCodecs.)
func TestProduceCompressedRealClients(t *testing.T) {
	b := startBroker(t, nil)
	const perClient = 200
	want := 0
	value := func(i int) []byte { return fmt.Appendf(nil, "value %05d %s", i, strings.Repeat("compress me ", 20)) }

	codecs := []string{"none", "gzip", "snappy", "lz4", "zstd"}
	for _, codec := range codecs {
		topic := "clients-" + codec
		b.createTopic(t, topic, 1, nil)

		// sarama.
		cfg := sarama.NewConfig()
		cfg.Version = sarama.V2_1_0_0
		cfg.Producer.RequiredAcks = sarama.WaitForAll
		cfg.Producer.Return.Successes = true
		cfg.Producer.Compression = map[string]sarama.CompressionCodec{"none": sarama.CompressionNone, "gzip": sarama.CompressionGZIP,
			"snappy": sarama.CompressionSnappy, "lz4": sarama.CompressionLZ4, "zstd": sarama.CompressionZSTD}[codec]
		prod, err := sarama.NewSyncProducer([]string{b.addr}, cfg)
		if err != nil {
			t.Fatalf("sarama: %v", err)
		}
		var msgs []*sarama.ProducerMessage
		for i := range perClient {
			msgs = append(msgs, &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(fmt.Sprint(i)), Value: sarama.ByteEncoder(value(i)),
				Headers: []sarama.RecordHeader{{Key: []byte("h"), Value: []byte("v")}}})
		}
		if err := prod.SendMessages(msgs); err != nil {
			t.Fatalf("sarama %s: %v", codec, err)
		}
		_ = prod.Close()
		want += perClient

		// segmentio/kafka-go.
		// Its own transport: the shared default caches metadata from before the topic existed.
		tr := &kafka.Transport{}
		w := &kafka.Writer{Addr: kafka.TCP(b.addr), Topic: topic, RequiredAcks: kafka.RequireAll, BatchSize: perClient, BatchTimeout: time.Millisecond, Transport: tr,
			Compression: map[string]kafka.Compression{"none": 0, "gzip": kafka.Gzip, "snappy": kafka.Snappy, "lz4": kafka.Lz4, "zstd": kafka.Zstd}[codec]}
		var kms []kafka.Message
		for i := range perClient {
			kms = append(kms, kafka.Message{Key: fmt.Append(nil, i), Value: value(i)})
		}
		ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
		if err := w.WriteMessages(ctx, kms...); err != nil {
			t.Fatalf("kafka-go %s: %v", codec, err)
		}
		cancel()
		_ = w.Close()
		tr.CloseIdleConnections()
		want += perClient

		// librdkafka.
		if kcat, err := exec.LookPath("kcat"); err == nil {
			var in strings.Builder
			for i := range perClient {
				in.Write(value(i))
				in.WriteByte('\n')
			}
			cmd := exec.Command(kcat, "-b", b.addr, "-P", "-t", topic, "-X", "compression.codec="+codec, "-X", "acks=all")
			cmd.Stdin = strings.NewReader(in.String())
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("kcat %s: %v: %s", codec, err, out)
			}
			want += perClient
		}
	}
	var topics []string
	for _, c := range codecs {
		topics = append(topics, "clients-"+c)
	}
	cl := b.client(t, kgo.ConsumeTopics(topics...), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
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
		t.Fatalf("consumed %d, want %d", got, want)
	}
}

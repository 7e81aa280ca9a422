package wire

import (
	"testing"

	"github.com/kaas-dev/kaas/engine/quota"
	"github.com/kaas-dev/kaas/volume/records/recordstest"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkProduceQuotas is one acks=1 produce round trip (a batch of 10
// records of 100 bytes) with quotas off and on, side by side in one run:
// "guard" meters every request against a broker-wide guard it never
// exceeds (10 GiB/s); "client" sets the default user's producer_byte_rate
// (10 GiB/s) and request_percentage (10^6 %), so every request is looked
// up and recorded on both client sensors and never throttled. The ratio to
// "off" is the quotas' cost on the produce path.
func BenchmarkProduceQuotas(b *testing.B) {
	batch := recordstest.Batch{Records: recordstest.Text(10, 100)}.Bytes()
	for _, mode := range []string{"off", "guard", "client"} {
		b.Run("quotas="+mode, func(b *testing.B) {
			br := startBroker(b, func(c *Config) {
				if mode == "guard" {
					c.MaxProduceBytesPerSecond = 10 << 30
				}
			})
			br.createTopic(b, "bench", 1, map[string]string{"retention.bytes": "67108864", "segment.bytes": "16777216"})
			c := br.dial(b)
			if mode == "client" {
				entry := alterEntry([]qcomp{{quota.TypeUser, nil}}, setOp("producer_byte_rate", 10<<30), setOp("request_percentage", 1e6))
				if resp := alterQuotas(c, false, entry); resp.Entries[0].ErrorCode != 0 {
					b.Fatalf("alter: %d %v", resp.Entries[0].ErrorCode, resp.Entries[0].ErrorMessage)
				}
			}
			req := produceReq(9, 1, "bench", 0, batch)
			b.SetBytes(int64(len(batch)))
			b.ReportAllocs()
			for b.Loop() {
				resp := c.do(req).(*kmsg.ProduceResponse)
				if resp.ThrottleMillis != 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
					b.Fatalf("throttled %d ms, error %d", resp.ThrottleMillis, resp.Topics[0].Partitions[0].ErrorCode)
				}
			}
		})
	}
}

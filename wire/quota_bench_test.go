package wire

import (
	"testing"

	"github.com/kaas-dev/kaas/volume/records/recordstest"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkProduceQuotas is one acks=1 produce round trip (a batch of 10
// records of 100 bytes) with quotas off and on, side by side in one run:
// on meters every request against a broker-wide guard it never exceeds
// (10 GiB/s), the same record and check a client quota takes. The ratio
// of the pair is the quotas' cost on the produce path.
func BenchmarkProduceQuotas(b *testing.B) {
	batch := recordstest.Batch{Records: recordstest.Text(10, 100)}.Bytes()
	for _, on := range []bool{false, true} {
		name := "quotas=off"
		if on {
			name = "quotas=on"
		}
		b.Run(name, func(b *testing.B) {
			br := startBroker(b, func(c *Config) {
				if on {
					c.MaxProduceBytesPerSecond = 10 << 30
				}
			})
			br.createTopic(b, "bench", 1, map[string]string{"retention.bytes": "67108864", "segment.bytes": "16777216"})
			c := br.dial(b)
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

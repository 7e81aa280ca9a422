package wire

import (
	"testing"

	"github.com/kaas-dev/kaas/volume/records/recordstest"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkProduceMetrics is one acks=1 produce round trip (a batch of 10
// records of 100 bytes) with the front end's metrics off and on, side by
// side in one run: the ratio is the metrics' cost on the produce path.
func BenchmarkProduceMetrics(b *testing.B) {
	batch := recordstest.Batch{Records: recordstest.Text(10, 100)}.Bytes()
	for _, mode := range []string{"off", "on"} {
		b.Run("metrics="+mode, func(b *testing.B) {
			br := startBroker(b, func(c *Config) { c.DisableMetrics = mode == "off" })
			br.createTopic(b, "bench", 1, map[string]string{"retention.bytes": "67108864", "segment.bytes": "16777216"})
			c := br.dial(b)
			req := produceReq(9, 1, "bench", 0, batch)
			b.SetBytes(int64(len(batch)))
			b.ReportAllocs()
			for b.Loop() {
				if resp := c.do(req).(*kmsg.ProduceResponse); resp.Topics[0].Partitions[0].ErrorCode != 0 {
					b.Fatalf("error %d", resp.Topics[0].Partitions[0].ErrorCode)
				}
			}
		})
	}
}

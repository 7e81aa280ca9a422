package wire

import (
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/engine"
	"github.com/kaas-dev/kaas/engine/datametrics"
	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/records/recordstest"
	"github.com/kaas-dev/kaas/volume/timedfs"
)

// BenchmarkProduceMetrics is one acks=1 produce round trip (a batch of 10
// records of 100 bytes) with every metric off and on, side by side in one
// run: on is what kaas-broker runs by default (the front end's counters,
// the group-commit rounds timed, every volume call timed through
// timedfs), off is --metrics=false. The ratio is the metrics' cost on the
// produce path, in wall time and in CPU time per request. TMPDIR on a
// tmpfs takes the disk's fsync out and leaves the CPU cost.
func BenchmarkProduceMetrics(b *testing.B) {
	batch := recordstest.Batch{Records: recordstest.Text(10, 100)}.Bytes()
	for _, on := range []bool{false, true} {
		name := "metrics=off"
		if on {
			name = "metrics=on"
		}
		b.Run(name, func(b *testing.B) {
			br := startBrokerWith(b, func(c *engine.Config) {
				c.DisableMetrics = !on
				if on {
					c.FS = timedfs.Wrap(volume.OS(), datametrics.NewVolumeOps(), time.Now)
				}
			}, func(c *Config) { c.DisableMetrics = !on })
			br.createTopic(b, "bench", 1, map[string]string{"retention.bytes": "67108864", "segment.bytes": "16777216"})
			c := br.dial(b)
			req := produceReq(9, 1, "bench", 0, batch)
			b.SetBytes(int64(len(batch)))
			b.ReportAllocs()
			cpu0 := processCPU(b)
			for b.Loop() {
				if resp := c.do(req).(*kmsg.ProduceResponse); resp.Topics[0].Partitions[0].ErrorCode != 0 {
					b.Fatalf("error %d", resp.Topics[0].Partitions[0].ErrorCode)
				}
			}
			// CPU per request (broker and client: one process) varies far
			// less than the round trip's wall time on a shared machine.
			b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// processCPU is the process's user and system CPU time so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

package groupstore

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/go-logr/logr"

	"github.com/kaas-dev/kaas/volume"
)

// BenchmarkAppendWait: parallel committers each Append one ~100-byte record
// (an offset commit's size) and wait for its acknowledgement, on the real
// filesystem in a temp dir, sharing group-commit fsyncs. Reports ops/s.
// RunParallel starts parallelism x GOMAXPROCS committers: 1 is the testing
// default, 16 is closer to a coordinator serving many consumers at once.
func BenchmarkAppendWait(b *testing.B) {
	for _, par := range []int{1, 16} {
		b.Run(fmt.Sprintf("parallelism=%d", par), func(b *testing.B) {
			benchAppendWait(b, par)
		})
	}
}

func benchAppendWait(b *testing.B, parallelism int) {
	dir := b.TempDir()
	s, _, err := Open(Config{FS: volume.OS(), Dir: dir, Index: 0, Epoch: 1, Logger: logr.Discard()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	value := bytes.Repeat([]byte("v"), 60)
	var next atomic.Int64
	b.SetParallelism(parallelism)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		id := next.Add(1)
		rec := []Record{{Key: fmt.Appendf(nil, "group-%03d/orders/%02d", id, id%32), Value: value}}
		for pb.Next() {
			_, wait, err := s.Append(rec)
			if err != nil {
				b.Error(err)
				return
			}
			if err := wait(context.Background()); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

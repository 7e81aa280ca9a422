package partlog

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/partlog/partlogtest"
)

// BenchmarkReadRefParallel takes and releases zero-copy references (the
// fetch path's segment pin) from parallel readers at random offsets.
func BenchmarkReadRefParallel(b *testing.B) {
	l := benchOpen(b, volume.OS(), b.TempDir())
	defer l.Close()
	buf := partlogtest.MakeBatch(16, 1024, 1, -1, -1, -1)
	for i := 0; i < 4096; i++ {
		if _, err := l.Append(buf); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Sync(context.Background(), l.LogEndOffset()-1); err != nil {
		b.Fatal(err)
	}
	hw := l.HighWatermark()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		rng := rand.New(rand.NewPCG(rand.Uint64(), 2))
		for pb.Next() {
			r, err := l.ReadRef(rng.Int64N(hw), 1<<20)
			if err != nil {
				b.Error(err)
				return
			}
			r.Release()
		}
	})
}

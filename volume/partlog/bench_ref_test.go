package partlog

import (
	"math/rand/v2"
	"testing"

	"github.com/kaas-dev/kaas/volume"
)

// BenchmarkReadRefParallel takes and releases zero-copy references (the
// fetch path's segment pin) from parallel readers at random offsets.
func BenchmarkReadRefParallel(b *testing.B) {
	l, hw := benchFilled(b, volume.OS(), b.TempDir())
	defer l.Close()
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

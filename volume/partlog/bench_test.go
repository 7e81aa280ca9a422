package partlog

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/go-logr/logr"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/partlog/partlogtest"
)

// benchFS returns the filesystems the benchmarks run on: the real one in a
// temp dir (fsync costs real time) and memfs (CPU cost only).
func benchFS(b *testing.B) map[string]func() (volume.FS, string) {
	return map[string]func() (volume.FS, string){
		"os": func() (volume.FS, string) { return volume.OS(), b.TempDir() },
		"memfs": func() (volume.FS, string) {
			m := newMemFS(b)
			return m, testDir
		},
	}
}

func benchOpen(b *testing.B, fsys volume.FS, dir string) *Log {
	b.Helper()
	l, err := Open(fsys, dir, Config{Epoch: 1, SegmentBytes: 256 << 20, Logger: logr.Discard()})
	if err != nil {
		b.Fatal(err)
	}
	return l
}

// benchFilled opens a log and appends and syncs 4096 batches of 16 1-KiB
// records (64 MiB), returning it and its high watermark.
func benchFilled(b *testing.B, fsys volume.FS, dir string) (*Log, int64) {
	b.Helper()
	l := benchOpen(b, fsys, dir)
	buf := partlogtest.MakeBatch(16, 1024, 1, -1, -1, -1)
	for i := 0; i < 4096; i++ {
		if _, err := l.Append(buf); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Sync(context.Background(), l.LogEndOffset()-1); err != nil {
		b.Fatal(err)
	}
	return l, l.HighWatermark()
}

// BenchmarkAppendSync: parallel producers each append a batch of 16 1-KiB
// records and wait for it to be acknowledged, sharing group-commit rounds.
// It runs on the OS filesystem only: memfs copies the whole file per Sync.
func BenchmarkAppendSync(b *testing.B) {
	for _, name := range []string{"os"} {
		b.Run(name, func(b *testing.B) {
			fsys, dir := benchFS(b)[name]()
			l := benchOpen(b, fsys, dir)
			defer l.Close()
			size := len(partlogtest.MakeBatch(16, 1024, 1, -1, -1, -1))
			b.SetBytes(int64(size))
			b.SetParallelism(16)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				buf := partlogtest.MakeBatch(16, 1024, 1, -1, -1, -1)
				for pb.Next() {
					res, err := l.Append(buf)
					if err != nil {
						b.Error(err)
						return
					}
					if err := l.Sync(context.Background(), res.LastOffset); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkAppend measures Append alone (no Sync): its CPU and allocations.
func BenchmarkAppend(b *testing.B) {
	l := benchOpen(b, volume.OS(), b.TempDir())
	defer l.Close()
	buf := partlogtest.MakeBatch(16, 64, 1, -1, -1, -1)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := l.Append(buf); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRead reads 1 MiB fetches from random offsets of a synced log.
func BenchmarkRead(b *testing.B) {
	for name, mk := range benchFS(b) {
		b.Run(name, func(b *testing.B) {
			fsys, dir := mk()
			l, hw := benchFilled(b, fsys, dir)
			defer l.Close()
			rng := rand.New(rand.NewPCG(1, 2))
			dst := make([]byte, 0, 2<<20)
			b.ReportAllocs()
			b.ResetTimer()
			var total int64
			for i := 0; i < b.N; i++ {
				out, err := l.Read(rng.Int64N(hw), 1<<20, dst[:0])
				if err != nil {
					b.Fatal(err)
				}
				total += int64(len(out))
			}
			b.SetBytes(total / int64(b.N))
		})
	}
}

package nfsfs

import (
	"fmt"
	"testing"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/memfs"
)

// TestAppendDoesNotAllocate: once a log has flushed a round of appends, the
// next round's writes reuse its buffer.
func TestAppendDoesNotAllocate(t *testing.T) {
	_, s, _ := setup(t, Options{})
	f := create(t, s.View("a"), "/d/log")
	defer f.Close()
	p := make([]byte, 4096)
	for range 256 { // 1 MiB
		write(t, f, string(p))
	}
	must(t, f.Sync())
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := f.Write(p); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per append", allocs)
	}
}

// BenchmarkAppendSync appends and fsyncs every 64 writes, straight to
// memfs and through a view over it: the difference is the view's cost.
func BenchmarkAppendSync(b *testing.B) {
	for _, size := range []int{4 << 10, 64 << 10} {
		for _, through := range []string{"memfs", "view"} {
			b.Run(fmt.Sprintf("%dKiB/%s", size>>10, through), func(b *testing.B) {
				var fsys volume.FS = memfs.New()
				if through == "view" {
					fsys = New(fsys, Options{}).View("a")
				}
				f, err := fsys.Create("/log")
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
				p := make([]byte, size)
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					if _, err := f.Write(p); err != nil {
						b.Fatal(err)
					}
					if i%64 == 63 {
						if err := f.Sync(); err != nil {
							b.Fatal(err)
						}
					}
				}
			})
		}
	}
}

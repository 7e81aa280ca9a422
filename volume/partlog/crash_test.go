package partlog

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/faultfs"
	"github.com/kaas-dev/kaas/volume/memfs"
)

// batchesByBase reads the whole log below the high watermark and returns
// each batch's bytes by base offset.
func batchesByBase(t testing.TB, l *Log) map[int64][]byte {
	t.Helper()
	out := map[int64][]byte{}
	for off := l.LogStartOffset(); off < l.HighWatermark(); {
		b, err := l.Read(off, 1<<20, nil)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		for len(b) > 0 {
			h, err := ParseBatchHeader(b)
			if err != nil {
				t.Fatalf("Read(%d): %v", off, err)
			}
			if h.BaseOffset != off {
				t.Fatalf("batch at %d, want %d", h.BaseOffset, off)
			}
			out[h.BaseOffset] = bytes.Clone(b[:h.Size()])
			b = b[h.Size():]
			off = h.NextOffset()
		}
	}
	return out
}

// checkAcked fails unless every acknowledged batch is in the log unchanged.
func checkAcked(t testing.TB, l *Log, acked map[int64][]byte, context string) map[int64][]byte {
	t.Helper()
	got := batchesByBase(t, l)
	for base, want := range acked {
		if !bytes.Equal(got[base], want) {
			t.Fatalf("%s: acknowledged batch at offset %d lost or changed (have %d bytes, want %d)", context, base, len(got[base]), len(want))
		}
	}
	return got
}

// TestCrashRandomInterleavings runs random sequences of appends, syncs,
// clock steps, clean reopens and crashes (memfs CrashClone drops everything
// not fsynced), and checks after every crash that every offset a Sync
// acknowledged survived, byte for byte.
func TestCrashRandomInterleavings(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 42))
			clk := newFakeClock()
			mem := newMemFS(t)
			epoch := int32(1)
			cfg := func() Config {
				return Config{Epoch: epoch, SegmentBytes: 4096, IndexIntervalBytes: 256,
					CheckpointInterval: time.Second, SegmentAge: time.Hour, Now: clk.Now, Logger: logr.Discard()}
			}
			// Each Log instance sees mem through its own killable view.
			var killed *bool
			instance := func() volume.FS {
				fsys, dead := killable(mem)
				killed = dead
				return fsys
			}
			l := mustOpen(t, instance(), cfg())
			acked := map[int64][]byte{}
			var pending []appendedBatch
			ack := func() {
				hw := l.HighWatermark()
				keep := pending[:0]
				for _, p := range pending {
					if p.last < hw {
						acked[p.base] = p.data
					} else {
						keep = append(keep, p)
					}
				}
				pending = keep
			}
			// reopen restarts the log after a clean close, a process crash
			// (unsynced writes stay in the page cache) or a power loss.
			reopen := func(how string) {
				switch how {
				case "power":
					mem = mem.CrashClone()
					_ = l.Close() // writes to the old memfs only
				case "process":
					*killed = true
					_ = l.Close() // every call fails: nothing is written
				default:
					mustClose(t, l)
					ack() // Close synced everything
				}
				if how != "clean" && rng.IntN(2) == 0 {
					epoch++
				}
				l = mustOpen(t, instance(), cfg())
				got := checkAcked(t, l, acked, fmt.Sprintf("reopen at epoch %d after %s stop", epoch, how))
				// Whatever the reopened log holds is now visible: it must
				// survive later crashes too.
				acked, pending = got, nil
				if hw, leo := l.HighWatermark(), l.LogEndOffset(); hw != leo {
					t.Fatalf("after Open HW %d != LEO %d", hw, leo)
				}
			}
			for step := 0; step < 300; step++ {
				switch r := rng.IntN(20); {
				case r < 10:
					b := batch(1+rng.IntN(5), 10+rng.IntN(400), int64(rng.IntN(1000)))
					res := mustAppend(t, l, b)
					pending = append(pending, appendedBatch{base: res.BaseOffset, last: res.LastOffset, data: bytes.Clone(b)})
				case r < 14:
					if len(pending) > 0 {
						mustSync(t, l, pending[rng.IntN(len(pending))].last)
						ack()
					}
				case r < 17:
					clk.Advance(time.Duration(rng.IntN(1500)) * time.Millisecond)
				case r < 18:
					reopen("power")
				case r < 19:
					reopen("process")
				default:
					reopen("clean")
				}
			}
			reopen("power")
			_ = l.Close()
		})
	}
}

// ackedWorkload opens the log with cfg and appends n batches of growing
// sizes, syncing after every second one (the clock moved 700 ms, so that
// checkpoints are written), and closes it. It returns what Sync
// acknowledged, and the first error, at which it stops; an Append error
// that refused says is skipped instead (the batch was not appended).
func ackedWorkload(fsys volume.FS, cfg Config, clk *fakeClock, n int, refused func(error) bool) (map[int64][]byte, error) {
	acked := map[int64][]byte{}
	l, err := Open(fsys, testDir, cfg)
	if err != nil {
		return acked, err
	}
	defer l.Close()
	var unacked []appendedBatch
	for i := 0; i < n; i++ {
		b := batch(1+i%3, 150+i*20, int64(i))
		res, err := l.Append(b)
		if err != nil {
			if refused != nil && refused(err) {
				continue
			}
			return acked, err
		}
		unacked = append(unacked, appendedBatch{res.BaseOffset, res.LastOffset, bytes.Clone(b)})
		if i%2 == 1 {
			clk.Advance(700 * time.Millisecond)
			if err := l.Sync(context.Background(), res.LastOffset); err != nil {
				return acked, err
			}
			for _, u := range unacked {
				acked[u.base] = u.data
			}
			unacked = nil
		}
	}
	return acked, l.Close()
}

// killable returns fsys seen through a faultfs that a process crash can
// kill: once *dead is set every call fails, as if the process were gone,
// while its unsynced writes stay visible.
func killable(fsys volume.FS) (volume.FS, *bool) {
	dead := new(bool)
	return faultfs.New(fsys, func(faultfs.Op) faultfs.Action {
		if *dead {
			return faultfs.CrashBefore
		}
		return faultfs.Proceed
	}), dead
}

type appendedBatch struct {
	base, last int64
	data       []byte
}

// TestCrashAtEveryMutation crashes a fixed workload (open, appends with
// rolls and checkpoints, syncs, close) at every mutating filesystem
// operation, before and after it, and checks that what survives opens under
// a new epoch with every acknowledged batch intact.
func TestCrashAtEveryMutation(t *testing.T) {
	workload := func(fsys volume.FS, clk *fakeClock) (map[int64][]byte, error) {
		cfg := Config{Epoch: 1, SegmentBytes: 1500, IndexIntervalBytes: 200,
			CheckpointInterval: time.Second, Now: clk.Now, Logger: logr.Discard()}
		return ackedWorkload(fsys, cfg, clk, 12, nil)
	}

	crashSweep(t, 20, workload, func(t *testing.T, disk *memfs.FS, clk *fakeClock, acked map[int64][]byte, i int) {
		for _, epoch := range []int32{1, 2} {
			l, err := Open(disk, testDir, Config{Epoch: epoch, SegmentBytes: 1500, IndexIntervalBytes: 200, Now: clk.Now, Logger: logr.Discard()})
			if err != nil {
				t.Fatalf("Open after crash at op %d (epoch %d): %v", i, epoch, err)
			}
			checkAcked(t, l, acked, fmt.Sprintf("crash at mutating op %d, reopened at epoch %d", i, epoch))
			res, err := l.Append(batch(1, 10, 1))
			if err == nil {
				err = l.Sync(context.Background(), res.LastOffset)
			}
			if err != nil {
				t.Fatalf("append after recovery: %v", err)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

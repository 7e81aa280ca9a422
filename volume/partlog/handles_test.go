package partlog

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/handles"
	"github.com/kaas-dev/kaas/volume/memfs"
)

// openWithCache opens the log in dir (created) on mem with the cache hc.
func openWithCache(t *testing.T, fsys volume.FS, mem *memfs.FS, dir string, clk *fakeClock, hc *handles.Cache) *Log {
	t.Helper()
	if err := volume.MkdirAllSync(mem, dir); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, 1, clk)
	cfg.Logger = logr.Discard()
	cfg.SegmentBytes = 2000
	cfg.Handles = hc
	l, err := Open(fsys, dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestIdleLogsHoldNoFiles: logs that took appends and syncs hold no open
// file once idle (two sweeps), however many sealed segments they have; a
// log with appends not yet fsynced keeps its active segment's handles
// until a round has fsynced them.
func TestIdleLogsHoldNoFiles(t *testing.T) {
	clk := newFakeClock()
	mem := memfs.New()
	hc := handles.NewCache(1000, time.Minute, true)
	var ls []*Log
	for i := 0; i < 10; i++ {
		l := openWithCache(t, mem, mem, fmt.Sprintf("p%d", i), clk, hc)
		for k := 0; k < 8; k++ { // several rolls
			res := mustAppend(t, l, batch(1, 400, int64(k)))
			mustSync(t, l, res.LastOffset)
		}
		if _, err := l.Read(0, 100, nil); err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	if st := hc.Stats(); st.Open == 0 {
		t.Fatalf("nothing open while active: %+v", st)
	}
	dirty := ls[0]
	mustAppend(t, dirty, batch(1, 10, 1))
	hc.Sweep()
	hc.Sweep()
	if st := hc.Stats(); st.Open != 2 {
		t.Fatalf("idle: %d files open, want only the unsynced log's append and sync handles", st.Open)
	}
	mustSync(t, dirty, dirty.LogEndOffset()-1)
	hc.Sweep()
	hc.Sweep()
	if st := hc.Stats(); st.Open != 0 {
		t.Fatalf("idle and synced: %d files open, want 0", st.Open)
	}
	// Everything reads and appends again, reopening on demand.
	for _, l := range ls {
		if got := len(readAll(t, l, 0)); got < 8 {
			t.Fatalf("read back %d batches", got)
		}
		res := mustAppend(t, l, batch(1, 10, 1))
		mustSync(t, l, res.LastOffset)
		mustClose(t, l)
	}
	if st := hc.Stats(); st.Open != 0 {
		t.Fatalf("after Close: %d files open", st.Open)
	}
}

// TestRefPinsItsFile: a Ref's file stays open under any pressure on the
// cache until the Ref is released, across Close too.
func TestRefPinsItsFile(t *testing.T) {
	clk := newFakeClock()
	mem := memfs.New()
	hc := handles.NewCache(1, 0, true)
	l := openWithCache(t, mem, mem, "a", clk, hc)
	var want []byte
	for k := 0; k < 6; k++ {
		b := batch(1, 400, int64(k))
		res := mustAppend(t, l, b) // stamps b in place
		want = append(want, b...)
		mustSync(t, l, res.LastOffset)
	}
	ref, err := l.ReadRef(0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	// Pressure: another log's files, and reads of every segment of this one.
	other := openWithCache(t, mem, mem, "b", clk, hc)
	for k := 0; k < 6; k++ {
		res := mustAppend(t, other, batch(1, 400, int64(k)))
		mustSync(t, other, res.LastOffset)
	}
	readAll(t, l, 0)
	mustClose(t, l)
	got := make([]byte, ref.Len)
	if _, err := ref.File.ReadAt(got, ref.Pos); err != nil {
		t.Fatalf("reading a live Ref's file after pressure and Close: %v", err)
	}
	if !bytes.Equal(got, want[:ref.Len]) {
		t.Fatal("a live Ref's bytes changed")
	}
	ref.Release()
	if _, err := ref.File.ReadAt(got, ref.Pos); err == nil {
		t.Fatal("the Ref's file is still open after its release on a closed log")
	}
	mustClose(t, other)
	if st := hc.Stats(); st.Open != 0 {
		t.Fatalf("%d files open after both logs closed", st.Open)
	}
}

// TestCrashWithEvictions: the random crash interleavings with a cache of
// one file, swept at random: every handle is closed and reopened between
// appends, syncs and reads; every acknowledged batch survives every crash.
func TestCrashWithEvictions(t *testing.T) {
	for seed := uint64(1); seed <= 12; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 99))
			clk := newFakeClock()
			mem := newMemFS(t)
			hc := handles.NewCache(1, time.Minute, true)
			epoch := int32(1)
			cfg := func() Config {
				return Config{Epoch: epoch, SegmentBytes: 3000, IndexIntervalBytes: 256, CheckpointInterval: time.Second,
					SegmentAge: time.Hour, Now: clk.Now, Logger: logr.Discard(), Handles: hc}
			}
			var dead *bool
			instance := func() volume.FS {
				fsys, d := killable(mem)
				dead = d
				return fsys
			}
			l := mustOpen(t, instance(), cfg())
			acked := map[int64][]byte{}
			var pending []appendedBatch
			for step := 0; step < 200; step++ {
				switch r := rng.IntN(20); {
				case r < 9:
					b := batch(1+rng.IntN(3), 10+rng.IntN(300), int64(rng.IntN(1000)))
					res := mustAppend(t, l, b)
					pending = append(pending, appendedBatch{res.BaseOffset, res.LastOffset, bytes.Clone(b)})
				case r < 13:
					if len(pending) > 0 {
						last := pending[len(pending)-1].last
						mustSync(t, l, last)
						for _, p := range pending {
							acked[p.base] = p.data
						}
						pending = nil
					}
				case r < 15:
					hc.Sweep()
				case r < 17:
					clk.Advance(700 * time.Millisecond)
					if hw := l.HighWatermark(); hw > l.LogStartOffset() {
						checkRefRead(t, l, rng.Int64N(hw))
					}
				case r < 18:
					mem = mem.CrashClone() // power loss: only what was synced
					_ = l.Close()
					epoch++
					l = mustOpen(t, instance(), cfg())
					acked, pending = checkAcked(t, l, acked, fmt.Sprintf("step %d", step)), nil
				default:
					*dead = true // process crash
					_ = l.Close()
					l = mustOpen(t, instance(), cfg())
					acked, pending = checkAcked(t, l, acked, fmt.Sprintf("step %d", step)), nil
				}
			}
			mustClose(t, l)
			if st := hc.Stats(); st.Open != 0 || st.Evictions == 0 {
				t.Fatalf("after Close: %+v, want nothing open and files evicted on the way", st)
			}
		})
	}
}

// checkRefRead reads a Ref at offset and checks it starts with a batch.
func checkRefRead(t *testing.T, l *Log, offset int64) {
	t.Helper()
	ref, err := l.ReadRef(offset, 4096)
	if err != nil {
		t.Fatalf("ReadRef(%d): %v", offset, err)
	}
	defer ref.Release()
	if ref.Len == 0 {
		return
	}
	buf := make([]byte, ref.Len)
	if _, err := ref.File.ReadAt(buf, ref.Pos); err != nil && err != io.EOF {
		t.Fatalf("reading Ref at %d: %v", offset, err)
	}
	if _, err := ParseBatchHeader(buf); err != nil {
		t.Fatalf("Ref at %d: %v", offset, err)
	}
}

package partlog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/faultfs"
	"github.com/kaas-dev/kaas/volume/memfs"
)

// gateFS holds the next manifest write (the exclusive create of its temp
// file) once armed, until released, so a
// test can make one writer's manifest write land at a chosen moment.
type gateFS struct {
	volume.FS
	mu      sync.Mutex
	armed   bool
	reached chan struct{}
	release chan struct{}
}

func newGateFS(inner volume.FS) *gateFS {
	return &gateFS{FS: inner, reached: make(chan struct{}), release: make(chan struct{})}
}

func (g *gateFS) arm() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed = true
}

func (g *gateFS) CreateExclusive(name string) (volume.File, error) {
	if strings.HasPrefix(path.Base(name), ".manifest") {
		g.mu.Lock()
		hold := g.armed
		g.armed = false
		g.mu.Unlock()
		if hold {
			close(g.reached)
			<-g.release
		}
	}
	return g.FS.CreateExclusive(name)
}

// TestStaleManifestWriteLandsLate is the check-then-act race of a fenced
// writer's manifest write: writer 1 passes its fence check, writer 2 takes
// over, seals writer 1's segment and acknowledges data in its own segment,
// then writer 1's manifest write lands. Writer 2 crashes before its next
// checkpoint. Epoch 3 must find everything writer 2 acknowledged and nothing
// writer 1 appended after the fence.
func TestStaleManifestWriteLandsLate(t *testing.T) {
	clk := newFakeClock()
	mem := newMemFS(t)
	gate := newGateFS(mem)
	acked := map[int64][]byte{}

	old := mustOpen(t, gate, testConfig(t, 1, clk))
	appendAcked(t, old, acked, 3, 100, 10)

	// A round of epoch 1 that checkpoints: its fence check passes, then its
	// manifest write is held before it creates its temp file (after the
	// fence check, and after epoch 2's Open sweeps temp files).
	b := batch(2, 100, 20)
	res := mustAppend(t, old, b)
	clk.Advance(2 * time.Second)
	gate.arm()
	synced := make(chan error, 1)
	go func() { synced <- old.Sync(context.Background(), res.LastOffset) }()
	<-gate.reached

	// Epoch 2 takes over meanwhile and acknowledges data.
	newer := mustOpen(t, mem, testConfig(t, 2, clk))
	zombie := batch(3, 100, 30)
	zres, err := old.Append(zombie) // after the fence and the seal: never to be read
	if err != nil {
		t.Fatalf("zombie append: %v", err)
	}
	appendAcked(t, newer, acked, 4, 100, 40) // the clock does not move: no checkpoint after Open

	// Now epoch 1's manifest write lands.
	close(gate.release)
	if err := <-synced; err != nil {
		t.Fatalf("epoch 1 Sync of a batch fenced-checked before the takeover: %v", err)
	}
	acked[res.BaseOffset] = bytes.Clone(b) // checked before the fence moved: acknowledged
	if err := old.Sync(context.Background(), zres.LastOffset); !errors.Is(err, ErrFenced) {
		t.Fatalf("epoch 1 Sync after the takeover = %v, want ErrFenced", err)
	}
	_ = old.Close()

	disk := mem.CrashClone() // epoch 2 dies before its next checkpoint
	_ = newer.Close()
	// The race happened: epoch 1's manifest was written after epoch 2's
	// Open had removed it.
	if got := manifestFiles(t, disk); !slices.Equal(got, []string{manifestName(1), manifestName(2)}) {
		t.Fatalf("manifests on disk before epoch 3 = %v", got)
	}

	l3 := mustOpen(t, disk, testConfig(t, 3, clk))
	defer l3.Close()
	checkExactly(t, l3, acked, "open at epoch 3 after a late stale manifest write")
	segs := l3.Segments()
	if len(segs) != 3 || segs[0].Epoch != 1 || !segs[0].Sealed || segs[1].Epoch != 2 || segs[1].Base != zres.BaseOffset || segs[2].Epoch != 3 {
		t.Fatalf("segments %+v", segs)
	}
	if got := manifestFiles(t, disk); !slices.Equal(got, []string{manifestName(3)}) {
		t.Fatalf("manifests after epoch 3's Open = %v, want only its own", got)
	}
}

// checkExactly fails unless the log holds exactly the acknowledged batches:
// none lost or changed, and no other batch readable.
func checkExactly(t testing.TB, l *Log, acked map[int64][]byte, context string) {
	t.Helper()
	got := checkAcked(t, l, acked, context)
	if !maps.EqualFunc(got, acked, bytes.Equal) {
		for base, data := range got {
			if !bytes.Equal(acked[base], data) {
				h, _ := ParseBatchHeader(data)
				t.Errorf("%s: offset %d holds a batch of epoch %d that was never acknowledged", context, base, h.PartitionLeaderEpoch)
			}
		}
		t.FailNow()
	}
	if hw := l.HighWatermark(); hw != l.LogEndOffset() {
		t.Fatalf("%s: HW %d != LEO %d", context, hw, l.LogEndOffset())
	}
}

// manifestFiles lists the manifest files (either form) in the partition
// directory, sorted.
func manifestFiles(t testing.TB, fsys volume.FS) []string {
	t.Helper()
	entries, err := fsys.ReadDir(testDir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if _, ok := parseManifestName(e.Name()); ok || e.Name() == legacyManifestName {
			out = append(out, e.Name())
		}
	}
	return out
}

// appendAcked appends n batches to l and syncs them, recording them in acked.
func appendAcked(t testing.TB, l *Log, acked map[int64][]byte, n, size int, ts int64) {
	t.Helper()
	var last int64
	for i := 0; i < n; i++ {
		b := batch(2, size, ts+int64(i))
		res := mustAppend(t, l, b)
		acked[res.BaseOffset] = bytes.Clone(b)
		last = res.LastOffset
	}
	mustSync(t, l, last)
}

// TestAdoptLegacyManifest opens directories written with the single
// manifest.json: its checkpoint is used (only the tail after it is read),
// it is migrated to the epoch's manifest and removed once that is durable,
// and a stale legacy manifest written later by an older binary is ignored.
func TestAdoptLegacyManifest(t *testing.T) {
	for _, epoch := range []int32{1, 2} {
		t.Run(fmt.Sprintf("reopen at epoch %d", epoch), func(t *testing.T) {
			clk := newFakeClock()
			mem := newMemFS(t)
			cfg := testConfig(t, 1, clk)
			cfg.SegmentBytes = 4096
			acked := map[int64][]byte{}
			l := mustOpen(t, mem, cfg)
			appendAcked(t, l, acked, 30, 300, 100) // several segments
			mustClose(t, l)                        // final checkpoint
			// The same bytes an older binary wrote, under the old name.
			if err := mem.Rename(path.Join(testDir, manifestName(1)), path.Join(testDir, legacyManifestName)); err != nil {
				t.Fatal(err)
			}
			if got := manifestFiles(t, mem); !slices.Equal(got, []string{legacyManifestName}) {
				t.Fatalf("manifests %v", got)
			}
			var tail int64
			for i := 0; i < 3; i++ {
				b := batch(2, 300, int64(i))
				tail += int64(len(b))
				appendRaw(t, mem, lastSegmentPath(t, mem), stamped(b, l.LogEndOffset()+int64(2*i), 1))
				acked[l.LogEndOffset()+int64(2*i)] = stamped(b, l.LogEndOffset()+int64(2*i), 1)
			}

			cfs := &countingFS{FS: mem}
			cfg.Epoch = epoch
			l2 := mustOpen(t, cfs, cfg)
			if read := cfs.logBytes.Load(); read != tail {
				t.Fatalf("Open read %d bytes of segment data; the tail after the legacy checkpoint is %d", read, tail)
			}
			checkExactly(t, l2, acked, "open over a legacy manifest")
			if got := manifestFiles(t, mem); !slices.Equal(got, []string{manifestName(epoch)}) {
				t.Fatalf("manifests after migration = %v, want only %s", got, manifestName(epoch))
			}
			appendAcked(t, l2, acked, 3, 300, 200)
			mustClose(t, l2)

			// An older binary still running at epoch 1 writes its legacy
			// manifest late: it names a lower epoch, so it is ignored (and
			// removed by the next Open).
			stale := &manifest{Version: manifestVersion, WriterEpoch: 1, Segments: []manifestSegment{{Base: 0, Epoch: 1}}}
			data, _ := json.Marshal(stale)
			if err := volume.WriteFileAtomic(mem, path.Join(testDir, legacyManifestName), data); err != nil {
				t.Fatal(err)
			}
			cfg.Epoch = epoch + 1
			l3 := mustOpen(t, mem, cfg)
			defer l3.Close()
			checkExactly(t, l3, acked, "open with a stale legacy manifest beside a newer one")
			if got := manifestFiles(t, mem); !slices.Equal(got, []string{manifestName(epoch + 1)}) {
				t.Fatalf("manifests = %v", got)
			}
		})
	}
}

// stamped returns a copy of b stamped with base offset and leader epoch, as
// Append would write it.
func stamped(b []byte, base int64, epoch int32) []byte {
	c := bytes.Clone(b)
	stampBatch(c, base, epoch)
	return c
}

// lastSegmentPath returns the path of the segment file with the highest base
// offset in the partition directory.
func lastSegmentPath(t testing.TB, fsys volume.FS) string {
	t.Helper()
	entries, err := fsys.ReadDir(testDir)
	if err != nil {
		t.Fatal(err)
	}
	last, lastBase := "", int64(-1)
	for _, e := range entries {
		if base, _, ok := parseSegmentName(e.Name()); ok && base >= lastBase {
			last, lastBase = e.Name(), base
		}
	}
	return path.Join(testDir, last)
}

// TestNewerSegmentWithoutManifest: segment files of an epoch newer than the
// newest readable manifest are adopted, never ignored.
func TestNewerSegmentWithoutManifest(t *testing.T) {
	// Epoch 2 dies in Open after creating its segment, before its manifest
	// is durable: its empty segment is adopted and replaced by epoch 3's.
	t.Run("empty, writer died in Open", func(t *testing.T) {
		clk := newFakeClock()
		mem := newMemFS(t)
		acked := map[int64][]byte{}
		l := mustOpen(t, mem, testConfig(t, 1, clk))
		appendAcked(t, l, acked, 5, 100, 1)
		disk := mem.CrashClone() // epoch 1 dies too, without a final checkpoint
		_ = l.Close()

		ffs := faultfs.New(disk, func(op faultfs.Op) faultfs.Action {
			if op.Kind == faultfs.OpCreateExclusive && strings.HasPrefix(path.Base(op.Path), "."+manifestName(2)) {
				return faultfs.CrashBefore
			}
			return faultfs.Proceed
		})
		if _, err := Open(ffs, testDir, testConfig(t, 2, clk)); !errors.Is(err, faultfs.ErrCrashed) {
			t.Fatalf("Open at epoch 2 = %v, want the injected crash", err)
		}
		disk = disk.CrashClone()
		e2 := segmentStem(10, 2) + segmentExt
		if _, err := disk.Stat(path.Join(testDir, e2)); err != nil {
			t.Fatalf("epoch 2's segment %s is not on disk: %v", e2, err)
		}

		l3 := mustOpen(t, disk, testConfig(t, 3, clk))
		defer l3.Close()
		checkExactly(t, l3, acked, "open at epoch 3")
		want := []SegmentInfo{{Base: 0, EndOffset: 10, Epoch: 1, Size: l3.Segments()[0].Size, Sealed: true}, {Base: 10, EndOffset: 10, Epoch: 3}}
		if got := l3.Segments(); !slices.Equal(got, want) {
			t.Fatalf("segments %+v, want %+v", got, want)
		}
		if got := l3.EpochHistory(); !slices.Equal(got, []EpochEntry{{1, 0}, {3, 10}}) {
			t.Fatalf("epoch history %v", got)
		}
		appendAcked(t, l3, acked, 1, 10, 1)
		checkExactly(t, l3, acked, "append at epoch 3")
	})

	// Epoch 2 acknowledged data across several segments, but its manifest is
	// gone (lost, or not yet in a stale listing) and epoch 1's is the newest
	// readable one, possibly with a checkpoint or a sealed end claiming a
	// fenced writer's late appends. Epoch 3 adopts epoch 2's segments,
	// reading only them and epoch 1's tail up to where epoch 2 sealed it.
	for _, stale := range []string{"none", "checkpoint", "seal"} {
		t.Run("acknowledged data, stale "+stale, func(t *testing.T) {
			clk := newFakeClock()
			mem := newMemFS(t)
			acked := map[int64][]byte{}
			cfg := testConfig(t, 1, clk)
			cfg.SegmentBytes = 2048
			l1 := mustOpen(t, mem, cfg)
			appendAcked(t, l1, acked, 20, 150, 1) // epoch 1 rolls a few times
			clk.Advance(2 * time.Second)
			appendAcked(t, l1, acked, 2, 150, 30) // checkpoint in the last segment
			e1Manifest, err := volume.ReadFile(mem, path.Join(testDir, manifestName(1)))
			if err != nil {
				t.Fatal(err)
			}
			e1Segs := l1.Segments()
			e1Tail := e1Segs[len(e1Segs)-1]

			cfg.Epoch = 2
			l2 := mustOpen(t, mem, cfg)
			appendAcked(t, l2, acked, 25, 150, 40) // several epoch 2 segments
			disk := mem.CrashClone()
			e2Segs := l2.Segments()
			_ = l2.Close()
			_ = l1.Close()

			// Epoch 1's late appends, after the seal.
			e1Path, _, _ := segID{base: e1Tail.Base, epoch: e1Tail.Epoch}.paths(testDir)
			zombie := stamped(batch(2, 150, 99), e1Tail.EndOffset, 1)
			appendRaw(t, disk, e1Path, zombie)
			// Epoch 2's manifest is gone; epoch 1's is back.
			if err := disk.Remove(path.Join(testDir, manifestName(2))); err != nil {
				t.Fatal(err)
			}
			m := &manifest{}
			if err := json.Unmarshal(e1Manifest, m); err != nil {
				t.Fatal(err)
			}
			switch stale {
			case "checkpoint": // as if epoch 1 had checkpointed its late appends
				m.Checkpoint.Position = e1Tail.Size + int64(len(zombie))
				m.Checkpoint.NextOffset = e1Tail.EndOffset + 2
			case "seal": // as if epoch 1 had rolled after them
				last := &m.Segments[len(m.Segments)-1]
				last.Sealed, last.EndOffset, last.Size = true, e1Tail.EndOffset+2, e1Tail.Size+int64(len(zombie))
				last.MaxTimestamp, last.MaxTimestampOffset = 99, e1Tail.EndOffset+1
				m.Segments = append(m.Segments, manifestSegment{Base: e1Tail.EndOffset + 2, Epoch: 1})
				m.Checkpoint = checkpoint{SegmentBase: e1Tail.EndOffset + 2, SegmentEpoch: 1, NextOffset: e1Tail.EndOffset + 2}
			}
			if err := writeManifest(disk, testDir, m); err != nil {
				t.Fatal(err)
			}

			var newerBytes int64
			for _, s := range e2Segs {
				if s.Epoch == 2 {
					newerBytes += s.Size
				}
			}
			if len(e2Segs)-len(e1Segs) < 3 {
				t.Fatalf("epoch 2 wrote only %d segments", len(e2Segs)-len(e1Segs))
			}
			cfs := &countingFS{FS: disk}
			cfg.Epoch = 3
			l3 := mustOpen(t, cfs, cfg)
			defer l3.Close()
			read := cfs.logBytes.Load()
			// Epoch 1's tail from its checkpoint (from its start if the
			// checkpoint is past the cut) up to the cut, then epoch 2's
			// segments; never epoch 1's sealed segments.
			if limit := newerBytes + e1Tail.Size; read < newerBytes || read > limit {
				t.Fatalf("Open read %d bytes of segment data, want %d..%d", read, newerBytes, limit)
			}
			checkExactly(t, l3, acked, "open at epoch 3 without epoch 2's manifest")
			got := l3.Segments()
			if len(got) != len(e2Segs)+1 {
				t.Fatalf("segments %+v, want epoch 2's %+v and a new one", got, e2Segs)
			}
			for i, s := range e2Segs {
				if got[i].Base != s.Base || got[i].Epoch != s.Epoch || got[i].EndOffset != s.EndOffset || got[i].Size != s.Size || !got[i].Sealed {
					t.Fatalf("segment %d: %+v, want %+v sealed", i, got[i], s)
				}
			}
			if hist := l3.EpochHistory(); !slices.Equal(hist, []EpochEntry{{1, 0}, {2, e1Tail.EndOffset}, {3, l3.LogEndOffset()}}) {
				t.Fatalf("epoch history %v", hist)
			}
			mustClose(t, l3)
			// Converged: the next open uses epoch 3's manifest and reads nothing.
			cfs = &countingFS{FS: disk}
			cfg.Epoch = 4
			l4 := mustOpen(t, cfs, cfg)
			defer l4.Close()
			if read := cfs.logBytes.Load(); read != 0 {
				t.Fatalf("reopen read %d bytes of segment data", read)
			}
			checkExactly(t, l4, acked, "reopen at epoch 4")
		})
	}
}

// TestCrashAtEveryMutationAcrossTakeover crashes a takeover workload at
// every mutating filesystem operation, before and after it: epoch 1 writes,
// epoch 2 takes over while epoch 1 keeps appending (and its checkpoint
// rounds keep writing its manifest until the fence stops them), epoch 2
// writes across rolls and checkpoints. Whatever survives must open at
// epoch 3 with every acknowledged batch intact.
func TestCrashAtEveryMutationAcrossTakeover(t *testing.T) {
	workload := func(fsys volume.FS, clk *fakeClock) (map[int64][]byte, error) {
		acked := map[int64][]byte{}
		cfg := func(epoch int32) Config {
			return Config{Epoch: epoch, SegmentBytes: 1200, IndexIntervalBytes: 200,
				CheckpointInterval: time.Second, Now: clk.Now, Logger: logr.Discard()}
		}
		write := func(l *Log, n int, ts int64) error {
			var pending []appendedBatch
			for i := 0; i < n; i++ {
				b := batch(1+i%2, 120+i*10, ts+int64(i))
				res, err := l.Append(b)
				if err != nil {
					return err
				}
				pending = append(pending, appendedBatch{res.BaseOffset, res.LastOffset, bytes.Clone(b)})
				if i%2 == 1 {
					clk.Advance(600 * time.Millisecond)
					if err := l.Sync(context.Background(), res.LastOffset); err != nil {
						return err
					}
					for _, p := range pending {
						acked[p.base] = p.data
					}
					pending = nil
				}
			}
			return nil
		}
		l1, err := Open(fsys, testDir, cfg(1))
		if err != nil {
			return acked, err
		}
		defer l1.Close()
		if err := write(l1, 8, 0); err != nil {
			return acked, err
		}
		l2, err := Open(fsys, testDir, cfg(2))
		if err != nil {
			return acked, err
		}
		defer l2.Close()
		_ = write(l1, 4, 50) // fenced: appends land, nothing is acknowledged
		if err := write(l2, 10, 100); err != nil {
			return acked, err
		}
		_ = l1.Close()
		return acked, l2.Close()
	}

	crashSweep(t, 40, workload, func(t *testing.T, disk *memfs.FS, clk *fakeClock, acked map[int64][]byte, i int) {
		l, err := Open(disk, testDir, Config{Epoch: 3, SegmentBytes: 1200, IndexIntervalBytes: 200, Now: clk.Now, Logger: logr.Discard()})
		if err != nil {
			t.Fatalf("Open after crash at op %d: %v", i, err)
		}
		checkAcked(t, l, acked, fmt.Sprintf("crash at mutating op %d, reopened at epoch 3", i))
		appendAcked(t, l, acked, 1, 10, 1)
		mustClose(t, l)
		if got := manifestFiles(t, disk); !slices.Equal(got, []string{manifestName(3)}) {
			t.Fatalf("manifests after epoch 3 = %v", got)
		}
	})
}

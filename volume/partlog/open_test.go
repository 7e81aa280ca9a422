package partlog

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/faultfs"
	"github.com/kaas-dev/kaas/volume/memfs"
)

// opLog records every operation a faultfs sees.
type opLog struct{ ops []faultfs.Op }

func (o *opLog) injector(op faultfs.Op) faultfs.Action {
	o.ops = append(o.ops, op)
	return faultfs.Proceed
}

// syncs counts the file fsyncs by the extension of the file (".log",
// ".index", ".timeindex", "temp" for WriteFileAtomic's temps) and the
// directory fsyncs ("dir").
func (o *opLog) syncs() map[string]int {
	out := map[string]int{}
	for _, op := range o.ops {
		switch {
		case op.Kind == faultfs.OpSyncDir:
			out["dir"]++
		case op.Kind != faultfs.OpSync:
		case volume.IsTempName(path.Base(op.Path)):
			out["temp"]++
		default:
			out[path.Ext(op.Path)]++
		}
	}
	return out
}

// first returns the index in o.ops of the first op that matches, -1 if none.
func (o *opLog) first(match func(faultfs.Op) bool) int {
	return slices.IndexFunc(o.ops, match)
}

// openRecorded opens the log on mem through a recording faultfs.
func openRecorded(t *testing.T, mem volume.FS, cfg Config) (*Log, *opLog) {
	t.Helper()
	rec := &opLog{}
	l, err := Open(faultfs.New(mem, rec.injector), testDir, cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return l, rec
}

// TestOpenFsyncs: what Open fsyncs on each path. A brand-new partition
// costs the fence's temp file and one directory fsync (its manifest waits
// for its first checkpoint); a takeover of a cleanly closed log fsyncs no segment or index
// file; one of a log with unsynced appends past its checkpoint fsyncs the
// segment and the rebuilt indexes.
func TestOpenFsyncs(t *testing.T) {
	clk := newFakeClock()
	cfg := func(epoch int32) Config {
		c := testConfig(t, epoch, clk)
		c.IndexIntervalBytes = 64
		return c
	}
	mem := newMemFS(t)

	l, rec := openRecorded(t, mem, cfg(1))
	if got := fmt.Sprint(rec.syncs()); got != "map[dir:1 temp:1]" {
		t.Errorf("new partition: fsyncs %s, want the fence's temp and the directory after the segment (no manifest before the first checkpoint)", got)
	}
	if n := len(rec.ops); n > 25 {
		t.Errorf("new partition: %d operations: %v", n, rec.ops)
	}
	for i := 0; i < 4; i++ {
		res := mustAppend(t, l, batch(2, 100, int64(i)))
		mustSync(t, l, res.LastOffset)
	}
	mustClose(t, l)

	l, rec = openRecorded(t, mem, cfg(2))
	if got := fmt.Sprint(rec.syncs()); got != "map[dir:3 temp:2]" {
		t.Errorf("takeover of a closed log: fsyncs %s, want the fence's and manifest's temps, and the directory after the fence, the new segment and the manifest", got)
	}
	checkFenceOrder(t, rec)

	// Appends past the checkpoint that the writer never closed (a crash of
	// its process: the bytes are in the files, the checkpoint is older).
	for i := 0; i < 4; i++ {
		mustAppend(t, l, batch(2, 100, int64(i)))
	}
	mustSync(t, l, l.LogEndOffset()-1) // l stays open: its checkpoint stays where Open put it
	l3, rec := openRecorded(t, mem, cfg(3))
	if got := fmt.Sprint(rec.syncs()); got != "map[.index:1 .log:1 .timeindex:1 dir:4 temp:2]" {
		t.Errorf("takeover of a log with data past its checkpoint: fsyncs %s, want the segment and both indexes too, and the directory after their creation", got)
	}
	checkFenceOrder(t, rec)
	if hw := l3.HighWatermark(); hw != 16 {
		t.Fatalf("recovered high watermark %d, want 16", hw)
	}
	mustClose(t, l3)
	_ = l.Close()
}

// checkFenceOrder fails unless the takeover in rec made the fence durable
// (its rename, then a directory fsync) before it opened any segment file
// and before it renamed a manifest into place.
func checkFenceOrder(t *testing.T, rec *opLog) {
	t.Helper()
	fence := rec.first(func(op faultfs.Op) bool {
		return op.Kind == faultfs.OpRename && path.Base(op.NewPath) == fenceName
	})
	if fence < 0 {
		t.Fatal("no fence rename")
	}
	synced := slices.IndexFunc(rec.ops[fence:], func(op faultfs.Op) bool { return op.Kind == faultfs.OpSyncDir })
	if synced < 0 {
		t.Fatal("the fence is never made durable")
	}
	synced += fence
	readTail := rec.first(func(op faultfs.Op) bool {
		return (op.Kind == faultfs.OpOpenReadWrite || op.Kind == faultfs.OpOpen) && strings.HasSuffix(op.Path, segmentExt)
	})
	manifest := rec.first(func(op faultfs.Op) bool {
		_, ok := parseManifestName(path.Base(op.NewPath))
		return op.Kind == faultfs.OpRename && ok
	})
	if readTail >= 0 && readTail < synced {
		t.Errorf("the old tail is opened (op %d) before the fence is durable (op %d)", readTail, synced)
	}
	if manifest < synced {
		t.Errorf("the manifest is renamed (op %d) before the fence is durable (op %d)", manifest, synced)
	}
}

// TestNewPartitionLeanPathCrashSweep crashes a new partition's Open at
// every mutating operation, before and after it: whatever survives holds
// a manifest only beside a fence of its epoch, opens again at the same and
// at a higher epoch, and takes appends.
func TestNewPartitionLeanPathCrashSweep(t *testing.T) {
	workload := func(fsys volume.FS, clk *fakeClock) (map[int64][]byte, error) {
		l, err := Open(fsys, testDir, Config{Epoch: 1, Now: clk.Now, Logger: logr.Discard()})
		if err != nil {
			return nil, err
		}
		return nil, l.Close()
	}
	crashSweep(t, 6, workload, func(t *testing.T, disk *memfs.FS, clk *fakeClock, _ map[int64][]byte, op int) {
		checkManifestFenced(t, disk, op)
		for _, epoch := range []int32{1, 2} {
			l, err := Open(disk, testDir, Config{Epoch: epoch, Now: clk.Now, Logger: logr.Discard()})
			if err != nil {
				t.Fatalf("Open after a crash at op %d (epoch %d): %v", op, epoch, err)
			}
			res, err := l.Append(batch(1, 10, 1))
			if err == nil {
				err = l.Sync(context.Background(), res.LastOffset)
			}
			if err != nil {
				t.Fatalf("append after a crash at op %d (epoch %d): %v", op, epoch, err)
			}
			mustClose(t, l)
		}
	})
}

// checkManifestFenced fails if disk holds a manifest without a fence at
// least at the manifest's epoch.
func checkManifestFenced(t *testing.T, disk volume.FS, op int) {
	t.Helper()
	ents, err := disk.ReadDir(testDir)
	if err != nil {
		t.Fatal(err)
	}
	fence, err := readFence(disk, testDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if epoch, ok := parseManifestName(e.Name()); ok && fence < epoch {
			t.Fatalf("crash at op %d left %s durable with the fence at %d", op, e.Name(), fence)
		}
	}
}

// TestClaimFenceDeferred: a claimant that defers a new fence's directory
// fsync and says so to Open gets the lean path's fsyncs, and the fence is
// durable before the manifest; over an existing fence the claim is durable
// at once.
func TestClaimFenceDeferred(t *testing.T) {
	clk := newFakeClock()
	mem := newMemFS(t)
	prev, durable, err := ClaimFenceDeferred(mem, testDir, 1)
	if err != nil || prev != -1 || durable {
		t.Fatalf("ClaimFenceDeferred over no fence = %d, %v, %v; want -1, not durable", prev, durable, err)
	}
	if f, _ := readFence(mem.CrashClone(), testDir); f != -1 {
		t.Fatalf("the deferred fence is durable already (%d)", f)
	}
	cfg := testConfig(t, 1, clk)
	cfg.PreviousEpochs, cfg.FenceNotDurable = []int32{prev}, true
	l, rec := openRecorded(t, mem, cfg)
	if got := fmt.Sprint(rec.syncs()); got != "map[dir:1]" {
		t.Errorf("Open after a deferred claim: fsyncs %s, want only the directory after the segment's creation", got)
	}
	if f, _ := readFence(mem.CrashClone(), testDir); f != 1 {
		t.Fatalf("after Open the durable fence holds %d, want 1", f)
	}
	mustClose(t, l)

	prev, durable, err = ClaimFenceDeferred(mem, testDir, 2)
	if err != nil || prev != 1 || !durable {
		t.Fatalf("ClaimFenceDeferred over a fence = %d, %v, %v; want 1, durable", prev, durable, err)
	}
	if f, _ := readFence(mem.CrashClone(), testDir); f != 2 {
		t.Fatalf("a takeover's deferred claim is not durable (%d)", f)
	}
}

// TestOpenWithoutFenceOverOldState: a directory holding a log but no
// fence (lost, or never written by an older writer) is not taken for a new
// partition: the fence is durable before the old tail is read.
func TestOpenWithoutFenceOverOldState(t *testing.T) {
	clk := newFakeClock()
	mem := newMemFS(t)
	l := mustOpen(t, mem, testConfig(t, 1, clk))
	mustAppend(t, l, batch(2, 100, 1))
	mustSync(t, l, 1)
	mustClose(t, l)
	if err := mem.Remove(path.Join(testDir, fenceName)); err != nil {
		t.Fatal(err)
	}
	l, rec := openRecorded(t, mem, testConfig(t, 2, clk))
	defer mustClose(t, l)
	checkFenceOrder(t, rec)
	if hw := l.HighWatermark(); hw != 2 {
		t.Fatalf("high watermark %d, want 2", hw)
	}
}

// TestOpenListing: Open hands its listing on once.
func TestOpenListing(t *testing.T) {
	clk := newFakeClock()
	mem := newMemFS(t)
	l := mustOpen(t, mem, testConfig(t, 1, clk))
	mustClose(t, l)
	if err := volume.WriteFileAtomic(mem, path.Join(testDir, "00000000000000000000-e1.producers"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, mem, testConfig(t, 2, clk))
	defer mustClose(t, l)
	got := l.OpenListing()
	// No index files: the log never had an index entry.
	// and no manifest: the first epoch never checkpointed anything.
	want := []string{"00000000000000000000-e1.log", "00000000000000000000-e1.producers", "fence"}
	if !slices.Equal(got, want) {
		t.Fatalf("OpenListing = %v, want %v", got, want)
	}
	if again := l.OpenListing(); again != nil {
		t.Fatalf("a second OpenListing = %v, want nil", again)
	}
}

package groupstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/faultfs"
	"github.com/kaas-dev/kaas/volume/memfs"
	"github.com/kaas-dev/kaas/volume/partlog"
)

// history is a workload with overwrites, tombstones and a key that comes
// back after its tombstone.
var history = [][]Record{
	{put("g1", "meta-1"), put("g1/t/0", "10"), put("g1/t/1", "11")},
	{put("g1/t/0", "20"), tomb("g1/t/1"), put("g2", "meta-2")},
	{tomb("g2"), put("g1/t/1", "31"), {Key: []byte("empty"), Value: []byte{}}},
	{put("g1", "meta-1b")},
}

// TestAppendReload: what was acknowledged is the table after a clean
// close (loaded from the final snapshot) and after a crash (replayed from
// the log), in the log order of each key's last write.
func TestAppendReload(t *testing.T) {
	cases := []struct {
		name         string
		clean        bool
		wantSnapshot bool
	}{
		{"close", true, true},
		{"crash", false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mem := newVolume(t)
			s, st := openAt(t, mem, 1)
			if st.SnapshotOffset != -1 || st.LogEnd != 0 || st.ReplayedRecords != 0 {
				t.Fatalf("fresh shard stats %+v", st)
			}
			m := model{}
			for _, recs := range history {
				appendAcked(t, s, m, recs...)
			}
			checkTable(t, s, m)
			fsys := volume.FS(mem)
			if tc.clean {
				closeOK(t, s)
			} else {
				fsys = mem.CrashClone()
				defer s.Close()
			}
			s2, st := openAt(t, fsys, 2)
			defer closeOK(t, s2)
			checkTable(t, s2, m)
			if st.LogEnd != 10 {
				t.Fatalf("log end %d, want 10", st.LogEnd)
			}
			if tc.wantSnapshot && (st.SnapshotOffset != 10 || st.ReplayedRecords != 0 || st.SnapshotRecords != len(m)) {
				t.Fatalf("stats %+v: want everything from the final snapshot", st)
			}
			if !tc.wantSnapshot && (st.SnapshotOffset != -1 || st.ReplayedRecords != 10) {
				t.Fatalf("stats %+v: want a full replay", st)
			}
			_, order := tableOf(t, s2)
			if want := []string{"g1/t/0", "g1/t/1", "empty", "g1"}; !slices.Equal(order, want) {
				t.Fatalf("order %v, want %v (log order of the last write)", order, want)
			}
		})
	}
}

// TestAppendEmpty: no records, no batch.
func TestAppendEmpty(t *testing.T) {
	s, _ := openAt(t, newVolume(t), 1)
	defer closeOK(t, s)
	off, wait, err := s.Append(nil)
	if err != nil || off != 0 || wait(context.Background()) != nil || s.LogEnd() != 0 {
		t.Fatalf("empty append: %d, %v, log end %d", off, err, s.LogEnd())
	}
}

// waitSnapshots waits for a background snapshot in flight.
func waitSnapshots(s *Store) {
	s.snapSem <- struct{}{}
	<-s.snapSem
}

// TestSnapshotEveryBytes: a snapshot follows every SnapshotEveryBytes of
// appends, only the newest two are kept, and a reopen loads the newest and
// replays only what follows it.
func TestSnapshotEveryBytes(t *testing.T) {
	mem := newVolume(t)
	every := func(c *Config) { c.SnapshotEveryBytes = 500 }
	s, _ := openAt(t, mem, 1, every)
	m := model{}
	var snaps [][]snapshotFile
	want, since := 0, 0
	for i := 0; i < 40; i++ {
		recs := []Record{put(fmt.Sprintf("k%d", i%7), fmt.Sprintf("v%d", i)), tomb(fmt.Sprintf("k%d", (i+3)%7))}
		if since += batchSize(recs); since > 500 {
			want, since = want+1, 0
		}
		appendAcked(t, s, m, recs...)
		waitSnapshots(s)
		snaps = append(snaps, snapshotNames(t, mem))
	}
	last := snaps[len(snaps)-1]
	if len(last) != 2 {
		t.Fatalf("snapshots kept: %v, want the newest two", last)
	}
	if last[0].offset <= last[1].offset || last[0].epoch != 1 {
		t.Fatalf("snapshots %v", last)
	}
	written := 0
	newestOf := func(fs []snapshotFile) int64 {
		if len(fs) == 0 {
			return -1
		}
		return fs[0].offset
	}
	for i := range snaps {
		if i == 0 && len(snaps[0]) > 0 || i > 0 && newestOf(snaps[i]) != newestOf(snaps[i-1]) {
			written++
		}
	}
	if written != want || want < 4 {
		t.Fatalf("%d snapshots written, want %d (one after every 500 bytes of batches)", written, want)
	}
	newest := last[0].offset
	end := s.LogEnd()
	// Reopen from a crash (no final snapshot): newest snapshot + tail.
	crashed := mem.CrashClone()
	_ = s.Close()
	s2, st := openAt(t, crashed, 2, every)
	defer closeOK(t, s2)
	checkTable(t, s2, m)
	if st.SnapshotOffset != newest || st.ReplayedRecords != int(end-newest) {
		t.Fatalf("stats %+v: want snapshot %d and %d replayed", st, newest, end-newest)
	}
}

// TestSnapshotSelection: the newest usable snapshot is loaded; torn,
// corrupt and mislabelled ones are skipped for the next older one, down to
// a full replay.
func TestSnapshotSelection(t *testing.T) {
	type fixture struct {
		mem   *memfs.FS
		m     model
		snaps []int64 // offsets of the epoch-1 snapshots written, oldest first
	}
	// Epoch 1 writes snapshots at 3 and 6 (keeping both), the log ends at 9.
	build := func(t *testing.T) fixture {
		mem := newVolume(t)
		s, _ := openAt(t, mem, 1)
		f := fixture{mem: mem, m: model{}}
		for i := 0; i < 3; i++ {
			appendAcked(t, s, f.m, put("a", fmt.Sprint(i)), put(fmt.Sprintf("k%d", i), "x"), tomb(fmt.Sprintf("k%d", i-1)))
			if i < 2 {
				if err := s.Snapshot(context.Background()); err != nil {
					t.Fatal(err)
				}
				f.snaps = append(f.snaps, s.LogEnd())
			}
		}
		f.mem = mem.CrashClone() // no final snapshot
		_ = s.Close()
		return f
	}
	write := func(t *testing.T, f fixture, name string, b []byte) {
		if err := volume.WriteFileAtomic(f.mem, path.Join(testDir, name), b); err != nil {
			t.Fatal(err)
		}
	}
	read := func(t *testing.T, f fixture, off int64) []byte {
		b, err := volume.ReadFile(f.mem, path.Join(testDir, SnapshotName(off, 1)))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cases := []struct {
		name    string
		prepare func(t *testing.T, f fixture)
		want    int64 // snapshot offset loaded
	}{
		{"newest", func(*testing.T, fixture) {}, 6},
		{"newest torn", func(t *testing.T, f fixture) {
			b := read(t, f, 6)
			write(t, f, SnapshotName(6, 1), b[:len(b)/2])
		}, 3},
		{"newest corrupt", func(t *testing.T, f fixture) {
			b := read(t, f, 6)
			b[snapshotHeaderSize+3] ^= 0x40
			write(t, f, SnapshotName(6, 1), b)
		}, 3},
		{"a snapshot under another offset's name", func(t *testing.T, f fixture) {
			write(t, f, SnapshotName(8, 1), read(t, f, 3))
		}, 6},
		{"another shard's snapshot", func(t *testing.T, f fixture) {
			write(t, f, SnapshotName(9, 1), EncodeSnapshot(4, 9, 1, []Record{put("a", "other shard")}))
		}, 6},
		{"empty file", func(t *testing.T, f fixture) { write(t, f, SnapshotName(9, 1), nil) }, 6},
		{"all bad: full replay", func(t *testing.T, f fixture) {
			for _, off := range f.snaps {
				write(t, f, SnapshotName(off, 1), []byte("garbage"))
			}
		}, -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := build(t)
			if !slices.Equal(f.snaps, []int64{3, 6}) {
				t.Fatalf("fixture snapshots at %v", f.snaps)
			}
			tc.prepare(t, f)
			s, st := openAt(t, f.mem, 2)
			defer closeOK(t, s)
			if st.SnapshotOffset != tc.want {
				t.Fatalf("loaded snapshot %d, want %d", st.SnapshotOffset, tc.want)
			}
			checkTable(t, s, f.m)
		})
	}
}

// TestZombieSnapshotRejected: a previous owner that keeps acknowledging
// after the takeover (the negative control without the fence re-check)
// writes a real snapshot past the end of its epoch. A later open must not
// use it, both while the new owner's log is shorter than its offset and
// after the new owner has appended past it, where only the epoch rule
// tells it apart.
func TestZombieSnapshotRejected(t *testing.T) {
	for _, newOwnerAppends := range []int{1, 12} {
		t.Run(fmt.Sprintf("new owner appends %d", newOwnerAppends), func(t *testing.T) {
			mem := newVolume(t)
			zombie, _ := openWith(t, mem, 1, []partlog.Option{partlog.UnsafeSkipFenceRecheck()})
			defer zombie.Close()
			m := model{}
			for i := 0; i < 3; i++ {
				appendAcked(t, zombie, m, put("g", fmt.Sprint(i)))
			}
			owner, st := openAt(t, mem, 2)
			defer owner.Close()
			checkTable(t, owner, m)
			sealed := st.LogEnd
			// The zombie goes on: its writes land past the sealed end.
			for i := 0; i < 5; i++ {
				appendAcked(t, zombie, nil, put("g", fmt.Sprintf("zombie-%d", i)), put("zombie", "x"))
			}
			if err := zombie.Snapshot(context.Background()); err != nil {
				t.Fatalf("zombie snapshot: %v", err)
			}
			zs := snapshotNames(t, mem)
			if len(zs) != 1 || zs[0].epoch != 1 || zs[0].offset != sealed+10 {
				t.Fatalf("zombie snapshots %v, want one at %d", zs, sealed+10)
			}
			for i := 0; i < newOwnerAppends; i++ {
				appendAcked(t, owner, m, put("g", fmt.Sprintf("owner-%d", i)))
			}
			if more := owner.LogEnd() > zs[0].offset; more != (newOwnerAppends > 10) {
				t.Fatalf("log end %d vs zombie snapshot %d: the case is not what it says", owner.LogEnd(), zs[0].offset)
			}
			// The next owner takes over from a live owner (so no final
			// snapshot of epoch 2 hides the zombie's).
			next, st := openAt(t, mem, 3)
			defer closeOK(t, next)
			if st.SnapshotOffset != -1 {
				t.Fatalf("loaded snapshot %d: the zombie's snapshot at %d was used", st.SnapshotOffset, zs[0].offset)
			}
			checkTable(t, next, m)
			if left := snapshotNames(t, mem); len(left) != 0 {
				t.Fatalf("zombie snapshot not removed: %v", left)
			}
		})
	}
}

// TestSameEpochSnapshotPastLogEnd: a snapshot of the opener's own epoch
// beyond the recovered log end (data lost with a torn tail) is removed
// before anything is appended, or the log would grow past it and make it
// look valid.
func TestSameEpochSnapshotPastLogEnd(t *testing.T) {
	mem := newVolume(t)
	s, _ := openAt(t, mem, 1)
	m := model{}
	appendAcked(t, s, m, put("a", "1"))
	closeOK(t, s)
	forged := SnapshotName(5, 2)
	if err := volume.WriteFileAtomic(mem, path.Join(testDir, forged), EncodeSnapshot(3, 5, 2, []Record{put("a", "lost")})); err != nil {
		t.Fatal(err)
	}
	s2, st := openAt(t, mem, 2)
	if st.SnapshotOffset != 1 {
		t.Fatalf("loaded %d, want the epoch-1 snapshot at 1", st.SnapshotOffset)
	}
	if _, err := mem.Stat(path.Join(testDir, forged)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("own-epoch snapshot past the log end still there: %v", err)
	}
	for i := 0; i < 6; i++ {
		appendAcked(t, s2, m, put("b", fmt.Sprint(i)))
	}
	closeOK(t, s2)
	s3, _ := openAt(t, mem, 3)
	defer closeOK(t, s3)
	checkTable(t, s3, m)
}

// TestFencedOwner: once a newer owner opened the shard, the old one's
// Append+wait fails with ErrFenced, OnFailure runs once, Err reports it,
// its late record is invisible and its Close writes no snapshot.
func TestFencedOwner(t *testing.T) {
	mem := newVolume(t)
	var failures atomic.Int32
	old, _ := openAt(t, mem, 1, func(c *Config) { c.OnFailure = func() { failures.Add(1) } })
	m := model{}
	appendAcked(t, old, m, put("a", "1"))
	owner, _ := openAt(t, mem, 2)
	for i := 0; i < 3; i++ {
		_, wait, err := old.Append([]Record{put("late", "x")})
		if err == nil {
			err = wait(context.Background())
		}
		if !errors.Is(err, partlog.ErrFenced) {
			t.Fatalf("late append %d: %v, want ErrFenced", i, err)
		}
	}
	if n := failures.Load(); n != 1 {
		t.Fatalf("OnFailure called %d times, want once", n)
	}
	if !errors.Is(old.Err(), partlog.ErrFenced) {
		t.Fatalf("Err = %v", old.Err())
	}
	before := snapshotNames(t, mem)
	if err := old.Close(); err == nil {
		t.Fatal("fenced store closed without an error")
	}
	if after := snapshotNames(t, mem); !slices.Equal(before, after) {
		t.Fatalf("fenced store wrote a snapshot at close: %v -> %v", before, after)
	}
	checkTable(t, owner, m)
	closeOK(t, owner)
	s3, _ := openAt(t, mem, 3)
	defer closeOK(t, s3)
	checkTable(t, s3, m)
}

// TestSyncFailure: a failed fsync is final: the wait fails, OnFailure
// runs once, later appends are refused, and nothing is snapshotted.
func TestSyncFailure(t *testing.T) {
	mem := newVolume(t)
	ffs := faultfs.New(mem, faultfs.StickySyncError(testDir+"/*.log", syscall.EIO))
	var failures atomic.Int32
	s, _ := openAt(t, ffs, 1, func(c *Config) { c.OnFailure = func() { failures.Add(1) } })
	_, wait, err := s.Append([]Record{put("a", "1")})
	if err != nil {
		t.Fatal(err)
	}
	if err := wait(context.Background()); !errors.Is(err, syscall.EIO) || !errors.Is(err, partlog.ErrLogFailed) {
		t.Fatalf("wait: %v, want the EIO as a log failure", err)
	}
	if _, _, err := s.Append([]Record{put("b", "2")}); !errors.Is(err, partlog.ErrLogFailed) {
		t.Fatalf("append after failure: %v", err)
	}
	if failures.Load() != 1 || s.Err() == nil {
		t.Fatalf("OnFailure %d times, Err %v", failures.Load(), s.Err())
	}
	_ = s.Close()
	if snaps := snapshotNames(t, mem); len(snaps) != 0 {
		t.Fatalf("snapshot written by a failed store: %v", snaps)
	}
}

// TestConcurrentAppendsShareFsyncs: appends made while an fsync round is
// in flight are acknowledged together by the next round: 10 acknowledged
// appends cost 2 segment fsyncs. The first fsync is held until all appends
// are in, so the count does not depend on timing.
func TestConcurrentAppendsShareFsyncs(t *testing.T) {
	mem := newVolume(t)
	gate := make(chan struct{})
	entered := make(chan struct{})
	var syncs atomic.Int32
	armed := atomic.Bool{}
	ffs := faultfs.New(mem, func(op faultfs.Op) faultfs.Action {
		if !armed.Load() || !op.Matches(faultfs.OpSync, testDir+"/*.log") {
			return faultfs.Proceed
		}
		if syncs.Add(1) == 1 {
			close(entered)
			return faultfs.Stall(gate)
		}
		return faultfs.Proceed
	})
	s, _ := openAt(t, ffs, 1)
	defer closeOK(t, s)
	armed.Store(true)
	const n = 10
	errs := make(chan error, n)
	waitAsync := func(wait func(context.Context) error) {
		go func() { errs <- wait(context.Background()) }()
	}
	m := model{}
	_, wait, err := s.Append([]Record{put("k0", "v")})
	if err != nil {
		t.Fatal(err)
	}
	m.apply(put("k0", "v"))
	waitAsync(wait)
	<-entered // the first round is in its fsync
	var wg sync.WaitGroup
	for i := 1; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, wait, err := s.Append([]Record{put(fmt.Sprintf("k%d", i), "v")})
			if err != nil {
				errs <- err
				return
			}
			waitAsync(wait)
		}()
		m.apply(put(fmt.Sprintf("k%d", i), "v"))
	}
	wg.Wait()
	close(gate)
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := syncs.Load(); got != 2 {
		t.Fatalf("%d segment fsyncs for %d appends, want 2", got, n)
	}
	checkTable(t, s, m)
}

package groupstore

import (
	"fmt"
	"testing"
)

// TestSnapshotsTruncateLog: once two snapshots cover a prefix of the log,
// the whole segments below the older one are deleted, so a shard's log
// stays bounded however many records it takes; a reopen after a crash
// still loads the whole table.
func TestSnapshotsTruncateLog(t *testing.T) {
	mem := newVolume(t)
	small := func(c *Config) { c.SnapshotEveryBytes, c.SegmentBytes = 2000, 4096 }
	s, _ := openAt(t, mem, 1, small)
	m := model{}
	for i := 0; i < 400; i++ {
		appendAcked(t, s, m, put(fmt.Sprintf("group-%d", i%13), fmt.Sprintf("offset %d", i)))
		waitSnapshots(s)
	}
	start := s.log.LogStartOffset()
	if start == 0 {
		t.Fatalf("log start still 0 after %d appends with snapshots every 2000 bytes", s.LogEnd())
	}
	snaps := snapshotNames(t, mem)
	if len(snaps) != 2 || start > snaps[1].offset {
		t.Fatalf("log start %d, snapshots %v: the log must keep everything from the older snapshot on", start, snaps)
	}
	if n := len(s.log.Segments()); n > 4 {
		t.Fatalf("%d segments of 4 KiB left for a 2000-byte snapshot interval", n)
	}
	crashed := mem.CrashClone()
	_ = s.Close()
	s2, st := openAt(t, crashed, 2, small)
	defer closeOK(t, s2)
	checkTable(t, s2, m)
	if st.SnapshotOffset < start {
		t.Fatalf("loaded snapshot %d below the log start %d", st.SnapshotOffset, start)
	}
}

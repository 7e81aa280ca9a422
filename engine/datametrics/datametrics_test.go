package datametrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kaas-dev/kaas/volume/memfs"
	"github.com/kaas-dev/kaas/volume/partlog"
	"github.com/kaas-dev/kaas/volume/timedfs"
)

func TestSyncRoundsSeries(t *testing.T) {
	s := NewSyncRounds()
	s.ObserveSyncRound(partlog.SyncRound{Synced: true, Fsync: 2 * time.Millisecond, Bytes: 1000, FenceChecked: true, Fence: time.Millisecond})
	s.ObserveSyncRound(partlog.SyncRound{FenceChecked: true, Fence: time.Millisecond}) // nothing new: fence only
	if n := testutil.CollectAndCount(s, "kaas_produce_fsync_duration_seconds"); n != 1 {
		t.Fatalf("fsync series %d", n)
	}
	for _, c := range []struct{ name, want string }{
		{"kaas_produce_fsync_batch_bytes", "kaas_produce_fsync_batch_bytes_sum 1000\nkaas_produce_fsync_batch_bytes_count 1\n"},
		{"kaas_fence_check_duration_seconds", "kaas_fence_check_duration_seconds_count 2\n"},
		{"kaas_produce_fsync_duration_seconds", "kaas_produce_fsync_duration_seconds_sum 0.002\nkaas_produce_fsync_duration_seconds_count 1\n"},
	} {
		out := gather(t, s, c.name)
		if !strings.Contains(out, c.want) {
			t.Errorf("%s:\n%s\nwant it to contain\n%s", c.name, out, c.want)
		}
	}
}

func TestVolumeOpsCountEachOp(t *testing.T) {
	v := NewVolumeOps()
	now := time.Unix(0, 0)
	clock := func() time.Time { now = now.Add(time.Millisecond); return now }
	fsys := timedfs.Wrap(memfs.New(), v, clock)
	f, err := fsys.Create("a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(v); n != int(timedfs.NumOps) {
		t.Fatalf("%d series, want one per op (%d)", n, timedfs.NumOps)
	}
	out := gather(t, v, "kaas_volume_op_duration_seconds")
	for _, want := range []string{
		`kaas_volume_op_duration_seconds_count{op="create"} 1`,
		`kaas_volume_op_duration_seconds_count{op="write"} 1`,
		`kaas_volume_op_duration_seconds_sum{op="fsync"} 0.001`,
		`kaas_volume_op_duration_seconds_count{op="rename"} 0`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %s in\n%s", want, out)
		}
	}
}

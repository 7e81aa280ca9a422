package faultfs

import (
	"errors"
	"reflect"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/kaas-dev/kaas/volume/memfs"
)

func TestParseSpec(t *testing.T) {
	cases := []struct {
		spec string
		want []specFault // nil with err
		err  bool
	}{
		{spec: "", want: nil},
		{spec: "Remove:/d/*:EBUSY", want: []specFault{{kind: OpRemove, glob: "/d/*", errno: syscall.EBUSY, first: 1}}},
		{spec: "Remove:/data/trash/*/*/*:EBUSY:6", want: []specFault{{kind: OpRemove, glob: "/data/trash/*/*/*", errno: syscall.EBUSY, first: 1, count: 6}}},
		{spec: "Rename:*.json:ESTALE:2:after", want: []specFault{{kind: OpRename, glob: "*.json", errno: syscall.ESTALE, first: 1, count: 2, after: true}}},
		{spec: "Sync:*.log:EIO:0:before", want: []specFault{{kind: OpSync, glob: "*.log", errno: syscall.EIO, first: 1}}},
		{spec: "SyncDir:/c:KILL", want: []specFault{{kind: OpSyncDir, glob: "/c", kill: true, first: 1}}},
		{spec: "Rename:/c/assignment.json:KILL:1@3:after", want: []specFault{{kind: OpRename, glob: "/c/assignment.json", kill: true, first: 3, count: 1, after: true}}},
		{spec: "Write:*.tmp-*:EIO:0@2", want: []specFault{{kind: OpWrite, glob: "*.tmp-*", errno: syscall.EIO, first: 2}}},
		{spec: "CreateExclusive:/c/.a.tmp-*:KILL:1@2,Remove::ENOSPC:1", want: []specFault{
			{kind: OpCreateExclusive, glob: "/c/.a.tmp-*", kill: true, first: 2, count: 1},
			{kind: OpRemove, glob: "", errno: syscall.ENOSPC, first: 1, count: 1},
		}},
		{spec: "Rename:/c/assignment.json:3>SyncDir:/c:KILL:1", want: []specFault{{kind: OpSyncDir, glob: "/c", kill: true, first: 1, count: 1,
			arms: []armStep{{OpRename, "/c/assignment.json", 3}}}}},
		{spec: "Remove:/a>Remove:/b:EIO:1@2:after", want: []specFault{{kind: OpRemove, glob: "/b", errno: syscall.EIO, first: 2, count: 1, after: true,
			arms: []armStep{{OpRemove, "/a", 1}}}}},
		{spec: "Open:/c/brokers/3.json>Rename:/c/assignment.json:2>SyncDir:/c:KILL:1:after", want: []specFault{{kind: OpSyncDir, glob: "/c", kill: true, first: 1, count: 1, after: true,
			arms: []armStep{{OpOpen, "/c/brokers/3.json", 1}, {OpRename, "/c/assignment.json", 2}}}}},
		{spec: "Sync:/data/*/*.log:DELAY=200ms:0", want: []specFault{{kind: OpSync, glob: "/data/*/*.log", delay: 200 * time.Millisecond, first: 1}}},
		{spec: "Sync:*.log:DELAY=1.5s:2@3:before", want: []specFault{{kind: OpSync, glob: "*.log", delay: 1500 * time.Millisecond, first: 3, count: 2}}},
		{spec: "Rename:/c/a.json:STALL=30s:1", want: []specFault{{kind: OpRename, glob: "/c/a.json", stall: 30 * time.Second, first: 1, count: 1}}},
		{spec: "Open:/a>Stat:/b:STALL=1m", want: []specFault{{kind: OpStat, glob: "/b", stall: time.Minute, first: 1,
			arms: []armStep{{OpOpen, "/a", 1}}}}},
		{spec: "Remove:/a>>Remove:/b:EIO", err: true},
		{spec: "Remove:/a:0>Remove:/b:EIO", err: true},
		{spec: "Frob:/a>Remove:/b:EIO", err: true},
		{spec: "Remove>Remove:/b:EIO", err: true},
		{spec: "Remove:/a:1:2>Remove:/b:EIO", err: true},
		{spec: "Remove:/a>Remove:/b", err: true},
		{spec: "Remove", err: true},
		{spec: "Remove:/x", err: true},
		{spec: "Frob:/x:EIO", err: true},
		{spec: "Remove:/x:EWHAT", err: true},
		{spec: "Remove:/x:kill", err: true},
		{spec: "Remove:/x:EIO:many", err: true},
		{spec: "Remove:/x:EIO:-1", err: true},
		{spec: "Remove:/x:EIO:1@", err: true},
		{spec: "Remove:/x:EIO:1@0", err: true},
		{spec: "Remove:/x:EIO:@2", err: true},
		{spec: "Remove:/x:EIO:1:later", err: true},
		{spec: "Remove:/x:EIO:1:after:again", err: true},
		{spec: "Remove:/x:EIO,", err: true},
		{spec: "Sync:/x:DELAY", err: true},
		{spec: "Sync:/x:DELAY=", err: true},
		{spec: "Sync:/x:DELAY=200", err: true},
		{spec: "Sync:/x:DELAY=-1s", err: true},
		{spec: "Sync:/x:DELAY=0s", err: true},
		{spec: "Sync:/x:STALL=forever", err: true},
		{spec: "Sync:/x:SLOW=1s", err: true},
		{spec: "Sync:/x:DELAY=1s:1:after", err: true},
		{spec: "Sync:/x:STALL=1s:1:after", err: true},
	}
	kill := func(Op, string) {}
	for _, tc := range cases {
		t.Run(tc.spec, func(t *testing.T) {
			got, err := parseSpecFaults(tc.spec)
			if tc.err {
				if err == nil {
					t.Fatalf("accepted: %+v", got)
				}
				if _, err := ParseSpec(tc.spec, kill); err == nil {
					t.Fatal("ParseSpec accepted it")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
			inj, err := ParseSpec(tc.spec, kill)
			if err != nil || (inj == nil) != (tc.spec == "") {
				t.Fatalf("ParseSpec = %v, %v", inj != nil, err)
			}
		})
	}
	if _, err := ParseSpec("Remove:/x:KILL", nil); err == nil {
		t.Fatal("KILL without a kill function accepted")
	}
}

// TestSpecDelayAndStall runs a spec's DELAY and STALL through an FS whose
// sleep function records what it was asked to wait.
func TestSpecDelayAndStall(t *testing.T) {
	inj, err := ParseSpec("Sync:*.log:DELAY=200ms:2,Rename:/b:STALL=30s:1,Remove:/x:EIO", nil)
	if err != nil {
		t.Fatal(err)
	}
	m := memfs.New()
	ffs := New(m, inj)
	var slept []time.Duration
	ffs.SetSleep(func(d time.Duration) { slept = append(slept, d) })
	f, err := ffs.Create("/a.log")
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if want := []time.Duration{200 * time.Millisecond, 200 * time.Millisecond}; !slices.Equal(slept, want) {
		t.Fatalf("after syncs slept %v, want %v", slept, want)
	}
	if err := ffs.Rename("/a.log", "/b"); err != nil {
		t.Fatal(err)
	}
	// The stall's sleep runs on its own goroutine; the rename waited for it
	// to end, so it has been recorded by now.
	if len(slept) != 3 || slept[2] != 30*time.Second {
		t.Fatalf("after the rename slept %v, want a 30s stall last", slept)
	}
	if err := ffs.Remove("/x"); !errors.Is(err, syscall.EIO) {
		t.Fatalf("remove: %v, want EIO", err)
	}
}

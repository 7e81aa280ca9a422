package cluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/memfs"
)

// TestStartCheck: a second process for a broker ID whose heartbeat is
// advancing is refused; one whose heartbeat stopped (a crash) starts after
// at most one lease; one whose last heartbeat is marked leaving (a clean
// shutdown), or that has none, starts without waiting. The wait is
// measured on the checker's clock only: the other host's WrittenAt is
// never read.
func TestStartCheck(t *testing.T) {
	const lease = 2 * time.Second
	for _, tc := range []struct {
		name string
		// file is broker 3's heartbeat before the check (nil: none).
		file *Heartbeat
		// during runs on every wait of the check, with the elapsed time
		// on the checker's clock: the other process beating, or not.
		during   func(t *testing.T, fsys volume.FS, at time.Duration)
		wantErr  bool
		maxWait  time.Duration // on the checker's clock
		minWait  time.Duration
		wantFind string
	}{
		{name: "no heartbeat", maxWait: 0},
		{name: "clean restart", file: &Heartbeat{BrokerID: 3, Incarnation: "old", Counter: 9, Leaving: true}, wantFind: "old", maxWait: 0},
		{name: "crash restart", file: &Heartbeat{BrokerID: 3, Incarnation: "old", Counter: 9, WrittenAt: time.Now().UnixMilli()},
			wantFind: "old", minWait: lease, maxWait: lease},
		{name: "running", file: &Heartbeat{BrokerID: 3, Incarnation: "live", Counter: 9},
			during: func(t *testing.T, fsys volume.FS, at time.Duration) {
				// Beats every 250ms; the written wall time is a year old,
				// which must not matter.
				n := uint64(9 + at/(250*time.Millisecond))
				write(t, fsys, Heartbeat{BrokerID: 3, Incarnation: "live", Counter: n, WrittenAt: 1})
			},
			wantErr: true, maxWait: 500 * time.Millisecond},
		{name: "running, a slow beat just inside the lease", file: &Heartbeat{BrokerID: 3, Incarnation: "live", Counter: 9},
			during: func(t *testing.T, fsys volume.FS, at time.Duration) {
				if at >= lease-lease/8 {
					write(t, fsys, Heartbeat{BrokerID: 3, Incarnation: "live", Counter: 10})
				}
			},
			wantErr: true, maxWait: lease},
		{name: "another process started meanwhile", file: &Heartbeat{BrokerID: 3, Incarnation: "old", Counter: 9},
			during: func(t *testing.T, fsys volume.FS, at time.Duration) {
				if at >= time.Second {
					write(t, fsys, Heartbeat{BrokerID: 3, Incarnation: "new", Counter: 1})
				}
			},
			wantErr: true, maxWait: lease},
		{name: "running, then stops cleanly", file: &Heartbeat{BrokerID: 3, Incarnation: "live", Counter: 9},
			during: func(t *testing.T, fsys volume.FS, at time.Duration) {
				write(t, fsys, Heartbeat{BrokerID: 3, Incarnation: "live", Counter: 10, Leaving: true})
			},
			wantFind: "live", maxWait: lease / 8},
		{name: "not a heartbeat", during: func(t *testing.T, fsys volume.FS, at time.Duration) {}, wantFind: "", minWait: lease, maxWait: lease},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := memfs.New()
			if tc.file != nil {
				write(t, fsys, *tc.file)
			} else if tc.during != nil {
				if err := volume.MkdirAllSync(fsys, clusterDir+"/brokers"); err != nil {
					t.Fatal(err)
				}
				if err := volume.WriteFileAtomic(fsys, HeartbeatPath(clusterDir, 3), []byte("{")); err != nil {
					t.Fatal(err)
				}
			}
			clk := &fakeClock{}
			c := StartCheck{FS: fsys, ClusterDir: clusterDir, BrokerID: 3, Lease: lease, Now: clk.Now,
				Sleep: func(ctx context.Context, d time.Duration) error {
					clk.Advance(d)
					if tc.during != nil {
						tc.during(t, fsys, clk.Now())
					}
					return nil
				}}
			found, err := c.Run(context.Background())
			var are *AlreadyRunningError
			if tc.wantErr != errors.As(err, &are) {
				t.Fatalf("err %v, want already running: %v", err, tc.wantErr)
			}
			if !tc.wantErr && (err != nil || found != tc.wantFind) {
				t.Fatalf("found %q, %v; want %q", found, err, tc.wantFind)
			}
			if w := clk.Now(); w > tc.maxWait || w < tc.minWait {
				t.Fatalf("waited %v, want %v..%v", w, tc.minWait, tc.maxWait)
			}
		})
	}
}

func write(t *testing.T, fsys volume.FS, hb Heartbeat) {
	t.Helper()
	if err := WriteHeartbeat(fsys, clusterDir, hb); err != nil {
		t.Fatal(err)
	}
}

// TestHeartbeaterSupplanted: once another process writes the broker's
// heartbeat file, the Heartbeater refuses to write again (no fence fight)
// and says so; the incarnation it replaced at start, a failed write of
// its own and a file missing for a moment are no such evidence.
func TestHeartbeaterSupplanted(t *testing.T) {
	fsys := memfs.New()
	write(t, fsys, Heartbeat{BrokerID: 3, Incarnation: "old", Counter: 40})
	h := NewHeartbeater(fsys, clusterDir, Heartbeat{BrokerID: 3, Incarnation: "mine"})
	h.Replaces("old")
	mustBeat := func(what string) {
		t.Helper()
		if err := h.Beat(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	mustBeat("first beat over the old incarnation's file")
	// The old process was only paused: it writes once more, then finds
	// this incarnation in the file and stops (its own Heartbeater).
	write(t, fsys, Heartbeat{BrokerID: 3, Incarnation: "old", Counter: 41})
	mustBeat("beat after the replaced incarnation wrote")
	if err := fsys.Remove(HeartbeatPath(clusterDir, 3)); err != nil {
		t.Fatal(err)
	}
	mustBeat("beat after the file went missing")
	write(t, fsys, Heartbeat{BrokerID: 3, Incarnation: "intruder", Counter: 1})
	var se *SupplantedError
	if err := h.Beat(); !errors.As(err, &se) || se.Other != "intruder" || se.Own != "mine" || se.BrokerID != 3 {
		t.Fatalf("beat after another incarnation wrote: %v, want SupplantedError", err)
	}
	if err := h.Leave(); !errors.As(err, &se) {
		t.Fatalf("leave after being supplanted: %v", err)
	}
	if got, err := ReadHeartbeat(fsys, clusterDir, 3); err != nil || got.Incarnation != "intruder" {
		t.Fatalf("file holds %+v, %v; want the intruder's untouched", got, err)
	}
}

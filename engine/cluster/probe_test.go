package cluster

import (
	"context"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/memfs"
	"github.com/kaas-dev/kaas/volume/probe/probetest"
)

// xhost is one cross-host check between broker 2 (starting) and broker 1
// (running), each with its own view of one volume, stepped in turn.
type xhost struct {
	t     *testing.T
	clock *fakeClock
	check *CrossHostCheck
	resp  *ProbeResponder // nil: broker 1 does not answer
	hb    *Heartbeater    // nil: broker 1 has no heartbeat
	beat  bool            // broker 1's heartbeat advances
	vol   volume.FS
}

// newXhost sets the pair up; view, if not nil, gives broker 1's view of
// the volume (default: the volume itself).
func newXhost(t *testing.T, view func(volume.FS) volume.FS, answer, beat bool) *xhost {
	t.Helper()
	m := memfs.New()
	var peerView volume.FS = m
	if view != nil {
		peerView = view(m)
	}
	x := &xhost{t: t, clock: &fakeClock{}, beat: beat, vol: m}
	if err := volume.MkdirAllSync(m, clusterDir); err != nil {
		t.Fatal(err)
	}
	x.hb = NewHeartbeater(m, clusterDir, Heartbeat{BrokerID: 1, Incarnation: "one"})
	if err := x.hb.Beat(); err != nil {
		t.Fatal(err)
	}
	if answer {
		x.resp = NewProbeResponder(peerView, clusterDir, 1, time.Second, x.clock.Now)
	}
	x.check = NewCrossHostCheck(CrossHostConfig{FS: m, ClusterDir: clusterDir, BrokerID: 2,
		Timeout: 3 * time.Second, Lease: time.Second, Clock: x.clock.Now})
	return x
}

// run steps the check, answering and beating in between, every 50 ms of
// fake time, until it is done.
func (x *xhost) run() CrossHostResult {
	x.t.Helper()
	for i := 0; i < 200; i++ {
		done, err := x.check.Step()
		if err != nil {
			x.t.Fatalf("step: %v", err)
		}
		if done {
			x.check.Cleanup()
			return x.check.Result()
		}
		if x.resp != nil {
			x.resp.Round()
		}
		if x.beat {
			if err := x.hb.Beat(); err != nil {
				x.t.Fatal(err)
			}
		}
		x.clock.Advance(50 * time.Millisecond)
	}
	x.t.Fatal("cross-host check never finished")
	return CrossHostResult{}
}

// ownFiles lists broker 2's files left in the probes directory.
func (x *xhost) ownFiles() []string {
	ents, _ := x.vol.ReadDir(path.Join(clusterDir, ProbesDir))
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "2.") || strings.HasPrefix(e.Name(), ".2.") {
			out = append(out, e.Name())
		}
	}
	return out
}

func TestCrossHostHonestPeer(t *testing.T) {
	x := newXhost(t, nil, true, true)
	res := x.run()
	if res.Skipped || res.Err != nil || len(res.Peers) != 1 || res.Peers[0] != 1 || len(res.Stale) != 0 {
		t.Fatalf("result: %+v", res)
	}
	if left := x.ownFiles(); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
}

func TestCrossHostStalePeer(t *testing.T) {
	var view *probetest.StaleView
	x := newXhost(t, func(m volume.FS) volume.FS {
		view = probetest.NewStaleView(m)
		view.SetStale(true)
		return view
	}, true, true)
	res := x.run()
	if res.Skipped || res.Err == nil || len(res.Stale) != 1 || res.Stale[0] != 1 {
		t.Fatalf("result: %+v", res)
	}
	for _, want := range []string{"close-to-open across hosts", "previous contents", "client caching off", "2.probe"} {
		if !strings.Contains(res.Err.Error(), want) {
			t.Errorf("error %q lacks %q", res.Err, want)
		}
	}
	if view.StaleReads.Load() == 0 {
		t.Error("the stale view served nothing stale")
	}
	if left := x.ownFiles(); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
}

func TestCrossHostNoOtherBroker(t *testing.T) {
	m := memfs.New()
	c := NewCrossHostCheck(CrossHostConfig{FS: m, ClusterDir: clusterDir, BrokerID: 2})
	done, err := c.Step()
	if !done || err != nil || !c.Result().Skipped || !strings.Contains(c.Result().Reason, "no other broker") {
		t.Fatalf("done=%v err=%v result=%+v", done, err, c.Result())
	}
	// Its own heartbeat does not count as another broker.
	if err := NewHeartbeater(m, clusterDir, Heartbeat{BrokerID: 2, Incarnation: "old"}).Beat(); err != nil {
		t.Fatal(err)
	}
	c = NewCrossHostCheck(CrossHostConfig{FS: m, ClusterDir: clusterDir, BrokerID: 2})
	if done, _ := c.Step(); !done || !c.Result().Skipped {
		t.Fatalf("result: %+v", c.Result())
	}
}

// A dead broker's heartbeat file: skipped once a lease passes.
func TestCrossHostDeadPeer(t *testing.T) {
	x := newXhost(t, nil, false, false)
	res := x.run()
	if !res.Skipped || !strings.Contains(res.Reason, "advanced") || x.clock.Now() < time.Second {
		t.Fatalf("result: %+v at %v", res, x.clock.Now())
	}
	if left := x.ownFiles(); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
}

// A live broker that does not answer (an older version): skipped at the
// timeout.
func TestCrossHostSilentPeer(t *testing.T) {
	x := newXhost(t, nil, false, true)
	res := x.run()
	if !res.Skipped || !strings.Contains(res.Reason, "answered") || x.clock.Now() < 3*time.Second {
		t.Fatalf("result: %+v at %v", res, x.clock.Now())
	}
}

// Leftovers of a crashed check are swept after a while, by the sweeper's
// own clock; fresh ones are not.
func TestProbeResponderSweeps(t *testing.T) {
	m := memfs.New()
	clock := &fakeClock{}
	dir := path.Join(clusterDir, ProbesDir)
	if err := volume.MkdirAllSync(m, dir); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"9.go", "9.3.seen", ".9.3.seen.tmp-0123456789abcdef", "unrelated.txt"} {
		if err := volume.WriteFileAtomic(m, path.Join(dir, n), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	r := NewProbeResponder(m, clusterDir, 1, time.Second, clock.Now)
	if r.Round() {
		t.Error("pending with no probe")
	}
	clock.Advance(9 * time.Second)
	r.Round()
	if ents, _ := m.ReadDir(dir); len(ents) != 4 {
		t.Fatalf("swept too early: %d left", len(ents))
	}
	clock.Advance(time.Second)
	r.Round()
	ents, _ := m.ReadDir(dir)
	if len(ents) != 1 || ents[0].Name() != "unrelated.txt" {
		t.Fatalf("after sweep: %v", ents)
	}
}

// CheckCrossHost against a responder running in the background.
func TestCheckCrossHostRealTime(t *testing.T) {
	m := memfs.New()
	hb := NewHeartbeater(m, clusterDir, Heartbeat{BrokerID: 1, Incarnation: "one"})
	if err := hb.Beat(); err != nil {
		t.Fatal(err)
	}
	resp := NewProbeResponder(m, clusterDir, 1, 0, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for ctx.Err() == nil {
			_ = hb.Beat()
			resp.Round()
			time.Sleep(5 * time.Millisecond)
		}
	}()
	res, err := CheckCrossHost(ctx, CrossHostConfig{FS: m, ClusterDir: clusterDir, BrokerID: 2}, 5*time.Millisecond)
	cancel()
	<-stopped
	if err != nil || res.Err != nil || len(res.Peers) != 1 {
		t.Fatalf("result %+v, err %v", res, err)
	}
}

// A broker that checks again at once (a restart) gets answered again by
// the same responder, which may not have seen its first probe go.
func TestCrossHostRepeatedSession(t *testing.T) {
	x := newXhost(t, nil, true, true)
	if res := x.run(); len(res.Peers) != 1 {
		t.Fatalf("first: %+v", res)
	}
	x.check = NewCrossHostCheck(CrossHostConfig{FS: x.vol, ClusterDir: clusterDir, BrokerID: 2,
		Timeout: 3 * time.Second, Lease: time.Second, Clock: x.clock.Now})
	if res := x.run(); len(res.Peers) != 1 || res.Skipped {
		t.Fatalf("second: %+v", res)
	}
}

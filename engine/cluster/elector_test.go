package cluster

import (
	"fmt"
	"io/fs"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/faultfs"
	"github.com/kaas-dev/kaas/volume/memfs"
)

const lease = 2 * time.Second

// round runs one full round on each broker in order: beat, observe, campaign.
func round(t *testing.T, bs ...*broker) {
	t.Helper()
	for _, b := range bs {
		b.beat(t)
	}
	for _, b := range bs {
		b.observe(t)
		b.campaign(t)
	}
}

func wantStatus(t *testing.T, b *broker, epoch, controller int32) {
	t.Helper()
	s := b.el.Status()
	want := Status{Epoch: epoch, Controller: controller, IsController: controller == b.id}
	if s != want {
		t.Fatalf("broker %d: status %+v, want %+v", b.id, s, want)
	}
}

func TestElectorFirstClaimAndStability(t *testing.T) {
	m := memfs.New()
	clk := &fakeClock{}
	a, b := newBroker(m, 1, "a1", clk.Now, lease), newBroker(m, 2, "b1", clk.Now, lease)
	round(t, a, b)
	wantStatus(t, a, 1, 1)
	wantStatus(t, b, 1, 1)
	for range 10 {
		clk.Advance(lease / 2)
		round(t, b, a)
	}
	wantStatus(t, a, 1, 1)
	wantStatus(t, b, 1, 1)
	if epochs, _ := claims(t, m); !slices.Equal(epochs, []int32{1}) {
		t.Fatalf("claims %v, want only epoch 1", epochs)
	}
	// The claim is durable: it survives a crash of the volume's host.
	if _, valid := claims(t, m.CrashClone()); valid[1] != (Claim{Epoch: 1, BrokerID: 1, Incarnation: "a1"}) {
		t.Fatalf("after crash: %+v", valid)
	}
}

func TestElectorFailoverAndStepDown(t *testing.T) {
	m := memfs.New()
	clk := &fakeClock{}
	a, b, c := newBroker(m, 1, "a1", clk.Now, lease), newBroker(m, 2, "b1", clk.Now, lease), newBroker(m, 3, "c1", clk.Now, lease)
	round(t, a, b, c)
	wantStatus(t, b, 1, 1)

	// a stops beating (SIGSTOP): within the lease nobody moves.
	clk.Advance(lease - time.Millisecond)
	round(t, b, c)
	wantStatus(t, b, 1, 1)
	wantStatus(t, c, 1, 1)
	// Past the lease on b's clock, b claims epoch 2 at once.
	clk.Advance(time.Millisecond)
	round(t, b, c)
	wantStatus(t, b, 2, 2)
	wantStatus(t, c, 2, 2)

	// a resumes: before any Campaign, Verify already steps it down.
	if ok, err := a.el.Verify(); err != nil || ok {
		t.Fatalf("zombie controller Verify = %v, %v; want false", ok, err)
	}
	wantStatus(t, a, 2, 2)
	round(t, a, b, c)
	wantStatus(t, a, 2, 2)
	if epochs, _ := claims(t, m); !slices.Equal(epochs, []int32{1, 2}) {
		t.Fatalf("claims %v", epochs)
	}
	if ok, err := b.el.Verify(); err != nil || !ok {
		t.Fatalf("controller Verify = %v, %v", ok, err)
	}
}

func TestElectorLeavingControllerReplacedAtOnce(t *testing.T) {
	m := memfs.New()
	clk := &fakeClock{}
	a, b := newBroker(m, 1, "a1", clk.Now, lease), newBroker(m, 2, "b1", clk.Now, lease)
	round(t, a, b)
	if err := a.hb.Leave(); err != nil {
		t.Fatal(err)
	}
	round(t, b) // no time passes
	wantStatus(t, b, 2, 2)
}

func TestElectorRestartedControllerReclaims(t *testing.T) {
	m := memfs.New()
	clk := &fakeClock{}
	a, b := newBroker(m, 1, "a1", clk.Now, lease), newBroker(m, 2, "b1", clk.Now, lease)
	round(t, a, b)
	// a restarts as a new incarnation: its old claim is dead, and it knows.
	a2 := newBroker(m, 1, "a2", clk.Now, lease)
	round(t, a2)
	wantStatus(t, a2, 2, 1)
	round(t, b)
	wantStatus(t, b, 2, 1)
	// And b sees a's old incarnation as gone too: had b run first, it
	// would not have waited out a lease either.
	if b.obs.IsLive(1, "a1") {
		t.Fatal("old incarnation still live")
	}
}

func TestElectorClaimOfUnseenBrokerGetsOneLease(t *testing.T) {
	m := memfs.New()
	clk := &fakeClock{}
	// Broker 9 claimed epoch 4 and never wrote a heartbeat we can see.
	if err := volume.MkdirAllSync(m, clusterDir+"/"+ControllerDir); err != nil {
		t.Fatal(err)
	}
	for e := int32(1); e <= 4; e++ {
		if err := volume.CreateExclusiveFile(m, ClaimPath(clusterDir, e), fmt.Appendf(nil, `{"epoch":%d,"brokerId":9,"incarnation":"z"}`, e)); err != nil {
			t.Fatal(err)
		}
	}
	b := newBroker(m, 2, "b1", clk.Now, lease)
	round(t, b)
	wantStatus(t, b, 4, 9)
	clk.Advance(lease - 1)
	round(t, b)
	wantStatus(t, b, 4, 9)
	clk.Advance(1)
	round(t, b)
	wantStatus(t, b, 5, 2)
}

// TestElectorStaleListing: a listing that lags (or is empty) never makes an
// elector claim a used epoch or go backwards: it probes upward with Open.
func TestElectorStaleListing(t *testing.T) {
	m := memfs.New()
	clk := &fakeClock{}
	a := newBroker(m, 1, "a1", clk.Now, lease)
	round(t, a)
	// Make a dead (never seen again) so that b takes over repeatedly.
	h := &hookFS{FS: m, readDir: func(name string) ([]fs.DirEntry, error) {
		if name == clusterDir+"/"+ControllerDir {
			return nil, nil // a directory cache from before any claim
		}
		return m.ReadDir(name)
	}}
	b := newBroker(h, 2, "b1", clk.Now, lease)
	round(t, b)
	wantStatus(t, b, 1, 1)
	clk.Advance(lease)
	round(t, b)
	wantStatus(t, b, 2, 2)
	round(t, b)
	wantStatus(t, b, 2, 2)
	if epochs, _ := claims(t, m); !slices.Equal(epochs, []int32{1, 2}) {
		t.Fatalf("claims %v", epochs)
	}
}

// TestElectorConcurrentRace: many electors campaign at once on one volume,
// round after round; there is one controller per epoch, all agree, and no
// elector's epoch ever decreases.
func TestElectorConcurrentRace(t *testing.T) {
	for iter := range 20 {
		m := memfs.New()
		clk := &fakeClock{}
		const n = 8
		var bs []*broker
		for i := range n {
			bs = append(bs, newBroker(m, int32(i), fmt.Sprintf("i%d-%d", i, iter), clk.Now, lease))
		}
		for _, b := range bs {
			b.beat(t)
		}
		last := make([]int32, n)
		for r := range 3 {
			var wg sync.WaitGroup
			errs := make([]error, n)
			for i, b := range bs {
				wg.Go(func() {
					hbs, err := ReadHeartbeats(b.fs, clusterDir)
					if err != nil {
						errs[i] = err
						return
					}
					b.obs.Observe(hbs)
					_, errs[i] = b.el.Campaign()
				})
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("iter %d round %d broker %d: %v", iter, r, i, err)
				}
				if e, _ := bs[i].el.Current(); e < last[i] {
					t.Fatalf("broker %d epoch went from %d to %d", i, last[i], e)
				} else {
					last[i] = e
				}
			}
		}
		epochs, valid := claims(t, m)
		if !slices.Equal(epochs, []int32{1}) || len(valid) != 1 {
			t.Fatalf("iter %d: claims %v valid %v; want exactly one, at epoch 1", iter, epochs, valid)
		}
		winner := valid[1].BrokerID
		for _, b := range bs {
			wantStatus(t, b, 1, winner)
		}
	}
}

// gate makes the claim creates of several electors wait until released, so
// that a test fixes the interleaving: every racer has decided (listed, read,
// seen no live controller) before any of them creates.
type gate struct {
	arrived sync.WaitGroup
	release map[int32]chan struct{}
}

func newGate(ids ...int32) *gate {
	g := &gate{release: map[int32]chan struct{}{}}
	for _, id := range ids {
		g.release[id] = make(chan struct{})
	}
	g.arrived.Add(len(ids))
	return g
}

func (g *gate) fs(inner volume.FS, id int32) volume.FS {
	once := sync.Once{}
	return &hookFS{FS: inner, beforeCreateExclusive: func(name string) {
		if path := ClaimPath(clusterDir, 1); name != path {
			return
		}
		once.Do(func() {
			g.arrived.Done()
			<-g.release[id]
		})
	}}
}

// raceForEpoch1 runs a's and b's first Campaign concurrently, both held at
// the create of epoch 1 until both got there, then releases a, lets it
// finish, and releases b.
func raceForEpoch1(t *testing.T, inner volume.FS, clk *fakeClock) (a, b *broker, errA, errB error) {
	t.Helper()
	g := newGate(1, 2)
	a = newBroker(g.fs(inner, 1), 1, "a1", clk.Now, lease)
	b = newBroker(g.fs(inner, 2), 2, "b1", clk.Now, lease)
	a.beat(t)
	b.beat(t)
	a.observe(t)
	b.observe(t)
	doneA, doneB := make(chan struct{}), make(chan struct{})
	go func() { _, errA = a.el.Campaign(); close(doneA) }()
	go func() { _, errB = b.el.Campaign(); close(doneB) }()
	g.arrived.Wait()
	close(g.release[1])
	<-doneA
	close(g.release[2])
	<-doneB
	return a, b, errA, errB
}

func TestElectorInterleavedEEXIST(t *testing.T) {
	clk := &fakeClock{}
	a, b, errA, errB := raceForEpoch1(t, memfs.New(), clk)
	if errA != nil || errB != nil {
		t.Fatalf("errors %v, %v", errA, errB)
	}
	wantStatus(t, a, 1, 1)
	wantStatus(t, b, 1, 1) // EEXIST, re-read, saw a's claim
}

// TestElectorBothEEXISTEmptyClaim: the GlusterFS race. Both racers get
// EEXIST and the claim file is left empty. Nobody is controller until the
// timeout; then exactly one claims the next epoch.
func TestElectorBothEEXISTEmptyClaim(t *testing.T) {
	clk := &fakeClock{}
	// The first create of epoch 1 is applied (an empty file) but answers
	// EEXIST; the second then finds the file and gets EEXIST for real.
	f := faultfs.New(withControllerDir(t), faultfs.FailMatching(faultfs.OpCreateExclusive, "00000000000000000001.json", syscall.EEXIST, true, 1))
	a, b, errA, errB := raceForEpoch1(t, f, clk)
	if errA != nil || errB != nil {
		t.Fatalf("errors %v, %v", errA, errB)
	}
	wantStatus(t, a, 1, -1)
	wantStatus(t, b, 1, -1)
	if _, valid := claims(t, f); len(valid) != 0 {
		t.Fatalf("valid claims %v; want the empty file only", valid)
	}
	// Before the timeout: an empty claim may be mid-write, wait.
	clk.Advance(lease - 1)
	round(t, a, b)
	wantStatus(t, a, 1, -1)
	wantStatus(t, b, 1, -1)
	// At the timeout both race again, concurrently: one wins epoch 2.
	clk.Advance(1)
	a.beat(t)
	b.beat(t)
	a.observe(t)
	b.observe(t)
	var wg sync.WaitGroup
	for _, x := range []*broker{a, b} {
		wg.Go(func() {
			if _, err := x.el.Campaign(); err != nil {
				t.Errorf("broker %d: %v", x.id, err)
			}
		})
	}
	wg.Wait()
	round(t, a, b) // the loser may have lost at the create or at the read
	epochs, valid := claims(t, f)
	if !slices.Equal(epochs, []int32{1, 2}) || len(valid) != 1 {
		t.Fatalf("claims %v valid %v; want the empty 1 and a valid 2", epochs, valid)
	}
	w := valid[2].BrokerID
	wantStatus(t, a, 2, w)
	wantStatus(t, b, 2, w)
}

// TestElectorCreateReplyLost: the claim's create is applied but its reply
// lost, leaving an empty file the creator cannot prove is its own. It is
// stale after the timeout, then claimed over; nobody waits forever.
func TestElectorCreateReplyLost(t *testing.T) {
	clk := &fakeClock{}
	f := faultfs.New(withControllerDir(t), faultfs.FailMatching(faultfs.OpCreateExclusive, "00000000000000000001.json", syscall.EIO, true, 1))
	a := newBroker(f, 1, "a1", clk.Now, lease)
	b := newBroker(f, 2, "b1", clk.Now, lease)
	a.beat(t)
	b.beat(t)
	a.observe(t)
	b.observe(t)
	if _, err := a.el.Campaign(); err == nil {
		t.Fatal("lost reply not reported")
	}
	wantStatus(t, a, 1, -1)
	b.campaign(t)
	wantStatus(t, b, 1, -1)
	clk.Advance(lease / 2)
	round(t, b, a)
	wantStatus(t, b, 1, -1)
	clk.Advance(lease / 2)
	round(t, b, a)
	wantStatus(t, a, 2, 2)
	wantStatus(t, b, 2, 2)
}

// TestElectorSyncDirFailsAfterCompleteClaim: the claim file is complete and
// only the directory fsync failed; re-reading shows it is ours, and it
// stands (others may already have read it).
func TestElectorSyncDirFailsAfterCompleteClaim(t *testing.T) {
	clk := &fakeClock{}
	f := faultfs.New(withControllerDir(t), faultfs.FailMatching(faultfs.OpSyncDir, clusterDir+"/"+ControllerDir, syscall.EIO, true, 1))
	a := newBroker(f, 1, "a1", clk.Now, lease)
	round(t, a)
	wantStatus(t, a, 1, 1)
}

// TestElectorMidWriteClaimNotStolen: a reader that opens the claim between
// its create and its write sees an empty file; it waits, and sees the
// finished claim next round.
func TestElectorMidWriteClaimNotStolen(t *testing.T) {
	clk := &fakeClock{}
	m := memfs.New()
	wrote := make(chan struct{})
	proceed := make(chan struct{})
	ha := &hookFS{FS: m, afterCreateExclusive: func(f volume.File) volume.File {
		if f.Name() != ClaimPath(clusterDir, 1) {
			return f
		}
		return &pausedFile{File: f, before: func() { close(wrote); <-proceed }}
	}}
	a := newBroker(ha, 1, "a1", clk.Now, lease)
	b := newBroker(m, 2, "b1", clk.Now, lease)
	a.beat(t)
	b.beat(t)
	a.observe(t)
	b.observe(t)
	done := make(chan error)
	go func() { _, err := a.el.Campaign(); done <- err }()
	<-wrote // a created the claim file and has not written it
	clk.Advance(lease - 1)
	b.beat(t)
	b.observe(t)
	b.campaign(t)
	wantStatus(t, b, 1, -1)
	close(proceed)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	wantStatus(t, a, 1, 1)
	clk.Advance(1)
	round(t, a, b)
	wantStatus(t, b, 1, 1)
}

// pausedFile calls before once, ahead of its first Write.
type pausedFile struct {
	volume.File
	before func()
	once   sync.Once
}

func (p *pausedFile) Write(b []byte) (int, error) {
	p.once.Do(p.before)
	return p.File.Write(b)
}

// TestElectorCreateFailsCleanly: a create that fails before it is applied
// leaves nothing behind; the error is reported and the next round claims.
func TestElectorCreateFailsCleanly(t *testing.T) {
	clk := &fakeClock{}
	f := faultfs.New(withControllerDir(t), faultfs.FailMatching(faultfs.OpCreateExclusive, "00000000000000000001.json", syscall.EIO, false, 1))
	a := newBroker(f, 1, "a1", clk.Now, lease)
	a.beat(t)
	a.observe(t)
	if _, err := a.el.Campaign(); err == nil {
		t.Fatal("failed create not reported")
	}
	wantStatus(t, a, 0, -1)
	a.campaign(t)
	wantStatus(t, a, 1, 1)
}

// withControllerDir returns a memfs whose controller directory exists, so
// that a fault counted on the first claim create hits the claim itself and
// not the ENOENT of a missing directory.
func withControllerDir(t *testing.T) *memfs.FS {
	t.Helper()
	m := memfs.New()
	if err := volume.MkdirAllSync(m, clusterDir+"/"+ControllerDir); err != nil {
		t.Fatal(err)
	}
	return m
}

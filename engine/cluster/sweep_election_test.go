package cluster

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"reflect"
	"strings"
	"testing"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/faultfs"
)

// clusterProcedure is one procedure of this package that changes the
// volume, with its crash sweep: work runs it on a broker whose volume
// crashes at a chosen mutating op; after the crash, checkCrashed looks at
// what survived and restart brings fresh brokers up on it and checks that
// they converge.
type clusterProcedure struct {
	name string
	// covers names the exported functions and methods the sweep crashes
	// ("WriteAssignment", "Elector.Campaign").
	covers       []string
	setup        func(t *testing.T, fsys volume.FS, ct *clusterTrial)
	work         func(fsys volume.FS, ct *clusterTrial) error
	checkCrashed func(t *testing.T, fsys volume.FS, ct *clusterTrial)
	restart      func(t *testing.T, fsys volume.FS, ct *clusterTrial)
}

// clusterProcedures is every volume-changing procedure of the package.
// TestClusterProceduresCoverVolumeAPI fails when an exported function or
// method that can reach the volume is neither covered here nor listed in
// readOnlyProcedures.
var clusterProcedures = []clusterProcedure{
	heartbeatProcedure(),
	controllerClaimProcedure("controller-claim", false),
	controllerClaimProcedure("controller-first-claim", true),
	assignmentWriteProcedure(),
	assignmentChainProcedure(),
	reportProcedure(),
	crossHostCheckProcedure("cross-host-check-first", false),
	crossHostCheckProcedure("cross-host-check-restart", true),
	probeRespondProcedure(),
	producerIDProcedure(),
}

// clusterTrial is what one crash point keeps outside the volume.
type clusterTrial struct {
	clk *fakeClock
	// believed maps a controller epoch to the brokers (id/incarnation)
	// whose Campaign reported them controller at it.
	believed map[int32]map[string]bool
	// durableAssignment is the highest controller epoch of an assignment
	// whose write returned success (the setup's included).
	durableAssignment int32
	// beat is the last heartbeat of broker 2 whose write returned success.
	beat *Heartbeat
	// tempsAfterCrash counts temp files found right after the crash.
	tempsAfterCrash int
	// write writes the assignment (WriteAssignment unless a negative
	// control swaps it).
	write func(volume.FS, string, *Assignment) error
	// issuedIDs are the producer IDs issued so far (producerIDProcedure).
	issuedIDs map[int64]bool
	// tried holds every assignment a chain commit was attempted with, by
	// version; committed is the last whose commit returned success, and
	// chainFrom the one a reader held before the work began
	// (assignmentChainProcedure).
	tried     map[AssignmentVersion]*Assignment
	committed AssignmentVersion
	chainFrom *Assignment
}

func (ct *clusterTrial) noteStatus(b *broker, s Status) {
	if !s.IsController {
		return
	}
	if ct.believed[s.Epoch] == nil {
		ct.believed[s.Epoch] = map[string]bool{}
	}
	ct.believed[s.Epoch][fmt.Sprintf("%d/%s", b.id, b.inc)] = true
}

var sweepTopics = []Topic{{ID: "t-orders", Partitions: 4}, {ID: "t-payments", Partitions: 2}}

// controllerRound is the engine's controller round, reduced to what
// touches the volume: read the previous assignment, compute the next,
// Verify, write.
func controllerRound(fsys volume.FS, b *broker, topics []Topic, ct *clusterTrial) error {
	st := b.el.Status()
	if !st.IsController {
		return nil
	}
	prev, err := ReadAssignment(fsys, clusterDir)
	if errors.Is(err, fs.ErrNotExist) {
		prev, err = nil, nil
	}
	if err != nil {
		return err
	}
	if prev != nil && prev.ControllerEpoch > st.Epoch {
		return nil
	}
	next, err := NextAssignment(prev, topics, b.obs.Live(), st.Epoch)
	if err != nil {
		return err
	}
	if prev != nil && reflect.DeepEqual(prev, next) {
		return nil
	}
	if ok, err := b.el.Verify(); err != nil || !ok {
		return err
	}
	write := ct.write
	if write == nil {
		write = WriteAssignment
	}
	if err := write(fsys, clusterDir, next); err != nil {
		return err
	}
	ct.durableAssignment = max(ct.durableAssignment, next.ControllerEpoch)
	return nil
}

// setupCluster leaves brokers 1, 2 and 3 beating, broker 1 controller at
// epoch 1 with an assignment written, and then broker 1 leaving (SIGTERM),
// so that the cluster needs a new controller with no time passing.
func setupCluster(t *testing.T, fsys volume.FS, ct *clusterTrial) {
	t.Helper()
	bs := []*broker{
		newBroker(fsys, 1, "a1", ct.clk.Now, lease),
		newBroker(fsys, 2, "b1", ct.clk.Now, lease),
		newBroker(fsys, 3, "c1", ct.clk.Now, lease),
	}
	round(t, bs...)
	if err := controllerRound(fsys, bs[0], sweepTopics[:1], ct); err != nil {
		t.Fatal(err)
	}
	if err := bs[0].hb.Leave(); err != nil {
		t.Fatal(err)
	}
}

// crashedBroker is broker 2 as it ran before the crash: it observes the
// heartbeats on the volume and campaigns.
func crashedBroker(fsys volume.FS, ct *clusterTrial) (*broker, error) {
	b := newBroker(fsys, 2, "b1", ct.clk.Now, lease)
	hbs, err := ReadHeartbeats(fsys, clusterDir)
	if err != nil {
		return b, err
	}
	b.obs.Observe(hbs)
	s, err := b.el.Campaign()
	ct.noteStatus(b, s)
	return b, err
}

func controllerClaimProcedure(name string, first bool) clusterProcedure {
	return clusterProcedure{
		name:   name,
		covers: []string{"Elector.Campaign", "WriteAssignment"},
		setup: func(t *testing.T, fsys volume.FS, ct *clusterTrial) {
			if first {
				// Brokers beating, nobody has campaigned yet.
				for _, b := range []*broker{newBroker(fsys, 2, "b1", ct.clk.Now, lease), newBroker(fsys, 3, "c1", ct.clk.Now, lease)} {
					b.beat(t)
				}
				return
			}
			setupCluster(t, fsys, ct)
		},
		work: func(fsys volume.FS, ct *clusterTrial) error {
			b, err := crashedBroker(fsys, ct)
			if err != nil {
				return err
			}
			if !b.el.Status().IsController {
				return fmt.Errorf("broker 2 did not become controller: %+v", b.el.Status())
			}
			return controllerRound(fsys, b, sweepTopics, ct)
		},
		checkCrashed: checkCrashedCluster,
		restart:      restartCluster,
	}
}

// assignmentWriteProcedure: broker 2 is controller at epoch 2 already; it
// writes two assignments (a topic created, then broker 3 leaving).
func assignmentWriteProcedure() clusterProcedure {
	return clusterProcedure{
		name:   "assignment-write",
		covers: []string{"WriteAssignment"},
		setup: func(t *testing.T, fsys volume.FS, ct *clusterTrial) {
			setupCluster(t, fsys, ct)
			b, err := crashedBroker(fsys, ct)
			if err != nil || !b.el.Status().IsController {
				t.Fatalf("broker 2 campaign: %+v, %v", b.el.Status(), err)
			}
		},
		work: func(fsys volume.FS, ct *clusterTrial) error {
			b, err := crashedBroker(fsys, ct)
			if err != nil {
				return err
			}
			if err := controllerRound(fsys, b, sweepTopics, ct); err != nil {
				return err
			}
			// Broker 3 leaves (written by broker 3's own host, not counted
			// here: the crash only stops broker 2's calls).
			b.obs.Observe([]Heartbeat{{BrokerID: 3, Counter: 1 << 20, KafkaAddr: "b3:9092", Incarnation: "c1", Leaving: true}})
			return controllerRound(fsys, b, sweepTopics, ct)
		},
		checkCrashed: checkCrashedCluster,
		restart:      restartCluster,
	}
}

// heartbeatProcedure: broker 2 beats twice, then leaves.
func heartbeatProcedure() clusterProcedure {
	return clusterProcedure{
		name:   "heartbeat",
		covers: []string{"WriteHeartbeat", "Heartbeater.Beat", "Heartbeater.Leave"},
		setup: func(t *testing.T, fsys volume.FS, ct *clusterTrial) {
			if err := WriteHeartbeat(fsys, clusterDir, Heartbeat{BrokerID: 2, Counter: 5, KafkaAddr: "b2:9092", Incarnation: "b0"}); err != nil {
				t.Fatal(err)
			}
		},
		work: func(fsys volume.FS, ct *clusterTrial) error {
			h := NewHeartbeater(fsys, clusterDir, Heartbeat{BrokerID: 2, KafkaAddr: "b2:9092", Incarnation: "b1"})
			for i := 0; i < 3; i++ {
				var err error
				if i < 2 {
					err = h.Beat()
				} else {
					err = h.Leave()
				}
				if err != nil {
					return err
				}
				last := h.Last()
				ct.beat = &last
			}
			return nil
		},
		checkCrashed: func(t *testing.T, fsys volume.FS, ct *clusterTrial) {
			t.Helper()
			hb := readBeat(t, fsys, 2)
			// The last acknowledged beat, or a later one whose write failed
			// but landed.
			if a := ct.beat; a != nil && (hb.Incarnation != a.Incarnation || hb.Counter < a.Counter || hb.Counter == a.Counter && hb.Leaving != a.Leaving) {
				t.Fatalf("after the crash the heartbeat is %+v; the last acknowledged write was %+v", hb, *ct.beat)
			}
			ct.tempsAfterCrash += len(tempsIn(t, fsys, path.Join(clusterDir, BrokersDir), ".2.json"))
		},
		restart: func(t *testing.T, fsys volume.FS, ct *clusterTrial) {
			t.Helper()
			h := NewHeartbeater(fsys, clusterDir, Heartbeat{BrokerID: 2, KafkaAddr: "b2:9092", Incarnation: "b2"})
			if err := h.Beat(); err != nil {
				t.Fatal(err)
			}
			if hb := readBeat(t, fsys, 2); hb.Incarnation != "b2" || hb.Counter != 1 || hb.Leaving {
				t.Fatalf("heartbeat after restart %+v", hb)
			}
			if left := tempsIn(t, fsys, path.Join(clusterDir, BrokersDir), ".2.json"); len(left) > 0 {
				t.Fatalf("heartbeat temps not swept by the first beat: %v", left)
			}
		},
	}
}

// readBeat reads broker id's heartbeat file, which must exist and parse.
func readBeat(t *testing.T, fsys volume.FS, id int32) Heartbeat {
	t.Helper()
	hbs, err := ReadHeartbeats(fsys, clusterDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, hb := range hbs {
		if hb.BrokerID == id {
			return hb
		}
	}
	b, err := volume.ReadFile(fsys, HeartbeatPath(clusterDir, id))
	t.Fatalf("heartbeat of broker %d missing or torn: %q, %v", id, b, err)
	return Heartbeat{}
}

// tempsIn lists the temp files in dir whose name starts with prefix.
func tempsIn(t *testing.T, fsys volume.FS, dir, prefix string) []string {
	t.Helper()
	ents, err := fsys.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if volume.IsTempName(e.Name()) && strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	return out
}

// assignmentProblem reports what is wrong with assignment.json as fsys
// shows it: torn, or older than the last write that returned success. It
// raises ct.durableAssignment to the epoch found.
func assignmentProblem(fsys volume.FS, ct *clusterTrial) error {
	a, err := ReadAssignment(fsys, clusterDir)
	if errors.Is(err, fs.ErrNotExist) {
		if ct.durableAssignment > 0 {
			return fmt.Errorf("assignment.json gone; a write at controller epoch %d had returned success", ct.durableAssignment)
		}
		return nil
	}
	if err != nil {
		b, _ := volume.ReadFile(fsys, AssignmentPath(clusterDir))
		return fmt.Errorf("assignment.json torn: %v (%q)", err, b)
	}
	if a.ControllerEpoch < ct.durableAssignment {
		return fmt.Errorf("assignment.json at controller epoch %d went back below %d", a.ControllerEpoch, ct.durableAssignment)
	}
	ct.durableAssignment = a.ControllerEpoch
	return nil
}

func checkAssignmentFile(t *testing.T, fsys volume.FS, ct *clusterTrial) {
	t.Helper()
	if err := assignmentProblem(fsys, ct); err != nil {
		t.Fatal(err)
	}
}

// checkClaims checks the claim files: epochs 1..top with no gap, and
// returns the highest.
func checkClaims(t *testing.T, fsys volume.FS) (top int32, valid map[int32]Claim) {
	t.Helper()
	if _, err := fsys.Stat(path.Join(clusterDir, ControllerDir)); errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	epochs, valid := claims(t, fsys)
	for i, e := range epochs {
		if e != int32(i+1) {
			t.Fatalf("claim epochs %v have a gap", epochs)
		}
	}
	return int32(len(epochs)), valid
}

func checkCrashedCluster(t *testing.T, fsys volume.FS, ct *clusterTrial) {
	t.Helper()
	checkAssignmentFile(t, fsys, ct)
	checkClaims(t, fsys)
	ct.tempsAfterCrash += len(tempsIn(t, fsys, clusterDir, "."+AssignmentFile))
}

// restartCluster starts brokers 2 and 3 again (new incarnations; broker 1
// stays gone) and runs rounds until they agree on one controller that has
// written the assignment, advancing the clock half a lease per round.
func restartCluster(t *testing.T, fsys volume.FS, ct *clusterTrial) {
	t.Helper()
	restartBrokers(t, fsys, ct, func(b *broker, r int) {
		if err := controllerRound(fsys, b, sweepTopics, ct); err != nil {
			t.Fatalf("round %d: broker %d controller round: %v", r, b.id, err)
		}
		checkAssignmentFile(t, fsys, ct)
	}, func(bs []*broker) bool { return converged(t, fsys, bs, ct) })
}

// restartBrokers starts brokers 2 and 3 again (new incarnations; broker 1
// stays gone) and runs rounds, half a lease apart, until done says so:
// each broker beats, observes and campaigns, then runs round.
func restartBrokers(t *testing.T, fsys volume.FS, ct *clusterTrial, round func(b *broker, r int), done func([]*broker) bool) {
	t.Helper()
	bs := []*broker{newBroker(fsys, 3, "c2", ct.clk.Now, lease), newBroker(fsys, 2, "b2", ct.clk.Now, lease)}
	for r := 0; r < 12; r++ {
		ct.clk.Advance(lease / 2)
		for _, b := range bs {
			b.beat(t)
		}
		for _, b := range bs {
			b.observe(t)
			s, err := b.el.Campaign()
			if err != nil {
				t.Logf("round %d: broker %d campaign: %v", r, b.id, err)
			}
			ct.noteStatus(b, s)
			round(b, r)
		}
		if done(bs) {
			return
		}
	}
	t.Fatalf("no convergence after 12 rounds: statuses %+v / %+v", bs[0].el.Status(), bs[1].el.Status())
}

// converged reports whether the brokers agree on one controller holding
// the highest claim, and the assignment is that controller's, complete and
// free of temps. A controller epoch believed by two brokers fails the test.
func converged(t *testing.T, fsys volume.FS, bs []*broker, ct *clusterTrial) bool {
	t.Helper()
	for e, who := range ct.believed {
		if len(who) > 1 {
			t.Fatalf("controller epoch %d won by more than one broker: %v", e, who)
		}
	}
	s0 := bs[0].el.Status()
	controllers := 0
	for _, b := range bs {
		s := b.el.Status()
		if s.Epoch != s0.Epoch || s.Controller != s0.Controller {
			return false
		}
		if s.IsController {
			controllers++
		}
	}
	if controllers != 1 {
		return false
	}
	top, valid := checkClaims(t, fsys)
	if c, ok := valid[top]; !ok || top != s0.Epoch || c.BrokerID != s0.Controller {
		return false
	}
	a, err := ReadAssignment(fsys, clusterDir)
	if err != nil || a.ControllerEpoch != s0.Epoch {
		return false
	}
	for _, tp := range sweepTopics {
		ps := a.Topics[tp.ID]
		if len(ps) != int(tp.Partitions) {
			return false
		}
		for _, p := range ps {
			if p.Broker != 2 && p.Broker != 3 {
				return false
			}
		}
	}
	if left := tempsIn(t, fsys, clusterDir, "."+AssignmentFile); len(left) > 0 {
		t.Fatalf("assignment temps left after the controller wrote: %v", left)
	}
	return true
}

func newClusterTrial() *clusterTrial {
	return &clusterTrial{clk: &fakeClock{}, believed: map[int32]map[string]bool{}, tried: map[AssignmentVersion]*Assignment{}}
}

// sweepProcedure runs one procedure's crash sweep on one substrate and
// returns the crash points covered.
func sweepProcedure(t *testing.T, p clusterProcedure, sub substrate) int {
	t.Helper()
	fresh := func(t *testing.T) (world, *clusterTrial) {
		w := sub.Fresh()
		ct := newClusterTrial()
		fsys := w.Host("setup")
		if err := volume.MkdirAllSync(fsys, clusterDir); err != nil {
			t.Fatal(err)
		}
		p.setup(t, fsys, ct)
		return w, ct
	}
	w, ct := fresh(t)
	clean := faultfs.New(w.Host("crashing"), nil)
	if err := p.work(clean, ct); err != nil {
		t.Fatalf("clean run: %v", err)
	}
	n := clean.MutatingOps()
	if n == 0 {
		t.Fatal("clean run made no mutating operations")
	}
	covered, temps := 0, 0
	for i := 0; i < n; i++ {
		for _, after := range []bool{false, true} {
			name := fmt.Sprintf("op%03d-before", i)
			if after {
				name = fmt.Sprintf("op%03d-after", i)
			}
			ok := t.Run(name, func(t *testing.T) {
				w, ct := fresh(t)
				ffs := faultfs.New(w.Host("crashing"), faultfs.CrashAtMutating(i, after))
				err := p.work(ffs, ct)
				if !ffs.Crashed() {
					t.Fatalf("crash point not reached (work: %v, %d mutating ops)", err, ffs.MutatingOps())
				}
				if err == nil {
					t.Fatal("work reported success although the volume crashed")
				}
				// Another host reading at the moment of the crash.
				if err := assignmentProblem(w.Host("reader"), &clusterTrial{durableAssignment: ct.durableAssignment}); err != nil {
					t.Fatalf("a reader at the crash: %v", err)
				}
				fsys := w.Crash().Host("restarted")
				p.checkCrashed(t, fsys, ct)
				p.restart(t, fsys, ct)
				temps += ct.tempsAfterCrash
			})
			if ok {
				covered++
			}
		}
	}
	t.Logf("crash sweep %s on %s: %d crash points (%d mutating ops x before/after), %d temp files left by crashes and swept", p.name, sub.Name, covered, n, temps)
	return covered
}

// TestClusterCrashSweep crashes every procedure of clusterProcedures at
// every mutating op, before and after it is applied, on every substrate;
// fresh brokers on what survived must converge: one controller per epoch,
// an assignment that always parses and never goes back, temps swept.
func TestClusterCrashSweep(t *testing.T) {
	total := map[string]int{}
	subs := substrates()
	for _, p := range clusterProcedures {
		for _, sub := range subs {
			var covered int
			t.Run(sub.Name+"/"+p.name, func(t *testing.T) { covered = sweepProcedure(t, p, sub) })
			total[sub.Name] += covered
			fmt.Printf("crash sweep %s: %d crash points (%s)\n", p.name, covered, sub.Name)
		}
	}
	for _, sub := range subs {
		fmt.Printf("crash sweep cluster total: %d crash points over %d procedures (%s)\n", total[sub.Name], len(clusterProcedures), sub.Name)
	}
}

// negativeControls are deliberately unsafe procedures (for chaos specs):
// the sweep must catch each at one crash point at least, which shows its
// checks can fail.
var negativeControls = []struct {
	name   string
	covers string
	write  func(volume.FS, string, *Assignment) error
}{
	{name: "assignment-write-in-place", covers: "WriteAssignmentInPlaceUnsafe", write: WriteAssignmentInPlaceUnsafe},
}

// TestClusterCrashSweepNegativeControls runs the assignment-write sweep
// with each negative control's writer and counts the crash points where a
// reader or the restarted volume finds assignment.json torn or gone back.
func TestClusterCrashSweepNegativeControls(t *testing.T) {
	p := assignmentWriteProcedure()
	for _, nc := range negativeControls {
		for _, sub := range substrates() {
			fresh := func() (world, *clusterTrial) {
				w := sub.Fresh()
				ct := newClusterTrial()
				fsys := w.Host("setup")
				if err := volume.MkdirAllSync(fsys, clusterDir); err != nil {
					t.Fatal(err)
				}
				p.setup(t, fsys, ct)
				ct.write = nc.write
				return w, ct
			}
			w, ct := fresh()
			clean := faultfs.New(w.Host("crashing"), nil)
			if err := p.work(clean, ct); err != nil {
				t.Fatalf("%s clean run: %v", nc.name, err)
			}
			n, caught := clean.MutatingOps(), 0
			for i := 0; i < n; i++ {
				for _, after := range []bool{false, true} {
					w, ct := fresh()
					ffs := faultfs.New(w.Host("crashing"), faultfs.CrashAtMutating(i, after))
					_ = p.work(ffs, ct)
					live := assignmentProblem(w.Host("reader"), &clusterTrial{durableAssignment: ct.durableAssignment})
					if live != nil || assignmentProblem(w.Crash().Host("restarted"), ct) != nil {
						caught++
					}
				}
			}
			fmt.Printf("crash sweep %s: %d crash points, %d caught (negative control, %s)\n", nc.name, 2*n, caught, sub.Name)
			if caught == 0 {
				t.Errorf("%s on %s: the sweep caught nothing at %d crash points", nc.name, sub.Name, 2*n)
			}
		}
	}
}

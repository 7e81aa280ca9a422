package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/faultfs"
)

// Crash sweeps of the cross-host close-to-open check (probe.go), in the
// clusterProcedures mould:
//
//   - cross-host-check-first, cross-host-check-restart: broker 2 runs
//     CheckCrossHost (on a volume without a probes directory yet, or over
//     the leftovers of an earlier run of its own that crashed) and crashes
//     at each of its mutating ops; broker 1, on another host, answers from
//     its heartbeat loop.
//   - probe-respond: broker 1's ProbeResponder crashes at each of its
//     mutating ops (answers and sweeps) while broker 2, on another host,
//     runs a check; a dead broker 9 left files to sweep.
//
// After each crash point, on both the volume as it stands (the crashed
// broker's process died and the other broker goes on; on nfsfs every
// host's client also lost what it had not flushed, the server nothing) and
// the crash clone (every host and the volume crashed), brokers restart and:
// no check ever reports a close-to-open violation, a restarted broker's
// check passes, the responder keeps answering, every probe file left is
// swept once the injected clock has moved on, and the probe code mutates
// nothing outside <cluster>/probes/.

const (
	probeStep    = 50 * time.Millisecond // fake time between polls of a check
	probeLease   = time.Second           // responder lease: sweeps after 10 s unchanged
	probeKeep    = "keep.json"           // a file outside probes/ nobody may touch
	probeOther   = "README"              // a file in probes/ that is not the check's
	probeSweepAt = 20                    // responder rounds, a second apart, to sweep leftovers
)

// probeTrial is what one crash point of a probe sweep keeps outside the
// volume beyond clusterTrial: the surviving host's view and the live
// broker's responder and heartbeat, and what went wrong where no
// *testing.T was at hand.
type probeTrial struct {
	// survivor is the setup host's view of the volume, the live broker's
	// host during work; after the crash it is the volume as it stands.
	survivor volume.FS
	resp     *ProbeResponder // broker 1's responder (initiator sweeps)
	hb       *Heartbeater    // broker 1's heartbeat, on survivor

	mu       sync.Mutex
	problems []string // violations reported, work failures
	touched  []string // mutating ops of probe code outside probes/
}

func (pt *probeTrial) problem(format string, args ...any) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	pt.problems = append(pt.problems, fmt.Sprintf(format, args...))
}

// report fails the test with every problem recorded so far.
func (pt *probeTrial) report(t *testing.T) {
	t.Helper()
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if len(pt.problems) > 0 {
		t.Errorf("problems:\n  %s", strings.Join(pt.problems, "\n  "))
	}
	if len(pt.touched) > 0 {
		t.Errorf("probe code mutated outside %s/: %v", ProbesDir, pt.touched)
	}
	if t.Failed() {
		t.FailNow()
	}
}

// probeTrials maps each crash point's clusterTrial to its probeTrial.
var probeTrials = struct {
	sync.Mutex
	m map[*clusterTrial]*probeTrial
}{m: map[*clusterTrial]*probeTrial{}}

func newProbeTrial(t *testing.T, ct *clusterTrial, survivor volume.FS) *probeTrial {
	pt := &probeTrial{survivor: survivor}
	probeTrials.Lock()
	probeTrials.m[ct] = pt
	probeTrials.Unlock()
	t.Cleanup(func() {
		probeTrials.Lock()
		delete(probeTrials.m, ct)
		probeTrials.Unlock()
	})
	return pt
}

func probeTrialOf(ct *clusterTrial) *probeTrial {
	probeTrials.Lock()
	defer probeTrials.Unlock()
	pt := probeTrials.m[ct]
	if pt == nil {
		panic("probe sweep: no probeTrial for this clusterTrial (setup not run?)")
	}
	return pt
}

// probeGuardFS records every mutating call of the probe code outside
// <cluster>/probes/ (creating the directory and syncing it and its
// parents excepted).
type probeGuardFS struct {
	volume.FS
	who string
	pt  *probeTrial
}

func (g probeGuardFS) note(op, name string) {
	name = path.Clean(name)
	dir := path.Join(clusterDir, ProbesDir)
	if strings.HasPrefix(name, dir+"/") {
		return
	}
	if (op == "MkdirAll" || op == "SyncDir") && (name == dir || strings.HasPrefix(dir, name+"/")) {
		return
	}
	g.pt.mu.Lock()
	defer g.pt.mu.Unlock()
	g.pt.touched = append(g.pt.touched, g.who+": "+op+" "+name)
}

func (g probeGuardFS) Create(name string) (volume.File, error) {
	g.note("Create", name)
	return g.FS.Create(name)
}

func (g probeGuardFS) CreateExclusive(name string) (volume.File, error) {
	g.note("CreateExclusive", name)
	return g.FS.CreateExclusive(name)
}

func (g probeGuardFS) OpenReadWrite(name string) (volume.File, error) {
	g.note("OpenReadWrite", name)
	return g.FS.OpenReadWrite(name)
}

func (g probeGuardFS) Rename(oldname, newname string) error {
	g.note("Rename", oldname)
	g.note("Rename", newname)
	return g.FS.Rename(oldname, newname)
}

func (g probeGuardFS) Remove(name string) error {
	g.note("Remove", name)
	return g.FS.Remove(name)
}

func (g probeGuardFS) MkdirAll(name string, perm fs.FileMode) error {
	g.note("MkdirAll", name)
	return g.FS.MkdirAll(name, perm)
}

func (g probeGuardFS) SyncDir(name string) error {
	g.note("SyncDir", name)
	return g.FS.SyncDir(name)
}

// peerDrivenFS runs the peer's round before each poll of the check over
// it (its listing of the heartbeats and its reads of broker 1's answer),
// so that CheckCrossHost, which polls on a real ticker, meets the peer at
// the same points of its run every time.
type peerDrivenFS struct {
	volume.FS
	before func()
}

func (p peerDrivenFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if path.Clean(name) == path.Join(clusterDir, BrokersDir) {
		p.before()
	}
	return p.FS.ReadDir(name)
}

func (p peerDrivenFS) Open(name string) (volume.File, error) {
	if path.Clean(name) == seenPath(clusterDir, 2, 1) {
		p.before()
	}
	return p.FS.Open(name)
}

// crashedFS reports whether fsys is a faultfs that has crashed.
func crashedFS(fsys volume.FS) bool {
	ff, ok := fsys.(*faultfs.FS)
	return ok && ff.Crashed()
}

func errCrashed(fsys volume.FS) error {
	return fmt.Errorf("probe sweep: %w (after %d mutating ops)", faultfs.ErrCrashed, fsys.(*faultfs.FS).MutatingOps())
}

// violation describes a close-to-open violation res reports, or "".
func violation(res CrossHostResult) string {
	if res.Err != nil || len(res.Stale) > 0 {
		return fmt.Sprintf("stale %v: %v", res.Stale, res.Err)
	}
	return ""
}

// passed reports whether res is broker 1 answering both phases.
func passed(res CrossHostResult) bool {
	return violation(res) == "" && !res.Skipped && slices.Equal(res.Peers, []int32{1})
}

// probeCheckConfig is broker 2's check over fsys.
func probeCheckConfig(fsys volume.FS, ct *clusterTrial) CrossHostConfig {
	return CrossHostConfig{FS: fsys, ClusterDir: clusterDir, BrokerID: 2, Lease: lease, Clock: ct.clk.Now}
}

// stepCheck runs broker 2's check over initFS to its end, broker 1 beating
// and answering over its own view between polls, and cleans up.
func stepCheck(t *testing.T, initFS volume.FS, resp *ProbeResponder, hb *Heartbeater, ct *clusterTrial) CrossHostResult {
	t.Helper()
	c := NewCrossHostCheck(probeCheckConfig(initFS, ct))
	defer c.Cleanup()
	for range 400 {
		done, err := c.Step()
		if err != nil {
			t.Fatalf("broker 2's check: %v", err)
		}
		if done {
			return c.Result()
		}
		if err := hb.Beat(); err != nil {
			t.Fatalf("broker 1 beat: %v", err)
		}
		resp.Round()
		ct.clk.Advance(probeStep)
	}
	t.Fatal("broker 2's check never finished")
	return CrossHostResult{}
}

// requirePass checks that a restarted broker's check passed.
func requirePass(t *testing.T, res CrossHostResult, where string) {
	t.Helper()
	if v := violation(res); v != "" {
		t.Fatalf("%s: the check reported a close-to-open violation on an honest substrate: %s", where, v)
	}
	if !passed(res) {
		t.Fatalf("%s: the check did not pass: %+v", where, res)
	}
}

// sweepRounds runs broker 1's heartbeat loop for n seconds of fake time.
func sweepRounds(t *testing.T, resp *ProbeResponder, hb *Heartbeater, ct *clusterTrial, n int) {
	t.Helper()
	for range n {
		ct.clk.Advance(time.Second)
		if err := hb.Beat(); err != nil {
			t.Fatalf("broker 1 beat: %v", err)
		}
		resp.Round()
	}
}

// probesLeft lists the probes directory: the entries other than the
// unrelated file, and whether that one is there.
func probesLeft(fsys volume.FS) (ours []string, other bool, err error) {
	ents, err := fsys.ReadDir(path.Join(clusterDir, ProbesDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	for _, e := range ents {
		if e.Name() == probeOther {
			other = true
			continue
		}
		ours = append(ours, e.Name())
	}
	return ours, other, nil
}

// requireSwept checks that every probe file is gone, the unrelated file in
// probes/ stays (when planted), and the file outside is intact.
func requireSwept(t *testing.T, fsys volume.FS, ct *clusterTrial, planted bool, where string) {
	t.Helper()
	ours, other, err := probesLeft(fsys)
	if err != nil {
		t.Fatal(err)
	}
	if len(ours) > 0 {
		t.Fatalf("%s: probe files never swept (fake clock at %v): %v", where, ct.clk.Now(), ours)
	}
	if planted && !other {
		t.Fatalf("%s: %s/%s, not a probe file, was removed", where, ProbesDir, probeOther)
	}
	requireKeep(t, fsys, where)
}

func requireKeep(t *testing.T, fsys volume.FS, where string) {
	t.Helper()
	if b, err := volume.ReadFile(fsys, path.Join(clusterDir, probeKeep)); err != nil || string(b) != "{}" {
		t.Fatalf("%s: %s outside %s/ changed: %q, %v", where, probeKeep, ProbesDir, b, err)
	}
}

// plant writes files atomically and durably.
func plant(t *testing.T, fsys volume.FS, files map[string][]byte) {
	t.Helper()
	for name, b := range files {
		if err := writeAtomicMkdir(fsys, path.Join(clusterDir, name), b); err != nil {
			t.Fatal(err)
		}
	}
}

func seenJSON(t *testing.T, r seenReply) []byte {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// probeSetupCommon gives broker 1 a heartbeat and plants the file outside
// probes/.
func probeSetupCommon(t *testing.T, fsys volume.FS, ct *clusterTrial) *probeTrial {
	t.Helper()
	pt := newProbeTrial(t, ct, fsys)
	pt.hb = NewHeartbeater(fsys, clusterDir, Heartbeat{BrokerID: 1, KafkaAddr: "b1:9092", Incarnation: "one"})
	if err := pt.hb.Beat(); err != nil {
		t.Fatal(err)
	}
	plant(t, fsys, map[string][]byte{probeKeep: []byte("{}")})
	return pt
}

// plantedTemps are the temp names the setups plant as an earlier crash's
// leftovers: not counted as left by the crash point.
var plantedTemps = []string{".2.probe.tmp-0123456789abcdef", ".2.1.seen.tmp-fedcba9876543210", ".9.1.seen.tmp-0123456789abcdef"}

// countProbeTemps adds the temps the crash left in probes/ to the trial.
func countProbeTemps(t *testing.T, fsys volume.FS, ct *clusterTrial) {
	t.Helper()
	for _, n := range tempsIn(t, fsys, path.Join(clusterDir, ProbesDir), ".") {
		if !slices.Contains(plantedTemps, n) {
			ct.tempsAfterCrash++
		}
	}
}

// crossHostCheckProcedure: broker 2 starts and runs CheckCrossHost while
// broker 1 answers; with leftovers, an earlier run of broker 2 crashed
// after broker 1 answered it.
func crossHostCheckProcedure(name string, leftovers bool) clusterProcedure {
	return clusterProcedure{
		name: name,
		covers: []string{"CheckCrossHost", "NewCrossHostCheck", "CrossHostCheck.Step",
			"CrossHostCheck.Result", "CrossHostCheck.Cleanup"},
		setup: func(t *testing.T, fsys volume.FS, ct *clusterTrial) {
			pt := probeSetupCommon(t, fsys, ct)
			pt.resp = NewProbeResponder(probeGuardFS{fsys, "broker 1", pt}, clusterDir, 1, probeLease, ct.clk.Now)
			if leftovers {
				plant(t, fsys, map[string][]byte{
					path.Join(ProbesDir, "2.probe"):       probeContent("0ldsess10n", "0ldn0nce2"),
					path.Join(ProbesDir, "2.go"):          []byte("0ldsess10n\n"),
					path.Join(ProbesDir, "2.1.seen"):      seenJSON(t, seenReply{Session: "0ldsess10n", Phase: 1, Read: "0ldn0nce1"}),
					path.Join(ProbesDir, plantedTemps[0]): probeContent("0ldsess10n", "0ldn0nce2"),
					path.Join(ProbesDir, plantedTemps[1]): []byte("{"),
					path.Join(ProbesDir, probeOther):      []byte("not a probe file"),
				})
			}
		},
		work: func(fsys volume.FS, ct *clusterTrial) error {
			pt := probeTrialOf(ct)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			polls := 0
			peerRound := func() {
				if polls++; polls > 1000 {
					cancel()
					return
				}
				ct.clk.Advance(probeStep)
				if err := pt.hb.Beat(); err != nil {
					pt.problem("broker 1 beat: %v", err)
				}
				pt.resp.Round()
			}
			initFS := peerDrivenFS{FS: probeGuardFS{fsys, "broker 2", pt}, before: peerRound}
			res, err := CheckCrossHost(ctx, probeCheckConfig(initFS, ct), time.Nanosecond)
			if v := violation(res); v != "" {
				pt.problem("broker 2's check reported a close-to-open violation (crashed: %v): %s", crashedFS(fsys), v)
			}
			if crashedFS(fsys) {
				return errCrashed(fsys)
			}
			if err != nil {
				return err
			}
			if !passed(res) {
				return fmt.Errorf("check did not pass: %+v", res)
			}
			return nil
		},
		checkCrashed: func(t *testing.T, fsys volume.FS, ct *clusterTrial) {
			t.Helper()
			probeTrialOf(ct).report(t)
			countProbeTemps(t, fsys, ct)
			requireKeep(t, fsys, "after the crash")
		},
		restart: func(t *testing.T, fsys volume.FS, ct *clusterTrial) {
			t.Helper()
			pt := probeTrialOf(ct)
			// The volume as it stands: broker 1 never stopped; broker 2
			// starts again at once and checks.
			res := stepCheck(t, probeGuardFS{pt.survivor, "broker 2 restarted", pt}, pt.resp, pt.hb, ct)
			requirePass(t, res, "broker 2 restarted beside the live broker 1")
			sweepRounds(t, pt.resp, pt.hb, ct, probeSweepAt)
			requireSwept(t, pt.survivor, ct, leftovers, "beside the live broker 1")
			pt.report(t)

			// The crash clone: broker 1 restarts; broker 2 stays down until
			// broker 1 has swept its leftovers, then checks.
			hb := NewHeartbeater(fsys, clusterDir, Heartbeat{BrokerID: 1, KafkaAddr: "b1:9092", Incarnation: "one-b"})
			resp := NewProbeResponder(probeGuardFS{fsys, "broker 1 restarted", pt}, clusterDir, 1, probeLease, ct.clk.Now)
			sweepRounds(t, resp, hb, ct, probeSweepAt)
			requireSwept(t, fsys, ct, leftovers, "crash clone, broker 2 down")
			res = stepCheck(t, probeGuardFS{fsys, "broker 2 restarted", pt}, resp, hb, ct)
			requirePass(t, res, "crash clone, both restarted")
			sweepRounds(t, resp, hb, ct, probeSweepAt)
			requireSwept(t, fsys, ct, leftovers, "crash clone, after the check")
			pt.report(t)
		},
	}
}

// probeRespondProcedure: broker 1 answers broker 2's check from its
// heartbeat loop and sweeps what a dead broker 9 (and a dead broker 7)
// left: a probe nobody will announce, broker 1's answer to it, a temp of
// an answer, an announcement.
func probeRespondProcedure() clusterProcedure {
	return clusterProcedure{
		name:   "probe-respond",
		covers: []string{"NewProbeResponder", "ProbeResponder.Round"},
		setup: func(t *testing.T, fsys volume.FS, ct *clusterTrial) {
			probeSetupCommon(t, fsys, ct)
			plant(t, fsys, map[string][]byte{
				path.Join(ProbesDir, "9.probe"):       probeContent("deadsess9", "deadn0nce"),
				path.Join(ProbesDir, "9.1.seen"):      seenJSON(t, seenReply{Session: "deadsess9", Phase: 1, Read: "deadn0nce"}),
				path.Join(ProbesDir, plantedTemps[2]): []byte(`{"session":`),
				path.Join(ProbesDir, "7.go"):          []byte("deadsess7\n"),
				path.Join(ProbesDir, probeOther):      []byte("not a probe file"),
			})
		},
		work: func(fsys volume.FS, ct *clusterTrial) error {
			pt := probeTrialOf(ct)
			resp := NewProbeResponder(probeGuardFS{fsys, "broker 1", pt}, clusterDir, 1, probeLease, ct.clk.Now)
			// Broker 1's heartbeat (its host's other writes) stops with it.
			alive := func() bool {
				if crashedFS(fsys) {
					return false
				}
				if err := pt.hb.Beat(); err != nil {
					pt.problem("broker 1 beat: %v", err)
				}
				return true
			}
			c := NewCrossHostCheck(probeCheckConfig(probeGuardFS{pt.survivor, "broker 2", pt}, ct))
			finished := false
			for range 400 {
				done, err := c.Step()
				if err != nil {
					pt.problem("broker 2's check (on a healthy host): %v", err)
				}
				if finished = done; done {
					break
				}
				if alive() {
					resp.Round()
				}
				ct.clk.Advance(probeStep)
			}
			c.Cleanup()
			res := c.Result()
			switch {
			case !finished:
				pt.problem("broker 2's check never finished (broker 1 crashed: %v)", crashedFS(fsys))
			case violation(res) != "":
				pt.problem("broker 2's check reported a close-to-open violation (broker 1 crashed: %v): %s", crashedFS(fsys), violation(res))
			case !crashedFS(fsys) && !passed(res):
				return fmt.Errorf("check did not pass: %+v", res)
			}
			for range probeSweepAt {
				if !alive() {
					break
				}
				ct.clk.Advance(time.Second)
				resp.Round()
			}
			if crashedFS(fsys) {
				return errCrashed(fsys)
			}
			if ours, _, err := probesLeft(pt.survivor); err != nil || len(ours) > 0 {
				return fmt.Errorf("not swept: %v, %v", ours, err)
			}
			return nil
		},
		checkCrashed: func(t *testing.T, fsys volume.FS, ct *clusterTrial) {
			t.Helper()
			probeTrialOf(ct).report(t)
			countProbeTemps(t, fsys, ct)
			requireKeep(t, fsys, "after the crash")
		},
		restart: func(t *testing.T, fsys volume.FS, ct *clusterTrial) {
			t.Helper()
			pt := probeTrialOf(ct)
			for _, w := range []struct {
				where string
				fsys  volume.FS
			}{{"broker 1 restarted on the volume as it stands", pt.survivor}, {"crash clone, both restarted", fsys}} {
				hb := NewHeartbeater(w.fsys, clusterDir, Heartbeat{BrokerID: 1, KafkaAddr: "b1:9092", Incarnation: "one-b"})
				resp := NewProbeResponder(probeGuardFS{w.fsys, "broker 1 restarted", pt}, clusterDir, 1, probeLease, ct.clk.Now)
				res := stepCheck(t, probeGuardFS{w.fsys, "broker 2", pt}, resp, hb, ct)
				requirePass(t, res, w.where)
				sweepRounds(t, resp, hb, ct, probeSweepAt)
				requireSwept(t, w.fsys, ct, true, w.where)
				pt.report(t)
			}
		},
	}
}

package specs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/kaas-dev/kaas/engine/cluster"
)

// ---------------------------------------------------------------------------
// Watching the assignment file

// epochOwner is who an assignment gives a partition at one leader epoch.
type epochOwner struct {
	broker      int32
	incarnation string
}

type partitionEpoch struct {
	topicID   string
	partition int32
	epoch     int32
}

// assignmentWatch reads the assignment file every couple of milliseconds,
// as a broker would, and records whether every read parsed, the controller
// epochs in the order seen, and every (partition, leader epoch) -> owner
// ever assigned, flagging a leader epoch given to two owners, a partition
// whose epoch went backwards, and a controller epoch that went backwards.
type assignmentWatch struct {
	path string

	mu          sync.Mutex
	reads       int
	transient   int      // opens that failed with ENOENT/ESTALE after the file existed
	bad         []string // reads that did not parse
	ctrlEpochs  []int32  // distinct, in the order seen
	owners      map[partitionEpoch]epochOwner
	lastEpoch   map[string]int32 // "topicID/partition" -> last leader epoch seen
	conflicts   []string
	last        *cluster.Assignment
	stop        chan struct{}
	stopped     chan struct{}
	seenAtLeast bool
}

func watchAssignment(path string) *assignmentWatch {
	w := &assignmentWatch{path: path, owners: map[partitionEpoch]epochOwner{}, lastEpoch: map[string]int32{},
		stop: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		defer close(w.stopped)
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			w.read()
			select {
			case <-w.stop:
				w.read()
				return
			case <-t.C:
			}
		}
	}()
	DeferCleanup(w.close)
	return w
}

func (w *assignmentWatch) close() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.stopped
}

func (w *assignmentWatch) read() {
	b, err := os.ReadFile(w.path)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		if w.seenAtLeast && (errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESTALE)) {
			w.transient++
		} else if w.seenAtLeast || !errors.Is(err, fs.ErrNotExist) {
			w.bad = append(w.bad, err.Error())
		}
		return
	}
	w.seenAtLeast = true
	w.reads++
	var a cluster.Assignment
	if err := json.Unmarshal(b, &a); err != nil || a.ControllerEpoch <= 0 || a.Topics == nil {
		w.bad = append(w.bad, fmt.Sprintf("%v: %q", err, b))
		return
	}
	if n := len(w.ctrlEpochs); n == 0 || w.ctrlEpochs[n-1] != a.ControllerEpoch {
		if n > 0 && a.ControllerEpoch < w.ctrlEpochs[n-1] {
			w.conflicts = append(w.conflicts, fmt.Sprintf("controller epoch went back from %d to %d", w.ctrlEpochs[n-1], a.ControllerEpoch))
		}
		w.ctrlEpochs = append(w.ctrlEpochs, a.ControllerEpoch)
	}
	for id, ps := range a.Topics {
		for p, o := range ps {
			k := partitionEpoch{id, int32(p), o.LeaderEpoch}
			now := epochOwner{o.Broker, o.Incarnation}
			if was, ok := w.owners[k]; ok && was != now {
				w.conflicts = append(w.conflicts, fmt.Sprintf("%s/%d epoch %d given to broker %d (%s) and to broker %d (%s)",
					id, p, o.LeaderEpoch, was.broker, was.incarnation, o.Broker, o.Incarnation))
			}
			w.owners[k] = now
			pk := fmt.Sprintf("%s/%d", id, p)
			if last, ok := w.lastEpoch[pk]; ok && o.LeaderEpoch < last {
				w.conflicts = append(w.conflicts, fmt.Sprintf("%s leader epoch went back from %d to %d", pk, last, o.LeaderEpoch))
			}
			w.lastEpoch[pk] = o.LeaderEpoch
		}
	}
	w.last = &a
}

// current returns the last assignment read (nil if none yet).
func (w *assignmentWatch) current() *cluster.Assignment {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}

// owner returns who the assignment history gave a partition at epoch.
func (w *assignmentWatch) owner(topicID string, partition, epoch int32) (epochOwner, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	o, ok := w.owners[partitionEpoch{topicID, partition, epoch}]
	return o, ok
}

// expectSound asserts that every read parsed and nothing conflicted.
func (w *assignmentWatch) expectSound() {
	GinkgoHelper()
	w.mu.Lock()
	defer w.mu.Unlock()
	AddReportEntry("assignment file reads", fmt.Sprintf("%d parsed, %d transient open errors, controller epochs %v", w.reads, w.transient, w.ctrlEpochs))
	Expect(w.reads).To(BeNumerically(">", 0), "the assignment file was never read")
	Expect(w.bad).To(BeEmpty(), "reads of the assignment file that did not parse (of %d)", w.reads)
	Expect(w.conflicts).To(BeEmpty(), "the assignment history")
}

// ---------------------------------------------------------------------------
// Helpers

// withoutFaults removes --inject-faults from a broker's arguments, for its
// next start.
func withoutFaults(b *Broker) {
	var args []string
	for i := 0; i < len(b.ExtraArgs); i++ {
		if b.ExtraArgs[i] == "--inject-faults" {
			i++
			continue
		}
		if !strings.HasPrefix(b.ExtraArgs[i], "--inject-faults=") {
			args = append(args, b.ExtraArgs[i])
		}
	}
	b.ExtraArgs = args
}

// waitBrokerExited waits until b's process has exited and returns when it was
// first seen gone.
func waitBrokerExited(ctx context.Context, b *Broker, within time.Duration) time.Time {
	GinkgoHelper()
	var at time.Time
	Eventually(func() bool {
		if !b.Running() {
			at = time.Now()
			return true
		}
		return false
	}).WithContext(ctx).WithTimeout(within).WithPolling(2*time.Millisecond).Should(BeTrue(),
		"broker %d still running; log tail:\n%s", b.ID, b.LogTail(4096))
	return at
}

// readControllerClaim reads the claim file of a controller epoch (ok false if it is
// missing or does not parse yet).
func readControllerClaim(clusterDir string, epoch int32) (cluster.Claim, bool) {
	b, err := os.ReadFile(cluster.ClaimPath(clusterDir, epoch))
	if err != nil {
		return cluster.Claim{}, false
	}
	var c cluster.Claim
	if json.Unmarshal(b, &c) != nil || c.Epoch != epoch {
		return cluster.Claim{}, false
	}
	return c, true
}

// assignmentTemps lists the temp files of assignment writes left in the
// cluster directory.
func assignmentTemps(clusterDir string) []string {
	GinkgoHelper()
	ents, err := os.ReadDir(clusterDir)
	Expect(err).NotTo(HaveOccurred())
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "."+cluster.AssignmentFile+".tmp-") {
			out = append(out, e.Name())
		}
	}
	return out
}

// ---------------------------------------------------------------------------
// Spec 3 of issue 3

// assignmentWriteSteps are the volume operations of one assignment write
// (cluster.WriteAssignment, through volume.WriteFileAtomic): exclusive
// create of the temp file, write, fsync, close, rename over
// assignment.json, fsync of the cluster directory.
var assignmentWriteSteps = []string{"CreateExclusive", "Write", "Sync", "Close", "Rename", "SyncDir"}

// assignmentKillFault is the --inject-faults value that SIGKILLs broker 1
// (whose cluster directory is clusterDir) at step of the first assignment
// write after it first reads broker 3's heartbeat, that is the write of the
// membership change that adds broker 3, before or after the step is
// applied.
func assignmentKillFault(clusterDir, step, when string) string {
	arm := "Open:" + filepath.Join(clusterDir, cluster.BrokersDir, "3.json") + ">"
	tmps := filepath.Join(clusterDir, "."+cluster.AssignmentFile+".tmp-*")
	target := cluster.AssignmentPath(clusterDir)
	switch step {
	case "Rename":
		return arm + "Rename:" + target + ":KILL:1:" + when
	case "SyncDir":
		// The directory sync has only the directory's path: it is the one
		// right after that write's rename.
		return arm + "Rename:" + target + ">SyncDir:" + clusterDir + ":KILL:1:" + when
	default:
		return arm + step + ":" + tmps + ":KILL:1:" + when
	}
}

// Killing the controller at every step of writing the assignment leaves a
// cluster that elects a new controller and carries on: the assignment file
// always parses, no leader epoch of a partition is ever given to two
// brokers, records are stored in non-decreasing leader epochs, and no
// acknowledged record is lost or duplicated.
var _ = Describe("the controller killed while it writes the assignment", Label("cluster", "slow"), func() {
	var entries []TableEntry
	for _, step := range assignmentWriteSteps {
		for _, when := range []string{"before", "after"} {
			entries = append(entries, Entry(step+" "+when, step, when, SpecTimeout(3*time.Minute)))
		}
	}
	DescribeTable("a new controller takes over, the assignment always parses, one writer per partition and epoch",
		func(ctx SpecContext, step, when string) {
			dirs := SharedDataDirs(3)
			abs := make([]string, 3)
			for i, d := range dirs {
				a, err := filepath.Abs(d)
				Expect(err).NotTo(HaveOccurred())
				abs[i] = a
			}
			// Broker 1's view of the cluster directory (how kaas-broker
			// derives it from --data), and the spec's.
			clusterDir := filepath.Join(abs[0], "__cluster")
			watch := watchAssignment(cluster.AssignmentPath(clusterDir))
			addrs := distinctFreeAddrs(3)
			fault := assignmentKillFault(clusterDir, step, when)
			By("broker 1 alone, with fault " + fault)
			b1 := StartBroker(dirs[0], WithBrokerID(1), withListenAddr(addrs, 0), WithBrokerArgs("--inject-faults", fault))

			topic := UniqueName("ctrl")
			topics := []string{topic}
			adm := NewAdmin(b1)
			CreateTopic(ctx, adm, topic, 6)
			ids := topicIDStrings(ctx, adm, topic)
			// Broker 3's arrival must change the assignment, or there is
			// no write to kill: add topics until it wins a partition (the
			// controller assigns by cluster.Assign over the live brokers).
			wins3 := func() bool {
				for _, id := range ids {
					for p := range int32(6) {
						if cluster.Assign(id, p, []cluster.LiveBroker{{ID: 1}, {ID: 2}, {ID: 3}}, "") == 3 {
							return true
						}
					}
				}
				return false
			}
			for i := 0; !wins3(); i++ {
				Expect(i).To(BeNumerically("<", 5), "broker 3 wins no partition of %d topics", len(topics))
				t := UniqueName("ctrl-pad")
				CreateTopic(ctx, adm, t, 6)
				topics = append(topics, t)
				ids = topicIDStrings(ctx, adm, topics...)
			}
			partitions := 6 * len(topics)

			ledger := startLedgerProducer(ctx, addrs, []string{topic}, 6)
			ledger.waitMore(ctx, 300, 30*time.Second)

			By("broker 2 joins")
			b2 := StartBroker(dirs[1], WithBrokerID(2), withListenAddr(addrs, 1))
			_, _ = brokersAgree(ctx, []*Broker{b1, b2}, topics, partitions, 30*time.Second)
			Expect(b1.Running()).To(BeTrue(), "broker 1 died before broker 3 joined: the fault fired early")
			before := watch.current()
			Expect(before).NotTo(BeNil())
			oldEpoch := before.ControllerEpoch
			claim, ok := readControllerClaim(clusterDir, oldEpoch)
			Expect(ok).To(BeTrue(), "claim of controller epoch %d", oldEpoch)
			Expect(claim.BrokerID).To(Equal(int32(1)), "broker 1 is the controller")
			ledger.waitMore(ctx, 200, 30*time.Second)

			By("broker 3 joins: controller 1 writes the assignment and dies at " + step + " " + when)
			// Watch, in the background, for broker 1's death and for the
			// first claim of a higher controller epoch.
			var (
				diedAt, claimedAt, assignedAt time.Time
				newClaim                      cluster.Claim
				atDeath                       []byte // the assignment file as broker 1 left it
				watchMu                       sync.Mutex
			)
			watchDone := make(chan struct{})
			stopWatch := make(chan struct{})
			go func() {
				defer close(watchDone)
				for {
					now := time.Now()
					watchMu.Lock()
					if diedAt.IsZero() && !b1.Running() {
						diedAt = now
						atDeath, _ = os.ReadFile(cluster.AssignmentPath(clusterDir))
					}
					if claimedAt.IsZero() {
						// The next epoch, or a later one should a racy
						// create on a shared filesystem burn it.
						for e := oldEpoch + 4; e > oldEpoch; e-- {
							if c, ok := readControllerClaim(clusterDir, e); ok {
								claimedAt, newClaim = now, c
								break
							}
						}
					}
					if a := watch.current(); assignedAt.IsZero() && a != nil && a.ControllerEpoch > oldEpoch {
						assignedAt = now
					}
					done := !diedAt.IsZero() && !claimedAt.IsZero() && !assignedAt.IsZero()
					watchMu.Unlock()
					if done {
						return
					}
					select {
					case <-stopWatch:
						return
					case <-time.After(2 * time.Millisecond):
					}
				}
			}()
			defer func() {
				select {
				case <-watchDone:
				default:
					close(stopWatch)
					<-watchDone
				}
			}()
			b3 := StartBroker(dirs[2], WithBrokerID(3), withListenAddr(addrs, 2))
			waitBrokerExited(ctx, b1, 30*time.Second)
			Expect(b1.LogTail(1<<20)).To(MatchRegexp(`injected fault: KILL %s #\d+ %s `, when, step),
				"broker 1 died of the injected fault at the intended step")

			By("brokers 2 and 3 elect a new controller and own every partition")
			ctrl, owners := brokersAgree(ctx, []*Broker{b2, b3}, topics, partitions, 30*time.Second)
			Eventually(watchDone).WithContext(ctx).WithTimeout(10 * time.Second).Should(BeClosed())
			after := watch.current()
			Expect(after.ControllerEpoch).To(BeNumerically(">", oldEpoch))
			watchMu.Lock()
			if c, ok := readControllerClaim(clusterDir, after.ControllerEpoch); ok {
				newClaim = c // the claim behind the assignment now in force
			}
			Expect(newClaim.BrokerID).To(Equal(ctrl), "the controller named in metadata holds the claim of the assignment in force")
			election, assigned := claimedAt.Sub(diedAt), assignedAt.Sub(diedAt)
			left := atDeath
			watchMu.Unlock()
			// The write that was killed landed exactly when the kill came
			// after its rename: the file then names broker 3, which wins
			// partitions in it; else it is still the previous one.
			var leftA cluster.Assignment
			Expect(json.Unmarshal(left, &leftA)).To(Succeed(), "the assignment file broker 1 left: %q", left)
			names3 := false
			for _, ps := range leftA.Topics {
				for _, o := range ps {
					names3 = names3 || o.Broker == 3
				}
			}
			landed := step == "SyncDir" || (step == "Rename" && when == "after")
			Expect(leftA.ControllerEpoch).To(Equal(oldEpoch))
			Expect(names3).To(Equal(landed), "the killed write landed (names broker 3) in the file broker 1 left")
			for _, id := range ids {
				Expect(after.Topics).To(HaveKey(id))
				for p, o := range after.Topics[id] {
					Expect(o.Broker).To(BeElementOf(int32(2), int32(3)), "owner of %s/%d", id, p)
				}
			}
			AddReportEntry("controller re-election", fmt.Sprintf(
				"broker 1 died at %s %s; broker %d claimed controller epoch %d %v later; assignment at that epoch %v after the death",
				step, when, ctrl, newClaim.Epoch, election.Round(time.Millisecond), assigned.Round(time.Millisecond)))
			ledger.waitMore(ctx, 300, 30*time.Second)
			Expect(owners).To(HaveLen(partitions))

			By("broker 1 comes back without faults")
			withoutFaults(b1)
			b1.Restart()
			_, _ = brokersAgree(ctx, []*Broker{b1, b2, b3}, topics, partitions, 30*time.Second)
			ledger.waitMore(ctx, 300, 30*time.Second)
			ledger.finish(ctx)
			watch.close()

			// A write killed between its create and its rename leaves its
			// temp file; the next controller's write sweeps it.
			Expect(assignmentTemps(clusterDir)).To(BeEmpty(), "assignment temp files left behind")

			By("checking the assignment history and the records")
			watch.expectSound()
			_, unexpected := ledger.errs.summary()
			AddReportEntry("records acknowledged", ledger.acked())
			AddReportEntry("client errors", ledger.errs.distinct(10))
			Expect(ledger.failures()).To(BeEmpty(), "produce callbacks got errors")
			Expect(unexpected).To(BeEmpty(), "non-retriable client errors")
			got := ledger.verify(ctx, addrs, 90*time.Second)

			// Each record's batch carries the leader epoch it was written
			// in: per partition, epochs never go down in offset order, and
			// each epoch belongs to exactly one owner in the assignment
			// history (so no two brokers wrote the partition in one epoch).
			var problems []string
			for k, rs := range got {
				id := ids[k.topic]
				last := int32(-1)
				ranges := map[int32][2]int64{}
				for _, r := range rs {
					if r.LeaderEpoch < last {
						problems = append(problems, fmt.Sprintf("%v offset %d: epoch %d after epoch %d", k, r.Offset, r.LeaderEpoch, last))
					}
					last = r.LeaderEpoch
					if _, ok := watch.owner(id, k.partition, r.LeaderEpoch); !ok {
						problems = append(problems, fmt.Sprintf("%v offset %d: epoch %d never assigned", k, r.Offset, r.LeaderEpoch))
					}
					rg, ok := ranges[r.LeaderEpoch]
					if !ok {
						rg = [2]int64{r.Offset, r.Offset}
					}
					rg[1] = r.Offset
					ranges[r.LeaderEpoch] = rg
				}
				if k.partition == 0 {
					var desc []string
					for e, rg := range ranges {
						o, _ := watch.owner(id, k.partition, e)
						desc = append(desc, fmt.Sprintf("epoch %d: broker %d, offsets %d-%d", e, o.broker, rg[0], rg[1]))
					}
					sort.Strings(desc)
					AddReportEntry(fmt.Sprintf("%s/0 by leader epoch", k.topic), desc)
				}
			}
			Expect(problems).To(BeEmpty(), "leader epochs of the stored records")
		}, entries)
})

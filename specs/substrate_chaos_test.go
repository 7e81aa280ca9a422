package specs

// Fault-model scenarios (shared/reference/fault-model.md §5) on three broker
// processes, each on its own mount of one shared filesystem: the
// contract-floor filesystem (kaas-floorfs) for T1, T2, T3, T8, T9, T12 and
// T13, and GlusterFS for T1 and T2. kaasverify loads the cluster, records
// every send outcome, reads everything back and checks L1–L9. Every scenario
// also runs once against a broker with one safety mechanism switched off (a
// negative control), and the checker must catch what that loses.

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/kaas-dev/kaas/cmd/kaasverify/check"
)

const (
	chaosPartitions = 6
	chaosLease      = 2 * time.Second
)

// chaosCluster is three brokers on one substrate under a verifier's load.
type chaosCluster struct {
	brokers []*Broker
	floor   *Floor // nil on GlusterFS
	topic   string
	load    *Verifier
	faults  int
	extra   []check.Event // send events the spec recorded itself
	// negative marks a negative control's cluster: it is expected to lose
	// data and may not recover every partition (kaas takes a partition
	// whose acknowledged bytes vanished offline), so settling is best-effort.
	negative bool
}

// floorDataDirs names one fresh directory of the floor's volume as each
// host sees it.
func floorDataDirs(f *Floor) []string {
	GinkgoHelper()
	name := UniqueName("chaos")
	Expect(os.MkdirAll(filepath.Join(f.Mounts[0], name), 0o755)).To(Succeed())
	dirs := make([]string, len(f.Mounts))
	for i, m := range f.Mounts {
		dirs[i] = filepath.Join(m, name)
	}
	Eventually(func() error { _, err := os.Stat(dirs[len(dirs)-1]); return err }).WithTimeout(5 * time.Second).Should(Succeed())
	return dirs
}

// startChaos starts the substrate ("floor" or "gluster"), three brokers
// with args, a topic and the verifier's load.
func startChaos(ctx context.Context, substrate string, brokerArgs ...string) *chaosCluster {
	GinkgoHelper()
	return startChaosWith(ctx, substrate, chaosLoad{}, brokerArgs...)
}

// chaosLoad is what a scenario adds to the default topic and load: topic
// configs, and flags of the verifier's run.
type chaosLoad struct {
	topicConfigs map[string]*string
	verifierArgs []string
}

// startChaosWith is startChaos with the topic and load of load.
func startChaosWith(ctx context.Context, substrate string, load chaosLoad, brokerArgs ...string) *chaosCluster {
	GinkgoHelper()
	c := &chaosCluster{}
	for _, a := range brokerArgs {
		if strings.HasPrefix(a, "--unsafe-negative-control") {
			c.negative = true
		}
	}
	var dirs []string
	switch substrate {
	case "floor":
		c.floor = StartFloor(3)
		dirs = floorDataDirs(c.floor)
	case "gluster":
		if os.Getenv("KAAS_SPECS_MOUNTS") == "" {
			Skip("KAAS_SPECS_MOUNTS names no GlusterFS mounts (.ci/gluster up 3)")
		}
		dirs = SharedDataDirs(3)
	default:
		Fail("unknown substrate " + substrate)
	}
	addrs := distinctFreeAddrs(3)
	args := append([]string{"--lease", chaosLease.String()}, brokerArgs...)
	for i, d := range dirs {
		c.brokers = append(c.brokers, StartBroker(d, WithBrokerID(i+1), withListenAddr(addrs, i), WithBrokerArgs(args...)))
	}
	c.topic = UniqueName("chaos")
	// Small segments so that power cuts also land mid-roll.
	adm := NewAdmin(c.brokers[0])
	configs := map[string]*string{"segment.bytes": ptr("262144")}
	maps.Copy(configs, load.topicConfigs)
	createTopicWithConfigs(ctx, adm, c.topic, chaosPartitions, configs)
	brokersAgree(ctx, c.brokers, []string{c.topic}, chaosPartitions, 30*time.Second)
	// A negative control's drain and final read may never complete (the
	// loss took a partition offline, which counts as caught): shorter waits.
	final, drain := "40s", "60s"
	if c.negative {
		final, drain = "15s", "5s"
	}
	c.load = StartVerifier(c.brokers, c.topic, chaosPartitions, append([]string{
		"--producers", "4", "--rate", "2000", "--consumers", "2", "--value-size", "100",
		"--final-timeout", final, "--drain-timeout", drain}, load.verifierArgs...)...)
	waitCtx(ctx, 2*time.Second)
	return c
}

func ptr(s string) *string { return &s }

// owners answers, from a live broker, each partition's leader.
func (c *chaosCluster) owners(ctx context.Context) map[int32]ownership {
	GinkgoHelper()
	var out map[int32]ownership
	Eventually(func(g Gomega) {
		for _, b := range c.brokers {
			if !b.Running() {
				continue
			}
			_, own, _, err := clusterMetadata(ctx, b, []string{c.topic})
			if err != nil {
				continue
			}
			out = map[int32]ownership{}
			for k, o := range own {
				if o.leader <= 0 && c.negative {
					continue // a negative control may leave partitions offline
				}
				g.Expect(o.leader).To(BeNumerically(">", 0), "partition %d has no leader", k.partition)
				out[k.partition] = o
			}
			g.Expect(out).NotTo(BeEmpty(), "no partition has a leader")
			return
		}
		g.Expect(false).To(BeTrue(), "no broker answered metadata")
	}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
	return out
}

// ownerOf is the broker (and its host index) that owns partition p.
func (c *chaosCluster) ownerOf(ctx context.Context, p int32) (*Broker, int) {
	GinkgoHelper()
	own := c.owners(ctx)
	o, ok := own[p]
	for q := range int32(chaosPartitions) {
		if ok {
			break
		}
		o, ok = own[q] // p is offline (negative controls only): take another
	}
	for i, b := range c.brokers {
		if int32(b.ID) == o.leader {
			return b, i
		}
	}
	Fail(fmt.Sprintf("partition %d owned by unknown broker %d", p, o.leader))
	return nil, -1
}

// ownerNotController returns a broker that owns a partition and is not the
// controller.
func (c *chaosCluster) ownerNotController(ctx context.Context) (*Broker, int) {
	GinkgoHelper()
	var found *Broker
	idx := -1
	Eventually(func() error {
		_, own, controller, err := clusterMetadata(ctx, c.brokers[0], []string{c.topic})
		if err != nil {
			return err
		}
		for _, o := range own {
			if o.leader <= 0 || o.leader == controller {
				continue
			}
			for i, b := range c.brokers {
				if int32(b.ID) == o.leader {
					found, idx = b, i
					return nil
				}
			}
		}
		return fmt.Errorf("every owned partition is the controller's (%d)", controller)
	}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
	return found, idx
}

// powerCut is a host crash: the broker is frozen, its host loses what it
// had not synced, then the broker dies.
func (c *chaosCluster) powerCut(i int) {
	GinkgoHelper()
	b := c.brokers[i]
	b.Pause()
	c.floor.Crash(i)
	b.Kill9()
}

// settle waits until the three brokers agree again and the load is acked
// again on every partition.
func (c *chaosCluster) settle(ctx context.Context) {
	GinkgoHelper()
	if c.negative {
		waitCtx(ctx, chaosLease+time.Second)
		return
	}
	brokersAgree(ctx, c.brokers, []string{c.topic}, chaosPartitions, 30*time.Second)
}

// restart starts b again; in a negative control it may own a partition
// the unsafe run lost for good, so it is not required to become ready.
func (c *chaosCluster) restart(b *Broker) {
	GinkgoHelper()
	if c.negative {
		b.RestartLive()
		return
	}
	b.Restart()
}

// finish stops the load, appends the spec's own events and checks.
func (c *chaosCluster) finish(ctx context.Context) VerifyReport {
	GinkgoHelper()
	for _, b := range c.brokers {
		if !b.Running() {
			c.restart(b)
		}
	}
	c.settle(ctx)
	r := c.load.Stop(3 * time.Minute)
	if len(c.extra) > 0 {
		AppendHistory(c.load.History, c.extra)
		r = CheckHistory(c.load.History)
	}
	fmt.Fprintf(GinkgoWriter, "chaos report (%d faults, exit %d):\n%s\n", c.faults, r.ExitCode, r.Output)
	return r
}

// expectClean is the pass criterion: no violation, real load, real faults.
func expectClean(name string, c *chaosCluster, r VerifyReport) {
	GinkgoHelper()
	Expect(r.ExitCode).To(Equal(0), "%s: the checker found violations:\n%s", name, r.Output)
	acked := reportCount(r, "acked")
	Expect(acked).To(BeNumerically(">", 1000), "%s: too little load to mean anything", name)
	Expect(c.faults).To(BeNumerically(">", 0))
	AddReportEntry(name, fmt.Sprintf("acked=%d faults=%d violations=0", acked, c.faults))
	fmt.Printf("CHAOS %s: acked=%d faults=%d violations=0\n", name, acked, c.faults)
}

// expectCaught is the negative control's criterion: the checker bites. A
// final read that cannot complete also counts: the loss made kaas take a
// partition offline ("corrupt log state"), and the verifier says which.
func expectCaught(name string, c *chaosCluster, r VerifyReport, checks ...string) {
	GinkgoHelper()
	if r.ExitCode == 2 && strings.Contains(r.Output, "final read incomplete") {
		AddReportEntry(name+" negative control", r.Output)
		fmt.Printf("CHAOS %s negative control caught: final read incomplete (a partition went offline)\n", name)
		return
	}
	Expect(r.ExitCode).To(Equal(1), "%s negative control: the checker did not catch the loss:\n%s", name, r.Output)
	caught := false
	for _, ch := range checks {
		if reportViolations(r, ch) > 0 {
			caught = true
		}
	}
	Expect(caught).To(BeTrue(), "%s negative control: violations, but none of %v:\n%s", name, checks, r.Output)
	AddReportEntry(name+" negative control", r.Output)
	fmt.Printf("CHAOS %s negative control caught: %s\n", name, violationSummary(r))
}

func reportCount(r VerifyReport, key string) int64 {
	if counts, ok := r.Raw["counts"].(map[string]any); ok {
		if n, ok := counts[key].(float64); ok {
			return int64(n)
		}
	}
	if n, ok := r.Raw[key].(float64); ok {
		return int64(n)
	}
	return 0
}

func reportViolations(r VerifyReport, id string) int64 {
	checks, _ := r.Raw["checks"].([]any)
	for _, ch := range checks {
		m, _ := ch.(map[string]any)
		if got, _ := m["id"].(string); strings.EqualFold(got, id) {
			if n, ok := m["violations"].(float64); ok {
				return int64(n)
			}
		}
	}
	return 0
}

func violationSummary(r VerifyReport) string {
	var parts []string
	checks, _ := r.Raw["checks"].([]any)
	for _, ch := range checks {
		m, _ := ch.(map[string]any)
		if n, _ := m["violations"].(float64); n > 0 {
			parts = append(parts, fmt.Sprintf("%v=%d", m["id"], int64(n)))
		}
	}
	return strings.Join(parts, " ")
}

// rounds is how many faults a scenario injects: def, or KAAS_CHAOS_ROUNDS
// for longer runs; a negative control needs one to be caught.
func (c *chaosCluster) rounds(def int) int {
	if c.negative {
		return 1
	}
	if v := os.Getenv("KAAS_CHAOS_ROUNDS"); v != "" {
		var n int
		if _, err := fmt.Sscan(v, &n); err == nil && n > 0 {
			return n
		}
	}
	return def
}

// ---------------------------------------------------------------------------
// The scenarios, as functions of a started cluster.

// t1Kills SIGKILLs the owner of a rotating partition and restarts it.
func t1Kills(ctx context.Context, c *chaosCluster, hostCrash bool) {
	for r := range c.rounds(3) {
		b, i := c.ownerOf(ctx, int32(r%chaosPartitions))
		By(fmt.Sprintf("round %d: %s broker %d", r+1, map[bool]string{false: "SIGKILL", true: "power-cut the host of"}[hostCrash], b.ID))
		if hostCrash {
			c.powerCut(i)
		} else {
			b.Kill9()
		}
		c.faults++
		waitCtx(ctx, chaosLease+time.Second)
		c.restart(b)
		c.settle(ctx)
		waitCtx(ctx, time.Second)
	}
}

// t2Zombie SIGSTOPs an owner past its lease, lets another broker take over,
// resumes it and sends it raw produces at once over a connection it held.
func t2Zombie(ctx context.Context, c *chaosCluster) {
	for r := range c.rounds(3) {
		p := int32(r % chaosPartitions)
		zombie, _ := c.ownerOf(ctx, p)
		cl, closeCl := foRoundClient(zombie)
		Expect(cl.Ping(ctx)).To(Succeed())
		var mine []int32
		for q, o := range c.owners(ctx) {
			if o.leader == int32(zombie.ID) {
				mine = append(mine, q)
			}
		}
		By(fmt.Sprintf("round %d: SIGSTOP broker %d (owner of %v) for 3 leases", r+1, zombie.ID, mine))
		zombie.Pause()
		c.faults++
		waitCtx(ctx, 3*chaosLease)
		zombie.Resume()
		var sent []<-chan foRawResult
		var values []string
		var parts []int32
		for n := range 10 {
			for _, q := range mine {
				v := fmt.Sprintf("zombie-r%d-p%d-%d", r, q, n)
				sent = append(sent, foRawProduce(ctx, cl, tp{c.topic, q}, v))
				values, parts = append(values, v), append(parts, q)
			}
		}
		for j, ch := range sent {
			res := <-ch
			ev := check.NewEvent(check.KindSend)
			ev.Time, ev.Process, ev.Value, ev.Topic, ev.Partition = time.Now(), "zombie-probe", values[j], c.topic, parts[j]
			switch {
			case res.err != nil:
				// Sent, answer lost: it may or may not be in the log.
				ev.Outcome, ev.Error = check.Info, res.err.Error()
			case res.code != 0:
				ev.Outcome, ev.Error = check.Fail, foErrName(res.code)
			default:
				ev.Outcome, ev.Offset = check.OK, res.offset
			}
			c.extra = append(c.extra, ev)
		}
		closeCl()
		c.settle(ctx)
	}
}

// t3Steps are the steps of an assignment write the controller's host is
// power-cut in, as floor fault specs (base-name globs) that stall it there.
var t3Steps = []string{
	"CreateExclusive:.assignment.json.tmp-*",
	"Sync:.assignment.json.tmp-*",
	"Rename:assignment.json",
	"SyncDir:__cluster",
}

// t3InPlaceSteps are the steps of the negative control's in-place write.
var t3InPlaceSteps = []string{"Create:assignment.json", "Write:assignment.json"}

// t3Controller power-cuts the controller's host in the middle of an
// assignment write: it stalls the controller's storage at one step, makes a
// broker leave so that the controller writes, and cuts the power while the
// write hangs there. The assignment file is watched all along.
func t3Controller(ctx context.Context, c *chaosCluster, steps []string) {
	for r, step := range steps {
		_, _, ctrl, err := clusterMetadata(ctx, c.brokers[0], []string{c.topic})
		Expect(err).NotTo(HaveOccurred())
		ci, vi := -1, -1
		for i, b := range c.brokers {
			if int32(b.ID) == ctrl {
				ci = i
			} else if vi < 0 {
				vi = i
			}
		}
		Expect(ci).To(BeNumerically(">=", 0), "no controller among the brokers")
		By(fmt.Sprintf("round %d: controller %d stalls at %s; broker %d leaves; the controller's host loses power", r+1, ctrl, step, c.brokers[vi].ID))
		c.floor.SetFaults(ci, step+":STALL=4s:1")
		c.brokers[vi].Kill9()
		waitCtx(ctx, chaosLease+1500*time.Millisecond)
		c.powerCut(ci)
		c.floor.ClearFaults(ci)
		c.faults++
		c.restart(c.brokers[vi])
		c.restart(c.brokers[ci])
		c.settle(ctx)
	}
}

// t8Torn power-cuts an owner's host and leaves a torn, partly garbage
// batch after the tail of its active segments, as a write cut mid-way would.
func t8Torn(ctx context.Context, c *chaosCluster) {
	for r := range c.rounds(3) {
		b, i := c.ownerOf(ctx, int32(r%chaosPartitions))
		By(fmt.Sprintf("round %d: power-cut broker %d and tear its segment tails", r+1, b.ID))
		c.powerCut(i)
		c.faults++
		torn := tearSegmentTails(filepath.Join(c.floor.Backing, strings.TrimPrefix(b.Dir, c.floor.Mounts[i])), c.topic)
		fmt.Fprintf(GinkgoWriter, "tore %d segment tails\n", torn)
		waitCtx(ctx, chaosLease)
		c.restart(b)
		c.settle(ctx)
		waitCtx(ctx, time.Second)
	}
}

// tearSegmentTails appends a partial batch (a plausible header, then
// garbage) to the newest segment of every partition of topic under data.
func tearSegmentTails(data, topic string) int {
	GinkgoHelper()
	logs, err := filepath.Glob(filepath.Join(data, "topics", "*", "*", "*.log"))
	Expect(err).NotTo(HaveOccurred())
	newest := map[string]string{}
	for _, l := range logs {
		if !strings.Contains(l, topic) {
			continue
		}
		d := filepath.Dir(l)
		if l > newest[d] {
			newest[d] = l
		}
	}
	n := 0
	for _, l := range newest {
		f, err := os.OpenFile(l, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			continue
		}
		junk := make([]byte, 12+rand.IntN(200))
		for j := range junk {
			junk[j] = byte(rand.IntN(256))
		}
		// A batch length that promises more than is there.
		junk[8], junk[9], junk[10], junk[11] = 0, 0, 4, 0
		_, _ = f.Write(junk)
		_ = f.Close()
		n++
	}
	return n
}

// t9PowerCuts cuts a random host's power at a random moment.
func t9PowerCuts(ctx context.Context, c *chaosCluster) {
	for r := range c.rounds(4) {
		waitCtx(ctx, time.Duration(rand.IntN(1500))*time.Millisecond)
		// The host of a partition's owner: a host that owns nothing has no
		// acknowledged data to lose, and the negative control (one round)
		// would then have nothing to catch.
		b, i := c.ownerOf(ctx, int32(r%chaosPartitions))
		By(fmt.Sprintf("round %d: power-cut host %d (broker %d, owner of partition %d)", r+1, i+1, b.ID, r%chaosPartitions))
		c.powerCut(i)
		c.faults++
		waitCtx(ctx, chaosLease)
		c.restart(c.brokers[i])
		c.settle(ctx)
	}
}

// t12Stalls stalls every sync and rename of an owner's host for longer than
// the lease (an NFS server that stops answering that client), so that
// another broker takes over while writes are stuck in fsync; then fails one
// segment fsync with EIO.
//
// The negative control stalls an owner that is not the controller, twice: a
// stalled controller cannot reassign while its own renames hang, so nobody
// takes over, and there is no zombie write for the checker to catch.
func t12Stalls(ctx context.Context, c *chaosCluster) {
	rounds := c.rounds(2)
	if c.negative {
		rounds = 2
	}
	for r := range rounds {
		b, i := c.ownerOf(ctx, int32(r%chaosPartitions))
		if c.negative {
			b, i = c.ownerNotController(ctx)
		}
		By(fmt.Sprintf("round %d: stall broker %d's storage for 3 leases", r+1, b.ID))
		stall := (3 * chaosLease).String()
		c.floor.SetFaults(i, "Sync:*:STALL="+stall+":0,SyncDir:*:STALL="+stall+":0,Rename:*:STALL="+stall+":0")
		c.faults++
		waitCtx(ctx, time.Second)
		c.floor.ClearFaults(i)
		waitCtx(ctx, 3*chaosLease)
		c.settle(ctx)
	}
	b, i := c.ownerOf(ctx, 0)
	By(fmt.Sprintf("EIO on one segment fsync of broker %d", b.ID))
	c.floor.SetFaults(i, "Sync:*.log:EIO:1")
	c.faults++
	waitCtx(ctx, 2*time.Second)
	c.floor.ClearFaults(i)
	c.settle(ctx)
}

// t13Jumps jumps the wall clocks of every broker in turn (the controller
// among them) and returns how many partitions changed hands meanwhile: a
// clock jump alone must move none.
func t13Jumps(ctx context.Context, c *chaosCluster) int {
	before := c.owners(ctx)
	jump := func(b *Broker, d string) {
		GinkgoHelper()
		httpPost(ctx, "http://"+b.AdminAddr+"/debug/clock?jump="+d)
		c.faults++
	}
	_, _, controller, err := clusterMetadata(ctx, c.brokers[0], []string{c.topic})
	Expect(err).NotTo(HaveOccurred())
	for _, b := range c.brokers {
		role := "broker"
		if int32(b.ID) == controller {
			role = "controller"
		}
		By(fmt.Sprintf("jump %s %d's clock +10m, -10m, then strobe ±5s", role, b.ID))
		jump(b, "10m")
		waitCtx(ctx, 2*chaosLease)
		jump(b, "-20m")
		waitCtx(ctx, 2*chaosLease)
		jump(b, "10m")
		for s := range 20 {
			jump(b, map[bool]string{true: "5s", false: "-5s"}[s%2 == 0])
			waitCtx(ctx, 100*time.Millisecond)
		}
	}
	waitCtx(ctx, 2*chaosLease)
	after := c.owners(ctx)
	moved := 0
	for p, o := range before {
		if after[p] != o {
			moved++
		}
	}
	return moved
}

func httpPost(ctx context.Context, url string) {
	GinkgoHelper()
	Eventually(func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("%s: %s", url, resp.Status)
		}
		return nil
	}).WithContext(ctx).WithTimeout(10 * time.Second).Should(Succeed())
}

// ---------------------------------------------------------------------------

var _ = Describe("Fault-model scenarios on the contract-floor filesystem", Label("chaos", "floor", "slow"), Ordered, func() {
	type scenario struct {
		name     string
		positive []string // broker args of the real run
		negative []string // broker args of the negative control
		catches  []string // checks the negative control must trip
		run      func(ctx context.Context, c *chaosCluster, negative bool)
	}
	scenarios := []scenario{
		{name: "T1 leader SIGKILL", negative: []string{"--unsafe-negative-control=no-fsync"}, catches: []string{"L1"},
			run: func(ctx context.Context, c *chaosCluster, neg bool) { t1Kills(ctx, c, neg) }},
		{name: "T2 zombie leader", negative: []string{"--unsafe-negative-control=no-fence-recheck,no-serving-lease"}, catches: []string{"L1", "L3", "L4"},
			run: func(ctx context.Context, c *chaosCluster, _ bool) { t2Zombie(ctx, c) }},
		{name: "T8 torn tail", negative: []string{"--unsafe-negative-control=no-fsync"}, catches: []string{"L1"},
			run: func(ctx context.Context, c *chaosCluster, _ bool) { t8Torn(ctx, c) }},
		{name: "T9 power loss", negative: []string{"--unsafe-negative-control=no-fsync"}, catches: []string{"L1"},
			run: func(ctx context.Context, c *chaosCluster, _ bool) { t9PowerCuts(ctx, c) }},
		{name: "T12 stalling and failing fsync", negative: []string{"--unsafe-negative-control=no-fence-recheck,no-serving-lease"}, catches: []string{"L1", "L3"},
			run: func(ctx context.Context, c *chaosCluster, _ bool) { t12Stalls(ctx, c) }},
	}
	for _, sc := range scenarios {
		It(sc.name, func(ctx SpecContext) {
			c := startChaos(ctx, "floor", sc.positive...)
			sc.run(ctx, c, false)
			expectClean(sc.name, c, c.finish(ctx))
		}, SpecTimeout(6*time.Minute))
		It(sc.name+": negative control", Label("negative"), func(ctx SpecContext) {
			c := startChaos(ctx, "floor", sc.negative...)
			sc.run(ctx, c, true)
			expectCaught(sc.name, c, c.finish(ctx), sc.catches...)
		}, SpecTimeout(6*time.Minute))
	}

	It("T3 controller crash mid-assignment write", func(ctx SpecContext) {
		c := startChaos(ctx, "floor")
		w := watchAssignment(filepath.Join(c.floor.Backing, strings.TrimPrefix(c.brokers[0].Dir, c.floor.Mounts[0]), "__cluster", "assignment.json"))
		t3Controller(ctx, c, t3Steps)
		r := c.finish(ctx)
		w.close()
		w.expectSound()
		expectClean("T3 controller crash mid-assignment write", c, r)
	}, SpecTimeout(6*time.Minute))
	It("T3 controller crash mid-assignment write: negative control", Label("negative"), func(ctx SpecContext) {
		c := startChaos(ctx, "floor", "--unsafe-negative-control=in-place-assignment")
		w := watchAssignment(filepath.Join(c.floor.Backing, strings.TrimPrefix(c.brokers[0].Dir, c.floor.Mounts[0]), "__cluster", "assignment.json"))
		t3Controller(ctx, c, t3InPlaceSteps)
		_ = c.finish(ctx)
		w.close()
		w.mu.Lock()
		torn := len(w.bad)
		w.mu.Unlock()
		Expect(torn).To(BeNumerically(">", 0), "the assignment was overwritten in place and no read found it torn: the check does not bite")
		fmt.Printf("CHAOS T3 negative control caught: %d torn reads of the assignment file\n", torn)
	}, SpecTimeout(6*time.Minute))

	It("T13 clock jumps", func(ctx SpecContext) {
		c := startChaos(ctx, "floor", "--debug-clock")
		spurious := t13Jumps(ctx, c)
		r := c.finish(ctx)
		Expect(spurious).To(Equal(0), "clock jumps alone moved %d partitions", spurious)
		expectClean("T13 clock jumps", c, r)
	}, SpecTimeout(6*time.Minute))
	It("T13 clock jumps: negative control", Label("negative"), func(ctx SpecContext) {
		c := startChaos(ctx, "floor", "--debug-clock", "--unsafe-negative-control=wall-clock-lease")
		spurious := t13Jumps(ctx, c)
		_ = c.finish(ctx)
		Expect(spurious).To(BeNumerically(">", 0), "leases on the wall clock, and clock jumps moved no partition: the check does not bite")
		fmt.Printf("CHAOS T13 negative control caught: %d spurious ownership changes\n", spurious)
	}, SpecTimeout(6*time.Minute))
})

var _ = Describe("Fault-model scenarios on GlusterFS", Label("chaos", "gluster", "slow"), Ordered, func() {
	It("T1 leader SIGKILL", func(ctx SpecContext) {
		c := startChaos(ctx, "gluster")
		t1Kills(ctx, c, false)
		expectClean("T1 on GlusterFS", c, c.finish(ctx))
	}, SpecTimeout(8*time.Minute))
	It("T2 zombie leader", func(ctx SpecContext) {
		c := startChaos(ctx, "gluster")
		t2Zombie(ctx, c)
		expectClean("T2 on GlusterFS", c, c.finish(ctx))
	}, SpecTimeout(8*time.Minute))
	It("T2 zombie leader: negative control", Label("negative"), func(ctx SpecContext) {
		c := startChaos(ctx, "gluster", "--unsafe-negative-control=no-fence-recheck,no-serving-lease")
		t2Zombie(ctx, c)
		expectCaught("T2 on GlusterFS", c, c.finish(ctx), "L1", "L3", "L4")
	}, SpecTimeout(8*time.Minute))
})

package specs

// Helpers of the consumer-group specs (groups_test.go): brokers started with
// short group timings, producing unique values, reading committed and end
// offsets, and a franz-go group member that records every assignment,
// revocation, consumed record and acknowledged commit with its generation.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	// groupSession is the members' session timeout: the broker's minimum.
	groupSession = 6 * time.Second
	// groupHeartbeat is the members' heartbeat interval: short, so that
	// members notice a rebalance (and rejoin) quickly.
	groupHeartbeat = 500 * time.Millisecond
)

// withGroupFlags starts a broker with no initial rebalance delay (Kafka's
// 3 s would be paid by every first join) and the 6 s minimum session.
func withGroupFlags() BrokerOpt {
	return WithBrokerArgs("--group-initial-rebalance-delay=0s", "--group-min-session-timeout=6s")
}

// groupValue is the unique value of the i-th record a group spec produces.
func groupValue(i int) string { return fmt.Sprintf("g%06d", i) }

// produceValues produces groupValue(i) for i in [from, to), round-robin over
// the partitions of topic, and waits until all are acknowledged.
func produceValues(ctx context.Context, b *Broker, topic string, partitions int32, from, to int) {
	GinkgoHelper()
	By(fmt.Sprintf("producing records %d..%d to %s", from, to-1, topic))
	cl := NewClient(b, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()))
	defer cl.Close()
	var rs []*kgo.Record
	for i := from; i < to; i++ {
		rs = append(rs, &kgo.Record{Partition: int32(i) % partitions, Value: []byte(groupValue(i))})
	}
	Expect(cl.ProduceSync(ctx, rs...).FirstErr()).To(Succeed())
}

// groupValues returns groupValue(i) for i in [from, to).
func groupValues(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, groupValue(i))
	}
	return out
}

// expectExactlyOnce checks that got holds every value of want once and
// nothing else.
func expectExactlyOnce(got, want []string) {
	GinkgoHelper()
	seen := map[string]int{}
	for _, v := range got {
		seen[v]++
	}
	wanted := map[string]bool{}
	var missing, dups, extra []string
	for _, v := range want {
		wanted[v] = true
		switch seen[v] {
		case 0:
			missing = append(missing, v)
		case 1:
		default:
			dups = append(dups, fmt.Sprintf("%s ×%d", v, seen[v]))
		}
	}
	for v := range seen {
		if !wanted[v] {
			extra = append(extra, v)
		}
	}
	sort.Strings(extra)
	sort.Strings(dups)
	Expect(len(missing)).To(BeZero(), "records not consumed (of %d; first %v)", len(want), head(missing))
	Expect(len(dups)).To(BeZero(), "records consumed more than once (first %v)", head(dups))
	Expect(len(extra)).To(BeZero(), "records consumed that this run should not see: committed offsets not resumed from (first %v)", head(extra))
}

// head returns at most the first 10 of s.
func head(s []string) []string { return s[:min(len(s), 10)] }

// topicEnds returns the end offset (high watermark) of every partition of topic.
//
// A partition moving between owners (a broker just restarted takes its
// partitions back) answers NOT_LEADER_OR_FOLLOWER, or its old owner's
// connection is refused, for a moment; kadm does not retry per-partition
// errors, so this does, for up to 30 s, as a client's consumer would.
func topicEnds(ctx context.Context, adm *kadm.Client, topic string) (map[int32]int64, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		listed, err := adm.ListEndOffsets(ctx, topic)
		if err == nil {
			err = listed.Error()
		}
		if err == nil {
			out := map[int32]int64{}
			listed.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
			return out, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("end offsets of %s: %w", topic, err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("end offsets of %s: %w (last error %v)", topic, ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// committed returns group's committed offset of every partition of topic
// that has one, by OffsetFetch.
func committed(ctx context.Context, adm *kadm.Client, group, topic string) (map[int32]int64, error) {
	resps, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for p, r := range resps[topic] {
		if r.Err != nil {
			return nil, fmt.Errorf("partition %d: %w", p, r.Err)
		}
		if r.At >= 0 {
			out[p] = r.At
		}
	}
	return out, nil
}

// expectCommittedAtEnd checks, with one OffsetFetch, that group's committed
// offsets of topic are its end offsets.
func expectCommittedAtEnd(ctx context.Context, adm *kadm.Client, group, topic string) {
	GinkgoHelper()
	ends, err := topicEnds(ctx, adm, topic)
	Expect(err).NotTo(HaveOccurred(), "ListOffsets of %s", topic)
	got, err := committed(ctx, adm, group, topic)
	Expect(err).NotTo(HaveOccurred(), "OffsetFetch of group %s", group)
	Expect(got).To(Equal(ends), "group %s: committed offsets (OffsetFetch) against end offsets (ListOffsets)", group)
}

// ---------------------------------------------------------------------------
// A recorded franz-go group member

// memberEvent is one assignment (or revocation or loss) a member's
// callbacks saw.
type memberEvent struct {
	group  string
	member string // the client's member ID at the time
	client int    // which of the spec's member slots
	gen    int32
	kind   string // "assigned", "revoked" or "lost"
	parts  []int32
	at     time.Time
}

// commitAck is one partition's offset an OffsetCommit acknowledged.
type commitAck struct {
	group  string
	member string
	gen    int32
	part   int32
	offset int64
	at     time.Time
}

// groupRecorder keeps what every member of the specs' groups did.
type groupRecorder struct {
	mu         sync.Mutex
	events     []memberEvent
	commits    []commitAck
	commitErrs map[string]int
	consumed   map[string]map[tp]map[int64]int // group → partition → offset → times
	ackedMax   map[string]map[int32]int64      // group → partition → highest acknowledged commit
}

func newGroupRecorder() *groupRecorder {
	return &groupRecorder{commitErrs: map[string]int{}, consumed: map[string]map[tp]map[int64]int{},
		ackedMax: map[string]map[int32]int64{}}
}

func (g *groupRecorder) event(e memberEvent) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.events = append(g.events, e)
}

func (g *groupRecorder) consume(group string, r *kgo.Record) {
	g.mu.Lock()
	defer g.mu.Unlock()
	byTP := g.consumed[group]
	if byTP == nil {
		byTP = map[tp]map[int64]int{}
		g.consumed[group] = byTP
	}
	k := tp{r.Topic, r.Partition}
	if byTP[k] == nil {
		byTP[k] = map[int64]int{}
	}
	byTP[k][r.Offset]++
}

// committedDone records an OffsetCommit's outcome: every partition it
// acknowledged, with the member ID and generation the request carried.
func (g *groupRecorder) committedDone(group string, req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
	now := time.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	if err != nil {
		g.commitErrs[err.Error()]++
		return
	}
	sent := map[tp]int64{}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			sent[tp{t.Topic, p.Partition}] = p.Offset
		}
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				g.commitErrs[err.Error()]++
				continue
			}
			off, ok := sent[tp{t.Topic, p.Partition}]
			if !ok {
				g.commitErrs["acknowledged a partition not sent"]++
				continue
			}
			g.commits = append(g.commits, commitAck{group, req.MemberID, req.Generation, p.Partition, off, now})
			if g.ackedMax[group] == nil {
				g.ackedMax[group] = map[int32]int64{}
			}
			g.ackedMax[group][p.Partition] = max(g.ackedMax[group][p.Partition], off)
		}
	}
}

// acked returns a copy of the highest acknowledged commit of every
// partition of group.
func (g *groupRecorder) acked(group string) map[int32]int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := map[int32]int64{}
	for p, o := range g.ackedMax[group] {
		out[p] = o
	}
	return out
}

// snapshot returns copies of the events and commits so far.
func (g *groupRecorder) snapshot() ([]memberEvent, []commitAck) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.events), slices.Clone(g.commits)
}

// uncovered returns, for group, the offsets below ends[p] of each
// partition p of topic that no member consumed (at most 10).
func (g *groupRecorder) uncovered(group, topic string, ends map[int32]int64) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for p, end := range ends {
		seen := g.consumed[group][tp{topic, p}]
		for o := int64(0); o < end && len(out) < 10; o++ {
			if seen[o] == 0 {
				out = append(out, fmt.Sprintf("%s/%d offset %d", topic, p, o))
			}
		}
	}
	return out
}

// groupMember is one franz-go group member (eager round-robin protocol, so
// that every assignment callback gets the member's whole assignment for its
// generation) that polls, and commits what it polled every commitEvery
// with CommitOffsetsSync (a commit carries the member's generation, and
// blocks rebalancing while it is in flight), and in OnPartitionsRevoked.
type groupMember struct {
	cl     *kgo.Client
	group  string
	client int
	rec    *groupRecorder
	stop   chan struct{}
	done   chan struct{}
}

// startGroupMember starts member slot client of group, consuming topic
// through seeds.
func startGroupMember(ctx context.Context, seeds []string, group, topic string, client int, rec *groupRecorder, commitEvery time.Duration) *groupMember {
	GinkgoHelper()
	m := &groupMember{group: group, client: client, rec: rec, stop: make(chan struct{}), done: make(chan struct{})}
	evt := func(kind string, cl *kgo.Client, assigned map[string][]int32) {
		id, gen := cl.GroupMetadata()
		ps := slices.Clone(assigned[topic])
		slices.Sort(ps)
		rec.event(memberEvent{group: group, member: id, client: client, gen: gen, kind: kind, parts: ps, at: time.Now()})
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(seeds...),
		kgo.ClientID(fmt.Sprintf("kaas-specs-%s-%d", group, client)),
		kgo.WithLogger(kgo.BasicLogger(GinkgoWriter, kgo.LogLevelWarn, func() string {
			return fmt.Sprintf("[kgo %s/%d] ", group, client)
		})),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.Balancers(kgo.RoundRobinBalancer()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.SessionTimeout(groupSession),
		kgo.HeartbeatInterval(groupHeartbeat),
		kgo.RebalanceTimeout(20*time.Second),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.MetadataMinAge(250*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
		kgo.OnPartitionsAssigned(func(_ context.Context, cl *kgo.Client, a map[string][]int32) { evt("assigned", cl, a) }),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, r map[string][]int32) {
			evt("revoked", cl, r)
			m.commit(ctx, cl)
		}),
		kgo.OnPartitionsLost(func(_ context.Context, cl *kgo.Client, l map[string][]int32) { evt("lost", cl, l) }),
	)
	Expect(err).NotTo(HaveOccurred())
	m.cl = cl
	go func() {
		defer GinkgoRecover()
		defer close(m.done)
		last := time.Now()
		for {
			select {
			case <-m.stop:
				return
			default:
			}
			pctx, cancel := context.WithTimeout(ctx, commitEvery)
			fs := cl.PollFetches(pctx)
			cancel()
			fs.EachError(func(t string, p int32, err error) {
				if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) && !errors.Is(err, kgo.ErrClientClosed) {
					fmt.Fprintf(GinkgoWriter, "[member %s/%d] fetch %s/%d: %v\n", group, client, t, p, err)
				}
			})
			fs.EachRecord(func(r *kgo.Record) { rec.consume(group, r) })
			if time.Since(last) >= commitEvery {
				m.commit(ctx, cl)
				last = time.Now()
			}
			cl.AllowRebalance()
		}
	}()
	return m
}

// commit commits what the member polled, synchronously, and records it.
func (m *groupMember) commit(ctx context.Context, cl *kgo.Client) {
	offs := cl.UncommittedOffsets()
	if len(offs) == 0 {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	start := time.Now()
	cl.CommitOffsetsSync(cctx, offs, func(_ *kgo.Client, req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		m.rec.committedDone(m.group, req, resp, err)
		if took := time.Since(start); took > 2*time.Second {
			// A member blocked in a commit rejoins late, and holds up its
			// group's rebalance: say so where a slow rebalance is read.
			fmt.Fprintf(GinkgoWriter, "[member %s/%d] commit from %s took %v (err %v)\n", m.group, m.client, start.Format("15:04:05.000"), took, err)
		}
	})
}

// leave stops polling, commits what was polled and closes the client
// (which leaves the group).
func (m *groupMember) leave(ctx context.Context) {
	GinkgoHelper()
	close(m.stop)
	Eventually(m.done).WithTimeout(30 * time.Second).Should(BeClosed())
	m.commit(ctx, m.cl)
	m.cl.Close()
}

// leaveAll makes every member leave, all at once (one after the other,
// each leave would be one more rebalance for the rest to sit through).
func leaveAll(ctx context.Context, ms []*groupMember) {
	GinkgoHelper()
	var wg sync.WaitGroup
	for _, m := range ms {
		wg.Add(1)
		go func() {
			defer GinkgoRecover()
			defer wg.Done()
			m.leave(ctx)
		}()
	}
	wg.Wait()
}

// ---------------------------------------------------------------------------
// Checks over what members recorded

// checkGenerations checks, for group, that every partition is assigned to
// at most one member per generation, that every acknowledged commit of a
// partition came from the member assigned it in the commit's generation,
// that no offset of a partition was committed by two members in one
// generation, and that a partition's acknowledged commits never go back
// (in generation order, then acknowledgement order). It returns how many
// generations it saw.
func checkGenerations(events []memberEvent, commits []commitAck, group string) int {
	GinkgoHelper()
	owner := map[int32]map[int32]string{} // generation → partition → member
	var problems []string
	for _, e := range events {
		if e.group != group || e.kind != "assigned" {
			continue
		}
		if owner[e.gen] == nil {
			owner[e.gen] = map[int32]string{}
		}
		for _, p := range e.parts {
			if o, ok := owner[e.gen][p]; ok && o != e.member {
				problems = append(problems, fmt.Sprintf("generation %d: partition %d assigned to %s and %s", e.gen, p, o, e.member))
			}
			owner[e.gen][p] = e.member
		}
	}
	type genPart struct{ gen, part int32 }
	committers := map[genPart]map[string]bool{}
	var mine []commitAck
	for _, c := range commits {
		if c.group != group {
			continue
		}
		mine = append(mine, c)
		if o := owner[c.gen][c.part]; o != c.member {
			problems = append(problems, fmt.Sprintf("generation %d: %s committed partition %d offset %d, which was assigned to %q",
				c.gen, c.member, c.part, c.offset, o))
		}
		k := genPart{c.gen, c.part}
		if committers[k] == nil {
			committers[k] = map[string]bool{}
		}
		committers[k][c.member] = true
		if len(committers[k]) == 2 {
			problems = append(problems, fmt.Sprintf("generation %d: partition %d committed by two members %v", c.gen, c.part, committers[k]))
		}
	}
	sort.SliceStable(mine, func(i, j int) bool { return mine[i].gen < mine[j].gen })
	high := map[int32]commitAck{}
	for _, c := range mine {
		if h, ok := high[c.part]; ok && c.offset < h.offset {
			problems = append(problems, fmt.Sprintf("partition %d: %s committed %d in generation %d after %s committed %d in generation %d",
				c.part, c.member, c.offset, c.gen, h.member, h.offset, h.gen))
		}
		if c.offset >= high[c.part].offset {
			high[c.part] = c
		}
	}
	if len(problems) > 20 {
		problems = problems[:20]
	}
	Expect(problems).To(BeEmpty(), "group %s: ownership and commits by generation", group)
	return len(owner)
}

// rebalance is one member's revocation or loss and its next assignment.
type rebalance struct {
	group    string
	client   int
	kind     string // "revoked" or "lost"
	from, to time.Time
	// back is when the group's coordinator served again, if it was down
	// during the rebalance (zero if not known).
	back time.Time
}

// took is the rebalance's time once its group had a coordinator: while
// none serves (a takeover loading the group), no rebalance can complete;
// that outage is the coordinator failover, measured on its own.
func (r rebalance) took() time.Duration {
	if r.back.After(r.from) {
		return r.to.Sub(r.back)
	}
	return r.to.Sub(r.from)
}

// rebalanceTimes returns, for every revocation or loss a member saw, the
// time until its next assignment.
func rebalanceTimes(events []memberEvent) []rebalance {
	type slot struct {
		group  string
		client int
	}
	open := map[slot]memberEvent{}
	var out []rebalance
	for _, e := range events {
		k := slot{e.group, e.client}
		switch e.kind {
		case "revoked", "lost":
			if _, ok := open[k]; !ok {
				open[k] = e
			}
		case "assigned":
			if s, ok := open[k]; ok {
				out = append(out, rebalance{group: e.group, client: e.client, kind: s.kind, from: s.at, to: e.at})
				delete(open, k)
			}
		}
	}
	return out
}

// durations returns how long each rebalance took.
func durations(rb []rebalance) []time.Duration {
	var ds []time.Duration
	for _, r := range rb {
		ds = append(ds, r.took())
	}
	return ds
}

// slowRebalances describes every rebalance longer than bound, with what
// every member of its group saw meanwhile, so a failure says who held the
// rebalance up.
func slowRebalances(rb []rebalance, events []memberEvent, bound time.Duration) []string {
	var out []string
	for _, r := range rb {
		if r.took() <= bound {
			continue
		}
		line := fmt.Sprintf("%s member %d: %s at %s, coordinator back at %s, assigned %v later;", r.group, r.client, r.kind, r.from.Format("15:04:05.000"), r.back.Format("15:04:05.000"), r.took())
		for _, e := range events {
			if e.group == r.group && !e.at.Before(r.from) && !e.at.After(r.to) {
				line += fmt.Sprintf(" [%s m%d gen %d %s]", e.at.Format("15:04:05.000"), e.client, e.gen, e.kind)
			}
		}
		out = append(out, line)
	}
	return out
}

// percentile returns the p-th percentile (0–100) of ds, nearest rank.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

package groups

import (
	"context"
	"errors"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeClock is a manual clock: Advance moves time and runs due timers
// synchronously, in time order, outside its own lock.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	seq    int
	timers []*fakeTimer
}

type fakeTimer struct {
	clock   *fakeClock
	at      time.Time
	seq     int
	f       func()
	stopped bool
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &fakeTimer{clock: c, at: c.now.Add(d), seq: c.seq, f: f}
	c.timers = append(c.timers, t)
	return t
}

func (t *fakeTimer) Stop() bool {
	t.clock.mu.Lock()
	defer t.clock.mu.Unlock()
	was := !t.stopped
	t.stopped = true
	return was
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	target := c.now.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		var next *fakeTimer
		live := c.timers[:0]
		for _, t := range c.timers {
			if t.stopped {
				continue
			}
			live = append(live, t)
			if !t.at.After(target) && (next == nil || t.at.Before(next.at) || (t.at.Equal(next.at) && t.seq < next.seq)) {
				next = t
			}
		}
		c.timers = live
		if next == nil {
			c.now = target
			c.mu.Unlock()
			return
		}
		next.stopped = true
		c.now = next.at
		c.mu.Unlock()
		next.f()
	}
}

// fakeJournal records appended batches. It can fail appends or waits, and
// hold batches' durability until released.
type fakeJournal struct {
	mu         sync.Mutex
	recs       []Record
	failAppend error
	failWait   error
	hold       bool
	gates      map[int]chan struct{} // batch index → closed when durable
	batches    []int64               // first offset of each batch
}

func (j *fakeJournal) Append(recs []Record) (int64, func(context.Context) error, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.failAppend != nil {
		return 0, nil, j.failAppend
	}
	off := int64(len(j.recs))
	for _, r := range recs {
		j.recs = append(j.recs, Record{Key: clone(r.Key), Value: clone(r.Value)})
	}
	j.batches = append(j.batches, off)
	var gate chan struct{}
	if j.hold {
		gate = make(chan struct{})
		if j.gates == nil {
			j.gates = make(map[int]chan struct{})
		}
		j.gates[len(j.batches)-1] = gate
	}
	failWait := j.failWait
	return off, func(ctx context.Context) error {
		if gate != nil {
			select {
			case <-gate:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return failWait
	}, nil
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

func (j *fakeJournal) release(batch int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	close(j.gates[batch])
	delete(j.gates, batch)
}

func (j *fakeJournal) batchCount() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.batches)
}

func (j *fakeJournal) records() []Record {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]Record(nil), j.recs...)
}

// compacted is what a snapshot holds: the last record of each key, in the
// log order of that last write, tombstones dropped.
func (j *fakeJournal) compacted() []Record {
	recs := j.records()
	last := make(map[string]int)
	for i, r := range recs {
		last[string(r.Key)] = i
	}
	var idx []int
	for _, i := range last {
		if recs[i].Value != nil {
			idx = append(idx, i)
		}
	}
	sort.Ints(idx)
	out := make([]Record, len(idx))
	for k, i := range idx {
		out[k] = recs[i]
	}
	return out
}

var errInjected = errors.New("injected journal failure")

type harness struct {
	t       *testing.T
	c       *Coordinator
	clock   *fakeClock
	journal *fakeJournal
}

func newHarness(t *testing.T, tweak ...func(*Config)) *harness {
	t.Helper()
	h := &harness{t: t, clock: newFakeClock(), journal: &fakeJournal{}}
	cfg := Config{
		Journal:               h.journal,
		Clock:                 h.clock,
		Logger:                testr.New(t),
		InitialRebalanceDelay: 3 * time.Second,
		OffsetsRetention:      time.Hour,
		RetentionCheck:        10 * time.Minute,
	}
	for _, f := range tweak {
		f(&cfg)
	}
	h.c = New(cfg)
	h.c.Start()
	t.Cleanup(h.c.Close)
	return h
}

// waitFor polls cond (under no lock of ours) until it holds: goroutines
// blocked in JoinGroup/SyncGroup need a moment to register.
func (h *harness) waitFor(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// waiting is the test hook: how many members of group wait in join / sync.
func (c *Coordinator) waiting(group string) (joins, syncs int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[group]
	if g == nil {
		return 0, 0
	}
	for _, m := range g.members {
		if m.joinReply != nil {
			joins++
		}
		if m.syncReply != nil {
			syncs++
		}
	}
	return joins, syncs
}

func (c *Coordinator) stateOf(group string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g := c.groups[group]; g != nil {
		return g.state.String()
	}
	return "Dead"
}

func (h *harness) waitJoins(group string, n int) {
	h.t.Helper()
	h.waitFor("joins", func() bool { j, _ := h.c.waiting(group); return j == n })
}

func (h *harness) waitSyncs(group string, n int) {
	h.t.Helper()
	h.waitFor("syncs", func() bool { _, s := h.c.waiting(group); return s == n })
}

func (h *harness) joinAsync(req *kmsg.JoinGroupRequest) <-chan *kmsg.JoinGroupResponse {
	ch := make(chan *kmsg.JoinGroupResponse, 1)
	ctx := WithClient(context.Background(), "client", "/10.0.0.1")
	go func() { ch <- h.c.JoinGroup(ctx, req) }()
	return ch
}

func (h *harness) syncAsync(req *kmsg.SyncGroupRequest) <-chan *kmsg.SyncGroupResponse {
	ch := make(chan *kmsg.SyncGroupResponse, 1)
	go func() { ch <- h.c.SyncGroup(context.Background(), req) }()
	return ch
}

func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second):
		t.Fatal("timed out waiting for a response")
		panic("unreachable")
	}
}

// consumerMeta is a consumer protocol subscription to topics.
func consumerMeta(topics ...string) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Topics = topics
	return m.AppendTo(nil)
}

type joinOpt func(*kmsg.JoinGroupRequest)

func withInstance(id string) joinOpt {
	return func(r *kmsg.JoinGroupRequest) { r.InstanceID = kmsg.StringPtr(id) }
}

func withProtocols(ps ...kmsg.JoinGroupRequestProtocol) joinOpt {
	return func(r *kmsg.JoinGroupRequest) { r.Protocols = ps }
}

func joinReq(version int16, group, memberID string, opts ...joinOpt) *kmsg.JoinGroupRequest {
	r := kmsg.NewPtrJoinGroupRequest()
	r.Version = version
	r.Group = group
	r.MemberID = memberID
	r.SessionTimeoutMillis = 10_000
	r.RebalanceTimeoutMillis = 60_000
	r.ProtocolType = "consumer"
	r.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: consumerMeta("t1")}}
	for _, o := range opts {
		o(r)
	}
	return r
}

func syncReq(version int16, group, memberID string, gen int32, assign map[string]string) *kmsg.SyncGroupRequest {
	r := kmsg.NewPtrSyncGroupRequest()
	r.Version = version
	r.Group = group
	r.MemberID = memberID
	r.Generation = gen
	for id, a := range assign {
		r.GroupAssignment = append(r.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: id, MemberAssignment: []byte(a)})
	}
	return r
}

func heartbeatReq(group, memberID string, gen int32) *kmsg.HeartbeatRequest {
	r := kmsg.NewPtrHeartbeatRequest()
	r.Version = 4
	r.Group, r.MemberID, r.Generation = group, memberID, gen
	return r
}

func commitReq(group, memberID string, gen int32, topic string, offsets map[int32]int64) *kmsg.OffsetCommitRequest {
	r := kmsg.NewPtrOffsetCommitRequest()
	r.Version = 8
	r.Group, r.MemberID, r.Generation = group, memberID, gen
	t := kmsg.NewOffsetCommitRequestTopic()
	t.Topic = topic
	parts := make([]int32, 0, len(offsets))
	for p := range offsets {
		parts = append(parts, p)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	for _, p := range parts {
		tp := kmsg.NewOffsetCommitRequestTopicPartition()
		tp.Partition, tp.Offset = p, offsets[p]
		tp.LeaderEpoch = 3
		tp.Metadata = kmsg.StringPtr("md")
		t.Partitions = append(t.Partitions, tp)
	}
	r.Topics = append(r.Topics, t)
	return r
}

// fetched is a group's committed offsets as topic → partition → offset.
func (h *harness) fetched(group string) map[string]map[int32]int64 {
	resp := h.c.OffsetFetch(kmsg.OffsetFetchRequestGroup{Group: group}, false)
	out := make(map[string]map[int32]int64)
	for _, t := range resp.Topics {
		out[t.Topic] = make(map[int32]int64)
		for _, p := range t.Partitions {
			out[t.Topic][p.Partition] = p.Offset
		}
	}
	return out
}

func commitCodes(resp *kmsg.OffsetCommitResponse) []int16 {
	var codes []int16
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			codes = append(codes, p.ErrorCode)
		}
	}
	return codes
}

// stableGroup forms group with two members (A leader, B follower) at
// generation 1 with assignments "a" and "b"; v5 joins, A static if
// instanceA is set.
func (h *harness) stableGroup(group string, instanceA string) (a, b string) {
	h.t.Helper()
	var optsA []joinOpt
	if instanceA != "" {
		optsA = append(optsA, withInstance(instanceA))
	}
	// A: static members join directly; dynamic ones go through KIP-394.
	a = h.memberID(group, optsA...)
	ja := h.joinAsync(joinReq(5, group, a, optsA...))
	h.waitJoins(group, 1)
	b = h.memberID(group)
	jb := h.joinAsync(joinReq(5, group, b))
	h.waitJoins(group, 2)
	h.clock.Advance(3 * time.Second)
	h.clock.Advance(3 * time.Second)
	ra, rb := recv(h.t, ja), recv(h.t, jb)
	if ra.ErrorCode != 0 || rb.ErrorCode != 0 || ra.Generation != 1 {
		h.t.Fatalf("join: %d %d gen %d", ra.ErrorCode, rb.ErrorCode, ra.Generation)
	}
	if ra.MemberID != a {
		a = ra.MemberID // a static member's ID is assigned on its join
	}
	sb := h.syncAsync(syncReq(3, group, b, 1, nil))
	h.waitSyncs(group, 1)
	sa := recv(h.t, h.syncAsync(syncReq(3, group, a, 1, map[string]string{a: "a", b: "b"})))
	if sa.ErrorCode != 0 || recv(h.t, sb).ErrorCode != 0 {
		h.t.Fatal("sync failed")
	}
	return a, b
}

// memberID gets a member ID: KIP-394's MEMBER_ID_REQUIRED for dynamic
// members, "" for static members (their ID is assigned on join).
func (h *harness) memberID(group string, opts ...joinOpt) string {
	h.t.Helper()
	req := joinReq(5, group, "", opts...)
	if req.InstanceID != nil {
		return ""
	}
	resp := h.c.JoinGroup(context.Background(), req)
	if resp.ErrorCode != kerr.MemberIDRequired.Code {
		h.t.Fatalf("first join: error %d, want MEMBER_ID_REQUIRED", resp.ErrorCode)
	}
	return resp.MemberID
}

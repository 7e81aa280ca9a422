package groups

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeTopics is a topic table: mem is the broker's routing table, vol the
// desired state on the volume (they differ while the broker lags).
type fakeTopics struct {
	mu       sync.Mutex
	mem, vol map[string][16]byte
	volErr   error
	reads    int
}

func newFakeTopics() *fakeTopics {
	return &fakeTopics{mem: map[string][16]byte{}, vol: map[string][16]byte{}}
}

func (f *fakeTopics) TopicID(topic string) ([16]byte, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id, ok := f.mem[topic]
	return id, ok
}

func (f *fakeTopics) ConfirmTopicID(topic string) ([16]byte, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if f.volErr != nil {
		return [16]byte{}, false, f.volErr
	}
	id, ok := f.vol[topic]
	return id, ok, nil
}

// set makes id the live incarnation of topic in memory and on the volume;
// a zero id deletes the topic.
func (f *fakeTopics) set(topic string, id [16]byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if id == noTopicID {
		delete(f.mem, topic)
		delete(f.vol, topic)
		return
	}
	f.mem[topic], f.vol[topic] = id, id
}

func (f *fakeTopics) volumeReads() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads
}

func uid(b byte) [16]byte { return [16]byte{15: b, 0: 0x40} }

func incarnationHarness(t *testing.T) (*harness, *fakeTopics) {
	topics := newFakeTopics()
	h := newHarness(t, func(c *Config) { c.Topics = topics })
	return h, topics
}

func (h *harness) fetchOne(group, topic string, partition int32) kmsg.OffsetFetchResponseGroupTopicPartition {
	h.t.Helper()
	resp := h.c.OffsetFetch(kmsg.OffsetFetchRequestGroup{Group: group, Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: topic, Partitions: []int32{partition}}}}, false)
	return resp.Topics[0].Partitions[0]
}

// Offsets committed for an incarnation do not apply to the next one: -1 by
// partition, absent from an all-partitions answer; a commit for the new
// incarnation is visible.
func TestOffsetsOfOldIncarnationHidden(t *testing.T) {
	h, topics := incarnationHarness(t)
	topics.set("t1", uid(1))
	topics.set("t2", uid(9))
	h.c.OffsetCommit(context.Background(), commitReq("g", "", -1, "t1", map[int32]int64{0: 10, 1: 11}))
	h.c.OffsetCommit(context.Background(), commitReq("g", "", -1, "t2", map[int32]int64{0: 5}))
	if p := h.fetchOne("g", "t1", 0); p.Offset != 10 || p.LeaderEpoch != 3 {
		t.Fatalf("live incarnation: %+v", p)
	}
	if n := topics.volumeReads(); n != 0 {
		t.Fatalf("matching offsets read the volume %d times", n)
	}

	topics.set("t1", uid(2)) // deleted and recreated
	p := h.fetchOne("g", "t1", 0)
	if p.Offset != -1 || p.LeaderEpoch != -1 || p.Metadata == nil || *p.Metadata != "" || p.ErrorCode != 0 {
		t.Fatalf("old incarnation's offset: %+v", p)
	}
	if f := h.fetched("g"); len(f) != 1 || f["t2"][0] != 5 {
		t.Fatalf("all partitions: %v", f)
	}
	h.c.OffsetCommit(context.Background(), commitReq("g", "", -1, "t1", map[int32]int64{1: 3}))
	if f := h.fetched("g"); len(f["t1"]) != 1 || f["t1"][1] != 3 || f["t2"][0] != 5 {
		t.Fatalf("after a commit to the new incarnation: %v", f)
	}

	topics.set("t2", noTopicID) // deleted, not recreated
	if f := h.fetched("g"); len(f) != 1 || len(f["t1"]) != 1 {
		t.Fatalf("deleted topic still listed: %v", f)
	}
}

// A broker whose routing table lags (it still routes the old incarnation,
// or no incarnation yet) serves an offset the volume confirms as live.
func TestIncarnationConfirmedOnVolume(t *testing.T) {
	h, topics := incarnationHarness(t)
	topics.set("t1", uid(2))
	h.c.OffsetCommit(context.Background(), commitReq("g", "", -1, "t1", map[int32]int64{0: 10}))

	topics.mu.Lock()
	topics.mem["t1"] = uid(1) // lags behind
	topics.mu.Unlock()
	if p := h.fetchOne("g", "t1", 0); p.Offset != 10 {
		t.Fatalf("stale memory hid a live offset: %+v", p)
	}
	topics.mu.Lock()
	delete(topics.mem, "t1") // not learnt yet
	topics.mu.Unlock()
	if p := h.fetchOne("g", "t1", 0); p.Offset != 10 {
		t.Fatalf("unknown in memory hid a live offset: %+v", p)
	}
	// The volume cannot be read: memory decides (not live: hidden), and
	// the expiry pass deletes nothing.
	topics.mu.Lock()
	topics.volErr = errors.New("EIO")
	topics.mu.Unlock()
	if p := h.fetchOne("g", "t1", 0); p.Offset != -1 {
		t.Fatalf("with the volume failing: %+v", p)
	}
	h.clock.Advance(10 * time.Minute)
	if n := len(h.journal.records()); n != 1 {
		t.Fatalf("expiry wrote %d records without a confirmed incarnation", n-1)
	}
}

// A commit for a topic the broker does not route (deleted after package
// wire checked it) is stored without an ID, and dropped by the expiry pass
// once the topic is gone from memory and volume.
func TestCommitToUnknownTopic(t *testing.T) {
	h, topics := incarnationHarness(t)
	topics.set("t1", uid(1))
	req := commitReq("g", "", -1, "t1", map[int32]int64{0: 1})
	req.Topics = append(req.Topics, commitReq("g", "", -1, "gone", map[int32]int64{0: 2}).Topics...)
	if got := commitCodes(h.c.OffsetCommit(context.Background(), req)); got[0] != 0 || got[1] != 0 {
		t.Fatalf("codes %v", got)
	}
	var v kmsg.OffsetCommitValue
	if err := v.ReadFrom(h.journal.records()[1].Value); err != nil || v.Version != 3 {
		t.Fatalf("unstamped value %+v %v", v, err)
	}
	if f := h.fetched("g"); len(f) != 2 || f["t1"][0] != 1 || f["gone"][0] != 2 {
		t.Fatalf("fetched %v", f)
	}
	h.clock.Advance(10 * time.Minute)
	if f := h.fetched("g"); len(f) != 1 || f["t1"][0] != 1 {
		t.Fatalf("after an expiry pass %v", f)
	}
}

// The topic ID is persisted (value v4, tag 0, as Kafka 4), replays, and
// old records (v3, no ID) still load and apply to any incarnation.
func TestIncarnationRecordsReplay(t *testing.T) {
	h, topics := incarnationHarness(t)
	topics.set("t1", uid(1))
	h.c.OffsetCommit(context.Background(), commitReq("g", "", -1, "t1", map[int32]int64{0: 10}))
	recs := h.journal.records()
	var v kmsg.OffsetCommitValue
	if err := v.ReadFrom(recs[0].Value); err != nil || v.Version != 4 || v.TopicID != uid(1) || v.Offset != 10 || v.LeaderEpoch != 3 || v.Metadata != "md" {
		t.Fatalf("value %+v %v", v, err)
	}
	legacy := offsetCommitRecord("g", topicPartition{"t2", 0}, committedOffset{offset: 20, leaderEpoch: -1, committedAt: 1})
	if err := v.ReadFrom(legacy.Value); err != nil || v.Version != 3 {
		t.Fatalf("legacy value %+v %v", v, err)
	}

	topics.set("t2", uid(5))
	replayed := New(Config{Journal: &fakeJournal{}, Clock: h.clock, Topics: topics})
	for _, r := range append(recs, legacy) {
		if err := replayed.Replay(r); err != nil {
			t.Fatal(err)
		}
	}
	replayed.Start()
	defer replayed.Close()
	fetch := func() map[string]int64 {
		out := map[string]int64{}
		for _, t := range replayed.OffsetFetch(kmsg.OffsetFetchRequestGroup{Group: "g"}, false).Topics {
			out[t.Topic] = t.Partitions[0].Offset
		}
		return out
	}
	if f := fetch(); f["t1"] != 10 || f["t2"] != 20 {
		t.Fatalf("replayed: %v", f)
	}
	topics.set("t1", uid(2))
	topics.set("t2", uid(6))
	if f := fetch(); len(f) != 1 || f["t2"] != 20 {
		t.Fatalf("replayed after recreating both: %v", f)
	}
}

// The expiry pass tombstones the offsets of incarnations confirmed gone,
// and offsets without an ID of topics gone from memory and volume; a
// group left Empty with nothing is removed. Live ones stay.
func TestExpiryDropsOffsetsOfDeletedIncarnations(t *testing.T) {
	h, topics := incarnationHarness(t)
	topics.set("t1", uid(1))
	topics.set("t2", uid(2))
	topics.set("t3", uid(3))
	h.c.OffsetCommit(context.Background(), commitReq("g", "", -1, "t1", map[int32]int64{0: 10, 1: 11}))
	h.c.OffsetCommit(context.Background(), commitReq("g", "", -1, "t2", map[int32]int64{0: 20}))
	h.c.OffsetCommit(context.Background(), commitReq("only-t3", "", -1, "t3", map[int32]int64{0: 30}))
	// Legacy offsets (no ID) of a topic that exists and of one that is gone.
	for _, r := range []Record{
		offsetCommitRecord("g", topicPartition{"t2", 1}, committedOffset{offset: 21, leaderEpoch: -1, committedAt: h.clock.Now().UnixMilli()}),
		offsetCommitRecord("g", topicPartition{"gone", 0}, committedOffset{offset: 40, leaderEpoch: -1, committedAt: h.clock.Now().UnixMilli()}),
	} {
		if err := h.c.Replay(r); err != nil {
			t.Fatal(err)
		}
	}
	n := len(h.journal.records())

	topics.set("t1", uid(11)) // recreated
	topics.set("t3", noTopicID)
	h.clock.Advance(10 * time.Minute) // one pass, well within retention
	tombs := map[string]bool{}
	for _, r := range h.journal.records()[n:] {
		if r.Value != nil {
			t.Fatalf("expiry wrote a value")
		}
		var k kmsg.OffsetCommitKey
		if err := k.ReadFrom(r.Key); err == nil && k.Version == 1 {
			tombs[fmt.Sprintf("%s/%s/%d", k.Group, k.Topic, k.Partition)] = true
			continue
		}
		var gk kmsg.GroupMetadataKey
		if err := gk.ReadFrom(r.Key); err != nil {
			t.Fatal(err)
		}
		tombs["group "+gk.Group] = true
	}
	want := map[string]bool{"g/t1/0": true, "g/t1/1": true, "g/gone/0": true, "only-t3/t3/0": true, "group only-t3": true}
	if len(tombs) != len(want) {
		t.Fatalf("tombstones %v, want %v", tombs, want)
	}
	for k := range want {
		if !tombs[k] {
			t.Fatalf("tombstones %v, want %v", tombs, want)
		}
	}
	if f := h.fetched("g"); len(f) != 1 || f["t2"][0] != 20 || f["t2"][1] != 21 {
		t.Fatalf("left: %v", f)
	}
	if got := h.c.DescribeGroup("only-t3").State; got != "Dead" {
		t.Fatalf("group of a deleted topic only: %s", got)
	}
	// The next pass has nothing more to do.
	n = len(h.journal.records())
	h.clock.Advance(10 * time.Minute)
	if got := len(h.journal.records()); got != n {
		t.Fatalf("second pass wrote %d records", got-n)
	}
}

// A transaction's offsets are for the incarnation live at its
// TxnOffsetCommit, and stay that after it commits.
func TestTxnOffsetsCarryIncarnation(t *testing.T) {
	h, topics := incarnationHarness(t)
	topics.set("t1", uid(1))
	h.txnCommit(simpleTxn("g", 7, "t1", map[int32]int64{0: 50}))
	topics.set("t1", uid(2))
	h.complete(7, true)
	if p := h.fetchOne("g", "t1", 0); p.Offset != -1 {
		t.Fatalf("transactional offset of the old incarnation: %+v", p)
	}
	h.txnCommit(simpleTxn("g", 7, "t1", map[int32]int64{0: 60}))
	h.complete(7, true)
	if p := h.fetchOne("g", "t1", 0); p.Offset != 60 {
		t.Fatalf("transactional offset of the live incarnation: %+v", p)
	}
}

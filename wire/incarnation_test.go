package wire

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// topicID returns the live incarnation's ID of name.
func (b *testBroker) topicID(t testing.TB, name string) [16]byte {
	t.Helper()
	v, ok := b.eng.Topic(name)
	if !ok {
		t.Fatalf("topic %s not live", name)
	}
	return uuid.MustParse(v.Spec.ID)
}

// recreateTopic deletes name and creates it again (one partition).
func (b *testBroker) recreateTopic(t testing.TB, name string) {
	t.Helper()
	spec, err := b.eng.DeleteTopic(name)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	if !b.eng.WaitDeleted(ctx, name, spec.ID) {
		t.Fatalf("%s never deleted", name)
	}
	b.createTopic(t, name, 1, nil)
}

func fetchByID(version int16, id [16]byte, offset int64) *kmsg.FetchRequest {
	req := fetchReq(version, "", offset, -1, 0, 0)
	req.Topics[0].TopicID = id
	return req
}

// TestFetchByTopicID: from v13 a fetch names the incarnation; the old
// incarnation's ID gets UNKNOWN_TOPIC_ID once the topic is recreated, the
// new one's reads the new log from offset 0. Metadata by an old ID says
// UNKNOWN_TOPIC_ID too.
func TestFetchByTopicID(t *testing.T) {
	b := startBroker(t, nil)
	b.createTopic(t, "inc", 1, nil)
	c := b.dial(t)
	if p := c.produce(9, "inc", makeBatch(batchOpts{values: []string{"a", "b", "c"}})); p.ErrorCode != 0 {
		t.Fatalf("produce: %d", p.ErrorCode)
	}
	old := b.topicID(t, "inc")
	for _, v := range []int16{13, 14, 15} {
		p := c.fetch(fetchByID(v, old, 0))
		if bases, counts := batchBases(t, p.RecordBatches); p.ErrorCode != 0 || len(bases) != 1 || counts[0] != 3 || p.HighWatermark != 3 {
			t.Fatalf("v%d by ID: code %d, batches %v %v, hw %d", v, p.ErrorCode, bases, counts, p.HighWatermark)
		}
	}
	resp := c.do(fetchByID(13, old, 0)).(*kmsg.FetchResponse)
	if resp.Topics[0].TopicID != old {
		t.Fatalf("answer names topic ID %x", resp.Topics[0].TopicID)
	}
	if p := c.fetch(fetchByID(13, uuid.New(), 0)); p.ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("never-created ID: %d", p.ErrorCode)
	}

	b.recreateTopic(t, "inc")
	if p := c.produce(9, "inc", makeBatch(batchOpts{values: []string{"new"}})); p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("produce to the new incarnation: %+v", p)
	}
	cur := b.topicID(t, "inc")
	if cur == old {
		t.Fatal("same ID after recreate")
	}
	for _, offset := range []int64{0, 1, 3} {
		if p := c.fetch(fetchByID(13, old, offset)); p.ErrorCode != kerr.UnknownTopicID.Code || len(p.RecordBatches) != 0 {
			t.Fatalf("old ID at %d: code %d, %d bytes", offset, p.ErrorCode, len(p.RecordBatches))
		}
	}
	p := c.fetch(fetchByID(15, cur, 0))
	if bases, counts := batchBases(t, p.RecordBatches); p.ErrorCode != 0 || len(bases) != 1 || bases[0] != 0 || counts[0] != 1 || p.HighWatermark != 1 {
		t.Fatalf("new ID: code %d, batches %v %v, hw %d", p.ErrorCode, bases, counts, p.HighWatermark)
	}
	// Two topics in one request, the old ID and the new: each its own answer.
	req := fetchByID(13, old, 0)
	req.Topics = append(req.Topics, fetchByID(13, cur, 0).Topics...)
	both := c.do(req).(*kmsg.FetchResponse)
	if len(both.Topics) != 2 || both.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicID.Code ||
		both.Topics[1].Partitions[0].ErrorCode != 0 || len(both.Topics[1].Partitions[0].RecordBatches) == 0 {
		t.Fatalf("mixed request: %+v", both.Topics)
	}

	// Metadata by ID (v10+).
	meta := func(id [16]byte) kmsg.MetadataResponseTopic {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 12
		rt := kmsg.NewMetadataRequestTopic()
		rt.TopicID = id
		req.Topics = append(req.Topics, rt)
		return c.do(req).(*kmsg.MetadataResponse).Topics[0]
	}
	if m := meta(old); m.ErrorCode != kerr.UnknownTopicID.Code || m.TopicID != old {
		t.Fatalf("metadata by the old ID: %+v", m)
	}
	if m := meta(cur); m.ErrorCode != 0 || m.Topic == nil || *m.Topic != "inc" || len(m.Partitions) != 1 {
		t.Fatalf("metadata by the new ID: %+v", m)
	}
}

// TestGroupOffsetsAcrossRecreate: over the wire, a group's committed
// offsets of a deleted incarnation are no committed offsets of the new
// one (-1, listed nowhere), for every OffsetFetch version shape.
func TestGroupOffsetsAcrossRecreate(t *testing.T) {
	b := startGroupBroker(t)
	b.createTopic(t, "grp-inc", 1, nil)
	c := b.dial(t)
	commitAs := func(version int16, id [16]byte, offset int64) int16 {
		t.Helper()
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.Generation = version, "g", -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic, rt.TopicID = "grp-inc", id
		p := kmsg.NewOffsetCommitRequestTopicPartition()
		p.Partition, p.Offset, p.LeaderEpoch = 0, offset, -1
		rt.Partitions = append(rt.Partitions, p)
		req.Topics = append(req.Topics, rt)
		resp := c.do(req).(*kmsg.OffsetCommitResponse)
		if version >= 10 && resp.Topics[0].TopicID != id {
			t.Fatalf("v%d answer names topic ID %x", version, resp.Topics[0].TopicID)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	commit := func(offset int64) {
		t.Helper()
		if code := commitAs(8, [16]byte{}, offset); code != 0 {
			t.Fatalf("commit: %d", code)
		}
	}
	old := b.topicID(t, "grp-inc")
	fetch := func(version int16, all bool) (int64, int) {
		t.Helper()
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version, req.Group = version, "g"
		if !all {
			rt := kmsg.NewOffsetFetchRequestTopic()
			rt.Topic, rt.Partitions = "grp-inc", []int32{0}
			req.Topics = append(req.Topics, rt)
		}
		resp := c.do(req).(*kmsg.OffsetFetchResponse)
		if resp.ErrorCode != 0 {
			t.Fatalf("offset fetch: %d", resp.ErrorCode)
		}
		if len(resp.Topics) == 0 {
			return -1, 0
		}
		return resp.Topics[0].Partitions[0].Offset, len(resp.Topics)
	}
	commit(2)
	if off, _ := fetch(7, false); off != 2 {
		t.Fatalf("committed %d", off)
	}
	b.recreateTopic(t, "grp-inc")
	if off, n := fetch(7, false); off != -1 || n != 1 {
		t.Fatalf("old incarnation's offset by partition: %d (%d topics)", off, n)
	}
	if off, n := fetch(7, true); off != -1 || n != 0 {
		t.Fatalf("old incarnation's offset listed: %d (%d topics)", off, n)
	}
	if off, _ := fetch(1, false); off != -1 {
		t.Fatalf("v1: %d", off)
	}
	// v10 names the incarnation the client consumed: the old one's
	// commit is refused, not taken for the new one.
	if code := commitAs(10, old, 3); code != kerr.UnknownTopicID.Code {
		t.Fatalf("v10 commit for the old incarnation: %d", code)
	}
	if off, _ := fetch(7, false); off != -1 {
		t.Fatalf("after a refused v10 commit: %d", off)
	}
	commit(1)
	if off, _ := fetch(7, true); off != 1 {
		t.Fatalf("new incarnation's commit: %d", off)
	}
	if code := commitAs(10, b.topicID(t, "grp-inc"), 4); code != 0 {
		t.Fatalf("v10 commit for the live incarnation: %d", code)
	}
	if off, _ := fetch(7, true); off != 4 {
		t.Fatalf("after a v10 commit: %d", off)
	}
}

// TestFranzGoConsumerAcrossRecreate documents how franz-go meets a
// recreated topic over Fetch v13+: it keeps the cursor's topic ID, its
// fetches fail UNKNOWN_TOPIC_ID (surfaced after a few retries), and after
// PurgeTopicsFromConsuming + AddConsumeTopics it consumes the new
// incarnation from its start, never a record of the old one.
func TestFranzGoConsumerAcrossRecreate(t *testing.T) {
	b := startBroker(t, nil)
	b.createTopic(t, "kgo-inc", 1, nil)
	c := b.dial(t)
	if p := c.produce(9, "kgo-inc", makeBatch(batchOpts{values: []string{"old-0", "old-1"}})); p.ErrorCode != 0 {
		t.Fatalf("produce: %d", p.ErrorCode)
	}
	cl := b.client(t, kgo.ConsumeTopics("kgo-inc"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.MetadataMinAge(50*time.Millisecond), kgo.MetadataMaxAge(200*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []string
	for len(got) < 2 {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("first incarnation: %v", err)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	b.recreateTopic(t, "kgo-inc")
	if p := c.produce(9, "kgo-inc", makeBatch(batchOpts{values: []string{"new-0"}})); p.ErrorCode != 0 {
		t.Fatalf("produce: %d", p.ErrorCode)
	}
	sawUnknownID := false
	for !sawUnknownID {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("franz-go never reported UNKNOWN_TOPIC_ID")
		}
		fs.EachError(func(_ string, _ int32, err error) {
			sawUnknownID = sawUnknownID || errors.Is(err, kerr.UnknownTopicID)
		})
		fs.EachRecord(func(r *kgo.Record) { t.Fatalf("read %q through the old cursor", r.Value) })
	}
	cl.PurgeTopicsFromConsuming("kgo-inc")
	cl.AddConsumeTopics("kgo-inc")
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("never consumed the new incarnation")
		}
		var recs []*kgo.Record
		fs.EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
		if len(recs) > 0 {
			if string(recs[0].Value) != "new-0" || recs[0].Offset != 0 {
				t.Fatalf("after re-adding: %q at %d", recs[0].Value, recs[0].Offset)
			}
			return
		}
	}
}

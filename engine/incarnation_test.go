package engine

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/engine/desired"
	"github.com/kaas-dev/kaas/engine/groups"
	"github.com/kaas-dev/kaas/volume/memfs"
	"github.com/kaas-dev/kaas/volume/partlog/partlogtest"
)

// recreate deletes the live incarnation of name and creates a new one,
// waiting until it is served.
func recreate(t *testing.T, ctx context.Context, e *Engine, old desired.TopicSpec) desired.TopicSpec {
	t.Helper()
	if _, err := e.DeleteTopic(old.Name); err != nil {
		t.Fatal(err)
	}
	if !e.WaitDeleted(ctx, old.Name, old.ID) {
		t.Fatal("never deleted")
	}
	spec, err := e.CreateTopic(CreateTopicRequest{Name: old.Name, Partitions: old.Partitions})
	if err != nil {
		t.Fatal(err)
	}
	if spec.ID == old.ID {
		t.Fatal("the new incarnation has the old topic ID")
	}
	mustServing(t, ctx, e, old.Name)
	return spec
}

// TestProducerStateDoesNotOutliveIncarnation: an idempotent producer's
// state belongs to the partition directory of one incarnation. After a
// delete and a recreate the producer is unknown to the new incarnation,
// and, as Kafka since KIP-360 (2.5) answers an unknown producer, a batch
// of it at any sequence is accepted and appended: no
// UNKNOWN_PRODUCER_ID (Kafka no longer returns it for produce) and no
// OUT_OF_ORDER_SEQUENCE_NUMBER (only a known producer at its epoch has a
// next sequence to miss). The retry of the old incarnation's last batch is
// not a duplicate answered with the old offset either: it is the new
// incarnation's offset 0.
func TestProducerStateDoesNotOutliveIncarnation(t *testing.T) {
	ctx := safety(t)
	e := startEngine(t, memfs.New())
	spec, err := e.CreateTopic(CreateTopicRequest{Name: "t", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	mustServing(t, ctx, e.Engine, "t")
	pid, err := e.NextProducerID()
	if err != nil {
		t.Fatal(err)
	}
	mk := func(seq int32) []byte { return partlogtest.MakeBatch(3, 40, 1, pid, 0, seq) }
	p := mustPartition(t, e.Engine, "t", 0)
	for i := int32(0); i < 4; i++ {
		if _, err := p.Produce(ctx, mk(3*i)); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := p.Produce(ctx, mk(9)); err != nil || res.BaseOffset != 9 {
		t.Fatalf("retry in the first incarnation: %+v %v, want the duplicate at 9", res, err)
	}
	if got := p.Producers(); len(got) != 1 || got[0].LastSequence != 11 {
		t.Fatalf("producers of the first incarnation: %+v", got)
	}

	spec2 := recreate(t, ctx, e.Engine, spec)
	p2 := mustPartition(t, e.Engine, "t", 0)
	if p2.TopicID != spec2.ID || p2.Log().LogEndOffset() != 0 || len(p2.Producers()) != 0 {
		t.Fatalf("new incarnation: ID %s (want %s), log end %d, producers %+v", p2.TopicID, spec2.ID, p2.Log().LogEndOffset(), p2.Producers())
	}
	// The old incarnation's last batch again (a retry across the delete).
	res, err := p2.Produce(ctx, mk(9))
	if err != nil || res.BaseOffset != 0 {
		t.Fatalf("old producer's retry into the new incarnation: %+v %v, want appended at 0", res, err)
	}
	// Its sequence continues from there in this incarnation only.
	if _, err := p2.Produce(ctx, mk(14)); err == nil {
		t.Fatal("a gap after the first batch of the new incarnation was accepted")
	}
	if res, err := p2.Produce(ctx, mk(12)); err != nil || res.BaseOffset != 3 {
		t.Fatalf("next batch: %+v %v", res, err)
	}

	// A producer never seen by the new incarnation, at a nonzero sequence.
	spec3 := recreate(t, ctx, e.Engine, spec2)
	p3 := mustPartition(t, e.Engine, "t", 0)
	if p3.TopicID != spec3.ID || len(p3.Producers()) != 0 {
		t.Fatalf("third incarnation: %s, producers %+v", p3.TopicID, p3.Producers())
	}
	if res, err := p3.Produce(ctx, mk(30)); err != nil || res.BaseOffset != 0 {
		t.Fatalf("unknown producer at sequence 30: %+v %v", res, err)
	}
}

// TestCommittedOffsetsDoNotOutliveIncarnation: the coordinators stamp
// commits with the topic ID the engine routes, so a group's offsets of a
// deleted incarnation are no committed offsets of the next one.
func TestCommittedOffsetsDoNotOutliveIncarnation(t *testing.T) {
	ctx := safety(t)
	e := startEngine(t, memfs.New())
	spec, err := e.CreateTopic(CreateTopicRequest{Name: "events", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	mustServing(t, ctx, e.Engine, "events")
	var coord *groups.Coordinator
	poll(t, ctx, "the group's coordinator", func() error {
		_, c, err := coordinatorOf("g", e.Engine)
		coord = c
		return err
	})
	if code := simpleCommit(ctx, coord, "g", 42); code != 0 {
		t.Fatalf("commit: %d", code)
	}
	if got := committed(coord, "g"); got != 42 {
		t.Fatalf("committed %d", got)
	}
	tt := topicTable{e.Engine}
	if id, ok := tt.TopicID("events"); !ok || uuid.UUID(id).String() != spec.ID {
		t.Fatalf("topic table: %x %v, want %s", id, ok, spec.ID)
	}

	recreate(t, ctx, e.Engine, spec)
	if got := committed(coord, "g"); got != -1 {
		t.Fatalf("the new incarnation has the old one's committed offset %d", got)
	}
	req := kmsg.NewOffsetFetchRequestGroup()
	req.Group = "g"
	req.Topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: "events", Partitions: []int32{0}}}
	if p := coord.OffsetFetch(req, false).Topics[0].Partitions[0]; p.Offset != -1 {
		t.Fatalf("by partition: %+v", p)
	}
	if code := simpleCommit(ctx, coord, "g", 7); code != 0 {
		t.Fatalf("commit: %d", code)
	}
	if got := committed(coord, "g"); got != 7 {
		t.Fatalf("committed to the new incarnation %d", got)
	}
}

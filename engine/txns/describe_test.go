package txns

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/engine/groups"
)

// describeSeed: a (Empty, pid 1), b (Ongoing 5 min, pid 2), c
// (PrepareCommit 30 s, pid 3), d (CompleteAbort, started 2 h ago, pid 4).
func describeSeed() []Record {
	now := newFakeClock().Now().UnixMilli()
	at := func(state string, pid int64, started time.Duration, parts ...TopicPartition) meta {
		m := seedMeta(state, parts...)
		m.producerID = pid
		if state != "Empty" {
			m.startMs = now - started.Milliseconds()
		}
		return m
	}
	b := at("Ongoing", 2, 5*time.Minute, tp("t", 1), tp("t", 0), tp("s", 3))
	b.groups = map[string]struct{}{"g1": {}, "g2": {}, "g3": {}}
	var recs []Record
	recs = append(recs, seed("a", at("Empty", 1, 0))...)
	recs = append(recs, seed("b", b)...)
	recs = append(recs, seed("c", at("PrepareCommit", 3, 30*time.Second, tp("t", 0)))...)
	recs = append(recs, seed("d", at("CompleteAbort", 4, 2*time.Hour))...)
	return recs
}

func TestDescribe(t *testing.T) {
	h := newHarness(t, describeSeed(), blockMarkers)
	now := h.clock.Now().UnixMilli()

	got := h.c.Describe("b")
	want := kmsg.NewDescribeTransactionsResponseTransactionState()
	want.TransactionalID, want.State, want.TimeoutMillis = "b", "Ongoing", 60_000
	want.StartTimestamp, want.ProducerID, want.ProducerEpoch = now-5*60_000, 2, 3
	var shards []int32
	for _, g := range []string{"g1", "g2", "g3"} {
		if s := groups.ShardOf(g); !slices.Contains(shards, s) {
			shards = append(shards, s)
		}
	}
	slices.Sort(shards)
	want.Topics = []kmsg.DescribeTransactionsResponseTransactionStateTopic{
		{Topic: "s", Partitions: []int32{3}},
		{Topic: "t", Partitions: []int32{0, 1}},
		{Topic: "__consumer_offsets", Partitions: shards},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("describe b:\n got  %+v\n want %+v", got, want)
	}

	for _, tt := range []struct {
		id        string
		code      int16
		state     string
		start     int64
		pid       int64
		numTopics int
	}{
		{"a", 0, "Empty", -1, 1, 0},
		{"c", 0, "PrepareCommit", now - 30_000, 3, 1},
		{"d", 0, "CompleteAbort", now - 2*3600_000, 4, 0},
		{"nope", kerr.TransactionalIDNotFound.Code, "", 0, 0, 0},
	} {
		got := h.c.Describe(tt.id)
		if got.TransactionalID != tt.id || got.ErrorCode != tt.code || got.State != tt.state || got.StartTimestamp != tt.start ||
			got.ProducerID != tt.pid || len(got.Topics) != tt.numTopics {
			t.Errorf("describe %s: %+v", tt.id, got)
		}
	}
}

func TestList(t *testing.T) {
	h := newHarness(t, describeSeed(), blockMarkers)
	tests := []struct {
		name        string
		states      []string
		producerIDs []int64
		minDuration time.Duration
		want        []string
	}{
		{name: "no filters", want: []string{"a Empty 1", "b Ongoing 2", "c PrepareCommit 3", "d CompleteAbort 4"}},
		{name: "states, any case", states: []string{"ongoing", "PrepareCommit"}, want: []string{"b Ongoing 2", "c PrepareCommit 3"}},
		{name: "unknown state", states: []string{"Nope"}},
		{name: "producer IDs", producerIDs: []int64{4, 1, 99}, want: []string{"a Empty 1", "d CompleteAbort 4"}},
		{name: "running over a minute", minDuration: time.Minute, want: []string{"b Ongoing 2"}},
		{name: "running over 10 s", minDuration: 10 * time.Second, want: []string{"b Ongoing 2", "c PrepareCommit 3"}},
		{name: "running exactly 30 s is not over 30 s", minDuration: 30 * time.Second, want: []string{"b Ongoing 2"}},
		{name: "filters combine", states: []string{"Ongoing"}, producerIDs: []int64{3}},
		{name: "negative duration matches all", minDuration: -time.Second, want: []string{"a Empty 1", "b Ongoing 2", "c PrepareCommit 3", "d CompleteAbort 4"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, l := range h.c.List(tt.states, tt.producerIDs, tt.minDuration) {
				got = append(got, fmt.Sprintf("%s %s %d", l.TransactionalID, l.TransactionState, l.ProducerID))
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

package txns

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestRecordKey(t *testing.T) {
	key := recordKey("tx")
	if want := []byte{0x03, 0xe8, 0, 2, 't', 'x'}; !bytes.Equal(key, want) {
		t.Fatalf("key %x, want %x", key, want)
	}
	groupKey := (&kmsg.OffsetCommitKey{Version: 1, Group: "g", Topic: "t"}).AppendTo(nil)
	for _, tt := range []struct {
		key  []byte
		want bool
	}{
		{key, true},
		{groupKey, false},
		{(&kmsg.GroupMetadataKey{Version: 2, Group: "g"}).AppendTo(nil), false},
		{[]byte{0x03}, false},
		{nil, false},
	} {
		if got := IsRecord(tt.key); got != tt.want {
			t.Errorf("IsRecord(%x) = %v", tt.key, got)
		}
	}
}

// A record holds everything a new owner needs, in Kafka's value format.
func TestRecordRoundTrip(t *testing.T) {
	m := meta{
		producerID: 42, epoch: 5, lastProducerID: 41, lastEpoch: 32766,
		timeout: 90 * time.Second, state: stateOngoing,
		partitions: map[TopicPartition]struct{}{tp("b", 1): {}, tp("a", 2): {}, tp("a", 0): {}},
		groups:     map[string]struct{}{"g/with/slashes": {}, "g1": {}},
		startMs:    1000, updateMs: 2000, timeoutFromMs: 1000,
	}
	rec := record("tx", m)
	got, err := parseValue(rec.Value)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Fatalf("round trip:\n got  %+v\n want %+v", got, m)
	}

	var v kmsg.TxnMetadataValue
	if err := v.ReadFrom(rec.Value); err != nil {
		t.Fatal(err)
	}
	if v.Version != 1 || v.ProducerID != 42 || v.ProducerEpoch != 5 || v.TimeoutMillis != 90_000 || v.State != stateOngoing ||
		v.LastUpdateTimestamp != 2000 || v.StartTimestamp != 1000 || v.PreviousProducerID != 41 || v.NextProducerID != -1 {
		t.Fatalf("kmsg reads %+v", v)
	}
	var topics []string
	for _, tt := range v.Topics {
		topics = append(topics, fmt.Sprint(tt.Topic, tt.Partitions))
	}
	if want := []string{"a[0 2]", "b[1]", "__consumer_offsets/g/with/slashes[]", "__consumer_offsets/g1[]"}; !slices.Equal(topics, want) {
		t.Fatalf("topics %q, want %q", topics, want)
	}

	// No last epoch: no tag.
	m.lastEpoch, m.lastProducerID = -1, -1
	m.state, m.partitions, m.groups = stateEmpty, map[TopicPartition]struct{}{}, map[string]struct{}{}
	got, err = parseValue(record("tx", m).Value)
	if err != nil || !reflect.DeepEqual(got, m) {
		t.Fatalf("round trip without a last pair: %+v %v", got, err)
	}
	var v0 kmsg.TxnMetadataValue
	if err := v0.ReadFrom(record("tx", m).Value); err != nil || v0.UnknownTags.Len() != 0 {
		t.Fatal("a last epoch tag without a last epoch")
	}

	if rec := record("tx", meta{state: stateDead}); !bytes.Equal(rec.Key, recordKey("tx")) || rec.Value != nil {
		t.Fatalf("Dead is a tombstone: %+v", rec)
	}
}

func TestReplayRejects(t *testing.T) {
	value := func(f func(v *kmsg.TxnMetadataValue)) []byte {
		v := kmsg.NewTxnMetadataValue()
		v.Version, v.ProducerID, v.TimeoutMillis, v.State = 1, 7, 60_000, stateOngoing
		f(&v)
		return v.AppendTo(nil)
	}
	good := value(func(*kmsg.TxnMetadataValue) {})
	withTag := func(val []byte) []byte {
		return value(func(v *kmsg.TxnMetadataValue) { v.UnknownTags.Set(lastEpochTag, val) })
	}
	for _, tt := range []struct {
		name string
		rec  Record
	}{
		{"group record key", Record{Key: (&kmsg.OffsetCommitKey{Version: 1, Group: "g"}).AppendTo(nil), Value: good}},
		{"short key", Record{Key: []byte{0x03, 0xe8, 0}, Value: good}},
		{"key length beyond the key", Record{Key: []byte{0x03, 0xe8, 0, 9, 'x'}, Value: good}},
		{"key with trailing bytes", Record{Key: append(recordKey("tx"), 0), Value: good}},
		{"null ID", Record{Key: []byte{0x03, 0xe8, 0xff, 0xff}, Value: good}},
		{"truncated value", Record{Key: recordKey("tx"), Value: good[:len(good)-3]}},
		{"value version 2", Record{Key: recordKey("tx"), Value: value(func(v *kmsg.TxnMetadataValue) { v.Version = 2 })}},
		{"PrepareEpochFence is never written", Record{Key: recordKey("tx"), Value: value(func(v *kmsg.TxnMetadataValue) { v.State = statePrepareEpochFence })}},
		{"unknown state", Record{Key: recordKey("tx"), Value: value(func(v *kmsg.TxnMetadataValue) { v.State = 9 })}},
		{"negative epoch", Record{Key: recordKey("tx"), Value: value(func(v *kmsg.TxnMetadataValue) { v.ProducerEpoch = -1 })}},
		{"no timeout", Record{Key: recordKey("tx"), Value: value(func(v *kmsg.TxnMetadataValue) { v.TimeoutMillis = 0 })}},
		{"bad last epoch tag", Record{Key: recordKey("tx"), Value: withTag([]byte{1})}},
	} {
		c := New(Config{Journal: newFakeJournal(nil), Clock: newFakeClock()})
		if err := c.Replay(tt.rec); err == nil {
			t.Errorf("%s: replayed without error", tt.name)
		} else if len(c.txns) != 0 {
			t.Errorf("%s: replay left state", tt.name)
		}
	}
	// A version 0 value (no tags) is read.
	c := New(Config{Journal: newFakeJournal(nil), Clock: newFakeClock()})
	if err := c.Replay(Record{Key: recordKey("tx"), Value: value(func(v *kmsg.TxnMetadataValue) { v.Version = 0 })}); err != nil {
		t.Fatal(err)
	}
}

// The latest record of an ID is its state; a tombstone (or a Dead value)
// removes it.
func TestReplayLatestWins(t *testing.T) {
	var recs []Record
	recs = append(recs, seed("a", seedMeta("Ongoing", tp("t", 0)))...)
	recs = append(recs, seed("b", seedMeta("Empty"))...)
	recs = append(recs, seed("a", seedMeta("CompleteCommit"))...)
	recs = append(recs, Record{Key: recordKey("b")})
	recs = append(recs, seed("c", seedMeta("Empty"))...)
	recs = append(recs, Record{Key: recordKey("c"), Value: func() []byte {
		v := kmsg.NewTxnMetadataValue()
		v.Version, v.ProducerID, v.ProducerEpoch, v.TimeoutMillis, v.State = 1, 7, 1, 60_000, stateDead
		return v.AppendTo(nil)
	}()})
	recs = append(recs, Record{Key: recordKey("never")})
	h := newHarness(t, recs)
	for id, want := range map[string]string{"a": "CompleteCommit", "b": "none", "c": "none", "never": "none"} {
		if got := h.state(id); got != want {
			t.Errorf("%s: %s, want %s", id, got, want)
		}
	}
	if m, _ := h.meta("a"); len(m.partitions) != 0 {
		t.Errorf("a keeps partitions %v", m.partitions)
	}
}

// A log cut after any record (a crash of its owner) is finished by the
// next owner: a transaction whose last record is Prepare* gets its markers
// once, with the recorded decision and epoch, and one completion; nothing
// else is written, and no later owner writes markers again.
func TestReplayCutAtEachRecord(t *testing.T) {
	live := newHarness(t, nil)
	pid, epoch := live.init("tx")
	opid, oepoch := live.init("other")
	live.add("tx", pid, epoch, tp("t", 0), tp("t", 1))
	if code := live.c.AddOffsets(ctx, "tx", pid, epoch, "g"); code != 0 {
		t.Fatal(codeName(code))
	}
	live.add("other", opid, oepoch, tp("u", 0))
	if code := live.c.EndTxn(ctx, "tx", pid, epoch, true); code != 0 {
		t.Fatal(codeName(code))
	}
	live.settle()
	if code := live.c.EndTxn(ctx, "other", opid, oepoch, false); code != 0 {
		t.Fatal(codeName(code))
	}
	live.settle()
	live.init("tx")
	full := live.journal.records()
	wantLog := []string{
		"tx Empty 1000/0", "other Empty 1001/0", "tx Ongoing 1000/0", "tx Ongoing 1000/0", "other Ongoing 1001/0",
		"tx PrepareCommit 1000/0", "tx CompleteCommit 1000/0", "other PrepareAbort 1001/0", "other CompleteAbort 1001/0",
		"tx Empty 1000/1",
	}
	if got := describeRecords(t, full); !slices.Equal(got, wantLog) {
		t.Fatalf("scenario log %q", got)
	}

	for cut := 0; cut <= len(full); cut++ {
		prefix := full[:cut]
		last := make(map[string]meta)
		for _, r := range prefix {
			id, _ := parseKey(r.Key)
			last[id], _ = parseValue(r.Value)
		}
		next := newHarness(t, prefix)
		next.settle()
		var wantMarkers []Markers
		var wantAppended []string
		for _, id := range []string{"other", "tx"} {
			m, ok := last[id]
			if !ok || !prepared(m.state) {
				continue
			}
			wantMarkers = append(wantMarkers, m.markers(id, testEpoch))
			wantAppended = append(wantAppended, describeRecords(t, []Record{record(id, m.completed(0))})...)
		}
		got := next.markers.got()
		slices.SortFunc(got, func(a, b Markers) int { return strings.Compare(a.TransactionalID, b.TransactionalID) })
		if !slices.EqualFunc(got, wantMarkers, equalMarkers) {
			t.Errorf("cut %d: markers %+v, want %+v", cut, got, wantMarkers)
		}
		appended := next.logged()[cut:]
		slices.Sort(appended)
		if !slices.Equal(appended, wantAppended) {
			t.Errorf("cut %d: appended %q, want %q", cut, appended, wantAppended)
		}

		// The completion is durable: the owner after does nothing.
		third := newHarness(t, next.journal.records())
		third.settle()
		if n := len(third.markers.got()); n != 0 || third.journal.batchCount() != 0 {
			t.Errorf("cut %d: a third owner wrote %d markers, %d batches", cut, n, third.journal.batchCount())
		}
	}

	// The whole log describes what the live coordinator describes.
	replayed := newHarness(t, full)
	for _, id := range []string{"tx", "other", "missing"} {
		if want, got := live.c.Describe(id), replayed.c.Describe(id); !reflect.DeepEqual(want, got) {
			t.Errorf("%s:\n live     %+v\n replayed %+v", id, want, got)
		}
	}
	if want, got := live.c.List(nil, nil, 0), replayed.c.List(nil, nil, 0); !reflect.DeepEqual(want, got) {
		t.Errorf("list:\n live     %+v\n replayed %+v", want, got)
	}
}

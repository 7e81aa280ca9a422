package engine

import (
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/kaas-dev/kaas/engine/desired"
	"github.com/kaas-dev/kaas/engine/groups"
	"github.com/kaas-dev/kaas/volume/memfs"
	"github.com/kaas-dev/kaas/volume/partlog"
	"github.com/kaas-dev/kaas/volume/partlog/partlogtest"
)

func readSpec(t *testing.T, e *Engine, name string) desired.TopicSpec {
	t.Helper()
	s, err := desired.ReadTopicSpec(e.fsys, e.cfg.ClusterDir, name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestAlterTopicConfigs(t *testing.T) {
	ctx := safety(t)
	e := startEngine(t, memfs.New())
	if _, err := e.CreateTopic(CreateTopicRequest{Name: "t", Partitions: 2, Configs: map[string]string{"retention.ms": "1000"}}); err != nil {
		t.Fatal(err)
	}
	mustServing(t, ctx, e.Engine, "t")
	base := readSpec(t, e.Engine, "t")

	for _, tc := range []struct {
		name     string
		topic    string
		configs  map[string]string
		validate bool
		wantErr  error
		msg      string
		want     map[string]string // the spec's configs afterwards
	}{
		{name: "unknown key", topic: "t", configs: map[string]string{"retention.ms": "5", "no.such.key": "1"}, wantErr: desired.ErrInvalidConfig, msg: "unknown topic config name: no.such.key", want: map[string]string{"retention.ms": "1000"}},
		{name: "rejected key", topic: "t", configs: map[string]string{"segment.jitter.ms": "1"}, wantErr: desired.ErrInvalidConfig, msg: "does not jitter segment rolls", want: map[string]string{"retention.ms": "1000"}},
		{name: "bad value", topic: "t", configs: map[string]string{"segment.bytes": "ten"}, wantErr: desired.ErrInvalidConfig, msg: "segment.bytes", want: map[string]string{"retention.ms": "1000"}},
		{name: "unknown policy refused", topic: "t", configs: map[string]string{"cleanup.policy": "compact,forever"}, wantErr: desired.ErrInvalidConfig, msg: `"forever" is not supported`, want: map[string]string{"retention.ms": "1000"}},
		{name: "validate only", topic: "t", configs: map[string]string{"segment.bytes": "2048"}, validate: true, want: map[string]string{"retention.ms": "1000"}},
		{name: "unknown topic", topic: "nope", configs: map[string]string{"segment.bytes": "2048"}, wantErr: ErrUnknownTopic, want: map[string]string{"retention.ms": "1000"}},
		{name: "invalid name", topic: "a/b", configs: nil, wantErr: desired.ErrInvalidTopic, want: map[string]string{"retention.ms": "1000"}},
		{name: "full replace", topic: "t", configs: map[string]string{"segment.bytes": "2048", "message.timestamp.type": "LogAppendTime"}, want: map[string]string{"segment.bytes": "2048", "message.timestamp.type": "LogAppendTime"}},
		{name: "back to defaults", topic: "t", configs: map[string]string{}, want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := readSpec(t, e.Engine, "t")
			_, err := e.AlterTopicConfigs(tc.topic, tc.configs, tc.validate)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.msg) {
					t.Fatalf("err = %v, want %v with %q", err, tc.wantErr, tc.msg)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			after := readSpec(t, e.Engine, "t")
			if !maps.Equal(after.Configs, tc.want) {
				t.Fatalf("configs %v, want %v", after.Configs, tc.want)
			}
			changed := !maps.Equal(before.Configs, after.Configs)
			if changed && after.Generation != before.Generation+1 || !changed && after.Generation != before.Generation {
				t.Fatalf("generation %d -> %d (changed: %v)", before.Generation, after.Generation, changed)
			}
			if after.ID != base.ID || after.Partitions != base.Partitions {
				t.Fatalf("ID or partitions changed: %+v", after)
			}
			// This broker routes with the new spec at once.
			if v, _ := e.Topic("t"); !maps.Equal(v.Spec.Configs, tc.want) || v.Spec.Generation != after.Generation {
				t.Fatalf("routing view %+v, volume %+v", v.Spec, after)
			}
		})
	}

	// A spec read before the change (a reconcile racing it) does not
	// roll the routing view back.
	cur := readSpec(t, e.Engine, "t")
	old := cur
	old.Generation--
	old.Configs = map[string]string{"retention.ms": "1"}
	if err := e.upsertTopic(old); err != nil {
		t.Fatal(err)
	}
	if v, _ := e.Topic("t"); v.Spec.Generation != cur.Generation || !maps.Equal(v.Spec.Configs, cur.Configs) {
		t.Fatalf("stale spec installed: %+v", v.Spec)
	}

	// A topic marked deleted is unknown.
	if _, err := e.DeleteTopic("t"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.AlterTopicConfigs("t", nil, false); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("alter of a deleted topic: %v", err)
	}
}

func TestIncrementalAlterTopicConfigs(t *testing.T) {
	e := startEngine(t, memfs.New())
	if _, err := e.CreateTopic(CreateTopicRequest{Name: "t", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	set := func(k, v string) ConfigOp { return ConfigOp{Name: k, Op: ConfigSet, Value: v} }
	for _, tc := range []struct {
		name    string
		ops     []ConfigOp
		wantErr error
		msg     string
		want    map[string]string
	}{
		{name: "set two", ops: []ConfigOp{set("retention.ms", "60000"), set("segment.bytes", "4096")}, want: map[string]string{"retention.ms": "60000", "segment.bytes": "4096"}},
		{name: "delete one", ops: []ConfigOp{{Name: "segment.bytes", Op: ConfigDelete}}, want: map[string]string{"retention.ms": "60000"}},
		{name: "delete unset", ops: []ConfigOp{{Name: "retention.bytes", Op: ConfigDelete}}, want: map[string]string{"retention.ms": "60000"}},
		{name: "append to non-list", ops: []ConfigOp{{Name: "retention.ms", Op: ConfigAppend, Value: "1"}}, wantErr: desired.ErrInvalidConfig, msg: "append is not allowed for config key: retention.ms", want: map[string]string{"retention.ms": "60000"}},
		{name: "subtract from non-list", ops: []ConfigOp{{Name: "segment.ms", Op: ConfigSubtract, Value: "1"}}, wantErr: desired.ErrInvalidConfig, msg: "subtract is not allowed for config key: segment.ms", want: map[string]string{"retention.ms": "60000"}},
		{name: "append present item", ops: []ConfigOp{{Name: "cleanup.policy", Op: ConfigAppend, Value: "delete"}}, want: map[string]string{"retention.ms": "60000", "cleanup.policy": "delete"}},
		{name: "append unknown policy", ops: []ConfigOp{{Name: "cleanup.policy", Op: ConfigAppend, Value: "forever"}}, wantErr: desired.ErrInvalidConfig, msg: `"forever" is not supported`, want: map[string]string{"retention.ms": "60000", "cleanup.policy": "delete"}},
		{name: "subtract to empty", ops: []ConfigOp{{Name: "cleanup.policy", Op: ConfigSubtract, Value: "delete"}}, wantErr: desired.ErrInvalidConfig, msg: "empty", want: map[string]string{"retention.ms": "60000", "cleanup.policy": "delete"}},
		{name: "subtract absent item", ops: []ConfigOp{{Name: "cleanup.policy", Op: ConfigSubtract, Value: "compact"}}, want: map[string]string{"retention.ms": "60000", "cleanup.policy": "delete"}},
		{name: "unknown key", ops: []ConfigOp{{Name: "bogus", Op: ConfigDelete}}, wantErr: desired.ErrInvalidConfig, msg: "bogus", want: map[string]string{"retention.ms": "60000", "cleanup.policy": "delete"}},
		{name: "bad value leaves all", ops: []ConfigOp{set("segment.bytes", "4096"), set("retention.ms", "-2")}, wantErr: desired.ErrInvalidConfig, msg: "retention.ms", want: map[string]string{"retention.ms": "60000", "cleanup.policy": "delete"}},
		{name: "key twice", ops: []ConfigOp{set("segment.bytes", "4096"), {Name: "segment.bytes", Op: ConfigDelete}}, wantErr: desired.ErrInvalidConfig, msg: "more than once", want: map[string]string{"retention.ms": "60000", "cleanup.policy": "delete"}},
		{name: "timestamp type", ops: []ConfigOp{set("message.timestamp.type", "LogAppendTime"), {Name: "cleanup.policy", Op: ConfigDelete}}, want: map[string]string{"retention.ms": "60000", "message.timestamp.type": "LogAppendTime"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.IncrementalAlterTopicConfigs("t", tc.ops, false)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.msg) {
					t.Fatalf("err = %v, want %v with %q", err, tc.wantErr, tc.msg)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if got := readSpec(t, e.Engine, "t").Configs; !maps.Equal(got, tc.want) {
				t.Fatalf("configs %v, want %v", got, tc.want)
			}
		})
	}
	gen := readSpec(t, e.Engine, "t").Generation
	if _, err := e.IncrementalAlterTopicConfigs("t", []ConfigOp{set("retention.ms", "1")}, true); err != nil {
		t.Fatal(err)
	}
	if s := readSpec(t, e.Engine, "t"); s.Generation != gen || s.Configs["retention.ms"] != "60000" {
		t.Fatalf("validateOnly wrote: %+v", s)
	}
}

func TestCreatePartitions(t *testing.T) {
	ctx := safety(t)
	e := startEngine(t, memfs.New())
	if _, err := e.CreateTopic(CreateTopicRequest{Name: "t", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	mustServing(t, ctx, e.Engine, "t")
	for _, tc := range []struct {
		count int32
		msg   string
	}{
		{1, "topic already has 1 partitions"},
		{0, "topic currently has 1 partitions, which is higher than the requested 0"},
		{desired.MaxPartitions + 1, "above the limit"},
	} {
		if _, err := e.CreatePartitions("t", tc.count, false); !errors.Is(err, desired.ErrInvalidPartitions) || !strings.Contains(err.Error(), tc.msg) {
			t.Fatalf("CreatePartitions(%d) = %v, want INVALID_PARTITIONS %q", tc.count, err, tc.msg)
		}
	}
	if _, err := e.CreatePartitions("nope", 3, false); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("unknown topic: %v", err)
	}
	if s, err := e.CreatePartitions("t", 3, true); err != nil || s.Partitions != 3 || readSpec(t, e.Engine, "t").Partitions != 1 {
		t.Fatalf("validateOnly: %+v %v", s, err)
	}
	s, err := e.CreatePartitions("t", 3, false)
	if err != nil || s.Partitions != 3 || s.Generation != 2 {
		t.Fatalf("CreatePartitions(3) = %+v, %v", s, err)
	}
	mustServing(t, ctx, e.Engine, "t")
	for i := int32(0); i < 3; i++ {
		p := mustPartition(t, e.Engine, "t", i)
		if _, err := p.Produce(ctx, partlogtest.MakeBatch(1, 8, 1, -1, -1, -1)); err != nil {
			t.Fatalf("produce to partition %d: %v", i, err)
		}
	}
	if _, err := e.CreatePartitions("t", 2, false); !errors.Is(err, desired.ErrInvalidPartitions) {
		t.Fatalf("decrease: %v", err)
	}
}

func TestDeleteRecords(t *testing.T) {
	ctx := safety(t)
	e := startEngine(t, memfs.New())
	if _, err := e.CreateTopic(CreateTopicRequest{Name: "t", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	mustServing(t, ctx, e.Engine, "t")
	p := mustPartition(t, e.Engine, "t", 0)
	for i := 0; i < 3; i++ {
		if _, err := p.Produce(ctx, partlogtest.MakeBatch(2, 8, int64(i), -1, -1, -1)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name      string
		topic     string
		partition int32
		offset    int64
		want      int64
		wantErr   error
	}{
		{name: "unknown topic", topic: "nope", offset: 1, want: -1, wantErr: ErrUnknownTopic},
		{name: "unknown partition", topic: "t", partition: 1, offset: 1, want: -1, wantErr: ErrUnknownTopic},
		{name: "above the high watermark", topic: "t", offset: 7, want: -1, wantErr: partlog.ErrOffsetOutOfRange},
		{name: "below -1", topic: "t", offset: -2, want: -1, wantErr: partlog.ErrOffsetOutOfRange},
		{name: "mid batch", topic: "t", offset: 3, want: 3},
		{name: "lower again keeps it", topic: "t", offset: 1, want: 3},
		{name: "high watermark", topic: "t", offset: -1, want: 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			low, err := e.DeleteRecords(tc.topic, tc.partition, tc.offset)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) || low != tc.want {
				t.Fatalf("DeleteRecords = %d, %v; want %d, %v", low, err, tc.want, tc.wantErr)
			}
		})
	}
	if got := p.Log().LogStartOffset(); got != 6 {
		t.Fatalf("log start offset %d, want 6", got)
	}
}

func TestTopicConfigEntries(t *testing.T) {
	entries := desired.TopicConfigEntries(desired.TopicSpec{Configs: map[string]string{"retention.ms": "5"}})
	if len(entries) != len(desired.TopicConfigNames()) {
		t.Fatalf("%d entries for %d configs", len(entries), len(desired.TopicConfigNames()))
	}
	for _, ce := range entries {
		if ce.Doc == "" || ce.Type == desired.ConfigTypeUnknown || ce.ReadOnly {
			t.Errorf("%s: %+v", ce.Name, ce)
		}
		c, _ := desired.LookupTopicConfig(ce.Name)
		if c.Synonym == "" { // no broker-level config: no default synonym, as Kafka
			if len(ce.Synonyms) != 0 {
				t.Errorf("%s: synonyms %+v for a key without a broker-level config", ce.Name, ce.Synonyms)
			}
			continue
		}
		last := ce.Synonyms[len(ce.Synonyms)-1]
		if last.Source != desired.SourceDefault || last.Name == "" {
			t.Errorf("%s: last synonym %+v is not the broker default", ce.Name, last)
		}
		switch ce.Name {
		case "retention.ms":
			if ce.Value != "5" || ce.Source != desired.SourceTopic || len(ce.Synonyms) != 2 || ce.Synonyms[0] != (desired.ConfigSynonym{Name: "retention.ms", Value: "5", Source: desired.SourceTopic}) || last.Name != "log.retention.ms" {
				t.Errorf("retention.ms: %+v", ce)
			}
		case "cleanup.policy":
			if ce.Type != desired.ConfigTypeList || ce.Value != "delete" || ce.Source != desired.SourceDefault || len(ce.Synonyms) != 1 {
				t.Errorf("cleanup.policy: %+v", ce)
			}
		case "min.cleanable.dirty.ratio":
			if ce.Type != desired.ConfigTypeDouble || ce.Value != "0.5" || last.Name != "log.cleaner.min.cleanable.ratio" {
				t.Errorf("min.cleanable.dirty.ratio: %+v", ce)
			}
		}
	}
	for _, k := range desired.RejectedTopicConfigNames() {
		if _, ok := desired.LookupTopicConfig(k); ok {
			t.Errorf("%s is both honoured and rejected", k)
		}
	}
}

func TestBrokerConfigEntries(t *testing.T) {
	e, err := New(Config{FS: memfs.New(), DataDir: testData, ClusterDir: testCluster, BrokerID: 3, AutoCreateTopics: true,
		DefaultPartitions: 4, Groups: groups.Config{MinSessionTimeout: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]desired.ConfigEntry{}
	for _, ce := range e.BrokerConfigEntries() {
		if !ce.ReadOnly || ce.Type == desired.ConfigTypeUnknown || ce.Doc == "" {
			t.Errorf("%s: %+v", ce.Name, ce)
		}
		got[ce.Name] = ce
	}
	for _, tc := range []struct {
		name, value string
		source      desired.ConfigSource
	}{
		{"broker.id", "3", desired.SourceStaticBroker},
		{"log.dirs", testData, desired.SourceStaticBroker},
		{"auto.create.topics.enable", "true", desired.SourceDefault},
		{"num.partitions", "4", desired.SourceStaticBroker},
		{"group.min.session.timeout.ms", "1000", desired.SourceStaticBroker},
		{"group.max.session.timeout.ms", "1800000", desired.SourceDefault},
		{"transaction.max.timeout.ms", "900000", desired.SourceDefault},
		{"log.retention.ms", "604800000", desired.SourceDefault},
		{"log.cleanup.policy", "delete", desired.SourceDefault},
		{"log.cleaner.delete.retention.ms", "86400000", desired.SourceDefault},
		{"log.cleaner.min.compaction.lag.ms", "0", desired.SourceDefault},
		{"log.cleaner.max.compaction.lag.ms", "9223372036854775807", desired.SourceDefault},
		{"log.cleaner.min.cleanable.ratio", "0.5", desired.SourceDefault},
		{"message.max.bytes", "1048588", desired.SourceDefault},
		{"log.retention.check.interval.ms", "300000", desired.SourceDefault},
	} {
		ce, ok := got[tc.name]
		if !ok || ce.Value != tc.value || ce.Source != tc.source {
			t.Errorf("%s = %+v, want %s from %d", tc.name, ce, tc.value, tc.source)
		}
	}
	if !e.IsBrokerConfig("log.dirs") || e.IsBrokerConfig("retention.ms") {
		t.Error("IsBrokerConfig")
	}
}

// TestConfigChangeReachesServedPartitions: a config change is applied to
// the open logs of the served partitions (upsertTopic → reconfigure), not
// only to partitions opened afterwards.
func TestConfigChangeReachesServedPartitions(t *testing.T) {
	ctx := safety(t)
	e := startEngine(t, memfs.New())
	if _, err := e.CreateTopic(CreateTopicRequest{Name: "t", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	mustServing(t, ctx, e.Engine, "t")
	p := mustPartition(t, e.Engine, "t", 0)
	produce := func() {
		t.Helper()
		if _, err := p.Produce(ctx, partlogtest.MakeBatch(4, 512, 1, -1, -1, -1)); err != nil {
			t.Fatal(err)
		}
	}
	produce()
	if _, err := e.IncrementalAlterTopicConfigs("t", []ConfigOp{
		{Name: "segment.bytes", Op: ConfigSet, Value: "1024"},
		{Name: "message.timestamp.type", Op: ConfigSet, Value: "LogAppendTime"},
	}, false); err != nil {
		t.Fatal(err)
	}
	if mustPartition(t, e.Engine, "t", 0) != p {
		t.Fatal("the partition was reopened instead of reconfigured")
	}
	for range 3 {
		produce()
	}
	if n := len(p.Log().Segments()); n < 3 {
		t.Fatalf("%d segments after 4 batches of ~2 KiB with segment.bytes=1024", n)
	}
	var attrs []int16
	for off := int64(0); off < p.Log().HighWatermark(); {
		recs, err := p.Log().Read(off, 64<<20, nil) // reads stop at a segment's end
		if err != nil || len(recs) == 0 {
			t.Fatalf("read at %d: %d bytes, %v", off, len(recs), err)
		}
		for len(recs) > 0 {
			h, err := partlog.ParseBatchHeader(recs)
			if err != nil {
				t.Fatal(err)
			}
			attrs = append(attrs, h.Attributes)
			recs, off = recs[h.Size():], h.LastOffset()+1
		}
	}
	if len(attrs) != 4 || attrs[0]&0x08 != 0 || attrs[3]&0x08 == 0 {
		t.Fatalf("batch attributes %#x: want CreateTime before the change and LogAppendTime after", attrs)
	}
}

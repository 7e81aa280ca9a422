package wire

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func strp(s string) *string { return &s }

func describeConfigsReq(version int16, typ kmsg.ConfigResourceType, name string, synonyms, docs bool, names ...string) *kmsg.DescribeConfigsRequest {
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.Version = version
	req.IncludeSynonyms, req.IncludeDocumentation = synonyms, docs
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName, r.ConfigNames = typ, name, names
	req.Resources = append(req.Resources, r)
	return req
}

// describeOne answers one resource of a DescribeConfigs request.
func (c *rawConn) describeOne(req *kmsg.DescribeConfigsRequest) kmsg.DescribeConfigsResponseResource {
	c.t.Helper()
	resp := c.do(req).(*kmsg.DescribeConfigsResponse)
	if len(resp.Resources) != 1 {
		c.t.Fatalf("%d resources answered", len(resp.Resources))
	}
	return resp.Resources[0]
}

func configsByName(r kmsg.DescribeConfigsResponseResource) map[string]kmsg.DescribeConfigsResponseResourceConfig {
	out := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, c := range r.Configs {
		out[c.Name] = c
	}
	return out
}

type kv struct {
	name  string
	value *string
	op    kmsg.IncrementalAlterConfigOp
}

func alterConfigsReq(validateOnly bool, typ kmsg.ConfigResourceType, name string, configs ...kv) *kmsg.AlterConfigsRequest {
	req := kmsg.NewPtrAlterConfigsRequest()
	req.Version = 2
	req.ValidateOnly = validateOnly
	r := kmsg.NewAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = typ, name
	for _, c := range configs {
		rc := kmsg.NewAlterConfigsRequestResourceConfig()
		rc.Name, rc.Value = c.name, c.value
		r.Configs = append(r.Configs, rc)
	}
	req.Resources = append(req.Resources, r)
	return req
}

func incrementalReq(validateOnly bool, typ kmsg.ConfigResourceType, name string, configs ...kv) *kmsg.IncrementalAlterConfigsRequest {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.Version = 1
	req.ValidateOnly = validateOnly
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = typ, name
	for _, c := range configs {
		rc := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		rc.Name, rc.Value, rc.Op = c.name, c.value, c.op
		r.Configs = append(r.Configs, rc)
	}
	req.Resources = append(req.Resources, r)
	return req
}

func TestDescribeConfigs(t *testing.T) {
	b := startBroker(t, nil)
	b.createTopic(t, "dc", 1, map[string]string{"retention.ms": "1000"})
	c := b.dial(t)
	self := strconv.Itoa(int(b.eng.BrokerID()))

	t.Run("topic", func(t *testing.T) {
		for _, v := range []int16{1, 2, 3, 4} {
			got := c.describeOne(describeConfigsReq(v, kmsg.ConfigResourceTypeTopic, "dc", true, true))
			if got.ErrorCode != 0 || got.ResourceName != "dc" || got.ResourceType != kmsg.ConfigResourceTypeTopic {
				t.Fatalf("v%d: %+v", v, got)
			}
			m := configsByName(got)
			rt, seg := m["retention.ms"], m["segment.bytes"]
			if deref(rt.Value) != "1000" || rt.Source != kmsg.ConfigSourceDynamicTopicConfig || rt.ReadOnly || rt.IsDefault {
				t.Fatalf("v%d retention.ms: %+v", v, rt)
			}
			if len(rt.ConfigSynonyms) != 2 || rt.ConfigSynonyms[0].Source != kmsg.ConfigSourceDynamicTopicConfig ||
				rt.ConfigSynonyms[1].Name != "log.retention.ms" || rt.ConfigSynonyms[1].Source != kmsg.ConfigSourceDefaultConfig {
				t.Fatalf("v%d retention.ms synonyms: %+v", v, rt.ConfigSynonyms)
			}
			if deref(seg.Value) != "1073741824" || seg.Source != kmsg.ConfigSourceDefaultConfig || len(seg.ConfigSynonyms) != 1 {
				t.Fatalf("v%d segment.bytes: %+v", v, seg)
			}
			if v >= 3 {
				if rt.ConfigType != kmsg.ConfigTypeLong || m["cleanup.policy"].ConfigType != kmsg.ConfigTypeList || rt.Documentation == nil {
					t.Fatalf("v%d types/docs: %+v %+v", v, rt, m["cleanup.policy"])
				}
				if ratio := m["min.cleanable.dirty.ratio"]; ratio.ConfigType != kmsg.ConfigTypeDouble || deref(ratio.Value) != "0.5" {
					t.Fatalf("v%d min.cleanable.dirty.ratio: %+v", v, ratio)
				}
			}
		}
	})
	t.Run("no synonyms, named configs", func(t *testing.T) {
		got := c.describeOne(describeConfigsReq(3, kmsg.ConfigResourceTypeTopic, "dc", false, false, "retention.ms", "cleanup.policy", "no.such"))
		if got.ErrorCode != 0 || len(got.Configs) != 2 {
			t.Fatalf("%+v", got)
		}
		for _, rc := range got.Configs {
			if len(rc.ConfigSynonyms) != 0 || rc.Documentation != nil {
				t.Fatalf("%+v", rc)
			}
		}
	})
	t.Run("broker", func(t *testing.T) {
		for _, name := range []string{self, ""} {
			got := c.describeOne(describeConfigsReq(4, kmsg.ConfigResourceTypeBroker, name, true, true))
			if got.ErrorCode != 0 {
				t.Fatalf("%q: %+v", name, got)
			}
			m := configsByName(got)
			for _, want := range []struct{ name, value string }{
				{"broker.id", self}, {"log.dirs", b.dir}, {"auto.create.topics.enable", "true"},
				{"log.retention.ms", "604800000"}, {"socket.request.max.bytes", strconv.Itoa(1 << 20)},
			} {
				rc, ok := m[want.name]
				if !ok || deref(rc.Value) != want.value || !rc.ReadOnly || rc.Documentation == nil || len(rc.ConfigSynonyms) == 0 {
					t.Errorf("%q %s: %+v", name, want.name, rc)
				}
			}
			if m["broker.id"].Source != kmsg.ConfigSourceStaticBrokerConfig || m["log.retention.ms"].Source != kmsg.ConfigSourceDefaultConfig ||
				m["socket.request.max.bytes"].Source != kmsg.ConfigSourceStaticBrokerConfig {
				t.Errorf("sources: %+v %+v %+v", m["broker.id"], m["log.retention.ms"], m["socket.request.max.bytes"])
			}
		}
	})
	t.Run("errors", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			typ  kmsg.ConfigResourceType
			res  string
			code int16
			msg  string
		}{
			{"unknown topic", kmsg.ConfigResourceTypeTopic, "ghost", kerr.UnknownTopicOrPartition.Code, "ghost"},
			{"invalid topic", kmsg.ConfigResourceTypeTopic, "a b", kerr.InvalidTopicException.Code, "a b"},
			{"other broker", kmsg.ConfigResourceTypeBroker, "77", kerr.InvalidRequest.Code, "unexpected broker id"},
			{"broker not a number", kmsg.ConfigResourceTypeBroker, "x", kerr.InvalidRequest.Code, "must be an integer"},
			{"broker logger", kmsg.ConfigResourceTypeBrokerLogger, self, kerr.InvalidRequest.Code, "unsupported resource type"},
			{"group", kmsg.ConfigResourceType(32), "g", kerr.InvalidRequest.Code, "unsupported resource type"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				got := c.describeOne(describeConfigsReq(4, tc.typ, tc.res, false, false))
				if got.ErrorCode != tc.code || !strings.Contains(deref(got.ErrorMessage), tc.msg) || len(got.Configs) != 0 {
					t.Fatalf("got %d %q, want %d %q", got.ErrorCode, deref(got.ErrorMessage), tc.code, tc.msg)
				}
			})
		}
	})
	t.Run("create topics answers configs", func(t *testing.T) {
		resp := c.do(createTopicsReq(7, true, "dry-configs", 1, map[string]string{"segment.ms": "1000"})).(*kmsg.CreateTopicsResponse)
		got := map[string]kmsg.CreateTopicsResponseTopicConfig{}
		for _, rc := range resp.Topics[0].Configs {
			got[rc.Name] = rc
		}
		if rc := got["segment.ms"]; deref(rc.Value) != "1000" || rc.Source != int8(kmsg.ConfigSourceDynamicTopicConfig) {
			t.Fatalf("segment.ms: %+v", rc)
		}
		if rc := got["retention.ms"]; deref(rc.Value) != "604800000" || rc.Source != int8(kmsg.ConfigSourceDefaultConfig) {
			t.Fatalf("retention.ms: %+v", rc)
		}
	})
}

func TestAlterConfigs(t *testing.T) {
	b := startBroker(t, nil)
	b.createTopic(t, "ac", 1, map[string]string{"retention.ms": "1000"})
	c := b.dial(t)
	topic, broker := kmsg.ConfigResourceTypeTopic, kmsg.ConfigResourceTypeBroker
	for _, tc := range []struct {
		name string
		req  kmsg.Request
		code int16
		msg  string
		want map[string]string // the topic's configs afterwards
	}{
		{"unknown key", alterConfigsReq(false, topic, "ac", kv{name: "no.such", value: strp("1")}), kerr.InvalidConfig.Code, "no.such",
			map[string]string{"retention.ms": "1000"}},
		{"bad value", alterConfigsReq(false, topic, "ac", kv{name: "retention.ms", value: strp("soon")}), kerr.InvalidConfig.Code, "retention.ms",
			map[string]string{"retention.ms": "1000"}},
		{"null value", alterConfigsReq(false, topic, "ac", kv{name: "retention.ms"}), kerr.InvalidRequest.Code, "null value",
			map[string]string{"retention.ms": "1000"}},
		{"key twice", alterConfigsReq(false, topic, "ac", kv{name: "retention.ms", value: strp("1")}, kv{name: "retention.ms", value: strp("2")}), kerr.InvalidRequest.Code, "duplicate config keys",
			map[string]string{"retention.ms": "1000"}},
		{"unknown topic", alterConfigsReq(false, topic, "ghost"), kerr.UnknownTopicOrPartition.Code, "ghost",
			map[string]string{"retention.ms": "1000"}},
		{"invalid topic", alterConfigsReq(false, topic, "a/b"), kerr.InvalidTopicException.Code, "a/b",
			map[string]string{"retention.ms": "1000"}},
		{"broker config", alterConfigsReq(false, broker, "0", kv{name: "log.retention.ms", value: strp("1")}), kerr.InvalidRequest.Code, "cannot update these configs dynamically",
			map[string]string{"retention.ms": "1000"}},
		{"broker nothing", alterConfigsReq(false, broker, ""), 0, "",
			map[string]string{"retention.ms": "1000"}},
		{"client metrics", alterConfigsReq(false, kmsg.ConfigResourceType(16), "m"), kerr.InvalidRequest.Code, "unsupported resource type",
			map[string]string{"retention.ms": "1000"}},
		{"validate only", alterConfigsReq(true, topic, "ac", kv{name: "segment.bytes", value: strp("4096")}), 0, "",
			map[string]string{"retention.ms": "1000"}},
		{"full replace", alterConfigsReq(false, topic, "ac", kv{name: "segment.bytes", value: strp("4096")}), 0, "",
			map[string]string{"segment.bytes": "4096"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := c.do(tc.req).(*kmsg.AlterConfigsResponse)
			if len(resp.Resources) != 1 {
				t.Fatalf("%d resources", len(resp.Resources))
			}
			got := resp.Resources[0]
			if got.ErrorCode != tc.code || !strings.Contains(deref(got.ErrorMessage), tc.msg) {
				t.Fatalf("got %d %q, want %d %q", got.ErrorCode, deref(got.ErrorMessage), tc.code, tc.msg)
			}
			if tc.code != 0 && got.ErrorMessage == nil {
				t.Fatal("error without a message")
			}
			checkTopicConfigs(t, c, "ac", tc.want)
		})
	}
	t.Run("resource twice", func(t *testing.T) {
		req := alterConfigsReq(false, topic, "ac", kv{name: "retention.ms", value: strp("5")})
		req.Resources = append(req.Resources, req.Resources[0])
		resp := c.do(req).(*kmsg.AlterConfigsResponse)
		for _, r := range resp.Resources {
			if r.ErrorCode != kerr.InvalidRequest.Code {
				t.Fatalf("%+v", resp.Resources)
			}
		}
		checkTopicConfigs(t, c, "ac", map[string]string{"segment.bytes": "4096"})
	})
}

// checkTopicConfigs asserts, through DescribeConfigs, which configs a topic
// sets.
func checkTopicConfigs(t *testing.T, c *rawConn, topic string, want map[string]string) {
	t.Helper()
	got := map[string]string{}
	for _, rc := range c.describeOne(describeConfigsReq(4, kmsg.ConfigResourceTypeTopic, topic, false, false)).Configs {
		if rc.Source == kmsg.ConfigSourceDynamicTopicConfig {
			got[rc.Name] = deref(rc.Value)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("topic configs %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("topic configs %v, want %v", got, want)
		}
	}
}

func TestIncrementalAlterConfigs(t *testing.T) {
	b := startBroker(t, nil)
	b.createTopic(t, "iac", 1, nil)
	c := b.dial(t)
	topic := kmsg.ConfigResourceTypeTopic
	set, del, app, sub := kmsg.IncrementalAlterConfigOpSet, kmsg.IncrementalAlterConfigOpDelete, kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract
	for _, tc := range []struct {
		name string
		req  kmsg.Request
		code int16
		msg  string
		want map[string]string
	}{
		{"set", incrementalReq(false, topic, "iac", kv{"retention.ms", strp("60000"), set}, kv{"segment.bytes", strp("4096"), set}), 0, "",
			map[string]string{"retention.ms": "60000", "segment.bytes": "4096"}},
		{"delete", incrementalReq(false, topic, "iac", kv{"segment.bytes", nil, del}), 0, "",
			map[string]string{"retention.ms": "60000"}},
		{"append to non-list", incrementalReq(false, topic, "iac", kv{"retention.ms", strp("1"), app}), kerr.InvalidConfig.Code, "append is not allowed for config key: retention.ms",
			map[string]string{"retention.ms": "60000"}},
		{"subtract from non-list", incrementalReq(false, topic, "iac", kv{"max.message.bytes", strp("1"), sub}), kerr.InvalidConfig.Code, "subtract is not allowed",
			map[string]string{"retention.ms": "60000"}},
		{"append unknown policy", incrementalReq(false, topic, "iac", kv{"cleanup.policy", strp("forever"), app}), kerr.InvalidConfig.Code, "forever",
			map[string]string{"retention.ms": "60000"}},
		{"append delete", incrementalReq(false, topic, "iac", kv{"cleanup.policy", strp("delete"), app}), 0, "",
			map[string]string{"retention.ms": "60000", "cleanup.policy": "delete"}},
		{"append compact", incrementalReq(false, topic, "iac", kv{"cleanup.policy", strp("compact"), app}, kv{"min.cleanable.dirty.ratio", strp("0.1"), set}), 0, "",
			map[string]string{"retention.ms": "60000", "cleanup.policy": "delete,compact", "min.cleanable.dirty.ratio": "0.1"}},
		{"bad ratio", incrementalReq(false, topic, "iac", kv{"min.cleanable.dirty.ratio", strp("1.5"), set}), kerr.InvalidConfig.Code, "min.cleanable.dirty.ratio",
			map[string]string{"retention.ms": "60000", "cleanup.policy": "delete,compact", "min.cleanable.dirty.ratio": "0.1"}},
		{"subtract compact", incrementalReq(false, topic, "iac", kv{"cleanup.policy", strp("compact"), sub}, kv{"min.cleanable.dirty.ratio", nil, del}), 0, "",
			map[string]string{"retention.ms": "60000", "cleanup.policy": "delete"}},
		{"unknown key", incrementalReq(false, topic, "iac", kv{"log.retention.ms", strp("1"), set}), kerr.InvalidConfig.Code, "log.retention.ms",
			map[string]string{"retention.ms": "60000", "cleanup.policy": "delete"}},
		{"bad value", incrementalReq(false, topic, "iac", kv{"segment.ms", strp("0"), set}), kerr.InvalidConfig.Code, "segment.ms",
			map[string]string{"retention.ms": "60000", "cleanup.policy": "delete"}},
		{"null set", incrementalReq(false, topic, "iac", kv{"segment.ms", nil, set}), kerr.InvalidRequest.Code, "null value",
			map[string]string{"retention.ms": "60000", "cleanup.policy": "delete"}},
		{"unknown op", incrementalReq(false, topic, "iac", kv{"segment.ms", strp("5"), 9}), kerr.InvalidRequest.Code, "unknown operation",
			map[string]string{"retention.ms": "60000", "cleanup.policy": "delete"}},
		{"key twice", incrementalReq(false, topic, "iac", kv{"segment.ms", strp("5"), set}, kv{"segment.ms", nil, del}), kerr.InvalidRequest.Code, "duplicate",
			map[string]string{"retention.ms": "60000", "cleanup.policy": "delete"}},
		{"validate only", incrementalReq(true, topic, "iac", kv{"retention.ms", nil, del}), 0, "",
			map[string]string{"retention.ms": "60000", "cleanup.policy": "delete"}},
		{"unknown topic", incrementalReq(false, topic, "ghost", kv{"retention.ms", nil, del}), kerr.UnknownTopicOrPartition.Code, "ghost",
			map[string]string{"retention.ms": "60000", "cleanup.policy": "delete"}},
		{"broker", incrementalReq(false, kmsg.ConfigResourceTypeBroker, "0", kv{"num.partitions", strp("3"), set}), kerr.InvalidRequest.Code, "cannot update these configs dynamically",
			map[string]string{"retention.ms": "60000", "cleanup.policy": "delete"}},
		{"log append time", incrementalReq(false, topic, "iac", kv{"message.timestamp.type", strp("LogAppendTime"), set}, kv{"cleanup.policy", nil, del}), 0, "",
			map[string]string{"retention.ms": "60000", "message.timestamp.type": "LogAppendTime"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := c.do(tc.req).(*kmsg.IncrementalAlterConfigsResponse)
			if len(resp.Resources) != 1 {
				t.Fatalf("%d resources", len(resp.Resources))
			}
			got := resp.Resources[0]
			if got.ErrorCode != tc.code || !strings.Contains(deref(got.ErrorMessage), tc.msg) {
				t.Fatalf("got %d %q, want %d %q", got.ErrorCode, deref(got.ErrorMessage), tc.code, tc.msg)
			}
			checkTopicConfigs(t, c, "iac", tc.want)
		})
	}
	// The served partition's routing spec follows at once.
	if v, _ := b.eng.Topic("iac"); v.Spec.ConfigValue("message.timestamp.type") != "LogAppendTime" {
		t.Fatalf("routing spec %+v", v.Spec)
	}
}

func createPartitionsReq(validateOnly bool, topic string, count int32) *kmsg.CreatePartitionsRequest {
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.Version = 3
	req.TimeoutMillis = 15000
	req.ValidateOnly = validateOnly
	t := kmsg.NewCreatePartitionsRequestTopic()
	t.Topic, t.Count = topic, count
	req.Topics = append(req.Topics, t)
	return req
}

func TestCreatePartitionsWire(t *testing.T) {
	b := startBroker(t, nil)
	b.createTopic(t, "cp", 1, nil)
	c := b.dial(t)
	withAssignment := createPartitionsReq(false, "cp", 3) // 2 new partitions, 1 assignment: malformed
	withAssignment.Topics[0].Assignment = []kmsg.CreatePartitionsRequestTopicAssignment{{Replicas: []int32{0}}}
	twice := createPartitionsReq(false, "cp", 2)
	twice.Topics = append(twice.Topics, twice.Topics[0])
	for _, tc := range []struct {
		name string
		req  *kmsg.CreatePartitionsRequest
		code int16
		msg  string
		want int32
	}{
		{"same count", createPartitionsReq(false, "cp", 1), kerr.InvalidPartitions.Code, "topic already has 1 partitions", 1},
		{"decrease", createPartitionsReq(false, "cp", 0), kerr.InvalidPartitions.Code, "which is higher than the requested 0", 1},
		{"too many", createPartitionsReq(false, "cp", 1<<30), kerr.InvalidPartitions.Code, "limit", 1},
		{"unknown topic", createPartitionsReq(false, "ghost", 3), kerr.UnknownTopicOrPartition.Code, "ghost", 1},
		{"malformed assignment", withAssignment, kerr.InvalidReplicaAssignment.Code, "1 assignments provided", 1},
		{"topic twice", twice, kerr.InvalidRequest.Code, "duplicate topic", 1},
		{"validate only", createPartitionsReq(true, "cp", 3), 0, "", 1},
		{"grow", createPartitionsReq(false, "cp", 3), 0, "", 3},
		{"decrease after grow", createPartitionsReq(false, "cp", 2), kerr.InvalidPartitions.Code, "topic currently has 3 partitions", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := c.do(tc.req).(*kmsg.CreatePartitionsResponse)
			for _, got := range resp.Topics {
				if got.ErrorCode != tc.code || !strings.Contains(deref(got.ErrorMessage), tc.msg) {
					t.Fatalf("got %d %q, want %d %q", got.ErrorCode, deref(got.ErrorMessage), tc.code, tc.msg)
				}
			}
			if n, _ := b.eng.TopicPartitions("cp"); n != tc.want {
				t.Fatalf("%d partitions, want %d", n, tc.want)
			}
		})
	}
	// The answer waited until the new partitions are served.
	resp := c.do(produceReq(9, -1, "cp", 2, makeBatch(batchOpts{values: []string{"x"}}))).(*kmsg.ProduceResponse)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("produce to new partition 2: code %d", code)
	}
}

func deleteRecordsReq(topic string, partition int32, offset int64) *kmsg.DeleteRecordsRequest {
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.Version = 2
	req.TimeoutMillis = 15000
	t := kmsg.NewDeleteRecordsRequestTopic()
	t.Topic = topic
	p := kmsg.NewDeleteRecordsRequestTopicPartition()
	p.Partition, p.Offset = partition, offset
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	return req
}

func TestDeleteRecordsWire(t *testing.T) {
	b := startBroker(t, nil)
	b.createTopic(t, "dr", 1, nil)
	c := b.dial(t)
	for i := 0; i < 3; i++ {
		if got := c.produce(9, "dr", makeBatch(batchOpts{values: []string{"a", "b"}})); got.ErrorCode != 0 {
			t.Fatalf("produce: %d", got.ErrorCode)
		}
	}
	for _, tc := range []struct {
		name      string
		topic     string
		partition int32
		offset    int64
		code      int16
		low       int64
	}{
		{"unknown topic", "ghost", 0, 1, kerr.UnknownTopicOrPartition.Code, -1},
		{"unknown partition", "dr", 5, 1, kerr.UnknownTopicOrPartition.Code, -1},
		{"above the high watermark", "dr", 0, 7, kerr.OffsetOutOfRange.Code, -1},
		{"below -1", "dr", 0, -5, kerr.OffsetOutOfRange.Code, -1},
		{"to 4", "dr", 0, 4, 0, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, v := range []int16{0, 1, 2} {
				req := deleteRecordsReq(tc.topic, tc.partition, tc.offset)
				req.Version = v
				resp := c.do(req).(*kmsg.DeleteRecordsResponse)
				got := resp.Topics[0].Partitions[0]
				if got.ErrorCode != tc.code || got.LowWatermark != tc.low {
					t.Fatalf("v%d: code %d low %d, want %d %d", v, got.ErrorCode, got.LowWatermark, tc.code, tc.low)
				}
			}
		})
	}
	lo := c.do(listOffsetsReq(7, "dr", -2)).(*kmsg.ListOffsetsResponse)
	if got := lo.Topics[0].Partitions[0]; got.ErrorCode != 0 || got.Offset != 4 {
		t.Fatalf("earliest after DeleteRecords: %+v", got)
	}
	if got := c.fetch(fetchReq(12, "dr", 2, -1, 0, 0)); got.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("fetch below the low watermark: code %d", got.ErrorCode)
	}
	if got := c.fetch(fetchReq(12, "dr", 4, -1, 0, 0)); got.ErrorCode != 0 || got.LogStartOffset != 4 || len(got.RecordBatches) == 0 {
		t.Fatalf("fetch at the low watermark: code %d start %d, %d bytes", got.ErrorCode, got.LogStartOffset, len(got.RecordBatches))
	}
	// -1: everything up to the high watermark.
	if got := c.do(deleteRecordsReq("dr", 0, -1)).(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0]; got.ErrorCode != 0 || got.LowWatermark != 6 {
		t.Fatalf("delete to the high watermark: %+v", got)
	}
}

// TestAdminThroughKadm: franz-go's admin client (its sharding of broker
// and topic resources included) against the handlers.
func TestAdminThroughKadm(t *testing.T) {
	b := startBroker(t, nil)
	b.createTopic(t, "kadm", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	adm := kadm.NewClient(b.client(t))

	alt, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: strp("1234")}}, "kadm")
	if err != nil || len(alt) != 1 || alt[0].Err != nil {
		t.Fatalf("AlterTopicConfigs: %v %+v", err, alt)
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, "kadm")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On("kadm", nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describe: %v %+v", err, rc)
	}
	found := false
	for _, cfg := range rc.Configs {
		if cfg.Key == "retention.ms" {
			found = cfg.MaybeValue() == "1234" && cfg.Source == kmsg.ConfigSourceDynamicTopicConfig
		}
	}
	if !found {
		t.Fatalf("retention.ms not set: %+v", rc.Configs)
	}
	brs, err := adm.DescribeBrokerConfigs(ctx, b.eng.BrokerID())
	if err != nil || len(brs) != 1 || brs[0].Err != nil || len(brs[0].Configs) == 0 {
		t.Fatalf("DescribeBrokerConfigs: %v %+v", err, brs)
	}
	if _, err := adm.CreatePartitions(ctx, 2, "kadm"); err != nil {
		t.Fatal(err)
	}
	if n, _ := b.eng.TopicPartitions("kadm"); n != 3 {
		t.Fatalf("%d partitions after CreatePartitions(+2)", n)
	}
}

// adminSeeds are fuzz seeds (FuzzDispatch) of the admin requests.
func adminSeeds() []kmsg.Request {
	topic, broker := kmsg.ConfigResourceTypeTopic, kmsg.ConfigResourceTypeBroker
	var out []kmsg.Request
	for _, v := range []int16{0, 2} {
		r := deleteRecordsReq("fuzz-topic", 0, -1)
		r.Version = v
		out = append(out, r)
	}
	for _, v := range []int16{1, 4} {
		out = append(out, describeConfigsReq(v, topic, "fuzz-topic", true, true, "retention.ms"),
			describeConfigsReq(v, broker, "", true, false))
	}
	for _, v := range []int16{0, 2} {
		r := alterConfigsReq(true, topic, "fuzz-topic", kv{name: "retention.ms", value: strp("1000")}, kv{name: "bad"})
		r.Version = v
		out = append(out, r)
	}
	for _, v := range []int16{0, 3} {
		r := createPartitionsReq(true, "fuzz-topic", 2)
		r.Version = v
		out = append(out, r)
	}
	for _, v := range []int16{0, 1} {
		r := incrementalReq(true, topic, "fuzz-topic", kv{"cleanup.policy", strp("delete"), kmsg.IncrementalAlterConfigOpAppend}, kv{"retention.ms", nil, kmsg.IncrementalAlterConfigOpDelete})
		r.Version = v
		out = append(out, r)
	}
	return out
}

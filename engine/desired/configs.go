package desired

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// ConfigType is a config's type as DescribeConfigs v3+ reports it (Kafka's
// ConfigDef.Type numbering).
type ConfigType int8

// Kafka's config types.
const (
	ConfigTypeUnknown  ConfigType = 0
	ConfigTypeBoolean  ConfigType = 1
	ConfigTypeString   ConfigType = 2
	ConfigTypeInt      ConfigType = 3
	ConfigTypeShort    ConfigType = 4
	ConfigTypeLong     ConfigType = 5
	ConfigTypeDouble   ConfigType = 6
	ConfigTypeList     ConfigType = 7
	ConfigTypeClass    ConfigType = 8
	ConfigTypePassword ConfigType = 9
)

// ConfigSource is where a config's value comes from (Kafka's
// DescribeConfigs numbering).
type ConfigSource int8

// Kafka's config sources kaas reports.
const (
	SourceTopic        ConfigSource = 1 // DYNAMIC_TOPIC_CONFIG: set on the topic
	SourceStaticBroker ConfigSource = 4 // STATIC_BROKER_CONFIG: a broker flag
	SourceDefault      ConfigSource = 5 // DEFAULT_CONFIG
)

// TopicConfig describes one topic configuration key kaas understands.
type TopicConfig struct {
	Name    string
	Default string
	Type    ConfigType
	// Check validates a value; nil accepts anything of the right type.
	Check func(string) error
	// Synonym is the broker-level config that gives the topic its default
	// (log.retention.ms for retention.ms).
	Synonym string
	Doc     string
}

// IsList reports whether the config is a comma-separated list, the only
// kind IncrementalAlterConfigs may APPEND to or SUBTRACT from.
func (c TopicConfig) IsList() bool { return c.Type == ConfigTypeList }

func longAtLeast(min int64) func(string) error {
	return func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("%q is not a whole number (LONG)", v)
		}
		if n < min {
			return fmt.Errorf("%d is below the minimum %d", n, min)
		}
		return nil
	}
}

func intAtLeast(min int64) func(string) error {
	return func(v string) error {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return fmt.Errorf("%q is not a 32-bit whole number (INT)", v)
		}
		if n < min {
			return fmt.Errorf("%d is below the minimum %d", n, min)
		}
		return nil
	}
}

func oneOf(allowed ...string) func(string) error {
	return func(v string) error {
		for _, a := range allowed {
			if v == a {
				return nil
			}
		}
		return fmt.Errorf("%q is not supported (supported: %s)", v, strings.Join(allowed, ", "))
	}
}

func boolean(v string) error {
	if v != "true" && v != "false" {
		return fmt.Errorf("%q is not a boolean (true or false)", v)
	}
	return nil
}

func intIn(min, max int64) func(string) error {
	atLeast := intAtLeast(min)
	return func(v string) error {
		if err := atLeast(v); err != nil {
			return err
		}
		if n, _ := strconv.ParseInt(v, 10, 32); n > max {
			return fmt.Errorf("%d is above the maximum %d", n, max)
		}
		return nil
	}
}

// gzipLevel is Kafka's check of compression.gzip.level: 1 to 9, or -1.
func gzipLevel(v string) error {
	if v == "-1" {
		return nil
	}
	if err := intIn(1, 9)(v); err != nil {
		return fmt.Errorf("%w (or -1: gzip's default)", err)
	}
	return nil
}

// listOf checks a comma-separated list whose items are all allowed; the
// list may not be empty.
func listOf(allowed ...string) func(string) error {
	one := oneOf(allowed...)
	return func(v string) error {
		items := SplitConfigList(v)
		if len(items) == 0 {
			return fmt.Errorf("the list is empty (supported: %s)", strings.Join(allowed, ", "))
		}
		for _, it := range items {
			if err := one(it); err != nil {
				return err
			}
		}
		return nil
	}
}

// SplitConfigList splits a list-type config value as Kafka does: by
// commas, items trimmed, empty items dropped.
func SplitConfigList(v string) []string {
	var out []string
	for _, it := range strings.Split(v, ",") {
		if it = strings.TrimSpace(it); it != "" {
			out = append(out, it)
		}
	}
	return out
}

// topicConfigs are the keys a topic may set. Every key here is honoured by
// kaas, or (min.insync.replicas, unclean.leader.election.enable) is
// harmless and true of kaas: clients and tools send them by habit. Values
// kaas cannot honour (compaction) and every other key are refused with a
// clear message instead of being accepted and ignored.
var topicConfigs = map[string]TopicConfig{
	"cleanup.policy": {Default: "delete", Type: ConfigTypeList, Check: listOf("delete"), Synonym: "log.cleanup.policy",
		Doc: "The retention policy of old log segments: a list of delete and compact. kaas supports delete only: segments are deleted once retention.ms or retention.bytes expires them."},
	"retention.ms": {Default: "604800000", Type: ConfigTypeLong, Check: longAtLeast(-1), Synonym: "log.retention.ms",
		Doc: "The longest time a log segment is kept, by its newest record's timestamp, before it is deleted; -1 keeps segments forever."},
	"retention.bytes": {Default: "-1", Type: ConfigTypeLong, Check: longAtLeast(-1), Synonym: "log.retention.bytes",
		Doc: "The largest size a partition may grow to before its oldest segments are deleted; -1 means no limit."},
	"segment.bytes": {Default: "1073741824", Type: ConfigTypeInt, Check: intAtLeast(1024), Synonym: "log.segment.bytes",
		Doc: "The size of a log segment file: a segment this large is rolled, and retention deletes whole segments."},
	"segment.ms": {Default: "604800000", Type: ConfigTypeLong, Check: longAtLeast(1), Synonym: "log.roll.ms",
		Doc: "The time after which a segment is rolled even if it is not full, so retention can delete or compact old data."},
	"max.message.bytes": {Default: "1048588", Type: ConfigTypeInt, Check: intAtLeast(0), Synonym: "message.max.bytes",
		Doc: "The largest record batch size allowed by this topic (after compression, and after the broker's recompression when compression.type asks for it)."},
	"message.timestamp.type": {Default: "CreateTime", Type: ConfigTypeString, Check: oneOf("CreateTime", "LogAppendTime"), Synonym: "log.message.timestamp.type",
		Doc: "Whether the timestamp of a record is the time the producer created it (CreateTime) or the time the broker appended it (LogAppendTime)."},
	"message.timestamp.before.max.ms": {Default: maxLong, Type: ConfigTypeLong, Check: longAtLeast(0), Synonym: "log.message.timestamp.before.max.ms",
		Doc: "How far before the owning broker's clock a record's CreateTime timestamp may be: a produce with an older record is refused with INVALID_TIMESTAMP. Not checked on LogAppendTime topics."},
	"message.timestamp.after.max.ms": {Default: maxLong, Type: ConfigTypeLong, Check: longAtLeast(0), Synonym: "log.message.timestamp.after.max.ms",
		Doc: "How far after the owning broker's clock a record's CreateTime timestamp may be: a produce with a later record is refused with INVALID_TIMESTAMP. Not checked on LogAppendTime topics."},
	"message.timestamp.difference.max.ms": {Default: maxLong, Type: ConfigTypeLong, Check: longAtLeast(0), Synonym: "log.message.timestamp.difference.max.ms",
		Doc: "Deprecated: message.timestamp.before.max.ms and message.timestamp.after.max.ms each take this value while they are at their default."},
	"compression.type": {Default: "producer", Type: ConfigTypeString, Check: oneOf("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"), Synonym: "compression.type",
		Doc: "The compression of the topic's data: producer keeps each batch as the producer compressed it; uncompressed, gzip, snappy, lz4 or zstd make the broker recompress a batch written with another codec on append."},
	"compression.gzip.level": {Default: "-1", Type: ConfigTypeInt, Check: gzipLevel, Synonym: "compression.gzip.level",
		Doc: "The gzip level of the broker's recompression when compression.type is gzip: 1 to 9, or -1 for gzip's default."},
	"compression.lz4.level": {Default: "9", Type: ConfigTypeInt, Check: intIn(1, 17), Synonym: "compression.lz4.level",
		Doc: "The LZ4 level of the broker's recompression when compression.type is lz4: 1 to 17 (kaas's LZ4 compresses levels above 9 as 9)."},
	"compression.zstd.level": {Default: "3", Type: ConfigTypeInt, Check: intIn(-131072, 22), Synonym: "compression.zstd.level",
		Doc: "The zstd level of the broker's recompression when compression.type is zstd: -131072 to 22 (kaas's zstd compresses negative levels as 1)."},
	"min.insync.replicas": {Default: "1", Type: ConfigTypeInt, Check: intAtLeast(1), Synonym: "min.insync.replicas",
		Doc: "Accepted for compatibility: kaas has one writer per partition and durability comes from the shared volume and fsync, so every acknowledged write is as durable as the volume whatever this says."},
	"unclean.leader.election.enable": {Default: "false", Type: ConfigTypeBoolean, Check: boolean, Synonym: "unclean.leader.election.enable",
		Doc: "Accepted for compatibility: kaas has no replicas that can fall behind, so a new leader always has every acknowledged record."},
}

// maxLong is Long.MAX_VALUE, Kafka's default of the keys that are off
// unless set.
const maxLong = "9223372036854775807"

func init() {
	for k, c := range topicConfigs {
		c.Name = k
		topicConfigs[k] = c
	}
}

// rejectedTopicConfigs are Kafka topic configs kaas refuses, with the
// reason sent to the client.
var rejectedTopicConfigs = map[string]string{
	"delete.retention.ms":                     "kaas does not compact topics",
	"min.compaction.lag.ms":                   "kaas does not compact topics",
	"max.compaction.lag.ms":                   "kaas does not compact topics",
	"min.cleanable.dirty.ratio":               "kaas does not compact topics",
	"flush.messages":                          "kaas fsyncs every acknowledged write",
	"flush.ms":                                "kaas fsyncs every acknowledged write",
	"file.delete.delay.ms":                    "kaas removes a deleted segment once its last reader is done",
	"index.interval.bytes":                    "kaas spaces its index entries itself (every 4 KiB)",
	"segment.index.bytes":                     "kaas sizes its indexes itself",
	"segment.jitter.ms":                       "kaas does not jitter segment rolls",
	"preallocate":                             "kaas does not preallocate segments",
	"message.downconversion.enable":           "kaas does not down-convert record batches",
	"message.format.version":                  "kaas writes record batch format v2 only",
	"leader.replication.throttled.replicas":   "kaas has no replication",
	"follower.replication.throttled.replicas": "kaas has no replication",
	"remote.storage.enable":                   "kaas has no tiered storage",
	"local.retention.ms":                      "kaas has no tiered storage",
	"local.retention.bytes":                   "kaas has no tiered storage",
}

// LookupTopicConfig returns the description of a topic config kaas
// understands.
func LookupTopicConfig(name string) (TopicConfig, bool) {
	c, ok := topicConfigs[name]
	return c, ok
}

// ValidateTopicConfigKey checks that kaas knows a topic config key.
func ValidateTopicConfigKey(k string) error {
	if _, ok := topicConfigs[k]; ok {
		return nil
	}
	if why, ok := rejectedTopicConfigs[k]; ok {
		return fmt.Errorf("topic config %s is not supported: %s", k, why)
	}
	return fmt.Errorf("unknown topic config name: %s (kaas supports %s)", k, strings.Join(TopicConfigNames(), ", "))
}

// ValidateTopicConfigs checks every key and value.
func ValidateTopicConfigs(configs map[string]string) error {
	keys := make([]string, 0, len(configs))
	for k := range configs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := ValidateTopicConfigKey(k); err != nil {
			return err
		}
		if c := topicConfigs[k]; c.Check != nil {
			if err := c.Check(configs[k]); err != nil {
				return fmt.Errorf("invalid value %s for topic config %s: %w", configs[k], k, err)
			}
		}
	}
	return nil
}

// ConfigValue returns a topic's value for key, or the default.
func (s TopicSpec) ConfigValue(key string) string {
	if v, ok := s.Configs[key]; ok {
		return v
	}
	return topicConfigs[key].Default
}

// ConfigInt returns a numeric config of the topic (0 when it does not parse).
func (s TopicSpec) ConfigInt(key string) int64 {
	n, _ := strconv.ParseInt(s.ConfigValue(key), 10, 64)
	return n
}

// TopicConfigNames lists every topic config key, sorted.
func TopicConfigNames() []string {
	out := make([]string, 0, len(topicConfigs))
	for k := range topicConfigs {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// RejectedTopicConfigNames lists the Kafka topic configs kaas refuses by
// name, sorted (every other unknown key is refused too).
func RejectedTopicConfigNames() []string {
	out := make([]string, 0, len(rejectedTopicConfigs))
	for k := range rejectedTopicConfigs {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ConfigSynonym is one source a config's value could come from, in
// precedence order (DescribeConfigs IncludeSynonyms).
type ConfigSynonym struct {
	Name   string
	Value  string
	Source ConfigSource
}

// ConfigEntry is one described config (DescribeConfigs, CreateTopics v5+).
type ConfigEntry struct {
	Name      string
	Value     string
	Source    ConfigSource
	ReadOnly  bool
	Sensitive bool
	Type      ConfigType
	Doc       string
	Synonyms  []ConfigSynonym
}

// TopicConfigEntries describes every config of a topic, sorted by name:
// its own value (source TOPIC) or the default (source DEFAULT), with the
// synonyms in precedence order: the topic's own value if set, then the
// broker-level config that gives the default.
func TopicConfigEntries(spec TopicSpec) []ConfigEntry {
	out := make([]ConfigEntry, 0, len(topicConfigs))
	for _, name := range TopicConfigNames() {
		c := topicConfigs[name]
		e := ConfigEntry{Name: name, Value: c.Default, Source: SourceDefault, Type: c.Type, Doc: c.Doc}
		if v, ok := spec.Configs[name]; ok {
			e.Value, e.Source = v, SourceTopic
			e.Synonyms = append(e.Synonyms, ConfigSynonym{Name: name, Value: v, Source: SourceTopic})
		}
		e.Synonyms = append(e.Synonyms, ConfigSynonym{Name: c.Synonym, Value: c.Default, Source: SourceDefault})
		out = append(out, e)
	}
	return out
}

package desired

import (
	"fmt"
	"math"
	"regexp"
	"slices"
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
	// (log.retention.ms for retention.ms); empty for the keys Kafka has no
	// broker-level config for.
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

// doubleIn checks a DOUBLE config that must lie in [min, max].
func doubleIn(min, max float64) func(string) error {
	return func(v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) {
			return fmt.Errorf("%q is not a number (DOUBLE)", v)
		}
		if f < min || f > max {
			return fmt.Errorf("%s is not within [%g, %g]", v, min, max)
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

// only accepts one value of a key whose other values would be a lie.
func only(value, why string) func(string) error {
	return func(v string) error {
		if v != value {
			return fmt.Errorf("%s; only %s is accepted", why, value)
		}
		return nil
	}
}

// emptyList accepts an empty list only.
func emptyList(why string) func(string) error {
	return func(v string) error {
		if len(SplitConfigList(v)) > 0 {
			return fmt.Errorf("%s; only an empty list is accepted", why)
		}
		return nil
	}
}

// formatVersion is a Kafka release or metadata version as
// message.format.version takes it: 0.11.0, 2.8, 3.0-IV1.
var formatVersion = regexp.MustCompile(`^(\d+)\.(\d+)(\.\d+)?(-IV\d+)?$`)

// formatV2 accepts the message.format.version values whose format is
// record batch v2 (0.11.0 and later) and refuses older ones, whose
// formats kaas does not write.
func formatV2(v string) error {
	m := formatVersion.FindStringSubmatch(v)
	if m == nil {
		return fmt.Errorf("%q is not a Kafka version (such as 3.0-IV1)", v)
	}
	if major, _ := strconv.Atoi(m[1]); major == 0 {
		if minor, _ := strconv.Atoi(m[2]); minor < 11 {
			return fmt.Errorf("version %s writes message format v0 or v1: kaas writes record batch v2 only (0.11.0 and later)", v)
		}
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
// kaas, or is moot because kaas's guarantee already exceeds what it asks
// (flush.ms: every acknowledged write is fsynced), or is accepted only at
// the values true of kaas (preallocate=false, remote.storage.enable=false):
// clients, frameworks and IaC tools send them by habit or copy them from
// other clusters. Each key's Doc says which (docs/topics.md). Values kaas
// cannot honour are refused with the reason, never accepted and ignored.
var topicConfigs = map[string]TopicConfig{
	"cleanup.policy": {Default: "delete", Type: ConfigTypeList, Check: listOf("delete", "compact"), Synonym: "log.cleanup.policy",
		Doc: "What happens to old log segments: a list of delete and compact. delete removes whole segments once retention.ms or retention.bytes expires them; compact has the broker's cleaner keep only the latest record of each key in the segments it may clean (records without a key are refused on produce); compact,delete does both."},
	"delete.retention.ms": {Default: "86400000", Type: ConfigTypeLong, Check: longAtLeast(0), Synonym: "log.cleaner.delete.retention.ms",
		Doc: "On a compacted topic, how long a tombstone (a record with a null value) and a transaction marker are kept after the cleaner first reaches them, so that a consumer reading from the start sees the delete."},
	"min.compaction.lag.ms": {Default: "0", Type: ConfigTypeLong, Check: longAtLeast(0), Synonym: "log.cleaner.min.compaction.lag.ms",
		Doc: "On a compacted topic, the least time a record stays uncompacted: records newer than this, by timestamp, are never cleaned."},
	"max.compaction.lag.ms": {Default: maxLong, Type: ConfigTypeLong, Check: longAtLeast(1), Synonym: "log.cleaner.max.compaction.lag.ms",
		Doc: "On a compacted topic, the longest time a record may stay uncompacted: a partition holding older uncleaned records is cleaned whatever its dirty ratio."},
	"min.cleanable.dirty.ratio": {Default: "0.5", Type: ConfigTypeDouble, Check: doubleIn(0, 1), Synonym: "log.cleaner.min.cleanable.ratio",
		Doc: "On a compacted topic, the share of the log not yet cleaned (0 to 1) above which the cleaner cleans the partition: lower cleans more often, keeping fewer superseded records at more I/O."},
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
		Doc: "The LZ4 level of the broker's recompression when compression.type is lz4: 1 to 17. The default, 9, is LZ4's fast compressor, as in Kafka; other levels are LZ4 HC (kaas's compresses levels above 9 as 9)."},
	"compression.zstd.level": {Default: "3", Type: ConfigTypeInt, Check: intIn(-131072, 22), Synonym: "compression.zstd.level",
		Doc: "The zstd level of the broker's recompression when compression.type is zstd: -131072 to 22 (kaas's zstd compresses negative levels as 1)."},
	"min.insync.replicas": {Default: "1", Type: ConfigTypeInt, Check: intAtLeast(1), Synonym: "min.insync.replicas",
		Doc: "Accepted for compatibility: kaas has one writer per partition and durability comes from the shared volume and fsync, so every acknowledged write is as durable as the volume whatever this says."},
	"unclean.leader.election.enable": {Default: "false", Type: ConfigTypeBoolean, Check: boolean, Synonym: "unclean.leader.election.enable",
		Doc: "Accepted for compatibility: kaas has no replicas that can fall behind, so a new leader always has every acknowledged record."},
	"flush.messages": {Default: maxLong, Type: ConfigTypeLong, Check: longAtLeast(1), Synonym: "log.flush.interval.messages",
		Doc: "Moot, any value is accepted: every acknowledged write is fsynced and its partition's fence checked before the answer, stronger than flush.messages=1."},
	"flush.ms": {Default: maxLong, Type: ConfigTypeLong, Check: longAtLeast(0), Synonym: "log.flush.interval.ms",
		Doc: "Moot, any value is accepted: every acknowledged write is fsynced and its partition's fence checked before the answer, stronger than flush.ms=0."},
	"file.delete.delay.ms": {Default: "60000", Type: ConfigTypeLong, Check: longAtLeast(0), Synonym: "log.segment.delete.delay.ms",
		Doc: "Moot, any value is accepted: a deleted segment's files are removed when its last reader releases them, never under a reader."},
	"message.downconversion.enable": {Default: "true", Type: ConfigTypeBoolean, Check: boolean, Synonym: "log.message.downconversion.enable",
		Doc: "Moot, either value is accepted: kaas serves Fetch v4 and later only, whose clients all read record batch v2, so nothing is ever down-converted."},
	"message.format.version": {Default: "3.0-IV1", Type: ConfigTypeString, Check: formatV2, Synonym: "log.message.format.version",
		Doc: "Accepted for versions whose message format is record batch v2 (0.11.0 and later), the only one kaas writes; older versions are refused."},
	"preallocate": {Default: "false", Type: ConfigTypeBoolean, Check: only("false", "kaas does not preallocate segment files"), Synonym: "log.preallocate",
		Doc: "Accepted as false only: kaas does not preallocate segment files."},
	"leader.replication.throttled.replicas": {Default: "", Type: ConfigTypeList, Check: emptyList("kaas has no replication to throttle"),
		Doc: "Accepted empty only: kaas keeps one copy of each partition on the shared volume, so there is no replication to throttle."},
	"follower.replication.throttled.replicas": {Default: "", Type: ConfigTypeList, Check: emptyList("kaas has no replication to throttle"),
		Doc: "Accepted empty only: kaas keeps one copy of each partition on the shared volume, so there is no replication to throttle."},
	"remote.storage.enable": {Default: "false", Type: ConfigTypeBoolean, Check: only("false", "kaas has no tiered storage"),
		Doc: "Accepted as false only: kaas has no tiered storage; every segment stays on the shared volume."},
	"remote.log.copy.disable": {Default: "false", Type: ConfigTypeBoolean, Check: only("false", "kaas has no tiered storage"),
		Doc: "Accepted as false only: kaas has no tiered storage."},
	"remote.log.delete.on.disable": {Default: "false", Type: ConfigTypeBoolean, Check: only("false", "kaas has no tiered storage"),
		Doc: "Accepted as false only: kaas has no tiered storage."},
	"local.retention.ms": {Default: "-2", Type: ConfigTypeLong, Check: only("-2", "kaas has no tiered storage: the local log is the whole log, kept by retention.ms"), Synonym: "log.local.retention.ms",
		Doc: "Accepted as -2 (the same as retention.ms) only: kaas has no tiered storage, so the local log is the whole log."},
	"local.retention.bytes": {Default: "-2", Type: ConfigTypeLong, Check: only("-2", "kaas has no tiered storage: the local log is the whole log, kept by retention.bytes"), Synonym: "log.local.retention.bytes",
		Doc: "Accepted as -2 (the same as retention.bytes) only: kaas has no tiered storage, so the local log is the whole log."},
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
	"index.interval.bytes": "kaas spaces its index entries itself (every 4 KiB)",
	"segment.index.bytes":  "kaas sizes its indexes itself",
	"segment.jitter.ms":    "kaas does not jitter segment rolls",
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

// ConfigFloat returns a DOUBLE config of the topic (0 when it does not
// parse).
func (s TopicSpec) ConfigFloat(key string) float64 {
	f, _ := strconv.ParseFloat(s.ConfigValue(key), 64)
	return f
}

// Compacted reports whether the topic's cleanup.policy includes compact:
// its partitions are compacted by the broker's cleaner, and produce refuses
// records without a key.
func (s TopicSpec) Compacted() bool {
	return slices.Contains(SplitConfigList(s.ConfigValue("cleanup.policy")), "compact")
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
		if c.Synonym != "" { // Kafka lists no default for a key without a broker-level config
			e.Synonyms = append(e.Synonyms, ConfigSynonym{Name: c.Synonym, Value: c.Default, Source: SourceDefault})
		}
		out = append(out, e)
	}
	return out
}

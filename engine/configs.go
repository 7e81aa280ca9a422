package engine

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/kaas-dev/kaas/engine/groups"
	"github.com/kaas-dev/kaas/engine/txns"
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
// kaas, or (min.insync.replicas, unclean.leader.election.enable,
// compression.type=producer) is harmless and true of kaas: clients and
// tools send them by habit. Values kaas cannot honour (compaction,
// broker-side recompression) and every other key are refused with a clear
// message instead of being accepted and ignored.
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
		Doc: "The largest record batch size allowed by this topic (after compression)."},
	"message.timestamp.type": {Default: "CreateTime", Type: ConfigTypeString, Check: oneOf("CreateTime", "LogAppendTime"), Synonym: "log.message.timestamp.type",
		Doc: "Whether the timestamp of a record is the time the producer created it (CreateTime) or the time the broker appended it (LogAppendTime)."},
	"compression.type": {Default: "producer", Type: ConfigTypeString, Check: oneOf("producer"), Synonym: "compression.type",
		Doc: "The compression of the topic's data. kaas keeps the producer's compression (producer) and does not recompress."},
	"min.insync.replicas": {Default: "1", Type: ConfigTypeInt, Check: intAtLeast(1), Synonym: "min.insync.replicas",
		Doc: "Accepted for compatibility: kaas has one writer per partition and durability comes from the shared volume and fsync, so every acknowledged write is as durable as the volume whatever this says."},
	"unclean.leader.election.enable": {Default: "false", Type: ConfigTypeBoolean, Check: boolean, Synonym: "unclean.leader.election.enable",
		Doc: "Accepted for compatibility: kaas has no replicas that can fall behind, so a new leader always has every acknowledged record."},
}

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
	"message.timestamp.difference.max.ms":     "kaas does not check timestamps against its clock",
	"message.timestamp.before.max.ms":         "kaas does not check timestamps against its clock",
	"message.timestamp.after.max.ms":          "kaas does not check timestamps against its clock",
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

// validateTopicConfigKey checks that kaas knows a topic config key.
func validateTopicConfigKey(k string) error {
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
		if err := validateTopicConfigKey(k); err != nil {
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

func (s TopicSpec) configInt(key string) int64 {
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

// brokerConfig is one broker config DescribeConfigs reports: a Kafka name
// for something a kaas broker really does, its value here and kaas's
// default (the broker flag's default).
type brokerConfig struct {
	name, value, def string
	typ              ConfigType
	doc              string
	// always: the value is this broker's own (identity, paths), reported
	// as a static broker config even when it equals the default.
	always bool
}

func msString(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// brokerConfigs lists the broker configs of this broker's engine, by name.
func (e *Engine) brokerConfigs() []brokerConfig {
	cfg := e.cfg
	g, tx := cfg.Groups, cfg.Txns
	delay := orDefault(g.InitialRebalanceDelay, groups.DefaultInitialRebalanceDelay)
	if delay < 0 {
		delay = 0
	}
	maxGroup := g.MaxGroupSize
	if maxGroup == 0 {
		maxGroup = groups.DefaultMaxGroupSize
	}
	id := strconv.Itoa(int(cfg.BrokerID))
	out := []brokerConfig{
		{name: "broker.id", value: id, def: "0", typ: ConfigTypeInt, always: true,
			doc: "The broker's ID (kaas-broker --id)."},
		{name: "node.id", value: id, def: "0", typ: ConfigTypeInt, always: true,
			doc: "The broker's ID (kaas-broker --id); the same as broker.id."},
		{name: "log.dirs", value: cfg.DataDir, def: "./kaas-data", typ: ConfigTypeList, always: true,
			doc: "The data directory on the shared volume holding every partition (kaas-broker --data)."},
		{name: "auto.create.topics.enable", value: strconv.FormatBool(cfg.AutoCreateTopics), def: "true", typ: ConfigTypeBoolean,
			doc: "Whether Metadata and Produce create unknown topics (kaas-broker --auto-create-topics)."},
		{name: "num.partitions", value: strconv.Itoa(int(cfg.DefaultPartitions)), def: "1", typ: ConfigTypeInt,
			doc: "The partitions of auto-created topics, and of topics created with -1 (kaas-broker --default-partitions)."},
		{name: "default.replication.factor", value: "1", def: "1", typ: ConfigTypeInt,
			doc: "kaas keeps one copy of each partition on the shared volume, whose own redundancy makes it durable."},
		{name: "transaction.max.timeout.ms", value: msString(orDefault(tx.MaxTimeout, txns.DefaultMaxTimeout)), def: msString(txns.DefaultMaxTimeout), typ: ConfigTypeInt,
			doc: "The longest transaction timeout a producer may ask for (kaas-broker --transaction-max-timeout)."},
		{name: "transaction.abort.timed.out.transaction.cleanup.interval.ms", value: msString(orDefault(tx.AbortCheck, txns.DefaultAbortCheck)), def: msString(txns.DefaultAbortCheck), typ: ConfigTypeInt,
			doc: "How often timed-out transactions are looked for and aborted (kaas-broker --transaction-abort-check-interval)."},
		{name: "transactional.id.expiration.ms", value: msString(orDefault(tx.IDExpiration, txns.DefaultIDExpiration)), def: msString(txns.DefaultIDExpiration), typ: ConfigTypeInt,
			doc: "How long a transactional ID with no transaction is kept (kaas-broker --transactional-id-expiration)."},
		{name: "group.initial.rebalance.delay.ms", value: msString(delay), def: msString(groups.DefaultInitialRebalanceDelay), typ: ConfigTypeInt,
			doc: "How long a new group waits for more members before its first rebalance (kaas-broker --group-initial-rebalance-delay)."},
		{name: "group.min.session.timeout.ms", value: msString(orDefault(g.MinSessionTimeout, groups.DefaultMinSessionTimeout)), def: msString(groups.DefaultMinSessionTimeout), typ: ConfigTypeInt,
			doc: "The shortest session timeout a group member may ask for (kaas-broker --group-min-session-timeout)."},
		{name: "group.max.session.timeout.ms", value: msString(orDefault(g.MaxSessionTimeout, groups.DefaultMaxSessionTimeout)), def: msString(groups.DefaultMaxSessionTimeout), typ: ConfigTypeInt,
			doc: "The longest session timeout a group member may ask for (kaas-broker --group-max-session-timeout)."},
		{name: "group.max.size", value: strconv.Itoa(maxGroup), def: strconv.Itoa(groups.DefaultMaxGroupSize), typ: ConfigTypeInt,
			doc: "The most members a group may have (kaas-broker --group-max-size)."},
		{name: "offsets.retention.minutes", value: strconv.FormatInt(int64(orDefault(g.OffsetsRetention, groups.DefaultOffsetsRetention)/time.Minute), 10),
			def: strconv.FormatInt(int64(groups.DefaultOffsetsRetention/time.Minute), 10), typ: ConfigTypeInt,
			doc: "How long the committed offsets of an empty group are kept (kaas-broker --offsets-retention)."},
		{name: "offsets.retention.check.interval.ms", value: msString(orDefault(g.RetentionCheck, groups.DefaultRetentionCheck)), def: msString(groups.DefaultRetentionCheck), typ: ConfigTypeLong,
			doc: "How often expired committed offsets are looked for (kaas-broker --offsets-retention-check-interval)."},
	}
	if cfg.RetentionCheckInterval > 0 { // New fills in the default
		out = append(out, brokerConfig{name: "log.retention.check.interval.ms", value: msString(cfg.RetentionCheckInterval), def: msString(DefaultRetentionCheckInterval), typ: ConfigTypeLong,
			doc: "How often the partitions a broker serves are checked for segments that retention.ms or retention.bytes expire."})
	}
	if cfg.ProducerIDExpiration > 0 {
		out = append(out, brokerConfig{name: "producer.id.expiration.ms", value: msString(cfg.ProducerIDExpiration), def: msString(24 * time.Hour), typ: ConfigTypeInt,
			doc: "How long an idle producer's state is kept by a partition (kaas-broker --producer-id-expiration)."})
	}
	if cfg.Zone != "" {
		out = append(out, brokerConfig{name: "broker.rack", value: cfg.Zone, typ: ConfigTypeString, always: true,
			doc: "The broker's zone, advertised as its rack (kaas-broker --zone)."})
	}
	// The broker-level defaults of the topic configs.
	for _, name := range TopicConfigNames() {
		c := topicConfigs[name]
		out = append(out, brokerConfig{name: c.Synonym, value: c.Default, def: c.Default, typ: c.Type,
			doc: "The default of the topic config " + name + ". " + c.Doc})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// BrokerConfigEntries describes this broker's configs, sorted by name. kaas
// brokers are configured by flags at start: every entry is read-only, a
// static broker config where a flag set it (or it is the broker's own
// identity), else the default.
func (e *Engine) BrokerConfigEntries() []ConfigEntry {
	var out []ConfigEntry
	for _, c := range e.brokerConfigs() {
		ce := ConfigEntry{Name: c.name, Value: c.value, Source: SourceDefault, ReadOnly: true, Type: c.typ, Doc: c.doc}
		if c.always || c.value != c.def {
			ce.Source = SourceStaticBroker
			ce.Synonyms = append(ce.Synonyms, ConfigSynonym{Name: c.name, Value: c.value, Source: SourceStaticBroker})
		}
		if !c.always {
			ce.Synonyms = append(ce.Synonyms, ConfigSynonym{Name: c.name, Value: c.def, Source: SourceDefault})
		}
		out = append(out, ce)
	}
	return out
}

// IsBrokerConfig reports whether name is a broker config kaas describes.
func (e *Engine) IsBrokerConfig(name string) bool {
	for _, c := range e.brokerConfigs() {
		if c.name == name {
			return true
		}
	}
	return false
}

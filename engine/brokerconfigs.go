package engine

import (
	"sort"
	"strconv"
	"time"

	"github.com/kaas-dev/kaas/engine/desired"
	"github.com/kaas-dev/kaas/engine/groups"
	"github.com/kaas-dev/kaas/engine/txns"
)

// brokerConfig is one broker config DescribeConfigs reports: a Kafka name
// for something a kaas broker really does, its value here and kaas's
// default (the broker flag's default).
type brokerConfig struct {
	name, value, def string
	typ              desired.ConfigType
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
		{name: "broker.id", value: id, def: "0", typ: desired.ConfigTypeInt, always: true,
			doc: "The broker's ID (kaas-broker --id)."},
		{name: "node.id", value: id, def: "0", typ: desired.ConfigTypeInt, always: true,
			doc: "The broker's ID (kaas-broker --id); the same as broker.id."},
		{name: "log.dirs", value: cfg.DataDir, def: "./kaas-data", typ: desired.ConfigTypeList, always: true,
			doc: "The data directory on the shared volume holding every partition (kaas-broker --data)."},
		{name: "auto.create.topics.enable", value: strconv.FormatBool(cfg.AutoCreateTopics), def: "true", typ: desired.ConfigTypeBoolean,
			doc: "Whether Metadata and Produce create unknown topics (kaas-broker --auto-create-topics)."},
		{name: "num.partitions", value: strconv.Itoa(int(cfg.DefaultPartitions)), def: "1", typ: desired.ConfigTypeInt,
			doc: "The partitions of auto-created topics, and of topics created with -1 (kaas-broker --default-partitions)."},
		{name: "default.replication.factor", value: "1", def: "1", typ: desired.ConfigTypeInt,
			doc: "kaas keeps one copy of each partition on the shared volume, whose own redundancy makes it durable."},
		{name: "transaction.max.timeout.ms", value: msString(orDefault(tx.MaxTimeout, txns.DefaultMaxTimeout)), def: msString(txns.DefaultMaxTimeout), typ: desired.ConfigTypeInt,
			doc: "The longest transaction timeout a producer may ask for (kaas-broker --transaction-max-timeout)."},
		{name: "transaction.abort.timed.out.transaction.cleanup.interval.ms", value: msString(orDefault(tx.AbortCheck, txns.DefaultAbortCheck)), def: msString(txns.DefaultAbortCheck), typ: desired.ConfigTypeInt,
			doc: "How often timed-out transactions are looked for and aborted (kaas-broker --transaction-abort-check-interval)."},
		{name: "transactional.id.expiration.ms", value: msString(orDefault(tx.IDExpiration, txns.DefaultIDExpiration)), def: msString(txns.DefaultIDExpiration), typ: desired.ConfigTypeInt,
			doc: "How long a transactional ID with no transaction is kept (kaas-broker --transactional-id-expiration)."},
		{name: "group.initial.rebalance.delay.ms", value: msString(delay), def: msString(groups.DefaultInitialRebalanceDelay), typ: desired.ConfigTypeInt,
			doc: "How long a new group waits for more members before its first rebalance (kaas-broker --group-initial-rebalance-delay)."},
		{name: "group.min.session.timeout.ms", value: msString(orDefault(g.MinSessionTimeout, groups.DefaultMinSessionTimeout)), def: msString(groups.DefaultMinSessionTimeout), typ: desired.ConfigTypeInt,
			doc: "The shortest session timeout a group member may ask for (kaas-broker --group-min-session-timeout)."},
		{name: "group.max.session.timeout.ms", value: msString(orDefault(g.MaxSessionTimeout, groups.DefaultMaxSessionTimeout)), def: msString(groups.DefaultMaxSessionTimeout), typ: desired.ConfigTypeInt,
			doc: "The longest session timeout a group member may ask for (kaas-broker --group-max-session-timeout)."},
		{name: "group.max.size", value: strconv.Itoa(maxGroup), def: strconv.Itoa(groups.DefaultMaxGroupSize), typ: desired.ConfigTypeInt,
			doc: "The most members a group may have (kaas-broker --group-max-size)."},
		{name: "offsets.retention.minutes", value: strconv.FormatInt(int64(orDefault(g.OffsetsRetention, groups.DefaultOffsetsRetention)/time.Minute), 10),
			def: strconv.FormatInt(int64(groups.DefaultOffsetsRetention/time.Minute), 10), typ: desired.ConfigTypeInt,
			doc: "How long the committed offsets of an empty group are kept (kaas-broker --offsets-retention)."},
		{name: "offsets.retention.check.interval.ms", value: msString(orDefault(g.RetentionCheck, groups.DefaultRetentionCheck)), def: msString(groups.DefaultRetentionCheck), typ: desired.ConfigTypeLong,
			doc: "How often expired committed offsets are looked for (kaas-broker --offsets-retention-check-interval)."},
	}
	if cfg.RetentionCheckInterval > 0 { // New fills in the default
		out = append(out, brokerConfig{name: "log.retention.check.interval.ms", value: msString(cfg.RetentionCheckInterval), def: msString(DefaultRetentionCheckInterval), typ: desired.ConfigTypeLong,
			doc: "How often the partitions a broker serves are checked for segments that retention.ms or retention.bytes expire."})
	}
	out = append(out, e.cleanerConfigs()...)
	if cfg.ProducerIDExpiration > 0 {
		out = append(out, brokerConfig{name: "producer.id.expiration.ms", value: msString(cfg.ProducerIDExpiration), def: msString(24 * time.Hour), typ: desired.ConfigTypeInt,
			doc: "How long an idle producer's state is kept by a partition (kaas-broker --producer-id-expiration)."})
	}
	if cfg.Zone != "" {
		out = append(out, brokerConfig{name: "broker.rack", value: cfg.Zone, typ: desired.ConfigTypeString, always: true,
			doc: "The broker's zone, advertised as its rack (kaas-broker --zone)."})
	}
	// The broker-level defaults of the topic configs.
	for _, name := range desired.TopicConfigNames() {
		c, _ := desired.LookupTopicConfig(name)
		if c.Synonym == "" {
			continue
		}
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
func (e *Engine) BrokerConfigEntries() []desired.ConfigEntry {
	var out []desired.ConfigEntry
	for _, c := range e.brokerConfigs() {
		ce := desired.ConfigEntry{Name: c.name, Value: c.value, Source: desired.SourceDefault, ReadOnly: true, Type: c.typ, Doc: c.doc}
		if c.always || c.value != c.def {
			ce.Source = desired.SourceStaticBroker
			ce.Synonyms = append(ce.Synonyms, desired.ConfigSynonym{Name: c.name, Value: c.value, Source: desired.SourceStaticBroker})
		}
		if !c.always {
			ce.Synonyms = append(ce.Synonyms, desired.ConfigSynonym{Name: c.name, Value: c.def, Source: desired.SourceDefault})
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

// Package desiredtest holds the topics that frameworks create at start-up,
// with the exact partitions, replication factor and configs their sources
// ask for, and the check each makes of the configs DescribeConfigs reports.
// The wire tests and the specs create every one through CreateTopics
// (docs/topics.md, "Topics frameworks create").
package desiredtest

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// FrameworkTopic is one topic a framework creates when it starts.
type FrameworkTopic struct {
	Framework string // "Kafka Streams"
	Kind      string // what the topic is for: "key-value changelog"
	// Name is the framework's name for the topic with its defaults
	// ("connect-configs"), or an example of the pattern it follows.
	Name       string
	Partitions int32
	// Replication is the replication factor the framework asks for (-1:
	// the broker's default). kaas accepts any and reports 1.
	Replication int16
	// Configs are exactly the topic configs the framework sends.
	Configs map[string]string
	// Verify is the check the framework makes at start-up of the topic's
	// configs as DescribeConfigs describes them (every key, defaults
	// included); nil when it makes none.
	Verify func(described map[string]string) error
}

// Values the frameworks compute from their own settings, at the settings
// these topics are made with.
const (
	// streamsAdditionalRetention is Kafka Streams'
	// windowstore.changelog.additional.retention.ms default.
	streamsAdditionalRetention = 86400000
	// windowRetention is a window store's retention (one day).
	windowRetention = 86400000
	// historyRetention is a versioned store's history retention (one hour).
	historyRetention = 3600000
)

// FrameworkTopics are the topics of Kafka Streams (every kind of internal
// topic), Kafka Connect in distributed mode, MirrorMaker 2, Confluent
// Schema Registry, Karapace and goka, with the frameworks' default
// settings.
var FrameworkTopics = []FrameworkTopic{
	// Kafka Streams: every internal topic starts from
	// message.timestamp.type=CreateTime, then adds its kind's configs;
	// replication.factor defaults to -1.
	{"Kafka Streams", "key-value changelog", "app-counts-store-changelog", 4, -1,
		map[string]string{"cleanup.policy": "compact", "message.timestamp.type": "CreateTime"},
		streamsNoDelete},
	{"Kafka Streams", "versioned store changelog", "app-versioned-store-changelog", 4, -1,
		map[string]string{"cleanup.policy": "compact", "message.timestamp.type": "CreateTime",
			"min.compaction.lag.ms": strconv.Itoa(historyRetention + streamsAdditionalRetention)},
		streamsVersioned(historyRetention + streamsAdditionalRetention)},
	{"Kafka Streams", "window or session store changelog", "app-window-store-changelog", 4, -1,
		map[string]string{"cleanup.policy": "compact,delete", "message.timestamp.type": "CreateTime",
			"retention.ms": strconv.Itoa(windowRetention + streamsAdditionalRetention)},
		streamsWindowed(windowRetention + streamsAdditionalRetention)},
	{"Kafka Streams", "repartition topic", "app-KSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition", 4, -1,
		map[string]string{"cleanup.policy": "delete", "segment.bytes": "52428800", "retention.ms": "-1",
			"message.timestamp.type": "CreateTime"},
		streamsRepartition},
	// Kafka Connect, distributed: the worker's <kind>.storage.* topic
	// settings (none by default), then cleanup.policy=compact.
	{"Kafka Connect", "config storage", "connect-configs", 1, 3,
		map[string]string{"cleanup.policy": "compact"}, connectOnlyCompact},
	{"Kafka Connect", "offset storage", "connect-offsets", 25, 3,
		map[string]string{"cleanup.policy": "compact"}, connectOnlyCompact},
	{"Kafka Connect", "status storage", "connect-status", 5, 3,
		map[string]string{"cleanup.policy": "compact"}, connectOnlyCompact},
	// MirrorMaker 2: single-partition compacted topics.
	{"MirrorMaker 2", "offset syncs", "mm2-offset-syncs.source.internal", 1, 3,
		map[string]string{"cleanup.policy": "compact"}, nil},
	{"MirrorMaker 2", "heartbeats", "heartbeats", 1, 3,
		map[string]string{"cleanup.policy": "compact"}, nil},
	{"MirrorMaker 2", "checkpoints", "source.checkpoints.internal", 1, 3,
		map[string]string{"cleanup.policy": "compact"}, nil},
	// Confluent Schema Registry: replication min(live brokers, 3).
	{"Confluent Schema Registry", "schemas", "_schemas", 1, 1,
		map[string]string{"cleanup.policy": "compact"}, schemaRegistryCompact},
	{"Karapace", "schemas", "_schemas", 1, 1,
		map[string]string{"cleanup.policy": "compact"}, nil},
	// goka: replication 2 by default, which goka compares with the
	// replicas a topic reports; against kaas an application sets 1.
	{"goka", "group table", "counter-table", 10, 1,
		map[string]string{"cleanup.policy": "compact"}, gokaSame(map[string]string{"cleanup.policy": "compact"})},
	{"goka", "stream", "events", 10, 1,
		map[string]string{"cleanup.policy": "delete", "retention.ms": "3600000"},
		gokaSame(map[string]string{"cleanup.policy": "delete", "retention.ms": "3600000"})},
}

// described returns a described config, or an error naming it when
// DescribeConfigs left it out (Kafka Streams fails then).
func described(d map[string]string, key string) (string, error) {
	v, ok := d[key]
	if !ok {
		return "", fmt.Errorf("%s not described", key)
	}
	return v, nil
}

func describedLong(d map[string]string, key string) (int64, error) {
	v, err := described(d, key)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(v, 10, 64)
}

// streamsNoDelete is Kafka Streams' check of a key-value changelog: its
// cleanup.policy may not contain delete.
func streamsNoDelete(d map[string]string) error {
	p, err := described(d, "cleanup.policy")
	if err != nil {
		return err
	}
	if strings.Contains(p, "delete") {
		return fmt.Errorf(`cleanup.policy %q should not contain "delete"`, p)
	}
	return nil
}

// streamsVersioned is Kafka Streams' check of a versioned store's
// changelog: no delete, and min.compaction.lag.ms at least lag.
func streamsVersioned(lag int64) func(map[string]string) error {
	return func(d map[string]string) error {
		if err := streamsNoDelete(d); err != nil {
			return err
		}
		got, err := describedLong(d, "min.compaction.lag.ms")
		if err != nil {
			return err
		}
		if got < lag {
			return fmt.Errorf("min.compaction.lag.ms is %d but should be %d or larger", got, lag)
		}
		return nil
	}
}

// streamsWindowed is Kafka Streams' check of a window store's changelog:
// with delete in its policy, retention.ms at least retention and no
// retention.bytes limit.
func streamsWindowed(retention int64) func(map[string]string) error {
	return func(d map[string]string) error {
		p, err := described(d, "cleanup.policy")
		if err != nil || !strings.Contains(p, "delete") {
			return err
		}
		got, err := describedLong(d, "retention.ms")
		if err != nil {
			return err
		}
		if got < retention {
			return fmt.Errorf("retention.ms is %d but should be %d or larger", got, retention)
		}
		return noRetentionBytes(d)
	}
}

// streamsRepartition is Kafka Streams' check of a repartition topic: no
// compact, and with delete, retention.ms -1 and no retention.bytes limit.
func streamsRepartition(d map[string]string) error {
	p, err := described(d, "cleanup.policy")
	if err != nil {
		return err
	}
	switch {
	case strings.Contains(p, "compact"):
		return fmt.Errorf(`cleanup.policy %q should not contain "compact"`, p)
	case !strings.Contains(p, "delete"):
		return nil
	}
	if got, err := describedLong(d, "retention.ms"); err != nil || got != -1 {
		return fmt.Errorf("retention.ms is %d but should be -1 (%v)", got, err)
	}
	return noRetentionBytes(d)
}

func noRetentionBytes(d map[string]string) error {
	if got, err := describedLong(d, "retention.bytes"); err != nil || got != -1 {
		return fmt.Errorf("retention.bytes is %d but should be unset (%v)", got, err)
	}
	return nil
}

// connectOnlyCompact is Kafka Connect's check of its internal topics: the
// set of cleanup policies is exactly {compact}.
func connectOnlyCompact(d map[string]string) error {
	p, err := described(d, "cleanup.policy")
	if err != nil {
		return err
	}
	var set []string
	for _, it := range strings.Split(p, ",") {
		if it = strings.TrimSpace(strings.ToLower(it)); it != "" && !slices.Contains(set, it) {
			set = append(set, it)
		}
	}
	if !slices.Equal(set, []string{"compact"}) {
		return fmt.Errorf("cleanup.policy %q: Kafka Connect requires only compact", p)
	}
	return nil
}

// schemaRegistryCompact is Confluent Schema Registry's check of _schemas:
// cleanup.policy is the string compact.
func schemaRegistryCompact(d map[string]string) error {
	if p := d["cleanup.policy"]; p != "compact" {
		return fmt.Errorf("expected cleanup.policy to be 'compact' but it is %s", p)
	}
	return nil
}

// gokaSame is goka's check of an existing topic: each config it would
// create the topic with has that value.
func gokaSame(want map[string]string) func(map[string]string) error {
	return func(d map[string]string) error {
		for k, v := range want {
			if d[k] != v {
				return fmt.Errorf("%s is %q, want %q", k, d[k], v)
			}
		}
		return nil
	}
}

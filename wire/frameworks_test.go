package wire

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/engine/desired/desiredtest"
)

// TestFrameworkTopics: every topic Kafka Streams, Kafka Connect,
// MirrorMaker 2, Schema Registry, Karapace and goka create at start-up is
// created through CreateTopics exactly as they ask (partitions,
// replication factor, configs), answered with its configs, read back by
// DescribeConfigs as set on the topic, and passes the check its framework
// makes of the described configs.
func TestFrameworkTopics(t *testing.T) {
	b := startBroker(t, nil)
	c := b.dial(t)
	seen := map[string]bool{}
	for i, ft := range desiredtest.FrameworkTopics {
		name := ft.Name
		if seen[name] { // Schema Registry's and Karapace's _schemas
			name = fmt.Sprintf("%s-%d", name, i)
		}
		seen[name] = true
		t.Run(ft.Framework+"/"+ft.Kind, func(t *testing.T) {
			req := kmsg.NewPtrCreateTopicsRequest()
			req.Version, req.TimeoutMillis = 7, 15000
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, ft.Partitions, ft.Replication
			for k, v := range ft.Configs {
				cfg := kmsg.NewCreateTopicsRequestTopicConfig()
				cfg.Name, cfg.Value = k, strp(v)
				rt.Configs = append(rt.Configs, cfg)
			}
			req.Topics = append(req.Topics, rt)
			resp := c.do(req).(*kmsg.CreateTopicsResponse)
			if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
				t.Fatalf("create %s: %+v", name, resp.Topics)
			}
			st := resp.Topics[0]
			if st.NumPartitions != ft.Partitions || st.ReplicationFactor != 1 {
				t.Errorf("created with %d partitions, replication %d; want %d, 1", st.NumPartitions, st.ReplicationFactor, ft.Partitions)
			}
			answered := map[string]string{}
			for _, cfg := range st.Configs {
				answered[cfg.Name] = deref(cfg.Value)
			}
			got := c.describeOne(describeConfigsReq(4, kmsg.ConfigResourceTypeTopic, name, false, false))
			if got.ErrorCode != 0 {
				t.Fatalf("describe %s: %+v", name, got)
			}
			described := map[string]string{}
			for _, cfg := range got.Configs {
				described[cfg.Name] = deref(cfg.Value)
				if want, set := ft.Configs[cfg.Name]; set && (deref(cfg.Value) != want || cfg.Source != kmsg.ConfigSourceDynamicTopicConfig) {
					t.Errorf("%s described as %q from source %v, want %q set on the topic", cfg.Name, deref(cfg.Value), cfg.Source, want)
				}
			}
			for k, want := range ft.Configs {
				if answered[k] != want || described[k] != want {
					t.Errorf("%s: CreateTopics answered %q, DescribeConfigs %q; want %q", k, answered[k], described[k], want)
				}
			}
			if ft.Verify != nil {
				if err := ft.Verify(described); err != nil {
					t.Errorf("%s's check: %v", ft.Framework, err)
				}
			}
		})
	}
}

package wire

// CreateTopics: versions 2-7.
//
// Behavior:
// * Writes the topic's desired state (a new topic ID per incarnation); the
//   reconciler opens its partitions. The answer waits (up to the request's
//   timeout) until they are served, so a client can produce at once.
// * Partitions -1 means the broker default. Replication is the volume's
//   job: any replication factor (or -1) is accepted and reported as 1.
// * A manual replica assignment is a hint kaas ignores (it places
//   partitions itself): it gives the partition count, and is refused only
//   when malformed (INVALID_REPLICA_ASSIGNMENT: partitions not 0..n-1, an
//   empty or duplicated replica list, a negative broker ID), or sent with
//   NumPartitions or ReplicationFactor other than -1 (INVALID_REQUEST, as
//   Kafka). The answer reports replication factor 1.
// * Configs are validated; keys kaas does not know, and values it cannot
//   honour, get INVALID_CONFIG with a message.
// * ValidateOnly checks everything and writes nothing.
// * Authorization (Kafka's): CREATE on the cluster or on the topic, else
//   TOPIC_AUTHORIZATION_FAILED with a message. Without DESCRIBE_CONFIGS on
//   the topic the answer hides its configs, partitions and replication
//   factor (-1), with TOPIC_AUTHORIZATION_FAILED as the config error.
//
// Version notes:
// * v1: ErrorMessage; ValidateOnly
// * v5: flexible; NumPartitions, ReplicationFactor and Configs in the answer
// * v7: TopicID in the answer

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/engine"
	"github.com/kaas-dev/kaas/engine/desired"
)

func handleCreateTopics(c *conn, kreq kmsg.Request, r *reply) {
	req := kreq.(*kmsg.CreateTopicsRequest)
	c.async(r, func() {
		resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
		seen := map[string]int{}
		for _, t := range req.Topics {
			seen[t.Topic]++
		}
		// Checked one by one, then created together (engine.CreateTopics).
		type toCreate struct {
			i   int // in resp.Topics
			req engine.CreateTopicRequest
		}
		var todo []toCreate
		for _, t := range req.Topics {
			st := kmsg.NewCreateTopicsResponseTopic()
			st.Topic = t.Topic
			setErr := func(code int16, msg string) {
				st.ErrorCode = code
				st.ErrorMessage = &msg
			}
			switch {
			case seen[t.Topic] > 1:
				setErr(kerr.InvalidRequest.Code, "topic "+t.Topic+" appears more than once in the request")
			case !c.mayCreateTopic(t.Topic):
				setErr(kerr.TopicAuthorizationFailed.Code, topicDenied(kmsg.ACLOperationCreate, t.Topic))
			case len(t.ReplicaAssignment) > 0 && (t.NumPartitions != -1 || t.ReplicationFactor != -1):
				setErr(kerr.InvalidRequest.Code, "both numPartitions or replicationFactor and replicasAssignments were set: both cannot be used at the same time")
			case t.ReplicationFactor == 0 || t.ReplicationFactor < -1:
				setErr(kerr.InvalidReplicationFactor.Code, "replication factor must be -1 or at least 1")
			default:
				partitions := t.NumPartitions
				if len(t.ReplicaAssignment) > 0 {
					ps := make([]int32, len(t.ReplicaAssignment))
					for i, a := range t.ReplicaAssignment {
						ps[i] = a.Partition
					}
					n, msg := createTopicsAssignment(ps, func(i int) []int32 { return t.ReplicaAssignment[i].Replicas })
					if msg != "" {
						setErr(kerr.InvalidReplicaAssignment.Code, "topic "+t.Topic+": "+msg)
						break
					}
					partitions = n // the assignment itself is not used: kaas places partitions
				}
				configs := map[string]string{}
				for _, kv := range t.Configs {
					if kv.Value != nil {
						configs[kv.Name] = *kv.Value
					}
				}
				todo = append(todo, toCreate{i: len(resp.Topics),
					req: engine.CreateTopicRequest{Name: t.Topic, Partitions: partitions, Configs: configs, ValidateOnly: req.ValidateOnly}})
			}
			resp.Topics = append(resp.Topics, st)
		}
		reqs := make([]engine.CreateTopicRequest, len(todo))
		for k, td := range todo {
			reqs[k] = td.req
		}
		var created []string
		for k, res := range c.s.eng.CreateTopics(reqs) {
			st := &resp.Topics[todo[k].i]
			if err := res.Err; err != nil {
				msg := err.Error()
				if errors.Is(err, engine.ErrTopicExists) {
					msg = "topic '" + st.Topic + "' already exists"
				}
				st.ErrorCode = errorCode(err)
				st.ErrorMessage = &msg
				continue
			}
			spec := res.Spec
			st.NumPartitions = spec.Partitions
			st.ReplicationFactor = 1
			if id, err := uuid.Parse(spec.ID); err == nil && !req.ValidateOnly {
				st.TopicID = id
			}
			st.Configs = topicConfigEntries(spec)
			if !c.allowedTopic(kmsg.ACLOperationDescribeConfigs, st.Topic) {
				// Kafka hides what DESCRIBE_CONFIGS would show.
				st.Configs, st.NumPartitions, st.ReplicationFactor = nil, -1, -1
				st.ConfigErrorCode = kerr.TopicAuthorizationFailed.Code
			}
			if !req.ValidateOnly {
				created = append(created, spec.Name)
			}
		}
		if len(created) > 0 {
			timeout := time.Duration(req.TimeoutMillis) * time.Millisecond
			if timeout <= 0 {
				timeout = time.Second
			}
			ctx, cancel := context.WithTimeout(c.ctx, timeout)
			for _, name := range created {
				c.s.eng.WaitServing(ctx, name)
			}
			cancel()
		}
		r.finish(resp)
	})
}

func topicConfigEntries(spec desired.TopicSpec) []kmsg.CreateTopicsResponseTopicConfig {
	var out []kmsg.CreateTopicsResponseTopicConfig
	for _, ce := range desired.TopicConfigEntries(spec) { // sorted by name
		e := kmsg.NewCreateTopicsResponseTopicConfig()
		e.Name = ce.Name
		v := ce.Value
		e.Value = &v
		e.Source = int8(ce.Source) // DEFAULT_CONFIG, or DYNAMIC_TOPIC_CONFIG when set
		e.ReadOnly, e.IsSensitive = ce.ReadOnly, ce.Sensitive
		out = append(out, e)
	}
	return out
}

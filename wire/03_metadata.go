package wire

// Metadata: versions 0-12.
//
// Behavior:
// * Brokers are the live brokers seen in heartbeats (zone as rack). The
//   controller named is where the client should send controller requests:
//   for a client that names its zone (client.id containing kaas_az=<zone>)
//   a live broker in that zone, else the elected controller (-1 while none
//   is known). Any kaas broker serves controller requests, so a controller
//   without the client's listener is not named: the answering broker is.
// * Each partition's leader, sole replica and sole in-sync replica is its
//   assigned owner, with the assigned leader epoch. A partition whose owner
//   is not live or does not serve it yet (opening, recovering) has no
//   leader and LEADER_NOT_AVAILABLE, so clients retry.
// * __consumer_offsets is listed as an internal topic (all topics, or
//   named): its partitions are the coordinator shards, each led by the
//   shard's owner at the shard's leader epoch. It is never auto-created;
//   Produce and Fetch to it are INVALID_TOPIC_EXCEPTION.
// * A partition without a leader whose leader is on its way (a topic or
//   partition just created, possibly through another broker; an owner that
//   is live but not serving it yet as far as this broker has seen) is
//   waited for briefly (two heartbeat intervals), so that a client that
//   created a topic and asks any broker finds every leader. A topic this
//   broker does not route yet is looked up in the desired state.
// * Unknown topics are created with the defaults when the broker allows it
//   (--auto-create-topics) and the request does too; the answer waits
//   briefly for the new partitions to be served.
// * Authorization (Kafka's): a topic needs DESCRIBE. All-topics requests
//   leave the others out; a named one is TOPIC_AUTHORIZATION_FAILED (its
//   existence is not disclosed; by ID, the ID is answered). Auto-creation
//   needs CREATE on the cluster or the topic, else the topic is
//   TOPIC_AUTHORIZATION_FAILED. Authorized operations (KIP-430): the
//   topic's when IncludeTopicAuthorizedOperations, the cluster's when
//   IncludeClusterAuthorizedOperations (v8-10), else -2147483648.
//
// Version notes:
// * v1: a null topic list means all topics (v0: an empty list does)
// * v4: AllowAutoTopicCreation
// * v7: leader epochs (KIP-320)
// * v10: topic IDs; topics may be named by ID only

import (
	"context"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/engine"
	"github.com/kaas-dev/kaas/engine/desired"
)

func handleMetadata(c *conn, kreq kmsg.Request, r *reply) {
	req := kreq.(*kmsg.MetadataRequest)
	c.async(r, func() { r.finish(c.s.metadata(c.ctx, c, req, r.zone, c.listener)) })
}

func (s *Server) metadata(ctx context.Context, c *conn, req *kmsg.MetadataRequest, zone string, l *Listener) *kmsg.MetadataResponse {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	defer c.metadataAuthorizedOps(req, resp)
	brokers := l.brokers(s.eng)
	for _, bi := range brokers {
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = bi.ID, bi.Host, bi.Port
		rack := bi.Zone
		if bi.Self {
			rack = s.cfg.Rack
		}
		if rack != "" {
			b.Rack = &rack
		}
		resp.Brokers = append(resp.Brokers, b)
	}
	cid := s.eng.ClusterID()
	resp.ClusterID = &cid
	resp.ControllerID = l.controller(s.eng, zone, brokers)

	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if all {
		views := s.eng.Topics()
		var coming []string
		for _, v := range views {
			if s.eng.LeadersComing(v) {
				coming = append(coming, v.Spec.Name)
			}
		}
		if len(coming) > 0 {
			s.waitLeaders(ctx, coming)
			views = s.eng.Topics()
		}
		for _, v := range views {
			if !v.Spec.Deleted && c.allowedTopic(kmsg.ACLOperationDescribe, v.Spec.Name) {
				resp.Topics = append(resp.Topics, s.metadataTopic(v))
			}
		}
		if c.allowedTopic(kmsg.ACLOperationDescribe, engine.OffsetsTopic) {
			resp.Topics = append(resp.Topics, s.offsetsTopic())
		}
		return resp
	}
	allowAuto := req.Version < 4 || req.AllowAutoTopicCreation
	var created, coming []string
	var createDenied map[string]bool // DESCRIBE but not CREATE, to be auto-created
	for _, rt := range req.Topics {
		if rt.Topic == nil {
			// Named by ID (v10+).
			id := uuid.UUID(rt.TopicID).String()
			if v, ok := s.eng.TopicByID(id); ok && !v.Spec.Deleted {
				if !c.allowedTopic(kmsg.ACLOperationDescribe, v.Spec.Name) {
					// Topic IDs are not secret: Kafka answers the ID denied.
					t := kmsg.NewMetadataResponseTopic()
					t.TopicID = rt.TopicID
					t.ErrorCode = kerr.TopicAuthorizationFailed.Code
					resp.Topics = append(resp.Topics, t)
					continue
				}
				resp.Topics = append(resp.Topics, s.metadataTopic(v))
				continue
			}
			t := kmsg.NewMetadataResponseTopic()
			t.TopicID = rt.TopicID
			t.ErrorCode = kerr.UnknownTopicID.Code
			resp.Topics = append(resp.Topics, t)
			continue
		}
		name := *rt.Topic
		if name == engine.OffsetsTopic || !c.allowedTopic(kmsg.ACLOperationDescribe, name) {
			continue
		}
		if v, ok := s.eng.KnownTopic(name); ok {
			if s.eng.LeadersComing(v) {
				coming = append(coming, name)
			}
			continue
		}
		if err := desired.ValidTopicName(name); err != nil {
			continue
		}
		if allowAuto && s.eng.AutoCreateEnabled() {
			if !c.mayCreateTopic(name) {
				if createDenied == nil {
					createDenied = map[string]bool{}
				}
				createDenied[name] = true
				continue
			}
			if err := s.eng.AutoCreate(name); err == nil {
				created = append(created, name)
			} else {
				s.log.V(1).Info("auto-create failed", "topic", name, "err", err.Error())
			}
		}
	}
	if len(created) > 0 {
		wctx, cancel := context.WithTimeout(ctx, s.cfg.MetadataWait)
		for _, name := range created {
			s.eng.WaitServing(wctx, name)
		}
		cancel()
	}
	if len(coming) > 0 {
		s.waitLeaders(ctx, coming)
	}
	for _, rt := range req.Topics {
		if rt.Topic == nil {
			continue
		}
		name := *rt.Topic
		if !c.allowedTopic(kmsg.ACLOperationDescribe, name) || createDenied[name] {
			// Whether the topic exists is not disclosed.
			t := kmsg.NewMetadataResponseTopic()
			t.Topic = rt.Topic
			t.ErrorCode = kerr.TopicAuthorizationFailed.Code
			t.IsInternal = name == engine.OffsetsTopic
			resp.Topics = append(resp.Topics, t)
			continue
		}
		if name == engine.OffsetsTopic {
			resp.Topics = append(resp.Topics, s.offsetsTopic())
			continue
		}
		v, ok := s.eng.Topic(name)
		if ok && !v.Spec.Deleted {
			resp.Topics = append(resp.Topics, s.metadataTopic(v))
			continue
		}
		t := kmsg.NewMetadataResponseTopic()
		t.Topic = rt.Topic
		t.ErrorCode = kerr.UnknownTopicOrPartition.Code
		if err := desired.ValidTopicName(name); err != nil {
			t.ErrorCode = kerr.InvalidTopicException.Code
		} else if allowAuto && s.eng.AutoCreateEnabled() {
			t.ErrorCode = kerr.LeaderNotAvailable.Code // being created
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

func (s *Server) metadataTopic(v engine.TopicView) kmsg.MetadataResponseTopic {
	t := kmsg.NewMetadataResponseTopic()
	name := v.Spec.Name
	t.Topic = &name
	if id, err := uuid.Parse(v.Spec.ID); err == nil {
		t.TopicID = id
	}
	for i, epoch := range v.Epochs {
		p := kmsg.NewMetadataResponseTopicPartition()
		p.Partition = int32(i)
		leader := v.Leaders[i]
		if epoch < 0 || leader < 0 {
			p.ErrorCode = kerr.LeaderNotAvailable.Code
			p.Leader = -1
			p.LeaderEpoch = -1
			p.Replicas = []int32{}
			p.ISR = []int32{}
		} else {
			p.Leader = leader
			p.LeaderEpoch = epoch
			p.Replicas = []int32{leader}
			p.ISR = []int32{leader}
		}
		p.OfflineReplicas = []int32{}
		t.Partitions = append(t.Partitions, p)
	}
	return t
}

// waitLeaders waits briefly for the leaders on their way of the named
// topics (a topic created through another broker reaches this one's
// routing up to a heartbeat interval later).
func (s *Server) waitLeaders(ctx context.Context, names []string) {
	wctx, cancel := context.WithTimeout(ctx, min(s.eng.LeaderWait(), s.cfg.MetadataWait))
	defer cancel()
	s.eng.WaitLeaders(wctx, names)
}

// offsetsTopic is __consumer_offsets as Kafka lists it: internal, one
// partition per coordinator shard.
func (s *Server) offsetsTopic() kmsg.MetadataResponseTopic {
	t := s.metadataTopic(s.eng.OffsetsTopicView())
	t.IsInternal = true
	return t
}

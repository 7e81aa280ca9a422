package wire

// DeleteTopics: versions 1-6.
//
// Behavior:
// * Marks the topic incarnation deleted in its desired state; the
//   reconciler drives the topic-delete machine (partitions released,
//   directory renamed aside, trash removed, desired state forgotten).
// * The answer waits up to the request's timeout for the machine to end;
//   past it the answer is REQUEST_TIMED_OUT while the delete goes on.
// * Authorization (Kafka's): DELETE on the topic, checked before the topic
//   is looked up (TOPIC_AUTHORIZATION_FAILED, never UNKNOWN_TOPIC_OR_PARTITION
//   for a principal that may not delete it); a topic named by ID also
//   needs DESCRIBE, else its name is not answered.
//
// Version notes:
// * v4: flexible
// * v5: ErrorMessage
// * v6: topics may be named by ID; unknown IDs get UNKNOWN_TOPIC_ID

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleDeleteTopics(c *conn, kreq kmsg.Request, r *reply) {
	req := kreq.(*kmsg.DeleteTopicsRequest)
	c.async(r, func() {
		resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
		type target struct {
			name *string
			id   [16]byte
		}
		var targets []target
		if req.Version >= 6 {
			for _, t := range req.Topics {
				targets = append(targets, target{name: t.Topic, id: t.TopicID})
			}
		} else {
			for _, n := range req.TopicNames {
				n := n
				targets = append(targets, target{name: &n})
			}
		}
		timeout := time.Duration(req.TimeoutMillis) * time.Millisecond
		if timeout <= 0 {
			timeout = 30 * time.Second
		}
		ctx, cancel := context.WithTimeout(c.ctx, timeout)
		defer cancel()
		type waiting struct {
			idx      int
			name, id string
		}
		var waits []waiting
		for _, t := range targets {
			st := kmsg.NewDeleteTopicsResponseTopic()
			st.Topic, st.TopicID = t.name, t.id
			name := ""
			if t.name != nil {
				name = *t.name
			} else {
				v, ok := c.s.eng.TopicByID(uuid.UUID(t.id).String())
				if !ok {
					st.ErrorCode = kerr.UnknownTopicID.Code
					resp.Topics = append(resp.Topics, st)
					continue
				}
				name = v.Spec.Name
				if !c.allowedTopic(kmsg.ACLOperationDescribe, name) {
					// Named by ID: the name is not disclosed.
					st.ErrorCode = kerr.TopicAuthorizationFailed.Code
					st.ErrorMessage = errMessage(topicDeniedError(kmsg.ACLOperationDescribe, uuid.UUID(t.id).String()))
					resp.Topics = append(resp.Topics, st)
					continue
				}
				st.Topic = &name
			}
			if !c.allowedTopic(kmsg.ACLOperationDelete, name) {
				// Before the topic is looked up: whether it exists is not disclosed.
				st.ErrorCode = kerr.TopicAuthorizationFailed.Code
				st.ErrorMessage = errMessage(topicDeniedError(kmsg.ACLOperationDelete, name))
				resp.Topics = append(resp.Topics, st)
				continue
			}
			spec, err := c.s.eng.DeleteTopic(name)
			if err != nil {
				st.ErrorCode = errorCode(err)
				st.ErrorMessage = errMessage(err)
			} else {
				if id, err := uuid.Parse(spec.ID); err == nil {
					st.TopicID = id
				}
				waits = append(waits, waiting{idx: len(resp.Topics), name: spec.Name, id: spec.ID})
			}
			resp.Topics = append(resp.Topics, st)
		}
		for _, w := range waits {
			if !c.s.eng.WaitDeleted(ctx, w.name, w.id) {
				resp.Topics[w.idx].ErrorCode = kerr.RequestTimedOut.Code
				msg := "the topic is being deleted; the delete goes on in the background"
				resp.Topics[w.idx].ErrorMessage = &msg
			}
		}
		r.finish(resp)
	})
}

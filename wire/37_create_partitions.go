package wire

// CreatePartitions: versions 0-3.
//
// Behavior:
// * Raises a topic's partition count in its desired state (a new
//   generation); the controller assigns the new partitions like every
//   other, and their owners open them. The answer waits (up to the
//   request's timeout) until every partition is served, so a client can
//   produce to the new ones at once.
// * Partitions are only added: a count at or below the current one is
//   INVALID_PARTITIONS with Kafka's message; above 100000 too.
// * A manual assignment is a hint kaas ignores (it places partitions
//   itself); it must name one well-formed replica list per new partition,
//   else INVALID_REPLICA_ASSIGNMENT (as Kafka). A topic named twice is
//   INVALID_REQUEST; an unknown one UNKNOWN_TOPIC_OR_PARTITION.
// * ValidateOnly checks everything and writes nothing.
// * Authorization (Kafka's): ALTER on the topic, checked before the topic
//   is looked up, else TOPIC_AUTHORIZATION_FAILED with a message.
//
// Version notes:
// * v1: same as v0 (throttling after the answer)
// * v2: flexible

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleCreatePartitions(c *conn, kreq kmsg.Request, r *reply) {
	req := kreq.(*kmsg.CreatePartitionsRequest)
	c.async(r, func() {
		resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
		seen := map[string]int{}
		for _, t := range req.Topics {
			seen[t.Topic]++
		}
		var grown []string
		for _, t := range req.Topics {
			st := kmsg.NewCreatePartitionsResponseTopic()
			st.Topic = t.Topic
			setErr := func(code int16, msg string) {
				st.ErrorCode = code
				st.ErrorMessage = &msg
			}
			alterable := c.allowedTopic(kmsg.ACLOperationAlter, t.Topic)
			var malformed string
			if len(t.Assignment) > 0 && alterable {
				malformed = c.s.malformedNewAssignment(t)
			}
			switch {
			case seen[t.Topic] > 1:
				setErr(kerr.InvalidRequest.Code, "duplicate topic in request: "+t.Topic)
			case !alterable:
				setErr(kerr.TopicAuthorizationFailed.Code, topicDenied(kmsg.ACLOperationAlter, t.Topic))
			case malformed != "":
				setErr(kerr.InvalidReplicaAssignment.Code, malformed)
			default:
				spec, err := c.s.eng.CreatePartitions(t.Topic, t.Count, req.ValidateOnly)
				if err != nil {
					st.ErrorCode, st.ErrorMessage = errorCode(err), errMessage(err)
				} else if !req.ValidateOnly {
					grown = append(grown, spec.Name)
				}
			}
			resp.Topics = append(resp.Topics, st)
		}
		if len(grown) > 0 {
			timeout := time.Duration(req.TimeoutMillis) * time.Millisecond
			if timeout <= 0 {
				timeout = time.Second
			}
			ctx, cancel := context.WithTimeout(c.ctx, timeout)
			for _, name := range grown {
				c.s.eng.WaitServing(ctx, name)
			}
			cancel()
		}
		r.finish(resp)
	})
}

// malformedNewAssignment says why a CreatePartitions assignment is
// malformed ("" when it is not): one replica list per new partition, each
// well formed. The assignment itself is not used.
func (s *Server) malformedNewAssignment(t kmsg.CreatePartitionsRequestTopic) string {
	cur, ok := s.eng.TopicPartitions(t.Topic)
	if !ok || t.Count <= cur {
		return "" // the count's own check answers
	}
	if int64(len(t.Assignment)) != int64(t.Count)-int64(cur) {
		return fmt.Sprintf("increasing the number of partitions by %d but %d assignments provided", int64(t.Count)-int64(cur), len(t.Assignment))
	}
	for i, a := range t.Assignment {
		if msg := checkReplicaLists(fmt.Sprintf("partition %d", cur+int32(i)), a.Replicas); msg != "" {
			return msg
		}
	}
	return ""
}

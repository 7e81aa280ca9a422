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
// * Manual assignments are refused (INVALID_REPLICA_ASSIGNMENT): placement
//   is decided by kaas. A topic named twice is INVALID_REQUEST; an unknown
//   one UNKNOWN_TOPIC_OR_PARTITION.
// * ValidateOnly checks everything and writes nothing.
//
// Version notes:
// * v1: same as v0 (throttling after the answer)
// * v2: flexible

import (
	"context"
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
			switch {
			case seen[t.Topic] > 1:
				setErr(kerr.InvalidRequest.Code, "duplicate topic in request: "+t.Topic)
			case len(t.Assignment) > 0:
				setErr(kerr.InvalidReplicaAssignment.Code, "manual replica assignment is not supported: kaas places partitions itself")
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

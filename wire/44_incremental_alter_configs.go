package wire

// IncrementalAlterConfigs: versions 0-1.
//
// Behavior:
// * Topic resources: each config is SET (0), DELETEd back to its default
//   (1), or, for list-type configs only (cleanup.policy), has items
//   APPENDed (2) or SUBTRACTed (3), starting from the default when unset.
//   APPEND or SUBTRACT on another config is INVALID_CONFIG ("config value
//   append is not allowed for config key: ..."). The result is validated as
//   a whole: unknown keys, keys kaas does not honour and bad values are
//   INVALID_CONFIG with a message, and nothing changes. A key given twice,
//   an unknown operation or a null value to SET, APPEND or SUBTRACT is
//   INVALID_REQUEST. Unknown topics: UNKNOWN_TOPIC_OR_PARTITION; invalid
//   names: INVALID_TOPIC_EXCEPTION.
// * Broker resources: kaas brokers are configured by flags, so any change
//   is INVALID_REQUEST ("cannot update these configs dynamically"); an
//   empty list succeeds. Other resource types: INVALID_REQUEST.
// * Authorization (Kafka's): ALTER_CONFIGS on the topic
//   (TOPIC_AUTHORIZATION_FAILED), or on the cluster for a broker resource
//   (CLUSTER_AUTHORIZATION_FAILED), with a message.
// * A resource named twice is INVALID_REQUEST. ValidateOnly checks
//   everything and writes nothing.
//
// Version notes:
// * v1: flexible

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/engine"
)

func handleIncrementalAlterConfigs(c *conn, kreq kmsg.Request, r *reply) {
	req := kreq.(*kmsg.IncrementalAlterConfigsRequest)
	c.async(r, func() {
		resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
		seen := map[string]int{}
		for _, rr := range req.Resources {
			seen[resourceKey(rr.ResourceType, rr.ResourceName)]++
		}
		for _, rr := range req.Resources {
			sr := kmsg.NewIncrementalAlterConfigsResponseResource()
			sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
			keys := make([]string, 0, len(rr.Configs))
			for _, kv := range rr.Configs {
				keys = append(keys, kv.Name)
			}
			err := c.alterResourceCheck(rr.ResourceType, rr.ResourceName, keys, seen[resourceKey(rr.ResourceType, rr.ResourceName)] > 1)
			if err == nil {
				ops := make([]engine.ConfigOp, 0, len(rr.Configs))
				for _, kv := range rr.Configs {
					op := engine.ConfigOp{Name: kv.Name, Op: engine.ConfigOpType(kv.Op)}
					if kv.Op < 0 || kv.Op > 3 {
						err = &codedError{code: kerr.InvalidRequest.Code, err: fmt.Errorf("unknown operation %d for config %s (SET 0, DELETE 1, APPEND 2, SUBTRACT 3)", int8(kv.Op), kv.Name)}
						break
					}
					if kv.Value != nil {
						op.Value = *kv.Value
					} else if op.Op != engine.ConfigDelete {
						err = &codedError{code: kerr.InvalidRequest.Code, err: fmt.Errorf("null value not supported for: %s", kv.Name)}
						break
					}
					ops = append(ops, op)
				}
				if err == nil {
					_, err = c.s.eng.IncrementalAlterTopicConfigs(rr.ResourceName, ops, req.ValidateOnly)
				}
			}
			if err != nil && !errors.Is(err, errNothingToDo) {
				sr.ErrorCode, sr.ErrorMessage = errorCode(err), errMessage(err)
			}
			resp.Resources = append(resp.Resources, sr)
		}
		r.finish(resp)
	})
}

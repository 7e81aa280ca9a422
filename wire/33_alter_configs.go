package wire

// AlterConfigs: versions 0-2.
//
// Behavior:
// * Topic resources: the given configs replace all of the topic's configs
//   (keys left out go back to their defaults), written to the topic's
//   desired state; each partition's owner applies them to the open log.
//   Unknown keys, keys kaas does not honour and bad values are
//   INVALID_CONFIG with a message, and nothing changes. A null value or a
//   key given twice is INVALID_REQUEST. Unknown topics:
//   UNKNOWN_TOPIC_OR_PARTITION; invalid names: INVALID_TOPIC_EXCEPTION.
// * Broker resources: kaas brokers are configured by flags, so altering
//   any broker config is INVALID_REQUEST ("cannot update these configs
//   dynamically", as Kafka answers for static configs); an empty list
//   succeeds. Other resource types: INVALID_REQUEST.
// * Authorization (Kafka's): ALTER_CONFIGS on the topic
//   (TOPIC_AUTHORIZATION_FAILED), or on the cluster for a broker resource
//   (CLUSTER_AUTHORIZATION_FAILED), with a message.
// * A resource named twice is INVALID_REQUEST. ValidateOnly checks
//   everything and writes nothing.
//
// Version notes:
// * v1: same as v0 (throttling after the answer)
// * v2: flexible

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleAlterConfigs(c *conn, kreq kmsg.Request, r *reply) {
	req := kreq.(*kmsg.AlterConfigsRequest)
	c.async(r, func() {
		resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
		seen := map[string]int{}
		for _, rr := range req.Resources {
			seen[resourceKey(rr.ResourceType, rr.ResourceName)]++
		}
		for _, rr := range req.Resources {
			sr := kmsg.NewAlterConfigsResponseResource()
			sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
			keys := make([]string, 0, len(rr.Configs))
			for _, kv := range rr.Configs {
				keys = append(keys, kv.Name)
			}
			err := c.alterResourceCheck(rr.ResourceType, rr.ResourceName, keys, seen[resourceKey(rr.ResourceType, rr.ResourceName)] > 1)
			if err == nil {
				configs := map[string]string{}
				for _, kv := range rr.Configs {
					if kv.Value == nil {
						err = &codedError{code: kerr.InvalidRequest.Code, err: fmt.Errorf("null value not supported for: %s", kv.Name)}
						break
					}
					configs[kv.Name] = *kv.Value
				}
				if err == nil {
					_, err = c.s.eng.AlterTopicConfigs(rr.ResourceName, configs, req.ValidateOnly)
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

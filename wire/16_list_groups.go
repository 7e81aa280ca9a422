package wire

// ListGroups: versions 0-4.
//
// Behavior:
// * Each broker lists the groups of the coordinator shards it serves, as
//   Kafka's brokers do: admin clients ask every broker and merge.
// * With the authorizer on, a principal with DESCRIBE on the cluster sees
//   every group; any other only the groups it may DESCRIBE, as Kafka.
//
// Version notes:
// * v3: flexible; v4: StatesFilter (KIP-518), case-insensitive

import "github.com/twmb/franz-go/pkg/kmsg"

func handleListGroups(c *conn, kreq kmsg.Request, r *reply) {
	req := kreq.(*kmsg.ListGroupsRequest)
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	var states []string
	if req.Version >= 4 {
		states = req.StatesFilter
	}
	for _, coord := range c.s.eng.GroupCoordinators() {
		resp.Groups = append(resp.Groups, coord.ListGroups(states)...)
	}
	if !c.allowedCluster(kmsg.ACLOperationDescribe) {
		seen := resp.Groups[:0]
		for _, g := range resp.Groups {
			if c.allowedGroup(kmsg.ACLOperationDescribe, g.Group) {
				seen = append(seen, g)
			}
		}
		resp.Groups = seen
	}
	r.finish(resp)
}

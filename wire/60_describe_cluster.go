package wire

// DescribeCluster: versions 0-1.
//
// Behavior:
// * The live brokers seen in heartbeats (zone as rack), the cluster ID, and
//   the controller as Metadata names it (in the client's zone if it names
//   one).
// * Authorization, as Kafka's: any principal may describe the brokers;
//   IncludeClusterAuthorizedOperations answers the operations it may
//   perform on the cluster (KIP-430; none without DESCRIBE on it),
//   -2147483648 when not asked.
//
// Version notes:
// * v1: EndpointType; only brokers (1) are described, controllers (2) get
//   UNSUPPORTED_ENDPOINT_TYPE as in Kafka's brokers.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleDescribeCluster(c *conn, kreq kmsg.Request, r *reply) {
	req := kreq.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	if req.Version >= 1 && req.EndpointType != 1 {
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		msg := "only broker endpoints are described"
		resp.ErrorMessage = &msg
		r.finish(resp)
		return
	}
	resp.EndpointType = 1
	resp.ClusterAuthorizedOperations = notAskedOps
	if req.IncludeClusterAuthorizedOperations {
		resp.ClusterAuthorizedOperations = c.clusterAuthorizedOps()
	}
	resp.ClusterID = c.s.eng.ClusterID()
	brokers := c.listener.brokers(c.s.eng)
	resp.ControllerID = c.listener.controller(c.s.eng, r.zone, brokers)
	for _, bi := range brokers {
		b := kmsg.NewDescribeClusterResponseBroker()
		b.NodeID, b.Host, b.Port = bi.ID, bi.Host, bi.Port
		rack := bi.Zone
		if bi.Self {
			rack = c.s.cfg.Rack
		}
		if rack != "" {
			b.Rack = &rack
		}
		resp.Brokers = append(resp.Brokers, b)
	}
	r.finish(resp)
}

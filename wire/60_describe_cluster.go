package wire

// DescribeCluster: versions 0-1.
//
// Behavior:
// * This broker, its cluster ID, and itself as the controller.
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
	resp.ClusterID = c.s.eng.ClusterID()
	resp.ControllerID = c.s.eng.BrokerID()
	b := kmsg.NewDescribeClusterResponseBroker()
	b.NodeID, b.Host, b.Port = c.s.eng.BrokerID(), c.s.host, c.s.port
	if c.s.cfg.Rack != "" {
		rack := c.s.cfg.Rack
		b.Rack = &rack
	}
	resp.Brokers = append(resp.Brokers, b)
	r.finish(resp)
}

package wire

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Inter-broker-only APIs are those only a broker sends another:
// WriteTxnMarkers, and AddPartitionsToTxn v4+ (the batched and verify-only
// form of KIP-890; clients send v3 and below). Kafka authorizes them as
// CLUSTER_ACTION on the cluster. With the authorizer on, a broker
// principal (Config.BrokerPrincipals) or a principal with CLUSTER_ACTION
// on the cluster may send them; with it off, once this broker
// authenticates clients (Config.BrokerPrincipals is set), only a broker
// principal may. Any other is answered CLUSTER_AUTHORIZATION_FAILED and
// nothing is done; a broker without an authorizer that authenticates
// nobody serves them to anyone, as before.

// interBrokerOnly reports whether req is an inter-broker-only request.
func interBrokerOnly(req kmsg.Request) bool {
	switch kmsg.Key(req.Key()) {
	case kmsg.WriteTxnMarkers:
		return true
	case kmsg.AddPartitionsToTxn:
		return req.GetVersion() >= 4
	}
	return false
}

// anonymous is the principal of a connection that did not authenticate,
// as Kafka names it.
const anonymous = "User:ANONYMOUS"

// principalName is the connection's principal as Kafka writes it
// (User:<name>): the SASL user, the mapped certificate principal of an SSL
// client, or User:ANONYMOUS.
func (c *conn) principalName() string {
	name := c.principal
	if c.sasl != nil {
		name = c.sasl.Principal()
	}
	if name == "" {
		return anonymous
	}
	return "User:" + name
}

// interBrokerRefusal is the answer to req when it is inter-broker-only and
// the connection's principal may not send it; nil when req is served.
func (c *conn) interBrokerRefusal(req kmsg.Request) kmsg.Response {
	if !interBrokerOnly(req) || c.interBrokerAllowed() {
		return nil
	}
	p := c.principalName()
	reason := "not a broker's principal"
	if c.authzOn() {
		reason = "not a broker's principal, and " + clusterDenied(kmsg.ACLOperationClusterAction)
	}
	c.s.log.V(1).Info("refused an inter-broker request",
		"remote", c.nc.RemoteAddr().String(), "listener", c.listener.Name, "principal", p, "api", kmsg.NameForKey(req.Key()), "reason", reason)
	return clusterRefusal(req)
}

// clusterRefusal answers req with CLUSTER_AUTHORIZATION_FAILED where Kafka
// puts it: every partition of a WriteTxnMarkers (its response has no
// top-level error or message), the top-level code of an AddPartitionsToTxn
// v4+.
func clusterRefusal(req kmsg.Request) kmsg.Response {
	code := kerr.ClusterAuthorizationFailed.Code
	switch req := req.(type) {
	case *kmsg.WriteTxnMarkersRequest:
		resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
		for _, m := range req.Markers {
			rm := kmsg.NewWriteTxnMarkersResponseMarker()
			rm.ProducerID = m.ProducerID
			for _, t := range m.Topics {
				rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
					rp.Partition, rp.ErrorCode = p, code
					rt.Partitions = append(rt.Partitions, rp)
				}
				rm.Topics = append(rm.Topics, rt)
			}
			resp.Markers = append(resp.Markers, rm)
		}
		return resp
	case *kmsg.AddPartitionsToTxnRequest:
		resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
		resp.ErrorCode = code
		return resp
	}
	panic("clusterRefusal of a request that is not inter-broker-only")
}

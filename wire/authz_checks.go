package wire

import (
	"encoding/binary"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/engine/acl"
	"github.com/kaas-dev/kaas/volume/records"
)

// The checks the topic and cluster APIs make beyond one resource and
// operation, as Kafka's request handlers make them.

// topicDeniedError is TOPIC_AUTHORIZATION_FAILED for op on topic.
func topicDeniedError(op kmsg.ACLOperation, topic string) error {
	return &codedError{code: kerr.TopicAuthorizationFailed.Code, err: errors.New(topicDenied(op, topic))}
}

// clusterDeniedError is CLUSTER_AUTHORIZATION_FAILED for op.
func clusterDeniedError(op kmsg.ACLOperation) error {
	return &codedError{code: kerr.ClusterAuthorizationFailed.Code, err: errors.New(clusterDenied(op))}
}

// mayCreateTopic: Kafka lets CREATE on the cluster or on the topic
// create it (also by auto-creation).
func (c *conn) mayCreateTopic(topic string) bool {
	return c.allowedCluster(kmsg.ACLOperationCreate) || c.allowedTopic(kmsg.ACLOperationCreate, topic)
}

// allowedTxnRecords: a produce carrying transactional batches needs WRITE
// on its transactional ID (none is never authorized), as Kafka checks
// before anything else.
func (c *conn) allowedTxnRecords(req *kmsg.ProduceRequest) bool {
	if !hasTxnBatches(req) {
		return true
	}
	return req.TransactionID != nil && c.allowedTxn(kmsg.ACLOperationWrite, *req.TransactionID)
}

// hasTxnBatches reads the attributes of every batch in the request.
func hasTxnBatches(req *kmsg.ProduceRequest) bool {
	const attrAt, lenAt, headLen = 21, 8, 12 // RecordBatch v2 layout
	for ti := range req.Topics {
		for pi := range req.Topics[ti].Partitions {
			recs := req.Topics[ti].Partitions[pi].Records
			for len(recs) >= attrAt+2 {
				if binary.BigEndian.Uint16(recs[attrAt:])&records.AttrTransactional != 0 {
					return true
				}
				next := headLen + int(int32(binary.BigEndian.Uint32(recs[lenAt:])))
				if next <= headLen || next > len(recs) {
					break
				}
				recs = recs[next:]
			}
		}
	}
	return false
}

// txnDeniedProduceResponse answers every partition of a produce whose
// transactional ID is not authorized TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
// as Kafka fails the whole request.
func txnDeniedProduceResponse(req *kmsg.ProduceRequest, resp *kmsg.ProduceResponse) *kmsg.ProduceResponse {
	id := ""
	if req.TransactionID != nil {
		id = *req.TransactionID
	}
	msg := txnDenied(kmsg.ACLOperationWrite, id)
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(req.Topics))
	for ti, rt := range req.Topics {
		st := &resp.Topics[ti]
		*st = kmsg.NewProduceResponseTopic()
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		for pi, rp := range rt.Partitions {
			sp := &st.Partitions[pi]
			*sp = kmsg.NewProduceResponseTopicPartition()
			sp.Partition, sp.BaseOffset = rp.Partition, -1
			sp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
			if req.Version >= 8 {
				sp.ErrorMessage = &msg
			}
		}
	}
	return resp
}

// The operations KIP-430's authorized-operations fields report, per
// resource type, as Kafka's supported operations.
var (
	topicOps = []kmsg.ACLOperation{kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationCreate,
		kmsg.ACLOperationDescribe, kmsg.ACLOperationDelete, kmsg.ACLOperationAlter,
		kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs}
	clusterOps = []kmsg.ACLOperation{kmsg.ACLOperationCreate, kmsg.ACLOperationClusterAction,
		kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs, kmsg.ACLOperationIdempotentWrite,
		kmsg.ACLOperationAlter, kmsg.ACLOperationDescribe}
)

// notAskedOps is the authorized-operations value when none was asked for.
const notAskedOps = -2147483648

// authorizedOps is the bit field (1 << operation) of ops the connection
// may perform on the resource; every one of them without an authorizer.
func (c *conn) authorizedOps(ops []kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) int32 {
	ix := c.s.eng.Authorizer()
	var bits int32
	for _, op := range ops {
		if ix == nil || ix.Authorize(c.aclPrincipal(), c.aclHost(), op, rt, name) {
			bits |= 1 << op
		}
	}
	return bits
}

// metadataAuthorizedOps fills the authorized operations a Metadata
// request asks for.
func (c *conn) metadataAuthorizedOps(req *kmsg.MetadataRequest, resp *kmsg.MetadataResponse) {
	resp.AuthorizedOperations = notAskedOps
	if req.Version >= 8 && req.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = c.clusterAuthorizedOps()
	}
	for i := range resp.Topics {
		t := &resp.Topics[i]
		t.AuthorizedOperations = notAskedOps
		if req.IncludeTopicAuthorizedOperations && t.Topic != nil && t.ErrorCode != kerr.TopicAuthorizationFailed.Code {
			t.AuthorizedOperations = c.authorizedOps(topicOps, kmsg.ACLResourceTypeTopic, *t.Topic)
		}
	}
}

// clusterAuthorizedOps: as Kafka, none without DESCRIBE on the cluster.
func (c *conn) clusterAuthorizedOps() int32 {
	if !c.allowedCluster(kmsg.ACLOperationDescribe) {
		return 0
	}
	return c.authorizedOps(clusterOps, kmsg.ACLResourceTypeCluster, acl.ClusterName)
}

// configsAllowed checks op (DESCRIBE_CONFIGS or ALTER_CONFIGS) on a config
// resource as Kafka maps it: a topic's on the topic, a broker's or broker
// logger's on the cluster. Other types are refused by their handler.
func (c *conn) configsAllowed(op kmsg.ACLOperation, typ kmsg.ConfigResourceType, name string) error {
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		if !c.allowedTopic(op, name) {
			return topicDeniedError(op, name)
		}
	case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger:
		if !c.allowedCluster(op) {
			return clusterDeniedError(op)
		}
	}
	return nil
}

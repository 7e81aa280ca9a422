package wire

import (
	"testing"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestAuthzMetadata: an all-topics Metadata leaves out what the principal
// may not describe; authorized operations (KIP-430) are the principal's
// real rights when asked, -2147483648 when not.
func TestAuthzMetadata(t *testing.T) {
	b := startAuthzBroker(t, nil)
	admin := b.as(t, "admin")
	for _, name := range []string{"seen", "hidden"} {
		if resp := admin.do(createTopicsReq(7, false, name, 1, nil)).(*kmsg.CreateTopicsResponse); resp.Topics[0].ErrorCode != 0 {
			t.Fatalf("create %s: %d", name, resp.Topics[0].ErrorCode)
		}
	}
	b.allow(t, "User:alice", kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypeLiteral, "seen", kmsg.ACLOperationRead, kmsg.ACLOperationDescribeConfigs)
	b.allow(t, "User:alice", kmsg.ACLResourceTypeCluster, kmsg.ACLResourcePatternTypeLiteral, "kafka-cluster", kmsg.ACLOperationDescribe, kmsg.ACLOperationCreate)
	alice := b.as(t, "alice")

	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(10)
	req.IncludeTopicAuthorizedOperations, req.IncludeClusterAuthorizedOperations = true, true
	resp := alice.do(req).(*kmsg.MetadataResponse)
	if len(resp.Topics) != 1 || *resp.Topics[0].Topic != "seen" {
		t.Fatalf("all topics as alice: %+v, want seen only", resp.Topics)
	}
	wantTopic := int32(1<<kmsg.ACLOperationRead | 1<<kmsg.ACLOperationDescribe | 1<<kmsg.ACLOperationDescribeConfigs)
	if got := resp.Topics[0].AuthorizedOperations; got != wantTopic {
		t.Errorf("topic authorized operations %b, want %b", got, wantTopic)
	}
	wantCluster := int32(1<<kmsg.ACLOperationDescribe | 1<<kmsg.ACLOperationCreate)
	if resp.AuthorizedOperations != wantCluster {
		t.Errorf("cluster authorized operations %b, want %b", resp.AuthorizedOperations, wantCluster)
	}

	req.IncludeTopicAuthorizedOperations, req.IncludeClusterAuthorizedOperations = false, false
	resp = alice.do(req).(*kmsg.MetadataResponse)
	if resp.AuthorizedOperations != notAskedOps || resp.Topics[0].AuthorizedOperations != notAskedOps {
		t.Errorf("not asked: cluster %d, topic %d", resp.AuthorizedOperations, resp.Topics[0].AuthorizedOperations)
	}

	// Named: the hidden topic is denied, and so is one that does not exist.
	for _, name := range []string{"hidden", "absent"} {
		if got := metadataOf(alice, name, false); got.ErrorCode != kerr.TopicAuthorizationFailed.Code || len(got.Partitions) != 0 {
			t.Errorf("metadata of %s: %d %+v", name, got.ErrorCode, got.Partitions)
		}
	}
	// DESCRIBE without CREATE, auto-creation off for the request: unknown.
	b.allow(t, "User:bob", kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypeLiteral, "absent", kmsg.ACLOperationDescribe)
	bob := b.as(t, "bob")
	if got := metadataOf(bob, "absent", false); got.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("absent, no auto-create: %d", got.ErrorCode)
	}
	if got := metadataOf(bob, "absent", true); got.ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("absent, auto-create without CREATE: %d", got.ErrorCode)
	}
	if _, ok := b.eng.Topic("absent"); ok {
		t.Errorf("absent was created")
	}

	dc := kmsg.NewPtrDescribeClusterRequest()
	dc.IncludeClusterAuthorizedOperations = true
	if got := alice.do(dc).(*kmsg.DescribeClusterResponse); got.ErrorCode != 0 || got.ClusterAuthorizedOperations != wantCluster {
		t.Errorf("DescribeCluster as alice: %d, operations %b", got.ErrorCode, got.ClusterAuthorizedOperations)
	}
	if got := bob.do(dc).(*kmsg.DescribeClusterResponse); got.ErrorCode != 0 || got.ClusterAuthorizedOperations != 0 {
		t.Errorf("DescribeCluster as bob: %d, operations %b", got.ErrorCode, got.ClusterAuthorizedOperations)
	}
}

// TestAuthzCreateTopicsHidesConfigs: CREATE without DESCRIBE_CONFIGS
// creates the topic but answers no configs.
func TestAuthzCreateTopicsHidesConfigs(t *testing.T) {
	b := startAuthzBroker(t, nil)
	b.allow(t, "User:alice", kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypePrefixed, "made", kmsg.ACLOperationCreate)
	b.allow(t, "User:alice", kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypeLiteral, "made-shown", kmsg.ACLOperationDescribeConfigs)
	alice := b.as(t, "alice")
	for _, tc := range []struct {
		name  string
		shown bool
	}{{"made-hidden", false}, {"made-shown", true}} {
		st := alice.do(createTopicsReq(7, false, tc.name, 1, nil)).(*kmsg.CreateTopicsResponse).Topics[0]
		if st.ErrorCode != 0 {
			t.Fatalf("create %s: %d", tc.name, st.ErrorCode)
		}
		if tc.shown != (len(st.Configs) > 0 && st.ConfigErrorCode == 0 && st.NumPartitions == 1) {
			t.Errorf("%s: configs %d, config error %d, partitions %d", tc.name, len(st.Configs), st.ConfigErrorCode, st.NumPartitions)
		}
		if !tc.shown && st.ConfigErrorCode != kerr.TopicAuthorizationFailed.Code {
			t.Errorf("%s: config error %d", tc.name, st.ConfigErrorCode)
		}
	}
}

// TestAuthzDeleteTopicByID: DELETE without DESCRIBE on a topic named by
// ID is TOPIC_AUTHORIZATION_FAILED without its name.
func TestAuthzDeleteTopicByID(t *testing.T) {
	b := startAuthzBroker(t, nil)
	admin := b.as(t, "admin")
	st := admin.do(createTopicsReq(7, false, "byid", 1, nil)).(*kmsg.CreateTopicsResponse).Topics[0]
	if st.ErrorCode != 0 {
		t.Fatalf("create: %d", st.ErrorCode)
	}
	b.deny(t, "User:alice", kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypeLiteral, "byid", kmsg.ACLOperationDescribe)
	b.allow(t, "User:alice", kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypeLiteral, "byid", kmsg.ACLOperationDelete)
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.SetVersion(6)
	req.TimeoutMillis = 15000
	dt := kmsg.NewDeleteTopicsRequestTopic()
	dt.TopicID = st.TopicID
	req.Topics = append(req.Topics, dt)
	got := b.as(t, "alice").do(req).(*kmsg.DeleteTopicsResponse).Topics[0]
	if got.ErrorCode != kerr.TopicAuthorizationFailed.Code || got.Topic != nil || uuid.UUID(got.TopicID) != uuid.UUID(st.TopicID) {
		t.Fatalf("delete by ID: %d, name %v", got.ErrorCode, got.Topic)
	}
	if _, ok := b.eng.Topic("byid"); !ok {
		t.Fatalf("byid was deleted")
	}
}

package wire

import (
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/engine/acl"
)

// anyButDenied, as a case's allowed code, accepts any answer but the
// authorization failure (the request got past the check and was answered
// on its own merits).
const anyButDenied = int16(-999)

// authzScenario is one way a principal comes to its right, or not.
type authzScenario struct {
	name  string
	user  string
	grant func(t *testing.T, b *authzBroker, rt kmsg.ACLResourceType, name string, op kmsg.ACLOperation)
	allow bool
}

var authzScenarios = []authzScenario{
	{"allowed", "alice", func(t *testing.T, b *authzBroker, rt kmsg.ACLResourceType, name string, op kmsg.ACLOperation) {
		b.allow(t, "User:alice", rt, kmsg.ACLResourcePatternTypeLiteral, name, op)
	}, true},
	{"no ACL", "alice", func(*testing.T, *authzBroker, kmsg.ACLResourceType, string, kmsg.ACLOperation) {}, false},
	{"DENY over ALLOW", "alice", func(t *testing.T, b *authzBroker, rt kmsg.ACLResourceType, name string, op kmsg.ACLOperation) {
		b.allow(t, "User:alice", rt, kmsg.ACLResourcePatternTypeLiteral, name, op)
		b.deny(t, "User:*", rt, kmsg.ACLResourcePatternTypeLiteral, name, op)
	}, false},
	{"super user", "admin", func(*testing.T, *authzBroker, kmsg.ACLResourceType, string, kmsg.ACLOperation) {}, true},
	{"prefixed", "alice", func(t *testing.T, b *authzBroker, rt kmsg.ACLResourceType, name string, op kmsg.ACLOperation) {
		b.allow(t, "User:alice", rt, kmsg.ACLResourcePatternTypePrefixed, name[:len(name)-2], op)
	}, true},
}

// authzCase is one API's check of one resource.
type authzCase struct {
	api string
	rt  kmsg.ACLResourceType
	op  kmsg.ACLOperation
	// resource names the resource checked in a scenario (a fresh topic
	// for the APIs that consume one).
	resource func(scenario int) string
	// extra are rights the principal has besides the one checked.
	extra   func(t *testing.T, b *authzBroker, resource string)
	probe   func(t *testing.T, c *rawConn, resource string) int16
	allowed int16
	denied  int16
}

func fixed(name string) func(int) string { return func(int) string { return name } }

func perScenario(prefix string) func(int) string {
	return func(i int) string { return prefix + "-" + string(rune('a'+i)) + "00" }
}

// TestAuthzMatrix: every topic and cluster API, for each resource it
// checks, in every scenario, answers the exact code Kafka does.
func TestAuthzMatrix(t *testing.T) {
	b := startAuthzBroker(t, nil)
	admin := b.as(t, "admin")
	for _, name := range []string{"mx-t00", perScenario("del")(0), perScenario("del")(1), perScenario("del")(2),
		perScenario("del")(3), perScenario("del")(4)} {
		if resp := admin.do(createTopicsReq(7, false, name, 1, nil)).(*kmsg.CreateTopicsResponse); resp.Topics[0].ErrorCode != 0 {
			t.Fatalf("create %s: %d", name, resp.Topics[0].ErrorCode)
		}
	}
	const (
		topic   = kmsg.ACLResourceTypeTopic
		cluster = kmsg.ACLResourceTypeCluster
		txnID   = kmsg.ACLResourceTypeTransactionalId
	)
	topicAuth, clusterAuth := kerr.TopicAuthorizationFailed.Code, kerr.ClusterAuthorizationFailed.Code
	writeMx := func(t *testing.T, b *authzBroker, _ string) {
		b.allow(t, "User:alice", topic, kmsg.ACLResourcePatternTypeLiteral, "mx-t00", kmsg.ACLOperationWrite)
	}
	describeIt := func(t *testing.T, b *authzBroker, name string) {
		b.allow(t, "User:alice", topic, kmsg.ACLResourcePatternTypeLiteral, name, kmsg.ACLOperationDescribe)
	}
	cases := []authzCase{
		{api: "Produce", rt: topic, op: kmsg.ACLOperationWrite, resource: fixed("mx-t00"),
			probe: func(t *testing.T, c *rawConn, name string) int16 {
				return c.produce(9, name, makeBatch(batchOpts{})).ErrorCode
			}, allowed: 0, denied: topicAuth},
		{api: "Produce transactional", rt: txnID, op: kmsg.ACLOperationWrite, resource: fixed("tx-00"), extra: writeMx,
			probe: func(t *testing.T, c *rawConn, name string) int16 {
				req := produceReq(9, -1, "mx-t00", 0, makeBatch(batchOpts{pid: 7, epoch: 0, seq: 0, attrs: 0x10}))
				req.TransactionID = &name
				return c.do(req).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
			}, allowed: anyButDenied, denied: kerr.TransactionalIDAuthorizationFailed.Code},
		{api: "Fetch", rt: topic, op: kmsg.ACLOperationRead, resource: fixed("mx-t00"),
			probe: func(t *testing.T, c *rawConn, name string) int16 {
				return c.fetch(fetchReq(12, name, 0, -1, 0, 0)).ErrorCode
			}, allowed: 0, denied: topicAuth},
		{api: "ListOffsets", rt: topic, op: kmsg.ACLOperationDescribe, resource: fixed("mx-t00"),
			probe: func(t *testing.T, c *rawConn, name string) int16 {
				req := kmsg.NewPtrListOffsetsRequest()
				req.SetVersion(7)
				rt := kmsg.NewListOffsetsRequestTopic()
				rt.Topic = name
				rp := kmsg.NewListOffsetsRequestTopicPartition()
				rp.Timestamp = -1
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				return c.do(req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode
			}, allowed: 0, denied: topicAuth},
		{api: "OffsetForLeaderEpoch", rt: topic, op: kmsg.ACLOperationDescribe, resource: fixed("mx-t00"),
			probe: func(t *testing.T, c *rawConn, name string) int16 {
				req := kmsg.NewPtrOffsetForLeaderEpochRequest()
				req.SetVersion(4)
				req.ReplicaID = -1
				rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
				rt.Topic = name
				rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
				rp.CurrentLeaderEpoch, rp.LeaderEpoch = -1, 0
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				return c.do(req).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0].ErrorCode
			}, allowed: 0, denied: topicAuth},
		{api: "Metadata", rt: topic, op: kmsg.ACLOperationDescribe, resource: fixed("mx-t00"),
			probe: func(t *testing.T, c *rawConn, name string) int16 {
				return metadataOf(c, name, false).ErrorCode
			}, allowed: 0, denied: topicAuth},
		{api: "Metadata auto-create", rt: topic, op: kmsg.ACLOperationCreate, resource: perScenario("auto"), extra: describeIt,
			probe: func(t *testing.T, c *rawConn, name string) int16 {
				return metadataOf(c, name, true).ErrorCode
			}, allowed: anyButDenied, denied: topicAuth},
		{api: "CreateTopics", rt: topic, op: kmsg.ACLOperationCreate, resource: fixed("new-t00"),
			probe: func(t *testing.T, c *rawConn, name string) int16 {
				return c.do(createTopicsReq(7, true, name, 1, nil)).(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode
			}, allowed: 0, denied: topicAuth},
		{api: "CreateTopics by cluster", rt: cluster, op: kmsg.ACLOperationCreate, resource: fixed(acl.ClusterName),
			probe: func(t *testing.T, c *rawConn, _ string) int16 {
				return c.do(createTopicsReq(7, true, "new-t00", 1, nil)).(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode
			}, allowed: 0, denied: topicAuth},
		{api: "DeleteTopics", rt: topic, op: kmsg.ACLOperationDelete, resource: perScenario("del"),
			probe: func(t *testing.T, c *rawConn, name string) int16 {
				req := kmsg.NewPtrDeleteTopicsRequest()
				req.SetVersion(6)
				req.TimeoutMillis = 15000
				dt := kmsg.NewDeleteTopicsRequestTopic()
				dt.Topic = &name
				req.Topics = append(req.Topics, dt)
				return c.do(req).(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode
			}, allowed: 0, denied: topicAuth},
		{api: "DeleteTopics unknown", rt: topic, op: kmsg.ACLOperationDelete, resource: fixed("none-t00"),
			probe: func(t *testing.T, c *rawConn, name string) int16 {
				req := kmsg.NewPtrDeleteTopicsRequest()
				req.SetVersion(5)
				req.TimeoutMillis = 15000
				req.TopicNames = []string{name}
				return c.do(req).(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode
			}, allowed: kerr.UnknownTopicOrPartition.Code, denied: topicAuth},
		{api: "DeleteRecords", rt: topic, op: kmsg.ACLOperationDelete, resource: fixed("mx-t00"),
			probe: func(t *testing.T, c *rawConn, name string) int16 {
				req := kmsg.NewPtrDeleteRecordsRequest()
				req.SetVersion(2)
				req.TimeoutMillis = 15000
				rt := kmsg.NewDeleteRecordsRequestTopic()
				rt.Topic = name
				rp := kmsg.NewDeleteRecordsRequestTopicPartition()
				rp.Offset = 0
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				return c.do(req).(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0].ErrorCode
			}, allowed: 0, denied: topicAuth},
		{api: "CreatePartitions", rt: topic, op: kmsg.ACLOperationAlter, resource: fixed("mx-t00"),
			probe: func(t *testing.T, c *rawConn, name string) int16 {
				req := kmsg.NewPtrCreatePartitionsRequest()
				req.SetVersion(3)
				req.ValidateOnly, req.TimeoutMillis = true, 15000
				ct := kmsg.NewCreatePartitionsRequestTopic()
				ct.Topic, ct.Count = name, 2
				req.Topics = append(req.Topics, ct)
				return c.do(req).(*kmsg.CreatePartitionsResponse).Topics[0].ErrorCode
			}, allowed: 0, denied: topicAuth},
		{api: "DescribeConfigs topic", rt: topic, op: kmsg.ACLOperationDescribeConfigs, resource: fixed("mx-t00"),
			probe: func(t *testing.T, c *rawConn, name string) int16 {
				return describeConfigsOf(c, kmsg.ConfigResourceTypeTopic, name)
			}, allowed: 0, denied: topicAuth},
		{api: "DescribeConfigs broker", rt: cluster, op: kmsg.ACLOperationDescribeConfigs, resource: fixed(acl.ClusterName),
			probe: func(t *testing.T, c *rawConn, _ string) int16 {
				return describeConfigsOf(c, kmsg.ConfigResourceTypeBroker, "")
			}, allowed: 0, denied: clusterAuth},
		{api: "AlterConfigs topic", rt: topic, op: kmsg.ACLOperationAlterConfigs, resource: fixed("mx-t00"),
			probe: func(t *testing.T, c *rawConn, name string) int16 {
				return alterConfigsOf(c, kmsg.ConfigResourceTypeTopic, name)
			}, allowed: 0, denied: topicAuth},
		{api: "AlterConfigs broker", rt: cluster, op: kmsg.ACLOperationAlterConfigs, resource: fixed(acl.ClusterName),
			probe: func(t *testing.T, c *rawConn, _ string) int16 {
				return alterConfigsOf(c, kmsg.ConfigResourceTypeBroker, "")
			}, allowed: 0, denied: clusterAuth},
		{api: "IncrementalAlterConfigs topic", rt: topic, op: kmsg.ACLOperationAlterConfigs, resource: fixed("mx-t00"),
			probe: func(t *testing.T, c *rawConn, name string) int16 {
				return incrementalAlterOf(c, kmsg.ConfigResourceTypeTopic, name)
			}, allowed: 0, denied: topicAuth},
		{api: "IncrementalAlterConfigs broker", rt: cluster, op: kmsg.ACLOperationAlterConfigs, resource: fixed(acl.ClusterName),
			probe: func(t *testing.T, c *rawConn, _ string) int16 {
				return incrementalAlterOf(c, kmsg.ConfigResourceTypeBroker, "")
			}, allowed: 0, denied: clusterAuth},
		{api: "DescribeUserScramCredentials", rt: cluster, op: kmsg.ACLOperationDescribe, resource: fixed(acl.ClusterName),
			probe: func(t *testing.T, c *rawConn, _ string) int16 {
				return c.do(kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()).(*kmsg.DescribeUserSCRAMCredentialsResponse).ErrorCode
			}, allowed: 0, denied: clusterAuth},
		{api: "AlterUserScramCredentials", rt: cluster, op: kmsg.ACLOperationAlter, resource: fixed(acl.ClusterName),
			probe: func(t *testing.T, c *rawConn, _ string) int16 {
				req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
				d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
				d.Name, d.Mechanism = "nobody", 1
				req.Deletions = append(req.Deletions, d)
				return c.do(req).(*kmsg.AlterUserSCRAMCredentialsResponse).Results[0].ErrorCode
			}, allowed: kerr.ResourceNotFound.Code, denied: clusterAuth},
		{api: "DescribeProducers", rt: topic, op: kmsg.ACLOperationRead, resource: fixed("mx-t00"),
			probe: func(t *testing.T, c *rawConn, name string) int16 {
				req := kmsg.NewPtrDescribeProducersRequest()
				dt := kmsg.NewDescribeProducersRequestTopic()
				dt.Topic, dt.Partitions = name, []int32{0}
				req.Topics = append(req.Topics, dt)
				return c.do(req).(*kmsg.DescribeProducersResponse).Topics[0].Partitions[0].ErrorCode
			}, allowed: 0, denied: topicAuth},
		{api: "DescribeLogDirs", rt: cluster, op: kmsg.ACLOperationDescribe, resource: fixed(acl.ClusterName),
			probe: func(t *testing.T, c *rawConn, _ string) int16 {
				return c.do(describeLogDirsReq(4, nil)).(*kmsg.DescribeLogDirsResponse).ErrorCode
			}, allowed: 0, denied: clusterAuth},
		{api: "DescribeAcls", rt: cluster, op: kmsg.ACLOperationDescribe, resource: fixed(acl.ClusterName),
			probe: func(t *testing.T, c *rawConn, _ string) int16 {
				return c.do(describeAnyACLs(3)).(*kmsg.DescribeACLsResponse).ErrorCode
			}, allowed: 0, denied: clusterAuth},
		{api: "CreateAcls", rt: cluster, op: kmsg.ACLOperationAlter, resource: fixed(acl.ClusterName),
			probe: func(t *testing.T, c *rawConn, _ string) int16 {
				req := kmsg.NewPtrCreateACLsRequest()
				req.Creations = []kmsg.CreateACLsRequestCreation{aclCreation(topic, "x", kmsg.ACLResourcePatternTypeLiteral,
					"User:carol", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow)}
				return c.do(req).(*kmsg.CreateACLsResponse).Results[0].ErrorCode
			}, allowed: 0, denied: clusterAuth},
		{api: "DeleteAcls", rt: cluster, op: kmsg.ACLOperationAlter, resource: fixed(acl.ClusterName),
			probe: func(t *testing.T, c *rawConn, _ string) int16 {
				req := kmsg.NewPtrDeleteACLsRequest()
				f := anyACLFilter()
				p := "User:nobody"
				f.Principal = &p
				req.Filters = []kmsg.DeleteACLsRequestFilter{f}
				return c.do(req).(*kmsg.DeleteACLsResponse).Results[0].ErrorCode
			}, allowed: 0, denied: clusterAuth},
	}
	for _, tc := range cases {
		for i, sc := range authzScenarios {
			t.Run(tc.api+"/"+sc.name, func(t *testing.T) {
				resetACLs(t, b)
				name := tc.resource(i)
				sc.grant(t, b, tc.rt, name, tc.op)
				if tc.extra != nil {
					tc.extra(t, b, name)
				}
				got := tc.probe(t, b.as(t, sc.user), name)
				switch {
				case !sc.allow && got != tc.denied:
					t.Errorf("%s as %s: code %d, want %d", name, sc.user, got, tc.denied)
				case sc.allow && tc.allowed == anyButDenied && got == tc.denied:
					t.Errorf("%s as %s: code %d, want anything else", name, sc.user, got)
				case sc.allow && tc.allowed != anyButDenied && got != tc.allowed:
					t.Errorf("%s as %s: code %d, want %d", name, sc.user, got, tc.allowed)
				}
			})
		}
	}
}

// resetACLs removes every stored ACL.
func resetACLs(t *testing.T, b *authzBroker) {
	t.Helper()
	all := acl.Filter{ResourceType: kmsg.ACLResourceTypeAny, PatternType: kmsg.ACLResourcePatternTypeAny,
		Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}
	if _, err := b.eng.DeleteACLs(context.Background(), []acl.Filter{all}); err != nil {
		t.Fatalf("DeleteACLs: %v", err)
	}
}

func metadataOf(c *rawConn, name string, autoCreate bool) kmsg.MetadataResponseTopic {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = &name
	req.Topics = append(req.Topics, rt)
	req.AllowAutoTopicCreation = autoCreate
	resp := c.do(req).(*kmsg.MetadataResponse)
	for _, t := range resp.Topics {
		if t.Topic != nil && *t.Topic == name {
			return t
		}
	}
	c.t.Fatalf("metadata of %s: %+v", name, resp.Topics)
	return kmsg.MetadataResponseTopic{}
}

func describeConfigsOf(c *rawConn, typ kmsg.ConfigResourceType, name string) int16 {
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.SetVersion(4)
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = typ, name
	req.Resources = append(req.Resources, rr)
	res := c.do(req).(*kmsg.DescribeConfigsResponse).Resources[0]
	if res.ErrorCode != 0 && (res.ErrorMessage == nil || !strings.Contains(*res.ErrorMessage, "not authorized")) &&
		(res.ErrorCode == kerr.TopicAuthorizationFailed.Code || res.ErrorCode == kerr.ClusterAuthorizationFailed.Code) {
		c.t.Errorf("authorization failure without its message: %v", res.ErrorMessage)
	}
	return res.ErrorCode
}

func alterConfigsOf(c *rawConn, typ kmsg.ConfigResourceType, name string) int16 {
	req := kmsg.NewPtrAlterConfigsRequest()
	req.SetVersion(2)
	req.ValidateOnly = true
	rr := kmsg.NewAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = typ, name
	if typ == kmsg.ConfigResourceTypeTopic {
		v := "1000"
		cfg := kmsg.NewAlterConfigsRequestResourceConfig()
		cfg.Name, cfg.Value = "retention.ms", &v
		rr.Configs = append(rr.Configs, cfg)
	}
	req.Resources = append(req.Resources, rr)
	return c.do(req).(*kmsg.AlterConfigsResponse).Resources[0].ErrorCode
}

func incrementalAlterOf(c *rawConn, typ kmsg.ConfigResourceType, name string) int16 {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.SetVersion(1)
	req.ValidateOnly = true
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = typ, name
	if typ == kmsg.ConfigResourceTypeTopic {
		v := "1000"
		cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		cfg.Name, cfg.Value = "retention.ms", &v
		rr.Configs = append(rr.Configs, cfg)
	}
	req.Resources = append(req.Resources, rr)
	return c.do(req).(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode
}

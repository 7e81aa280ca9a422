package wire

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/engine/acl"
	"github.com/kaas-dev/kaas/engine/auth"
	"github.com/kaas-dev/kaas/volume"
)

// The authorization matrix of the group, transaction and inter-broker
// APIs: every API × each resource it checks × five cases, with the exact
// code. Each case speaks as its own principal, which gets exactly the
// operation the API needs on every resource but the one under test; on
// that one it gets:
//   - allowed:  an ALLOW of the operation on the resource (LITERAL);
//   - none:     nothing (the API's *_AUTHORIZATION_FAILED);
//   - deny:     the ALLOW and a DENY of the operation, DENY winning;
//   - prefixed: an ALLOW on a PREFIXED pattern the name starts with;
//   - super:    nothing, speaking as the super user User:admin.

// grpCase is how the resource under test is granted.
type grpCase string

const (
	grpAllowed  grpCase = "allowed"
	grpNone     grpCase = "none"
	grpDeny     grpCase = "deny"
	grpPrefixed grpCase = "prefixed"
	grpSuper    grpCase = "super"
)

var grpCases = []grpCase{grpAllowed, grpNone, grpDeny, grpPrefixed, grpSuper}

// grpRes is a resource an API checks and the operation it needs there.
type grpRes struct {
	rt kmsg.ACLResourceType
	op kmsg.ACLOperation
}

// grpNames are the resources one API's requests name.
type grpNames struct{ group, topic, txn string }

func (n grpNames) of(rt kmsg.ACLResourceType) string {
	switch rt {
	case kmsg.ACLResourceTypeGroup:
		return n.group
	case kmsg.ACLResourceTypeTopic:
		return n.topic
	case kmsg.ACLResourceTypeTransactionalId:
		return n.txn
	}
	return acl.ClusterName
}

// grpDeniedCode is the code Kafka answers a denial on a resource type with.
func grpDeniedCode(rt kmsg.ACLResourceType) int16 {
	switch rt {
	case kmsg.ACLResourceTypeGroup:
		return kerr.GroupAuthorizationFailed.Code
	case kmsg.ACLResourceTypeTopic:
		return kerr.TopicAuthorizationFailed.Code
	case kmsg.ACLResourceTypeTransactionalId:
		return kerr.TransactionalIDAuthorizationFailed.Code
	}
	return kerr.ClusterAuthorizationFailed.Code
}

// grpAPI is one row of the matrix.
type grpAPI struct {
	name   string
	prefix string // the API's resource names start with it
	res    []grpRes
	ok     int16 // the code when every resource is allowed
	call   func(c *rawConn, n grpNames) int16
	topic  bool                             // the API names a topic it does not check
	before func(admin *rawConn, n grpNames) // runs before every case, as the super user
}

func (a grpAPI) namesTopic() bool {
	for _, r := range a.res {
		if r.rt == kmsg.ACLResourceTypeTopic {
			return true
		}
	}
	return a.topic
}

// grpCommitAsAdmin commits offset 1 of the API's topic for its group, so
// the group has an offset to delete.
func grpCommitAsAdmin(admin *rawConn, n grpNames) {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.SetVersion(8)
	req.Group, req.Generation = n.group, -1
	t := kmsg.NewOffsetCommitRequestTopic()
	t.Topic = n.topic
	p := kmsg.NewOffsetCommitRequestTopicPartition()
	p.Partition, p.Offset = 0, 1
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	if code := admin.do(req).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; code != 0 {
		admin.t.Fatalf("commit as admin: %d", code)
	}
}

func (a grpAPI) names() grpNames {
	return grpNames{group: a.prefix + "-group", topic: a.prefix + "-topic", txn: a.prefix + "-txn"}
}

var (
	grpGroupRead     = grpRes{kmsg.ACLResourceTypeGroup, kmsg.ACLOperationRead}
	grpGroupDescribe = grpRes{kmsg.ACLResourceTypeGroup, kmsg.ACLOperationDescribe}
	grpGroupDelete   = grpRes{kmsg.ACLResourceTypeGroup, kmsg.ACLOperationDelete}
	grpTopicRead     = grpRes{kmsg.ACLResourceTypeTopic, kmsg.ACLOperationRead}
	grpTopicWrite    = grpRes{kmsg.ACLResourceTypeTopic, kmsg.ACLOperationWrite}
	grpTopicDescribe = grpRes{kmsg.ACLResourceTypeTopic, kmsg.ACLOperationDescribe}
	grpTxnWrite      = grpRes{kmsg.ACLResourceTypeTransactionalId, kmsg.ACLOperationWrite}
	grpTxnDescribe   = grpRes{kmsg.ACLResourceTypeTransactionalId, kmsg.ACLOperationDescribe}
	grpClusterAction = grpRes{kmsg.ACLResourceTypeCluster, kmsg.ACLOperationClusterAction}
)

var authzGroupAPIs = []grpAPI{
	{name: "FindCoordinator v3 group", prefix: "fc3", res: []grpRes{grpGroupDescribe}, ok: 0,
		call: func(c *rawConn, n grpNames) int16 {
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.SetVersion(3)
			req.CoordinatorKey, req.CoordinatorType = n.group, 0
			return c.do(req).(*kmsg.FindCoordinatorResponse).ErrorCode
		}},
	{name: "FindCoordinator v4 transactional ID", prefix: "fc4", res: []grpRes{grpTxnDescribe}, ok: 0,
		call: func(c *rawConn, n grpNames) int16 {
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.SetVersion(4)
			req.CoordinatorType, req.CoordinatorKeys = 1, []string{n.txn}
			return c.do(req).(*kmsg.FindCoordinatorResponse).Coordinators[0].ErrorCode
		}},
	{name: "JoinGroup", prefix: "jg", res: []grpRes{grpGroupRead}, ok: kerr.MemberIDRequired.Code,
		call: func(c *rawConn, n grpNames) int16 {
			req := kmsg.NewPtrJoinGroupRequest()
			req.SetVersion(5)
			req.Group, req.SessionTimeoutMillis, req.RebalanceTimeoutMillis, req.ProtocolType = n.group, 10000, 10000, "consumer"
			p := kmsg.NewJoinGroupRequestProtocol()
			p.Name = "range"
			req.Protocols = append(req.Protocols, p)
			return c.do(req).(*kmsg.JoinGroupResponse).ErrorCode
		}},
	{name: "SyncGroup", prefix: "sg", res: []grpRes{grpGroupRead}, ok: kerr.UnknownMemberID.Code,
		call: func(c *rawConn, n grpNames) int16 {
			req := kmsg.NewPtrSyncGroupRequest()
			req.SetVersion(3)
			req.Group, req.Generation, req.MemberID = n.group, 1, "m"
			return c.do(req).(*kmsg.SyncGroupResponse).ErrorCode
		}},
	{name: "Heartbeat", prefix: "hb", res: []grpRes{grpGroupRead}, ok: kerr.UnknownMemberID.Code,
		call: func(c *rawConn, n grpNames) int16 {
			req := kmsg.NewPtrHeartbeatRequest()
			req.SetVersion(3)
			req.Group, req.Generation, req.MemberID = n.group, 1, "m"
			return c.do(req).(*kmsg.HeartbeatResponse).ErrorCode
		}},
	{name: "LeaveGroup", prefix: "lg", res: []grpRes{grpGroupRead}, ok: 0, // the member's own error aside
		call: func(c *rawConn, n grpNames) int16 {
			req := kmsg.NewPtrLeaveGroupRequest()
			req.SetVersion(3)
			req.Group = n.group
			m := kmsg.NewLeaveGroupRequestMember()
			m.MemberID = "m"
			req.Members = append(req.Members, m)
			return c.do(req).(*kmsg.LeaveGroupResponse).ErrorCode
		}},
	{name: "OffsetCommit", prefix: "oc", res: []grpRes{grpGroupRead, grpTopicRead}, ok: 0,
		call: func(c *rawConn, n grpNames) int16 {
			req := kmsg.NewPtrOffsetCommitRequest()
			req.SetVersion(8)
			req.Group, req.Generation = n.group, -1
			t := kmsg.NewOffsetCommitRequestTopic()
			t.Topic = n.topic
			p := kmsg.NewOffsetCommitRequestTopicPartition()
			p.Partition, p.Offset = 0, 1
			t.Partitions = append(t.Partitions, p)
			req.Topics = append(req.Topics, t)
			return c.do(req).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
		}},
	{name: "OffsetFetch v7", prefix: "of7", res: []grpRes{grpGroupDescribe, grpTopicDescribe}, ok: 0,
		call: func(c *rawConn, n grpNames) int16 {
			req := kmsg.NewPtrOffsetFetchRequest()
			req.SetVersion(7)
			req.Group = n.group
			t := kmsg.NewOffsetFetchRequestTopic()
			t.Topic, t.Partitions = n.topic, []int32{0}
			req.Topics = append(req.Topics, t)
			resp := c.do(req).(*kmsg.OffsetFetchResponse)
			if resp.ErrorCode != 0 {
				return resp.ErrorCode
			}
			return resp.Topics[0].Partitions[0].ErrorCode
		}},
	{name: "OffsetFetch v8", prefix: "of8", res: []grpRes{grpGroupDescribe, grpTopicDescribe}, ok: 0,
		call: func(c *rawConn, n grpNames) int16 {
			req := kmsg.NewPtrOffsetFetchRequest()
			req.SetVersion(8)
			g := kmsg.NewOffsetFetchRequestGroup()
			g.Group = n.group
			t := kmsg.NewOffsetFetchRequestGroupTopic()
			t.Topic, t.Partitions = n.topic, []int32{0}
			g.Topics = append(g.Topics, t)
			req.Groups = append(req.Groups, g)
			out := c.do(req).(*kmsg.OffsetFetchResponse).Groups[0]
			if out.ErrorCode != 0 {
				return out.ErrorCode
			}
			return out.Topics[0].Partitions[0].ErrorCode
		}},
	{name: "OffsetDelete", prefix: "od", res: []grpRes{grpGroupDelete, grpTopicRead}, ok: 0, before: grpCommitAsAdmin,
		call: func(c *rawConn, n grpNames) int16 {
			req := kmsg.NewPtrOffsetDeleteRequest()
			req.Group = n.group
			t := kmsg.NewOffsetDeleteRequestTopic()
			t.Topic = n.topic
			t.Partitions = append(t.Partitions, kmsg.NewOffsetDeleteRequestTopicPartition())
			req.Topics = append(req.Topics, t)
			resp := c.do(req).(*kmsg.OffsetDeleteResponse)
			if resp.ErrorCode != 0 {
				return resp.ErrorCode
			}
			return resp.Topics[0].Partitions[0].ErrorCode
		}},
	{name: "DescribeGroups", prefix: "dg", res: []grpRes{grpGroupDescribe}, ok: 0,
		call: func(c *rawConn, n grpNames) int16 {
			req := kmsg.NewPtrDescribeGroupsRequest()
			req.SetVersion(5)
			req.Groups = []string{n.group}
			return c.do(req).(*kmsg.DescribeGroupsResponse).Groups[0].ErrorCode
		}},
	{name: "DeleteGroups", prefix: "xg", res: []grpRes{grpGroupDelete}, ok: kerr.GroupIDNotFound.Code,
		call: func(c *rawConn, n grpNames) int16 {
			req := kmsg.NewPtrDeleteGroupsRequest()
			req.SetVersion(2)
			req.Groups = []string{n.group}
			return c.do(req).(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode
		}},
	{name: "InitProducerId transactional", prefix: "ip", res: []grpRes{grpTxnWrite}, ok: 0,
		call: func(c *rawConn, n grpNames) int16 {
			req := kmsg.NewPtrInitProducerIDRequest()
			req.SetVersion(4)
			req.TransactionalID, req.TransactionTimeoutMillis = &n.txn, 60000
			return c.do(req).(*kmsg.InitProducerIDResponse).ErrorCode
		}},
	{name: "AddPartitionsToTxn v3", prefix: "ap", res: []grpRes{grpTxnWrite, grpTopicWrite}, ok: kerr.InvalidProducerIDMapping.Code,
		call: func(c *rawConn, n grpNames) int16 {
			req := kmsg.NewPtrAddPartitionsToTxnRequest()
			req.SetVersion(3)
			req.TransactionalID, req.ProducerID, req.ProducerEpoch = n.txn, 1, 0
			t := kmsg.NewAddPartitionsToTxnRequestTopic()
			t.Topic, t.Partitions = n.topic, []int32{0}
			req.Topics = append(req.Topics, t)
			return c.do(req).(*kmsg.AddPartitionsToTxnResponse).Topics[0].Partitions[0].ErrorCode
		}},
	{name: "AddPartitionsToTxn v4 (inter-broker)", prefix: "ap4", res: []grpRes{grpClusterAction, grpTxnWrite, grpTopicWrite}, ok: kerr.InvalidTxnState.Code,
		call: func(c *rawConn, n grpNames) int16 {
			req := kmsg.NewPtrAddPartitionsToTxnRequest()
			req.SetVersion(4)
			tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
			tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly = n.txn, 1, 0, true
			t := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
			t.Topic, t.Partitions = n.topic, []int32{0}
			tx.Topics = append(tx.Topics, t)
			req.Transactions = append(req.Transactions, tx)
			resp := c.do(req).(*kmsg.AddPartitionsToTxnResponse)
			if resp.ErrorCode != 0 {
				return resp.ErrorCode
			}
			return resp.Transactions[0].Topics[0].Partitions[0].ErrorCode
		}},
	{name: "AddOffsetsToTxn", prefix: "ao", res: []grpRes{grpTxnWrite, grpGroupRead}, ok: kerr.InvalidProducerIDMapping.Code,
		call: func(c *rawConn, n grpNames) int16 {
			req := kmsg.NewPtrAddOffsetsToTxnRequest()
			req.SetVersion(3)
			req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = n.txn, 1, 0, n.group
			return c.do(req).(*kmsg.AddOffsetsToTxnResponse).ErrorCode
		}},
	{name: "EndTxn", prefix: "et", res: []grpRes{grpTxnWrite}, ok: kerr.InvalidProducerIDMapping.Code,
		call: func(c *rawConn, n grpNames) int16 {
			req := kmsg.NewPtrEndTxnRequest()
			req.SetVersion(3)
			req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = n.txn, 1, 0, true
			return c.do(req).(*kmsg.EndTxnResponse).ErrorCode
		}},
	{name: "TxnOffsetCommit", prefix: "to", res: []grpRes{grpTxnWrite, grpGroupRead, grpTopicRead}, ok: 0,
		call: func(c *rawConn, n grpNames) int16 {
			req := kmsg.NewPtrTxnOffsetCommitRequest()
			req.SetVersion(3)
			req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch, req.Generation = n.txn, n.group, 1, 0, -1
			t := kmsg.NewTxnOffsetCommitRequestTopic()
			t.Topic = n.topic
			p := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			p.Partition, p.Offset = 0, 1
			t.Partitions = append(t.Partitions, p)
			req.Topics = append(req.Topics, t)
			return c.do(req).(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
		}},
	{name: "DescribeTransactions", prefix: "dt", res: []grpRes{grpTxnDescribe}, ok: kerr.TransactionalIDNotFound.Code,
		call: func(c *rawConn, n grpNames) int16 {
			req := kmsg.NewPtrDescribeTransactionsRequest()
			req.TransactionalIDs = []string{n.txn}
			return c.do(req).(*kmsg.DescribeTransactionsResponse).TransactionStates[0].ErrorCode
		}},
	{name: "DescribeProducers", prefix: "dp", res: []grpRes{grpTopicRead}, ok: 0,
		call: func(c *rawConn, n grpNames) int16 {
			req := kmsg.NewPtrDescribeProducersRequest()
			t := kmsg.NewDescribeProducersRequestTopic()
			t.Topic, t.Partitions = n.topic, []int32{0}
			req.Topics = append(req.Topics, t)
			return c.do(req).(*kmsg.DescribeProducersResponse).Topics[0].Partitions[0].ErrorCode
		}},
	{name: "WriteTxnMarkers (inter-broker)", prefix: "wm", res: []grpRes{grpClusterAction}, ok: 0, topic: true,
		call: func(c *rawConn, n grpNames) int16 {
			req := kmsg.NewPtrWriteTxnMarkersRequest()
			req.SetVersion(1)
			m := kmsg.NewWriteTxnMarkersRequestMarker()
			m.ProducerID, m.ProducerEpoch, m.Committed = 1, 0, true
			t := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
			t.Topic, t.Partitions = n.topic, []int32{0}
			m.Topics = append(m.Topics, t)
			req.Markers = append(req.Markers, m)
			return c.do(req).(*kmsg.WriteTxnMarkersResponse).Markers[0].Topics[0].Partitions[0].ErrorCode
		}},
}

// addGrpUser gives the broker's credential store a user (password
// "pw") for the SASL listener.
func addGrpUser(t testing.TB, b *authzBroker, user string) {
	t.Helper()
	cred, err := auth.ScramSHA256.FromPassword(user, "pw", auth.DefaultIterations)
	if err != nil {
		t.Fatal(err)
	}
	if err := auth.SaveCredential(volume.OS(), filepath.Join(b.dir, "__cluster"), cred); err != nil {
		t.Fatal(err)
	}
}

// grpBinding is an ACL from any host.
func grpBinding(principal string, perm kmsg.ACLPermissionType, rt kmsg.ACLResourceType, pt kmsg.ACLResourcePatternType, name string, op kmsg.ACLOperation) acl.Binding {
	return acl.Binding{ResourceType: rt, ResourceName: name, PatternType: pt, Principal: principal, Host: "*", Operation: op, Permission: perm}
}

// grpCaseBindings are the ACLs of one case: the API's operation on every
// resource but the one under test (index under), which gets the case's.
func grpCaseBindings(principal string, a grpAPI, under int, k grpCase) []acl.Binding {
	allow, deny := kmsg.ACLPermissionTypeAllow, kmsg.ACLPermissionTypeDeny
	lit, pre := kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLResourcePatternTypePrefixed
	n := a.names()
	var out []acl.Binding
	for i, r := range a.res {
		name := n.of(r.rt)
		switch {
		case i != under || k == grpAllowed:
			out = append(out, grpBinding(principal, allow, r.rt, lit, name, r.op))
		case k == grpDeny:
			out = append(out, grpBinding(principal, allow, r.rt, lit, name, r.op), grpBinding(principal, deny, r.rt, lit, name, r.op))
		case k == grpPrefixed:
			out = append(out, grpBinding(principal, allow, r.rt, pre, name[:len(name)-3], r.op))
		}
	}
	return out
}

func TestAuthzGroupsMatrix(t *testing.T) {
	b := startReadyAuthzBroker(t)
	admin := b.as(t, "admin")
	for _, a := range authzGroupAPIs {
		if a.namesTopic() {
			if resp := admin.do(createTopicsReq(7, false, a.names().topic, 1, nil)).(*kmsg.CreateTopicsResponse); resp.Topics[0].ErrorCode != 0 {
				t.Fatalf("create %s: %d", a.names().topic, resp.Topics[0].ErrorCode)
			}
		}
	}
	type run struct {
		api   grpAPI
		under int
		k     grpCase
		user  string
	}
	var runs []run
	var bindings []acl.Binding
	for _, a := range authzGroupAPIs {
		for i := range a.res {
			for _, k := range grpCases {
				user := "admin"
				if k != grpSuper {
					user = fmt.Sprintf("%s-%d-%s", a.prefix, i, k)
					addGrpUser(t, b, user)
					bindings = append(bindings, grpCaseBindings("User:"+user, a, i, k)...)
				}
				runs = append(runs, run{a, i, k, user})
			}
		}
	}
	if err := b.eng.CreateACLs(context.Background(), bindings); err != nil {
		t.Fatalf("CreateACLs: %v", err)
	}
	for _, r := range runs {
		res := r.api.res[r.under]
		t.Run(fmt.Sprintf("%s/%s %s/%s", r.api.name, res.rt, res.op, r.k), func(t *testing.T) {
			want := r.api.ok
			if r.k == grpNone || r.k == grpDeny {
				want = grpDeniedCode(res.rt)
			}
			if r.api.before != nil {
				r.api.before(b.as(t, "admin"), r.api.names())
			}
			if got := r.api.call(b.as(t, r.user), r.api.names()); got != want {
				t.Errorf("code %d (%v), want %d (%v)", got, kerr.ErrorForCode(got), want, kerr.ErrorForCode(want))
			}
		})
	}
}

// startReadyAuthzBroker is startAuthzBroker once the broker serves its
// coordinator shards, so group and transaction requests are answered
// rather than COORDINATOR_LOAD_IN_PROGRESS.
func startReadyAuthzBroker(t *testing.T) *authzBroker {
	t.Helper()
	b := startAuthzBroker(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	for !b.eng.Ready() {
		select {
		case <-ctx.Done():
			t.Fatal("broker not ready: coordinator shards not served")
		case <-time.After(10 * time.Millisecond):
		}
	}
	return b
}

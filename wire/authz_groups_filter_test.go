package wire

import (
	"context"
	"reflect"
	"sort"
	"testing"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/engine/acl"
)

// The answers of the group and transaction APIs that the matrix's one
// code per case does not show: what lists and describes leave out, which
// operations DescribeGroups reports, and who may send inter-broker
// requests.

var (
	grpPermAllow = kmsg.ACLPermissionTypeAllow
	grpPermDeny  = kmsg.ACLPermissionTypeDeny
	grpPatLit    = kmsg.ACLResourcePatternTypeLiteral
	grpPatPre    = kmsg.ACLResourcePatternTypePrefixed
)

func grpCreateACLs(t *testing.T, b *authzBroker, bindings ...acl.Binding) {
	t.Helper()
	if err := b.eng.CreateACLs(context.Background(), bindings); err != nil {
		t.Fatalf("CreateACLs: %v", err)
	}
}

func grpInitProducer(c *rawConn, txnID *string) int16 {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.SetVersion(4)
	req.TransactionalID, req.TransactionTimeoutMillis = txnID, 60000
	return c.do(req).(*kmsg.InitProducerIDResponse).ErrorCode
}

// TestAuthzIdempotentProducer: an idempotent producer needs
// IDEMPOTENT_WRITE on the cluster or WRITE on some topic (KIP-679).
func TestAuthzIdempotentProducer(t *testing.T) {
	b := startReadyAuthzBroker(t)
	cluster, topic := kmsg.ACLResourceTypeCluster, kmsg.ACLResourceTypeTopic
	idem, write, read := kmsg.ACLOperationIdempotentWrite, kmsg.ACLOperationWrite, kmsg.ACLOperationRead
	for _, tc := range []struct {
		user string
		acls []acl.Binding
		want int16
	}{
		{"ip-cluster", []acl.Binding{grpBinding("User:ip-cluster", grpPermAllow, cluster, grpPatLit, acl.ClusterName, idem)}, 0},
		{"ip-topic", []acl.Binding{grpBinding("User:ip-topic", grpPermAllow, topic, grpPatLit, "anything", write)}, 0},
		{"ip-prefixed", []acl.Binding{grpBinding("User:ip-prefixed", grpPermAllow, topic, grpPatPre, "logs-", write)}, 0},
		{"ip-none", nil, kerr.ClusterAuthorizationFailed.Code},
		{"ip-read", []acl.Binding{grpBinding("User:ip-read", grpPermAllow, topic, grpPatLit, "anything", read)}, kerr.ClusterAuthorizationFailed.Code},
		{"ip-deny", []acl.Binding{
			grpBinding("User:ip-deny", grpPermAllow, cluster, grpPatLit, acl.ClusterName, idem),
			grpBinding("User:ip-deny", grpPermDeny, cluster, grpPatLit, acl.ClusterName, idem),
		}, kerr.ClusterAuthorizationFailed.Code},
		{"admin", nil, 0},
	} {
		t.Run(tc.user, func(t *testing.T) {
			if tc.user != "admin" {
				addGrpUser(t, b, tc.user)
			}
			if len(tc.acls) > 0 {
				grpCreateACLs(t, b, tc.acls...)
			}
			if got := grpInitProducer(b.as(t, tc.user), nil); got != tc.want {
				t.Fatalf("InitProducerId: %v, want %v", kerr.ErrorForCode(got), kerr.ErrorForCode(tc.want))
			}
		})
	}
}

// TestAuthzListFilters: ListGroups lists every group to a principal with
// DESCRIBE on the cluster and only the groups it may DESCRIBE to another;
// ListTransactions only the transactional IDs it may DESCRIBE.
func TestAuthzListFilters(t *testing.T) {
	b := startReadyAuthzBroker(t)
	admin := b.as(t, "admin")
	if resp := admin.do(createTopicsReq(7, false, "lf", 1, nil)).(*kmsg.CreateTopicsResponse); resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create lf: %d", resp.Topics[0].ErrorCode)
	}
	for _, g := range []string{"lf-a", "lf-b"} {
		grpCommitAsAdmin(admin, grpNames{group: g, topic: "lf"})
	}
	for _, id := range []string{"lf-a", "lf-b"} {
		if code := grpInitProducer(admin, &id); code != 0 {
			t.Fatalf("InitProducerId %s: %d", id, code)
		}
	}
	group, txn, cluster := kmsg.ACLResourceTypeGroup, kmsg.ACLResourceTypeTransactionalId, kmsg.ACLResourceTypeCluster
	describe := kmsg.ACLOperationDescribe
	grpCreateACLs(t, b,
		grpBinding("User:alice", grpPermAllow, group, grpPatLit, "lf-a", kmsg.ACLOperationRead),
		grpBinding("User:alice", grpPermAllow, txn, grpPatPre, "lf-a", describe),
		grpBinding("User:bob", grpPermAllow, cluster, grpPatLit, acl.ClusterName, describe),
		grpBinding("User:carol", grpPermAllow, group, grpPatPre, "lf-", describe),
		grpBinding("User:carol", grpPermDeny, group, grpPatLit, "lf-b", describe),
	)
	listGroups := func(c *rawConn) []string {
		var out []string
		for _, g := range c.do(kmsg.NewPtrListGroupsRequest()).(*kmsg.ListGroupsResponse).Groups {
			out = append(out, g.Group)
		}
		sort.Strings(out)
		return out
	}
	listTxns := func(c *rawConn) []string {
		var out []string
		for _, s := range c.do(kmsg.NewPtrListTransactionsRequest()).(*kmsg.ListTransactionsResponse).TransactionStates {
			out = append(out, s.TransactionalID)
		}
		return out
	}
	for _, tc := range []struct {
		user           string
		groups, txnIDs []string
	}{
		{"alice", []string{"lf-a"}, []string{"lf-a"}},
		{"bob", []string{"lf-a", "lf-b"}, nil},
		{"carol", []string{"lf-a"}, nil},
		{"admin", []string{"lf-a", "lf-b"}, []string{"lf-a", "lf-b"}},
	} {
		c := b.as(t, tc.user)
		if got := listGroups(c); !reflect.DeepEqual(got, tc.groups) {
			t.Errorf("%s: ListGroups %v, want %v", tc.user, got, tc.groups)
		}
		if got := listTxns(c); !reflect.DeepEqual(got, tc.txnIDs) {
			t.Errorf("%s: ListTransactions %v, want %v", tc.user, got, tc.txnIDs)
		}
	}
}

// TestAuthzDescribeGroupsOperations: KIP-430's authorized operations are
// the caller's real rights on the group, implied DESCRIBE included; a
// group it may not describe gets GROUP_AUTHORIZATION_FAILED.
func TestAuthzDescribeGroupsOperations(t *testing.T) {
	b := startReadyAuthzBroker(t)
	group := kmsg.ACLResourceTypeGroup
	grpCreateACLs(t, b,
		grpBinding("User:alice", grpPermAllow, group, grpPatLit, "dgo", kmsg.ACLOperationRead),
		grpBinding("User:bob", grpPermAllow, group, grpPatPre, "dg", kmsg.ACLOperationDelete),
		grpBinding("User:carol", grpPermAllow, group, grpPatLit, "dgo", kmsg.ACLOperationAll),
		grpBinding("User:carol", grpPermDeny, group, grpPatLit, "dgo", kmsg.ACLOperationDelete),
	)
	const read, del, describe = 1 << 3, 1 << 6, 1 << 8
	describeGroup := func(c *rawConn, version int16, ops bool) kmsg.DescribeGroupsResponseGroup {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.SetVersion(version)
		req.Groups, req.IncludeAuthorizedOperations = []string{"dgo"}, ops
		return c.do(req).(*kmsg.DescribeGroupsResponse).Groups[0]
	}
	for _, tc := range []struct {
		user string
		ops  int32
	}{
		{"alice", read | describe},
		{"bob", del | describe},
		{"carol", read | describe},
		{"admin", read | del | describe},
	} {
		g := describeGroup(b.as(t, tc.user), 5, true)
		if g.ErrorCode != 0 || g.AuthorizedOperations != tc.ops {
			t.Errorf("%s: code %d, authorized operations %b, want %b", tc.user, g.ErrorCode, g.AuthorizedOperations, tc.ops)
		}
	}
	if g := describeGroup(b.as(t, "alice"), 5, false); g.AuthorizedOperations != kip430Unasked {
		t.Errorf("authorized operations not asked for: %d", g.AuthorizedOperations)
	}
	addGrpUser(t, b, "dave")
	g := describeGroup(b.as(t, "dave"), 5, true)
	if g.ErrorCode != kerr.GroupAuthorizationFailed.Code || g.AuthorizedOperations != kip430Unasked {
		t.Errorf("dave: code %d, authorized operations %d, want GROUP_AUTHORIZATION_FAILED and none", g.ErrorCode, g.AuthorizedOperations)
	}
}

// TestAuthzOffsetFetchTopics: an all-topics OffsetFetch leaves out the
// topics the principal may not describe; a named one answers them
// TOPIC_AUTHORIZATION_FAILED with offset -1.
func TestAuthzOffsetFetchTopics(t *testing.T) {
	b := startReadyAuthzBroker(t)
	admin := b.as(t, "admin")
	for _, topic := range []string{"oft-x", "oft-y"} {
		if resp := admin.do(createTopicsReq(7, false, topic, 1, nil)).(*kmsg.CreateTopicsResponse); resp.Topics[0].ErrorCode != 0 {
			t.Fatalf("create %s: %d", topic, resp.Topics[0].ErrorCode)
		}
		grpCommitAsAdmin(admin, grpNames{group: "oft", topic: topic})
	}
	grpCreateACLs(t, b,
		grpBinding("User:alice", grpPermAllow, kmsg.ACLResourceTypeGroup, grpPatLit, "oft", kmsg.ACLOperationDescribe),
		grpBinding("User:alice", grpPermAllow, kmsg.ACLResourceTypeTopic, grpPatLit, "oft-x", kmsg.ACLOperationDescribe),
	)
	type part struct {
		topic  string
		offset int64
		code   int16
	}
	fetch := func(version int16, topics []string) []part {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.SetVersion(version)
		g := kmsg.NewOffsetFetchRequestGroup()
		g.Group = "oft"
		for _, name := range topics {
			rt := kmsg.NewOffsetFetchRequestGroupTopic()
			rt.Topic, rt.Partitions = name, []int32{0}
			g.Topics = append(g.Topics, rt)
		}
		req.Groups = append(req.Groups, g)
		var out []part
		for _, rt := range b.as(t, "alice").do(req).(*kmsg.OffsetFetchResponse).Groups[0].Topics {
			for _, p := range rt.Partitions {
				out = append(out, part{rt.Topic, p.Offset, p.ErrorCode})
			}
		}
		return out
	}
	if got, want := fetch(8, nil), []part{{"oft-x", 1, 0}}; !reflect.DeepEqual(got, want) {
		t.Errorf("all topics: %v, want %v", got, want)
	}
	denied := kerr.TopicAuthorizationFailed.Code
	if got, want := fetch(8, []string{"oft-x", "oft-y"}), []part{{"oft-x", 1, 0}, {"oft-y", -1, denied}}; !reflect.DeepEqual(got, want) {
		t.Errorf("named topics: %v, want %v", got, want)
	}
	if got, want := fetch(8, []string{"oft-y"}), []part{{"oft-y", -1, denied}}; !reflect.DeepEqual(got, want) {
		t.Errorf("only a denied topic: %v, want %v", got, want)
	}
}

// TestAuthzAddPartitionsNotAttempted: a denied topic fails the whole
// request: its partitions get TOPIC_AUTHORIZATION_FAILED, the others
// OPERATION_NOT_ATTEMPTED, as Kafka answers.
func TestAuthzAddPartitionsNotAttempted(t *testing.T) {
	b := startReadyAuthzBroker(t)
	admin := b.as(t, "admin")
	for _, topic := range []string{"apn-x", "apn-y"} {
		if resp := admin.do(createTopicsReq(7, false, topic, 1, nil)).(*kmsg.CreateTopicsResponse); resp.Topics[0].ErrorCode != 0 {
			t.Fatalf("create %s: %d", topic, resp.Topics[0].ErrorCode)
		}
	}
	grpCreateACLs(t, b,
		grpBinding("User:alice", grpPermAllow, kmsg.ACLResourceTypeTransactionalId, grpPatLit, "apn", kmsg.ACLOperationWrite),
		grpBinding("User:alice", grpPermAllow, kmsg.ACLResourceTypeTopic, grpPatLit, "apn-x", kmsg.ACLOperationWrite),
	)
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.SetVersion(3)
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = "apn", 1, 0
	for _, topic := range []string{"apn-x", "apn-y"} {
		rt := kmsg.NewAddPartitionsToTxnRequestTopic()
		rt.Topic, rt.Partitions = topic, []int32{0}
		req.Topics = append(req.Topics, rt)
	}
	got := map[string]int16{}
	for _, rt := range b.as(t, "alice").do(req).(*kmsg.AddPartitionsToTxnResponse).Topics {
		got[rt.Topic] = rt.Partitions[0].ErrorCode
	}
	want := map[string]int16{"apn-x": kerr.OperationNotAttempted.Code, "apn-y": kerr.TopicAuthorizationFailed.Code}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("codes %v, want %v", got, want)
	}
}

// TestAuthzFindCoordinatorMessage: a denied key is answered with Kafka's
// code and a message naming the resource.
func TestAuthzFindCoordinatorMessage(t *testing.T) {
	b := startReadyAuthzBroker(t)
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.SetVersion(4)
	req.CoordinatorType, req.CoordinatorKeys = 1, []string{"fcm"}
	co := b.as(t, "alice").do(req).(*kmsg.FindCoordinatorResponse).Coordinators[0]
	want := txnDenied(kmsg.ACLOperationDescribe, "fcm")
	if co.ErrorCode != kerr.TransactionalIDAuthorizationFailed.Code || co.ErrorMessage == nil || *co.ErrorMessage != want || co.NodeID != -1 {
		t.Errorf("coordinator %+v, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED %q", co, want)
	}
}

// TestInterBrokerAllowed: who may send an inter-broker-only request. With
// the authorizer on: a broker principal, or a principal with
// CLUSTER_ACTION on the cluster (never by an ACL on anything else). With
// it off, as before: anyone while the broker authenticates nobody, else
// only a broker principal.
func TestInterBrokerAllowed(t *testing.T) {
	on := startReadyAuthzBroker(t)
	grpCreateACLs(t, on,
		grpBinding("User:alice", grpPermAllow, kmsg.ACLResourceTypeCluster, grpPatLit, acl.ClusterName, kmsg.ACLOperationClusterAction),
		grpBinding("User:bob", grpPermAllow, kmsg.ACLResourceTypeCluster, grpPatLit, acl.ClusterName, kmsg.ACLOperationAlter),
		grpBinding("User:carol", grpPermAllow, kmsg.ACLResourceTypeCluster, grpPatLit, acl.ClusterName, kmsg.ACLOperationClusterAction),
	)
	on.deny(t, "User:carol", kmsg.ACLResourceTypeCluster, grpPatLit, acl.ClusterName, kmsg.ACLOperationClusterAction)
	off := startBroker(t, nil)
	brokers := map[string]bool{"User:broker": true, "User:admin": true}
	for _, tc := range []struct {
		authz     bool
		brokers   map[string]bool
		principal string
		want      bool
	}{
		{true, brokers, "broker", true},
		{true, nil, "broker", false},
		{true, nil, "alice", true},
		{true, brokers, "alice", true},
		{true, brokers, "bob", false},
		{true, brokers, "carol", false},
		{true, nil, "admin", true}, // the super user
		{true, nil, "", false},
		{false, nil, "", true},
		{false, nil, "alice", true},
		{false, brokers, "broker", true},
		{false, brokers, "alice", false},
	} {
		b := off
		if tc.authz {
			b = on.testBroker
		}
		c := &conn{s: &Server{eng: b.eng, log: logr.Discard(), brokerPrincipals: tc.brokers}, principal: tc.principal, aclIP: "127.0.0.1"}
		c.aclName = c.principalName()
		if got := c.interBrokerAllowed(); got != tc.want {
			t.Errorf("authorizer %v, brokers %v, principal %q: allowed %v, want %v", tc.authz, tc.brokers, tc.principal, got, tc.want)
		}
	}
}

package wire

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

func aclCreation(rt kmsg.ACLResourceType, name string, pt kmsg.ACLResourcePatternType, principal string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) kmsg.CreateACLsRequestCreation {
	cr := kmsg.NewCreateACLsRequestCreation()
	cr.ResourceType, cr.ResourceName, cr.ResourcePatternType = rt, name, pt
	cr.Principal, cr.Host, cr.Operation, cr.PermissionType = principal, "*", op, perm
	return cr
}

func anyACLFilter() kmsg.DeleteACLsRequestFilter {
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	f.Operation, f.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	return f
}

func describeAnyACLs(version int16) *kmsg.DescribeACLsRequest {
	req := kmsg.NewPtrDescribeACLsRequest()
	req.SetVersion(version)
	req.ResourceType, req.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	return req
}

// TestACLAPIsGate: without an authorizer the ACL APIs answer
// SECURITY_DISABLED; with one, a principal without DESCRIBE (describe) or
// ALTER (create, delete) on the cluster is CLUSTER_AUTHORIZATION_FAILED,
// each with a message.
func TestACLAPIsGate(t *testing.T) {
	plainBroker := startBroker(t, nil)
	authz := startAuthzBroker(t, nil)
	authz.allow(t, "User:bob", kmsg.ACLResourceTypeCluster, kmsg.ACLResourcePatternTypeLiteral, "kafka-cluster", kmsg.ACLOperationDescribe)
	for _, tc := range []struct {
		name                     string
		conn                     func() *rawConn
		describe, create, delete int16
	}{
		{"no authorizer", func() *rawConn { return plainBroker.dial(t) },
			kerr.SecurityDisabled.Code, kerr.SecurityDisabled.Code, kerr.SecurityDisabled.Code},
		{"no ACL", func() *rawConn { return authz.as(t, "alice") },
			kerr.ClusterAuthorizationFailed.Code, kerr.ClusterAuthorizationFailed.Code, kerr.ClusterAuthorizationFailed.Code},
		{"DESCRIBE on the cluster", func() *rawConn { return authz.as(t, "bob") },
			0, kerr.ClusterAuthorizationFailed.Code, kerr.ClusterAuthorizationFailed.Code},
		{"super user", func() *rawConn { return authz.as(t, "admin") }, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.conn()
			d := c.do(describeAnyACLs(3)).(*kmsg.DescribeACLsResponse)
			if d.ErrorCode != tc.describe || (d.ErrorCode != 0) != (d.ErrorMessage != nil) {
				t.Errorf("DescribeAcls: %d %v, want %d", d.ErrorCode, d.ErrorMessage, tc.describe)
			}
			cr := kmsg.NewPtrCreateACLsRequest()
			cr.SetVersion(3)
			cr.Creations = []kmsg.CreateACLsRequestCreation{aclCreation(kmsg.ACLResourceTypeTopic, "gate", kmsg.ACLResourcePatternTypeLiteral,
				"User:carol", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow)}
			crr := c.do(cr).(*kmsg.CreateACLsResponse)
			if len(crr.Results) != 1 || crr.Results[0].ErrorCode != tc.create || (tc.create != 0) != (crr.Results[0].ErrorMessage != nil) {
				t.Errorf("CreateAcls: %+v, want %d", crr.Results, tc.create)
			}
			dr := kmsg.NewPtrDeleteACLsRequest()
			dr.SetVersion(3)
			f := anyACLFilter()
			name := "none-such"
			f.ResourceName = &name
			dr.Filters = []kmsg.DeleteACLsRequestFilter{f}
			drr := c.do(dr).(*kmsg.DeleteACLsResponse)
			if len(drr.Results) != 1 || drr.Results[0].ErrorCode != tc.delete || (tc.delete != 0) != (drr.Results[0].ErrorMessage != nil) {
				t.Errorf("DeleteAcls: %+v, want %d", drr.Results, tc.delete)
			}
		})
	}
}

// TestCreateAclsValidation: each creation is answered on its own; the
// invalid ones are INVALID_REQUEST with a message and the valid ones are
// stored.
func TestCreateAclsValidation(t *testing.T) {
	b := startAuthzBroker(t, nil)
	c := b.as(t, "admin")
	const (
		topic   = kmsg.ACLResourceTypeTopic
		literal = kmsg.ACLResourcePatternTypeLiteral
		read    = kmsg.ACLOperationRead
		allow   = kmsg.ACLPermissionTypeAllow
	)
	cases := []struct {
		name string
		cr   kmsg.CreateACLsRequestCreation
		want int16
	}{
		{"valid", aclCreation(topic, "t", literal, "User:alice", read, allow), 0},
		{"prefixed deny", aclCreation(topic, "t-", kmsg.ACLResourcePatternTypePrefixed, "User:alice", read, kmsg.ACLPermissionTypeDeny), 0},
		{"cluster", aclCreation(kmsg.ACLResourceTypeCluster, "kafka-cluster", literal, "User:alice", kmsg.ACLOperationAlter, allow), 0},
		{"unknown resource type", aclCreation(kmsg.ACLResourceTypeUnknown, "t", literal, "User:alice", read, allow), kerr.InvalidRequest.Code},
		{"any resource type", aclCreation(kmsg.ACLResourceTypeAny, "t", literal, "User:alice", read, allow), kerr.InvalidRequest.Code},
		{"delegation token", aclCreation(kmsg.ACLResourceTypeDelegationToken, "t", literal, "User:alice", read, allow), kerr.InvalidRequest.Code},
		{"user", aclCreation(kmsg.ACLResourceTypeUser, "bob", literal, "User:alice", kmsg.ACLOperationCreateTokens, allow), kerr.InvalidRequest.Code},
		{"match pattern", aclCreation(topic, "t", kmsg.ACLResourcePatternTypeMatch, "User:alice", read, allow), kerr.InvalidRequest.Code},
		{"any pattern", aclCreation(topic, "t", kmsg.ACLResourcePatternTypeAny, "User:alice", read, allow), kerr.InvalidRequest.Code},
		{"any operation", aclCreation(topic, "t", literal, "User:alice", kmsg.ACLOperationAny, allow), kerr.InvalidRequest.Code},
		{"unknown operation", aclCreation(topic, "t", literal, "User:alice", kmsg.ACLOperationUnknown, allow), kerr.InvalidRequest.Code},
		{"any permission", aclCreation(topic, "t", literal, "User:alice", read, kmsg.ACLPermissionTypeAny), kerr.InvalidRequest.Code},
		{"empty name", aclCreation(topic, "", literal, "User:alice", read, allow), kerr.InvalidRequest.Code},
		{"bad principal", aclCreation(topic, "t", literal, "alice", read, allow), kerr.InvalidRequest.Code},
		{"cluster not kafka-cluster", aclCreation(kmsg.ACLResourceTypeCluster, "other", literal, "User:alice", read, allow), kerr.InvalidRequest.Code},
	}
	req := kmsg.NewPtrCreateACLsRequest()
	req.SetVersion(3)
	for _, tc := range cases {
		req.Creations = append(req.Creations, tc.cr)
	}
	resp := c.do(req).(*kmsg.CreateACLsResponse)
	if len(resp.Results) != len(cases) {
		t.Fatalf("%d results for %d creations", len(resp.Results), len(cases))
	}
	for i, tc := range cases {
		res := resp.Results[i]
		if res.ErrorCode != tc.want || (tc.want != 0) != (res.ErrorMessage != nil) {
			t.Errorf("%s: %d %v, want %d", tc.name, res.ErrorCode, res.ErrorMessage, tc.want)
		}
	}
	d := c.do(describeAnyACLs(3)).(*kmsg.DescribeACLsResponse)
	if d.ErrorCode != 0 || len(d.Resources) != 3 {
		t.Fatalf("described %+v (%d), want the 3 valid ACLs", d.Resources, d.ErrorCode)
	}
}

// TestAclsVersion0: v0 has no pattern type; a v0 creation is LITERAL, a
// v0 filter selects LITERAL ACLs only.
func TestAclsVersion0(t *testing.T) {
	b := startAuthzBroker(t, nil)
	b.allow(t, "User:alice", kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypePrefixed, "v0", kmsg.ACLOperationRead)
	c := b.as(t, "admin")
	cr := kmsg.NewPtrCreateACLsRequest()
	cr.SetVersion(0)
	cr.Creations = []kmsg.CreateACLsRequestCreation{aclCreation(kmsg.ACLResourceTypeTopic, "v0", kmsg.ACLResourcePatternTypePrefixed,
		"User:bob", kmsg.ACLOperationWrite, kmsg.ACLPermissionTypeAllow)}
	if resp := c.do(cr).(*kmsg.CreateACLsResponse); len(resp.Results) != 1 || resp.Results[0].ErrorCode != 0 {
		t.Fatalf("CreateAcls v0: %+v", resp.Results)
	}
	d := c.do(describeAnyACLs(0)).(*kmsg.DescribeACLsResponse)
	if d.ErrorCode != 0 || len(d.Resources) != 1 || len(d.Resources[0].ACLs) != 1 || d.Resources[0].ACLs[0].Principal != "User:bob" {
		t.Fatalf("DescribeAcls v0: %d %+v, want bob's literal ACL only", d.ErrorCode, d.Resources)
	}
	d = c.do(describeAnyACLs(1)).(*kmsg.DescribeACLsResponse)
	if len(d.Resources) != 2 || d.Resources[0].ResourcePatternType != kmsg.ACLResourcePatternTypeLiteral ||
		d.Resources[1].ResourcePatternType != kmsg.ACLResourcePatternTypePrefixed {
		t.Fatalf("DescribeAcls v1: %+v, want the literal and the prefixed pattern", d.Resources)
	}
	dr := kmsg.NewPtrDeleteACLsRequest()
	dr.SetVersion(0)
	dr.Filters = []kmsg.DeleteACLsRequestFilter{anyACLFilter()}
	resp := c.do(dr).(*kmsg.DeleteACLsResponse)
	if len(resp.Results) != 1 || len(resp.Results[0].MatchingACLs) != 1 || resp.Results[0].MatchingACLs[0].Principal != "User:bob" {
		t.Fatalf("DeleteAcls v0: %+v, want bob's literal ACL only", resp.Results)
	}
}

// TestAclFiltersInvalid: a filter with an UNKNOWN field is
// INVALID_REQUEST: the whole DescribeAcls, one DeleteAcls filter.
func TestAclFiltersInvalid(t *testing.T) {
	b := startAuthzBroker(t, nil)
	b.allow(t, "User:alice", kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypeLiteral, "t", kmsg.ACLOperationRead)
	c := b.as(t, "admin")
	d := describeAnyACLs(3)
	d.Operation = kmsg.ACLOperationUnknown
	if resp := c.do(d).(*kmsg.DescribeACLsResponse); resp.ErrorCode != kerr.InvalidRequest.Code || resp.ErrorMessage == nil {
		t.Errorf("DescribeAcls UNKNOWN operation: %d %v", resp.ErrorCode, resp.ErrorMessage)
	}
	bad := anyACLFilter()
	bad.ResourceType = kmsg.ACLResourceTypeUnknown
	dr := kmsg.NewPtrDeleteACLsRequest()
	dr.SetVersion(3)
	dr.Filters = []kmsg.DeleteACLsRequestFilter{bad, anyACLFilter()}
	resp := c.do(dr).(*kmsg.DeleteACLsResponse)
	if len(resp.Results) != 2 || resp.Results[0].ErrorCode != kerr.InvalidRequest.Code || resp.Results[0].ErrorMessage == nil ||
		resp.Results[1].ErrorCode != 0 || len(resp.Results[1].MatchingACLs) != 1 {
		t.Fatalf("DeleteAcls: %+v", resp.Results)
	}
}

// TestAclsKadmRoundTrip: franz-go's admin client creates literal,
// prefixed, wildcard and DENY ACLs, finds those that apply to one topic
// with a MATCH filter, deletes by filter, and the authorizer follows.
func TestAclsKadmRoundTrip(t *testing.T) {
	b := startAuthzBroker(t, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.saslAddr), kgo.WithLogger(nil),
		kgo.SASL(plain.Auth{User: "admin", Pass: "pw"}.AsMechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	create := func(ab *kadm.ACLBuilder) {
		t.Helper()
		res, err := adm.CreateACLs(ctx, ab)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("create %+v: %v %s", r, r.Err, r.ErrMessage)
			}
		}
	}
	create(kadm.NewACLs().Allow("User:alice").Topics("orders").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral))
	create(kadm.NewACLs().Allow("User:alice").Topics("ord").Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternPrefixed))
	create(kadm.NewACLs().Allow("User:*").Topics("*").Operations(kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral))
	create(kadm.NewACLs().Deny("User:bob").Topics("orders").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral))
	create(kadm.NewACLs().Allow("User:carol").Topics("other").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral))

	ix := b.eng.Authorizer()
	for _, c := range []struct {
		principal string
		op        kmsg.ACLOperation
		want      bool
	}{
		{"User:alice", kmsg.ACLOperationRead, true},
		{"User:alice", kmsg.ACLOperationWrite, true},
		{"User:bob", kmsg.ACLOperationRead, false},
		{"User:bob", kmsg.ACLOperationDescribe, true},
		{"User:carol", kmsg.ACLOperationRead, false},
	} {
		if got := ix.Authorize(c.principal, "127.0.0.1", c.op, kmsg.ACLResourceTypeTopic, "orders"); got != c.want {
			t.Errorf("%s %s orders: %v, want %v", c.principal, c.op, got, c.want)
		}
	}

	described, err := adm.DescribeACLs(ctx, kadm.NewACLs().Topics("orders").ResourcePatternType(kadm.ACLPatternMatch).
		Operations(kadm.OpAny).Allow().AllowHosts().Deny().DenyHosts())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range described {
		if r.Err != nil {
			t.Fatalf("describe: %v %s", r.Err, r.ErrMessage)
		}
		for _, d := range r.Described {
			got = append(got, d.Pattern.String()+" "+d.Name+" "+d.Principal+" "+d.Permission.String()+" "+d.Operation.String())
		}
	}
	sort.Strings(got)
	want := []string{
		"LITERAL * User:* ALLOW DESCRIBE",
		"LITERAL orders User:alice ALLOW READ",
		"LITERAL orders User:bob DENY READ",
		"PREFIXED ord User:alice ALLOW WRITE",
	}
	if len(got) != len(want) {
		t.Fatalf("MATCH orders: %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("MATCH orders: %q, want %q", got, want)
		}
	}

	deleted, err := adm.DeleteACLs(ctx, kadm.NewACLs().Deny("User:bob").DenyHosts().Topics("orders").
		ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpAny))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range deleted {
		if r.Err != nil {
			t.Fatalf("delete: %v %s", r.Err, r.ErrMessage)
		}
		n += len(r.Deleted)
	}
	if n != 1 {
		t.Fatalf("deleted %d ACLs, want bob's DENY", n)
	}
	if !b.eng.Authorizer().Authorize("User:bob", "127.0.0.1", kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, "orders") ||
		b.eng.Authorizer().Authorize("User:bob", "127.0.0.1", kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, "orders") {
		t.Fatalf("after the DENY is gone bob may describe (wildcard) but not read orders")
	}
}

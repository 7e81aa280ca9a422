package kafkaadmin

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// answer is a Requester that answers every request with resp.
type answer struct{ resp kmsg.Response }

func (a answer) Request(context.Context, kmsg.Request) (kmsg.Response, error) { return a.resp, nil }

// TestBrokerErrors: an error a broker answers surfaces with its code's
// name and the broker's message (or the code's description), and matches
// kerr's error.
func TestBrokerErrors(t *testing.T) {
	msg := "ALTER on the cluster is needed"
	denied := &kmsg.CreateACLsResponse{Results: []kmsg.CreateACLsResponseResult{
		{}, {ErrorCode: kerr.ClusterAuthorizationFailed.Code, ErrorMessage: &msg}}}
	bs := []Binding{{Principal: "User:a", Host: "*", ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: "t",
		PatternType: kmsg.ACLResourcePatternTypeLiteral, Operation: kmsg.ACLOperationRead, Permission: kmsg.ACLPermissionTypeAllow},
		{Principal: "User:b", Host: "*", ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: "t",
			PatternType: kmsg.ACLResourcePatternTypeLiteral, Operation: kmsg.ACLOperationRead, Permission: kmsg.ACLPermissionTypeAllow}}
	for _, tc := range []struct {
		name string
		call func() error
		want string
		is   error
	}{
		{name: "create", call: func() error { return CreateACLs(context.Background(), answer{denied}, bs) },
			want: "create ALLOW User:b READ from * on LITERAL TOPIC:t: CLUSTER_AUTHORIZATION_FAILED: ALTER on the cluster is needed",
			is:   kerr.ClusterAuthorizationFailed},
		{name: "describe without a message", call: func() error {
			_, err := DescribeACLs(context.Background(), answer{&kmsg.DescribeACLsResponse{ErrorCode: kerr.SecurityDisabled.Code}}, AnyFilter())
			return err
		}, want: "DescribeAcls: SECURITY_DISABLED: " + kerr.SecurityDisabled.Description, is: kerr.SecurityDisabled},
		{name: "alter quotas", call: func() error {
			m := "unknown key"
			return AlterQuotas(context.Background(), answer{&kmsg.AlterClientQuotasResponse{Entries: []kmsg.AlterClientQuotasResponseEntry{
				{ErrorCode: kerr.InvalidRequest.Code, ErrorMessage: &m}}}}, Entity{{Type: EntityUser}}, map[string]float64{"x": 1}, nil)
		}, want: "AlterClientQuotas user=<default>: INVALID_REQUEST: unknown key", is: kerr.InvalidRequest},
		{name: "delete match error", call: func() error {
			m := "gone"
			_, err := DeleteACLs(context.Background(), answer{&kmsg.DeleteACLsResponse{Results: []kmsg.DeleteACLsResponseResult{{
				MatchingACLs: []kmsg.DeleteACLsResponseResultMatchingACL{{ErrorCode: kerr.UnknownServerError.Code, ErrorMessage: &m,
					Principal: "User:a", Host: "*", ResourceType: kmsg.ACLResourceTypeGroup, ResourceName: "g",
					ResourcePatternType: kmsg.ACLResourcePatternTypeLiteral, Operation: kmsg.ACLOperationRead,
					PermissionType: kmsg.ACLPermissionTypeAllow}}}}}}, []Filter{AnyFilter()})
			return err
		}, want: "delete ALLOW User:a READ from * on LITERAL GROUP:g: UNKNOWN_SERVER_ERROR: gone", is: kerr.UnknownServerError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, tc.is) {
				t.Fatalf("error %v, want %q (and %v)", err, tc.want, tc.is)
			}
		})
	}
}

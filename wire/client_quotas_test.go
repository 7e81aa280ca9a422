package wire

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/engine/quota"
)

func sp(s string) *string { return &s }

type qcomp struct {
	typ  string
	name *string
}

func alterEntry(comps []qcomp, ops ...kmsg.AlterClientQuotasRequestEntryOp) kmsg.AlterClientQuotasRequestEntry {
	e := kmsg.NewAlterClientQuotasRequestEntry()
	for _, c := range comps {
		e.Entity = append(e.Entity, kmsg.AlterClientQuotasRequestEntryEntity{Type: c.typ, Name: c.name})
	}
	e.Ops = ops
	return e
}

func setOp(k string, v float64) kmsg.AlterClientQuotasRequestEntryOp {
	return kmsg.AlterClientQuotasRequestEntryOp{Key: k, Value: v}
}

func alterQuotas(c *rawConn, validateOnly bool, entries ...kmsg.AlterClientQuotasRequestEntry) *kmsg.AlterClientQuotasResponse {
	req := kmsg.NewPtrAlterClientQuotasRequest()
	req.Entries, req.ValidateOnly = entries, validateOnly
	return c.do(req).(*kmsg.AlterClientQuotasResponse)
}

func describeQuotas(c *rawConn, strict bool, comps ...kmsg.DescribeClientQuotasRequestComponent) *kmsg.DescribeClientQuotasResponse {
	req := kmsg.NewPtrDescribeClientQuotasRequest()
	req.Components, req.Strict = comps, strict
	return c.do(req).(*kmsg.DescribeClientQuotasResponse)
}

func dcomp(typ string, m kmsg.QuotasMatchType, name *string) kmsg.DescribeClientQuotasRequestComponent {
	return kmsg.DescribeClientQuotasRequestComponent{EntityType: typ, MatchType: m, Match: name}
}

// described renders the entries as sorted "user=a,client-id=<default>:key=value" lines.
func described(resp *kmsg.DescribeClientQuotasResponse) string {
	var lines []string
	for _, e := range resp.Entries {
		var parts []string
		for _, c := range e.Entity {
			n := "<default>"
			if c.Name != nil {
				n = *c.Name
			}
			parts = append(parts, c.Type+"="+n)
		}
		for _, v := range e.Values {
			parts = append(parts, fmt.Sprintf("%s:%v", v.Key, v.Value))
		}
		lines = append(lines, strings.Join(parts, ","))
	}
	sort.Strings(lines)
	return strings.Join(lines, " ")
}

func TestAlterClientQuotasValidation(t *testing.T) {
	b := startBroker(t, nil)
	c := b.dial(t)
	user := []qcomp{{quota.TypeUser, sp("alice")}}
	tests := []struct {
		name  string
		entry kmsg.AlterClientQuotasRequestEntry
		code  int16
	}{
		{"ok", alterEntry(user, setOp("producer_byte_rate", 1024)), 0},
		{"unknown key", alterEntry(user, setOp("bogus", 1)), kerr.InvalidRequest.Code},
		{"mutation rate", alterEntry(user, setOp("controller_mutation_rate", 1)), kerr.InvalidRequest.Code},
		{"zero", alterEntry(user, setOp("consumer_byte_rate", 0)), kerr.InvalidRequest.Code},
		{"fraction of a byte", alterEntry(user, setOp("consumer_byte_rate", 1.5)), kerr.InvalidRequest.Code},
		{"negative percentage", alterEntry(user, setOp("request_percentage", -1)), kerr.InvalidRequest.Code},
		{"ip", alterEntry([]qcomp{{quota.TypeIP, sp("10.0.0.1")}}, setOp("connection_creation_rate", 1)), kerr.InvalidRequest.Code},
		{"user and ip", alterEntry([]qcomp{{quota.TypeUser, nil}, {quota.TypeIP, nil}}, setOp("producer_byte_rate", 1)), kerr.InvalidRequest.Code},
		{"no entity", alterEntry(nil, setOp("producer_byte_rate", 1)), kerr.InvalidRequest.Code},
		{"type twice", alterEntry([]qcomp{{quota.TypeUser, nil}, {quota.TypeUser, sp("a")}}, setOp("producer_byte_rate", 1)), kerr.InvalidRequest.Code},
		{"remove ignores the value", alterEntry(user, kmsg.AlterClientQuotasRequestEntryOp{Key: "consumer_byte_rate", Value: -1, Remove: true}), 0},
	}
	for _, tt := range tests {
		resp := alterQuotas(c, true, tt.entry)
		if len(resp.Entries) != 1 {
			t.Fatalf("%s: %d entries", tt.name, len(resp.Entries))
		}
		got := resp.Entries[0]
		if got.ErrorCode != tt.code || (tt.code != 0 && (got.ErrorMessage == nil || *got.ErrorMessage == "")) {
			t.Errorf("%s: code %d message %v, want %d", tt.name, got.ErrorCode, got.ErrorMessage, tt.code)
		}
	}
	// Validate-only applied nothing.
	if n := b.eng.ClientQuotas().Len(); n != 0 {
		t.Errorf("validate-only stored %d entities", n)
	}
	// Per entry: the valid one is applied, the invalid one is not.
	resp := alterQuotas(c, false, alterEntry(user, setOp("producer_byte_rate", 1024)),
		alterEntry([]qcomp{{quota.TypeUser, sp("bob")}}, setOp("producer_byte_rate", 1), setOp("bogus", 1)))
	if resp.Entries[0].ErrorCode != 0 || resp.Entries[1].ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("mixed: codes %d %d", resp.Entries[0].ErrorCode, resp.Entries[1].ErrorCode)
	}
	if limit, _, ok := b.eng.ClientQuota(quota.ProducerByteRate, "alice", "x"); !ok || limit != 1024 {
		t.Errorf("alice: %v %v", limit, ok)
	}
	if _, _, ok := b.eng.ClientQuota(quota.ProducerByteRate, "bob", "x"); ok {
		t.Error("bob's invalid entry was applied")
	}
}

func TestDescribeClientQuotasFilters(t *testing.T) {
	b := startBroker(t, nil)
	c := b.dial(t)
	resp := alterQuotas(c, false,
		alterEntry([]qcomp{{quota.TypeUser, sp("alice")}}, setOp("producer_byte_rate", 100)),
		alterEntry([]qcomp{{quota.TypeUser, nil}}, setOp("consumer_byte_rate", 200)),
		alterEntry([]qcomp{{quota.TypeUser, sp("alice")}, {quota.TypeClientID, sp("app")}}, setOp("request_percentage", 50)),
		alterEntry([]qcomp{{quota.TypeClientID, nil}}, setOp("producer_byte_rate", 300)),
	)
	for i, e := range resp.Entries {
		if e.ErrorCode != 0 {
			t.Fatalf("entry %d: %d %v", i, e.ErrorCode, e.ErrorMessage)
		}
	}
	exact, deflt, any := kmsg.QuotasMatchTypeExact, kmsg.QuotasMatchTypeDefault, kmsg.QuotasMatchTypeAny
	const (
		alice    = "user=alice,producer_byte_rate:100"
		everyone = "user=<default>,consumer_byte_rate:200"
		aliceApp = "user=alice,client-id=app,request_percentage:50"
		clients  = "client-id=<default>,producer_byte_rate:300"
	)
	tests := []struct {
		name   string
		strict bool
		comps  []kmsg.DescribeClientQuotasRequestComponent
		want   []string
	}{
		{"everything", false, nil, []string{alice, aliceApp, clients, everyone}},
		{"strict nothing", true, nil, nil},
		{"user alice", false, []kmsg.DescribeClientQuotasRequestComponent{dcomp("user", exact, sp("alice"))}, []string{alice, aliceApp}},
		{"user alice strict", true, []kmsg.DescribeClientQuotasRequestComponent{dcomp("user", exact, sp("alice"))}, []string{alice}},
		{"default user", false, []kmsg.DescribeClientQuotasRequestComponent{dcomp("user", deflt, nil)}, []string{everyone}},
		{"any user", false, []kmsg.DescribeClientQuotasRequestComponent{dcomp("user", any, nil)}, []string{alice, aliceApp, everyone}},
		{"any client-id", false, []kmsg.DescribeClientQuotasRequestComponent{dcomp("client-id", any, nil)}, []string{aliceApp, clients}},
		{"both", true, []kmsg.DescribeClientQuotasRequestComponent{dcomp("user", any, nil), dcomp("client-id", exact, sp("app"))}, []string{aliceApp}},
		{"ip", false, []kmsg.DescribeClientQuotasRequestComponent{dcomp("ip", any, nil)}, nil},
	}
	for _, tt := range tests {
		resp := describeQuotas(c, tt.strict, tt.comps...)
		if resp.ErrorCode != 0 {
			t.Errorf("%s: code %d %v", tt.name, resp.ErrorCode, resp.ErrorMessage)
			continue
		}
		sort.Strings(tt.want)
		if got, want := described(resp), strings.Join(tt.want, " "); got != want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, got, want)
		}
	}
	bad := []struct {
		name  string
		comps []kmsg.DescribeClientQuotasRequestComponent
		code  int16
	}{
		{"empty type", []kmsg.DescribeClientQuotasRequestComponent{dcomp("", any, nil)}, kerr.InvalidRequest.Code},
		{"type twice", []kmsg.DescribeClientQuotasRequestComponent{dcomp("user", any, nil), dcomp("user", deflt, nil)}, kerr.InvalidRequest.Code},
		{"exact without name", []kmsg.DescribeClientQuotasRequestComponent{dcomp("user", exact, nil)}, kerr.InvalidRequest.Code},
		{"default with name", []kmsg.DescribeClientQuotasRequestComponent{dcomp("user", deflt, sp("a"))}, kerr.InvalidRequest.Code},
		{"ip with user", []kmsg.DescribeClientQuotasRequestComponent{dcomp("ip", any, nil), dcomp("user", any, nil)}, kerr.InvalidRequest.Code},
		{"unknown type", []kmsg.DescribeClientQuotasRequestComponent{dcomp("group", any, nil)}, kerr.UnsupportedVersion.Code},
		{"unknown match", []kmsg.DescribeClientQuotasRequestComponent{dcomp("user", 7, nil)}, kerr.UnsupportedVersion.Code},
	}
	for _, tt := range bad {
		resp := describeQuotas(c, false, tt.comps...)
		if resp.ErrorCode != tt.code || resp.ErrorMessage == nil || len(resp.Entries) != 0 {
			t.Errorf("%s: code %d %v, %d entries; want %d", tt.name, resp.ErrorCode, resp.ErrorMessage, len(resp.Entries), tt.code)
		}
	}
}

func TestClientQuotasAuthorization(t *testing.T) {
	b := startAuthzBroker(t, nil)
	b.allow(t, "User:bob", kmsg.ACLResourceTypeCluster, kmsg.ACLResourcePatternTypeLiteral, "kafka-cluster",
		kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs)
	entry := alterEntry([]qcomp{{quota.TypeUser, sp("alice")}}, setOp("producer_byte_rate", 10))
	alice := b.as(t, "alice")
	if resp := alterQuotas(alice, false, entry); resp.Entries[0].ErrorCode != kerr.ClusterAuthorizationFailed.Code || resp.Entries[0].ErrorMessage == nil {
		t.Errorf("alice alter: %d %v", resp.Entries[0].ErrorCode, resp.Entries[0].ErrorMessage)
	}
	if resp := describeQuotas(alice, false); resp.ErrorCode != kerr.ClusterAuthorizationFailed.Code || resp.ErrorMessage == nil {
		t.Errorf("alice describe: %d %v", resp.ErrorCode, resp.ErrorMessage)
	}
	bob := b.as(t, "bob")
	if resp := alterQuotas(bob, false, entry); resp.Entries[0].ErrorCode != 0 {
		t.Errorf("bob alter: %d %v", resp.Entries[0].ErrorCode, resp.Entries[0].ErrorMessage)
	}
	if resp := describeQuotas(bob, false); resp.ErrorCode != 0 || len(resp.Entries) != 1 {
		t.Errorf("bob describe: %d %v %d entries", resp.ErrorCode, resp.ErrorMessage, len(resp.Entries))
	}
}

func TestClientQuotasKadmRoundTrip(t *testing.T) {
	b := startBroker(t, nil)
	adm := kadm.NewClient(b.client(t))
	ctx := context.Background()
	entity := kadm.ClientQuotaEntity{{Type: "user", Name: sp("alice")}, {Type: "client-id", Name: nil}}
	altered, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: entity,
		Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1048576}, {Key: "request_percentage", Value: 25}}}})
	if err != nil || len(altered) != 1 || altered[0].Err != nil {
		t.Fatalf("AlterClientQuotas: %v %+v", err, altered)
	}
	got, err := adm.DescribeClientQuotas(ctx, true, []kadm.DescribeClientQuotaComponent{
		{Type: "user", MatchName: sp("alice"), MatchType: kmsg.QuotasMatchTypeExact},
		{Type: "client-id", MatchType: kmsg.QuotasMatchTypeDefault},
	})
	if err != nil || len(got) != 1 {
		t.Fatalf("DescribeClientQuotas: %v %+v", err, got)
	}
	if s := got[0].Entity.String(); s != "{user=alice, client-id=<default>}" {
		t.Errorf("entity %s", s)
	}
	vals := map[string]float64{}
	for _, v := range got[0].Values {
		vals[v.Key] = v.Value
	}
	if vals["producer_byte_rate"] != 1048576 || vals["request_percentage"] != 25 || len(vals) != 2 {
		t.Errorf("values %v", vals)
	}
	if _, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: entity,
		Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Remove: true}, {Key: "request_percentage", Remove: true}}}}); err != nil {
		t.Fatal(err)
	}
	if got, err := adm.DescribeClientQuotas(ctx, false, nil); err != nil || len(got) != 0 {
		t.Errorf("after removing: %v %+v", err, got)
	}
}

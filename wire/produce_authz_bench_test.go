package wire

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/engine"
	"github.com/kaas-dev/kaas/engine/acl"
	"github.com/kaas-dev/kaas/volume/records/recordstest"
)

// BenchmarkProduceAuthz compares whole produce requests (one batch of 100
// records of 1 KiB, acks=-1, over a PLAINTEXT connection) to a broker
// without an authorizer and to one with 10,000 ACLs loaded, among them the
// prefixed ACL that lets the producer write, in one run: the ratio of the
// pair is the authorizer's cost on the hot path.
func BenchmarkProduceAuthz(b *testing.B) {
	recs := recordstest.Text(100, 1024)
	batch := recordstest.Batch{Records: recs}.Bytes()
	raw := int64(len(recordstest.EncodeRecords(recs)))
	topicConfigs := map[string]string{"retention.bytes": "67108864", "segment.bytes": "16777216"}

	off := startBroker(b, nil)
	off.createTopic(b, "bench-produce", 1, topicConfigs)

	on := startBrokerWith(b, func(c *engine.Config) {
		c.ACLs = engine.ACLConfig{Enabled: true, SuperUsers: []string{"User:admin"}}
	}, nil)
	if err := on.eng.CreateACLs(context.Background(), benchACLs(10000)); err != nil {
		b.Fatal(err)
	}
	if n := len(on.eng.Authorizer().Bindings(acl.Filter{ResourceType: kmsg.ACLResourceTypeAny,
		PatternType: kmsg.ACLResourcePatternTypeAny, Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny})); n != 10000 {
		b.Fatalf("%d ACLs loaded, want 10000", n)
	}
	on.createTopic(b, "bench-produce", 1, topicConfigs)

	type side struct {
		name string
		br   *testBroker
	}
	offSide, onSide := side{"authz=off", off}, side{"authz=on", on}
	// Three rounds, the order alternating, so that neither side always
	// runs first on a shared machine.
	for round, pair := range [][2]side{{offSide, onSide}, {onSide, offSide}, {offSide, onSide}} {
		for _, tc := range pair {
			b.Run(fmt.Sprintf("round%d/%s", round+1, tc.name), func(b *testing.B) {
				c := tc.br.dial(b)
				b.SetBytes(raw)
				b.ReportAllocs()
				for b.Loop() {
					if p := c.produce(9, "bench-produce", batch); p.ErrorCode != 0 {
						b.Fatalf("produce: %d", p.ErrorCode)
					}
				}
			})
		}
	}
}

// benchACLs is n ACLs of many principals, literal and prefixed, topics
// and groups; the last lets the PLAINTEXT listener's principal do
// anything (create, write) to the bench-* topics by prefix.
func benchACLs(n int) []acl.Binding {
	out := make([]acl.Binding, 0, n)
	for i := 0; len(out) < n-1; i++ {
		b := acl.Binding{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: fmt.Sprintf("topic-%d", i),
			PatternType: kmsg.ACLResourcePatternTypeLiteral, Principal: fmt.Sprintf("User:u%d", i%500), Host: "*",
			Operation: kmsg.ACLOperationWrite, Permission: kmsg.ACLPermissionTypeAllow}
		switch i % 4 {
		case 1:
			b.PatternType, b.ResourceName = kmsg.ACLResourcePatternTypePrefixed, fmt.Sprintf("be%d-", i)
		case 2:
			b.ResourceType, b.Operation = kmsg.ACLResourceTypeGroup, kmsg.ACLOperationRead
		case 3:
			b.Permission = kmsg.ACLPermissionTypeDeny
		}
		out = append(out, b)
	}
	return append(out, acl.Binding{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: "bench-",
		PatternType: kmsg.ACLResourcePatternTypePrefixed, Principal: "User:ANONYMOUS", Host: "*",
		Operation: kmsg.ACLOperationAll, Permission: kmsg.ACLPermissionTypeAllow})
}

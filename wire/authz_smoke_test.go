package wire

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestAuthzHarness: the harness's principals reach the engine's index:
// an ACL stored for alice lets her, and only her, describe a topic.
func TestAuthzHarness(t *testing.T) {
	b := startAuthzBroker(t, nil)
	ix := b.eng.Authorizer()
	if ix == nil || ix.Authorize("User:alice", "127.0.0.1", kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, "t") {
		t.Fatalf("alice may describe t before any ACL")
	}
	b.allow(t, "User:alice", kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypeLiteral, "t", kmsg.ACLOperationRead)
	ix = b.eng.Authorizer()
	if !ix.Authorize("User:alice", "127.0.0.1", kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, "t") {
		t.Fatalf("alice may not describe t after READ on it")
	}
	if ix.Authorize("User:bob", "127.0.0.1", kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, "t") {
		t.Fatalf("bob may describe t")
	}
	if !ix.Authorize("User:admin", "127.0.0.1", kmsg.ACLOperationDelete, kmsg.ACLResourceTypeTopic, "t") {
		t.Fatalf("the super user may not delete t")
	}
	for _, u := range authzUsers {
		c := b.as(t, u)
		md := kmsg.NewPtrMetadataRequest()
		md.SetVersion(9)
		c.do(md)
	}
}

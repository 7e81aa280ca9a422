package wire

import (
	"context"
	"net"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/engine"
	"github.com/kaas-dev/kaas/engine/acl"
	"github.com/kaas-dev/kaas/engine/auth"
	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/wire/sasl"
)

// authzBroker is a broker with the authorizer on and a SASL_PLAINTEXT
// listener whose users (password "pw") are the principals the
// authorization tests speak as: "User:admin" is the super user.
type authzBroker struct {
	*testBroker
	saslAddr string
}

// authzUsers are the users every authzBroker knows.
var authzUsers = []string{"admin", "alice", "bob", "carol"}

// startAuthzBroker starts a broker with --authorizer acl and
// --super-users User:admin; tweak may change the ACL config further.
func startAuthzBroker(t *testing.T, tweak func(*engine.ACLConfig)) *authzBroker {
	t.Helper()
	b := startBrokerWith(t, func(c *engine.Config) {
		c.ACLs = engine.ACLConfig{Enabled: true, SuperUsers: []string{"User:admin"}}
		if tweak != nil {
			tweak(&c.ACLs)
		}
	}, nil)
	clusterDir := filepath.Join(b.dir, "__cluster")
	for _, u := range authzUsers {
		cred, err := auth.ScramSHA256.FromPassword(u, "pw", auth.DefaultIterations)
		if err != nil {
			t.Fatal(err)
		}
		if err := auth.SaveCredential(volume.OS(), clusterDir, cred); err != nil {
			t.Fatal(err)
		}
	}
	return &authzBroker{testBroker: b, saslAddr: serveSASLListener(t, b, clusterDir, sasl.Plain)}
}

// as dials the SASL listener and authenticates as user with PLAIN.
func (b *authzBroker) as(t testing.TB, user string) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", b.saslAddr, ioTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	c := &rawConn{t: t, nc: nc, fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID("authz-test"))}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = sasl.Plain
	if resp := c.do(hs).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != 0 {
		t.Fatalf("SaslHandshake as %s: %d", user, resp.ErrorCode)
	}
	au := kmsg.NewPtrSASLAuthenticateRequest()
	au.SASLAuthBytes = []byte("\x00" + user + "\x00pw")
	if resp := c.do(au).(*kmsg.SASLAuthenticateResponse); resp.ErrorCode != 0 {
		t.Fatalf("SaslAuthenticate as %s: %d %v", user, resp.ErrorCode, resp.ErrorMessage)
	}
	return c
}

// allow stores ACLs straight through the engine (so that the tests of
// one API do not depend on CreateAcls): principal may do each op on the
// resource, from any host.
func (b *authzBroker) allow(t testing.TB, principal string, rt kmsg.ACLResourceType, pt kmsg.ACLResourcePatternType, name string, ops ...kmsg.ACLOperation) {
	t.Helper()
	b.store(t, principal, kmsg.ACLPermissionTypeAllow, rt, pt, name, ops...)
}

// deny is allow with DENY.
func (b *authzBroker) deny(t testing.TB, principal string, rt kmsg.ACLResourceType, pt kmsg.ACLResourcePatternType, name string, ops ...kmsg.ACLOperation) {
	t.Helper()
	b.store(t, principal, kmsg.ACLPermissionTypeDeny, rt, pt, name, ops...)
}

func (b *authzBroker) store(t testing.TB, principal string, perm kmsg.ACLPermissionType, rt kmsg.ACLResourceType, pt kmsg.ACLResourcePatternType, name string, ops ...kmsg.ACLOperation) {
	t.Helper()
	bindings := make([]acl.Binding, 0, len(ops))
	for _, op := range ops {
		bd := acl.Binding{ResourceType: rt, ResourceName: name, PatternType: pt, Principal: principal, Host: "*", Operation: op, Permission: perm}
		if err := bd.Validate(); err != nil {
			t.Fatalf("binding %v: %v", bd, err)
		}
		bindings = append(bindings, bd)
	}
	if err := b.eng.CreateACLs(context.Background(), bindings); err != nil {
		t.Fatalf("CreateACLs: %v", err)
	}
}

package main

import (
	"flag"
	"fmt"

	"github.com/kaas-dev/kaas/engine"
)

// authzOptions turns Kafka's ACL authorizer on (authorizer.class.name,
// allow.everyone.if.no.acl.found; the super users are --super-users).
type authzOptions struct {
	authorizer   string
	allowIfNoACL bool
}

func (a *authzOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&a.authorizer, "authorizer", "none", "none: every client may do anything; acl: requests are checked against the cluster's ACLs, kept on the volume and managed with CreateAcls/DeleteAcls (kaasctl acls) (KAAS_AUTHORIZER)")
	fs.BoolVar(&a.allowIfNoACL, "allow-everyone-if-no-acl-found", false, "with --authorizer acl, a resource no ACL names is open to everyone (allow.everyone.if.no.acl.found; KAAS_ALLOW_EVERYONE_IF_NO_ACL_FOUND)")
}

// config is the engine's ACL configuration.
func (a authzOptions) config(superUsers string) (engine.ACLConfig, error) {
	switch a.authorizer {
	case "none", "":
		return engine.ACLConfig{}, nil
	case "acl":
	default:
		return engine.ACLConfig{}, fmt.Errorf("--authorizer %q: want none or acl", a.authorizer)
	}
	supers, err := parseSuperUsers(superUsers)
	if err != nil {
		return engine.ACLConfig{}, err
	}
	return engine.ACLConfig{Enabled: true, SuperUsers: supers, AllowIfNoACL: a.allowIfNoACL}, nil
}

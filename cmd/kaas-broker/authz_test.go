package main

import (
	"flag"
	"reflect"
	"strings"
	"testing"

	"github.com/kaas-dev/kaas/engine"
)

func TestAuthzOptions(t *testing.T) {
	cases := []struct {
		args    []string
		supers  string
		want    engine.ACLConfig
		wantErr string
	}{
		{args: nil, want: engine.ACLConfig{}},
		{args: []string{"--authorizer", "none", "--allow-everyone-if-no-acl-found"}, want: engine.ACLConfig{}},
		{args: []string{"--authorizer", "acl"}, supers: "User:admin;User:ops",
			want: engine.ACLConfig{Enabled: true, SuperUsers: []string{"User:admin", "User:ops"}}},
		{args: []string{"--authorizer", "acl", "--allow-everyone-if-no-acl-found"},
			want: engine.ACLConfig{Enabled: true, AllowIfNoACL: true}},
		{args: []string{"--authorizer", "kafka.security.authorizer.AclAuthorizer"}, wantErr: "want none or acl"},
		{args: []string{"--authorizer", "acl"}, supers: "admin", wantErr: "--super-users"},
	}
	for _, c := range cases {
		var a authzOptions
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		a.register(fs)
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		got, err := a.config(c.supers)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%v %q: error %v, want %q", c.args, c.supers, err, c.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%v %q: %+v %v, want %+v", c.args, c.supers, got, err, c.want)
		}
	}
}

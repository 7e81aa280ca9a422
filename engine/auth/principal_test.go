package auth

import (
	"crypto/x509/pkix"
	"errors"
	"testing"
)

func subject(cn, ou string) pkix.Name {
	return pkix.Name{CommonName: cn, OrganizationalUnit: []string{ou}, Organization: []string{"Unknown"},
		Locality: []string{"Unknown"}, Province: []string{"Unknown"}, Country: []string{"Unknown"}}
}

// TestPrincipalRules: the rules of Kafka's documentation map its example
// subjects as it says; no rules give the CN.
func TestPrincipalRules(t *testing.T) {
	kafkaDocs := `RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,
RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,
RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,
DEFAULT`
	cases := []struct {
		rules   string
		subject pkix.Name
		want    string
	}{
		{kafkaDocs, subject("serviceuser", "ServiceUsers"), "serviceuser"},
		{kafkaDocs, subject("adminUser", "Admin"), "adminuser@admin"},
		{kafkaDocs, pkix.Name{CommonName: "Web.Example", Organization: []string{"x,y"}}, "web.example"},
		{"DEFAULT", subject("a", "b"), "CN=a,OU=b,O=Unknown,L=Unknown,ST=Unknown,C=Unknown"},
		{"RULE:^CN=([^,]*),.*$/kaas-$1/U", subject("app", "eng"), "KAAS-APP"},
		{`RULE:^CN=(.*)\/x,.*$/$1/`, pkix.Name{CommonName: "a/x", Country: []string{"US"}}, "a"},
		{"", subject("app", "eng"), "app"},
	}
	for _, c := range cases {
		r, err := ParsePrincipalRules(c.rules)
		if err != nil {
			t.Fatalf("%q: %v", c.rules, err)
		}
		got, err := r.Principal(c.subject)
		if err != nil || got != c.want {
			t.Errorf("rules %q, subject %q: %q, %v; want %q", c.rules, c.subject.String(), got, err, c.want)
		}
	}
	r, _ := ParsePrincipalRules("RULE:^CN=admin,.*$/admin/")
	if _, err := r.Principal(subject("app", "eng")); err == nil {
		t.Error("a subject no rule applies to got a principal")
	}
	if _, err := (PrincipalRules{}).Principal(pkix.Name{Organization: []string{"acme"}}); err == nil {
		t.Error("a subject without a CN got a principal by default")
	}
	for _, bad := range []string{"RULE:abc", "RULE:a/b", "RULE:(/x/", "NOPE", "DEFAULT DEFAULT", "RULE:a/b/X"} {
		if _, err := ParsePrincipalRules(bad); !errors.Is(err, ErrPrincipalRules) {
			t.Errorf("ParsePrincipalRules(%q) = %v, want ErrPrincipalRules", bad, err)
		}
	}
}

package acl

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// benchIndex is 10,000 bindings: 2,000 users, each with READ and WRITE on
// a topic of its own, DESCRIBE on a prefix of its team, READ on a group,
// and a DENY on one topic of the team; plus super users.
func benchIndex() *Index {
	var bs []Binding
	for u := range 2000 {
		p := fmt.Sprintf("User:u%d", u)
		team := fmt.Sprintf("team%d.", u%50)
		bs = append(bs,
			bind(topic, literal, fmt.Sprintf("%st%d", team, u), p, "*", read, allow),
			bind(topic, literal, fmt.Sprintf("%st%d", team, u), p, "*", write, allow),
			bind(topic, prefixed, team, p, "*", describe, allow),
			bind(group, literal, fmt.Sprintf("g%d", u), p, "*", read, allow),
			bind(topic, literal, team+"secret", p, "*", all, deny),
		)
	}
	return New(bs, Config{SuperUsers: []string{"User:admin"}})
}

func BenchmarkAuthorize(b *testing.B) {
	ix := benchIndex()
	if ix.Len() != 10000 {
		b.Fatalf("%d bindings", ix.Len())
	}
	cases := []struct {
		name                string
		principal, resource string
		op                  kmsg.ACLOperation
		want                bool
	}{
		{"allowed-literal", "User:u777", "team27.t777", write, true},
		{"allowed-prefix", "User:u777", "team27.t1", describe, true},
		{"denied-no-acl", "User:u777", "team28.t3", write, false},
		{"denied-by-deny", "User:u777", "team27.secret", read, false},
		{"super-user", "User:admin", "anything", write, true},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if ix.Authorize(c.principal, "10.0.0.1", c.op, topic, c.resource) != c.want {
					b.Fatal("wrong decision")
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "checks/s")
		})
	}
}

func TestAuthorizeAllocatesNothing(t *testing.T) {
	ix := benchIndex()
	allocs := testing.AllocsPerRun(100, func() {
		ix.Authorize("User:u777", "10.0.0.1", write, topic, "team27.t777")
		ix.Authorize("User:u777", "10.0.0.1", read, topic, "team27.secret")
	})
	if allocs != 0 {
		t.Fatalf("Authorize allocates %v times per check", allocs)
	}
}

package wire

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// TestAuthzFranzGroupConsumer: a franz-go group consumer whose user may
// read the topic but has no ACL on the group gets
// GROUP_AUTHORIZATION_FAILED surfaced from its polls; once READ on the
// group is granted, the same user consumes.
func TestAuthzFranzGroupConsumer(t *testing.T) {
	b := startReadyAuthzBroker(t)
	admin := b.as(t, "admin")
	if resp := admin.do(createTopicsReq(7, false, "fgc", 1, nil)).(*kmsg.CreateTopicsResponse); resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create fgc: %d", resp.Topics[0].ErrorCode)
	}
	if p := admin.produce(9, "fgc", makeBatch(batchOpts{pid: -1, values: []string{"hello"}})); p.ErrorCode != 0 {
		t.Fatalf("produce as admin: %d", p.ErrorCode)
	}
	b.allow(t, "User:alice", kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypeLiteral, "fgc", kmsg.ACLOperationRead)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	consumer := func() *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.saslAddr), kgo.WithLogger(nil),
			kgo.SASL(plain.Auth{User: "alice", Pass: "pw"}.AsMechanism()),
			kgo.ConsumerGroup("fgc-group"), kgo.ConsumeTopics("fgc"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.RetryBackoffFn(func(int) time.Duration { return 10 * time.Millisecond }))
		if err != nil {
			t.Fatalf("kgo client: %v", err)
		}
		t.Cleanup(cl.Close)
		return cl
	}

	denied := consumer()
	for surfaced := false; !surfaced; {
		fs := denied.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("no GROUP_AUTHORIZATION_FAILED surfaced: %v", err)
		}
		fs.EachRecord(func(r *kgo.Record) { t.Fatalf("consumed %q without a group ACL", r.Value) })
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, kerr.GroupAuthorizationFailed) {
				t.Fatalf("poll error %v, want GROUP_AUTHORIZATION_FAILED", err)
			}
			surfaced = true
		})
	}
	denied.Close()

	b.allow(t, "User:alice", kmsg.ACLResourceTypeGroup, kmsg.ACLResourcePatternTypeLiteral, "fgc-group", kmsg.ACLOperationRead)
	allowed := consumer()
	for got := false; !got; {
		fs := allowed.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("nothing consumed with the group ACL: %v", err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("poll %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Value) != "hello" {
				t.Fatalf("consumed %q", r.Value)
			}
			got = true
		})
	}
}

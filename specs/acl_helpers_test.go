package specs

// Helpers of the authorization specs: brokers with the ACL authorizer on a
// SASL_PLAINTEXT (SCRAM-SHA-512) listener, their users created offline with
// kaasctl, franz-go clients logged in as one of them, ACLs made with kadm,
// and the metadata one exact broker answers.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

const (
	// aclAdmin is the super user (--super-users), aclBrokerUser the
	// brokers' own credential on the inter-broker listener (a super user
	// too, as Kafka operators make it).
	aclAdmin, aclBrokerUser = "admin", "kaas-broker"
	// aclPassword is every user's password.
	aclPassword = "acl-specs-password"
	// aclSyncBound is how long a CreateAcls waits at most for every live
	// broker to load the change: storeSyncRounds (12) heartbeat intervals
	// of 250 ms (engine/synced.go).
	aclSyncBound = 12 * 250 * time.Millisecond
)

// aclUsers are the SCRAM-SHA-512 users every authorization spec's brokers
// know: the admin, the brokers' own, and the applications'.
var aclUsers = []string{aclAdmin, aclBrokerUser, "app", "rdkafka", "sarama-app", "kafkago-app", "takeover-app"}

// createACLUsers writes aclUsers' SCRAM-SHA-512 credentials into the data
// directory dir with kaasctl users set, before any broker starts, and
// returns the password file.
func createACLUsers(ctx context.Context, dir string) string {
	GinkgoHelper()
	pwFile := filepath.Join(GinkgoT().TempDir(), "password")
	Expect(os.WriteFile(pwFile, []byte(aclPassword+"\n"), 0o600)).To(Succeed())
	By(fmt.Sprintf("creating the SCRAM-SHA-512 users %v offline with kaasctl users set", aclUsers))
	for _, u := range aclUsers {
		out, err := Kaasctl(ctx, "users", "set", u, "--mechanism", "SCRAM-SHA-512", "--password-file", pwFile, "--data", dir)
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(ContainSubstring("SCRAM-SHA-512 credential set"))
	}
	return pwFile
}

// withACLAuthorizer makes a broker's only listener SASL_PLAINTEXT with
// SCRAM-SHA-512 on its address, brokers reach each other on it as
// aclBrokerUser, and turns the ACL authorizer on with aclAdmin and
// aclBrokerUser as super users. V 1 logs every refusal.
func withACLAuthorizer(pwFile string) BrokerOpt {
	return func(b *Broker) {
		b.ExtraArgs = append(b.ExtraArgs,
			"--listeners", "SASL_PLAINTEXT://"+b.Addr,
			"--inter-broker-listener", "SASL_PLAINTEXT",
			"--inter-broker-username", aclBrokerUser, "--inter-broker-password-file", pwFile,
			"--sasl-mechanisms", "SCRAM-SHA-512",
			"--authorizer", "acl", "--super-users", "User:"+aclAdmin+";User:"+aclBrokerUser,
			"--v", "1")
	}
}

// startACLBrokers starts n brokers (IDs 1..n) on one shared data directory
// holding aclUsers, with the ACL authorizer on.
func startACLBrokers(ctx context.Context, n int) []*Broker {
	GinkgoHelper()
	dirs := SharedDataDirs(n)
	Expect(os.MkdirAll(dirs[0], 0o755)).To(Succeed())
	pwFile := createACLUsers(ctx, dirs[0])
	var bs []*Broker
	for i, d := range dirs {
		bs = append(bs, StartBroker(d, WithBrokerID(i+1), withACLAuthorizer(pwFile), withGroupFlags()))
	}
	return bs
}

// principal is the ACL principal of user.
func principal(user string) string { return "User:" + user }

// scramOpts are the options of a franz-go client of addrs logged in as
// user with SCRAM-SHA-512. It retries little, so that a refusal is seen at
// once.
func scramOpts(user string, addrs ...string) []kgo.Opt {
	return []kgo.Opt{kgo.SeedBrokers(addrs...), kgo.ClientID("kaas-specs-" + user),
		kgo.SASL(scram.Auth{User: user, Pass: aclPassword}.AsSha512Mechanism()),
		kgo.WithLogger(kgo.BasicLogger(GinkgoWriter, kgo.LogLevelWarn, func() string { return "[kgo " + user + "] " })),
		kgo.RequestRetries(3), kgo.RetryTimeout(10 * time.Second), kgo.RecordDeliveryTimeout(20 * time.Second)}
}

// scramClient is a franz-go client of addrs logged in as user, closed at
// cleanup.
func scramClient(user string, addrs []string, opts ...kgo.Opt) *kgo.Client {
	GinkgoHelper()
	cl, err := kgo.NewClient(append(scramOpts(user, addrs...), opts...)...)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(cl.Close)
	return cl
}

// scramAdmin is a kadm client of addrs logged in as user.
func scramAdmin(user string, addrs ...string) *kadm.Client {
	GinkgoHelper()
	return kadm.NewClient(scramClient(user, addrs))
}

// produceAs produces one record (acks=all) to topic through a new client
// of addrs logged in as user and returns the record's error. The producer
// is not idempotent, so that a user with WRITE on no topic at all meets
// the topic's refusal rather than InitProducerId's.
func produceAs(ctx context.Context, user, topic string, addrs ...string) error {
	GinkgoHelper()
	cl, err := kgo.NewClient(append(scramOpts(user, addrs...), kgo.DefaultProduceTopic(topic), kgo.DisableIdempotentWrite())...)
	Expect(err).NotTo(HaveOccurred())
	defer cl.Close()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return cl.ProduceSync(cctx, &kgo.Record{Value: []byte(UniqueName("v"))}).FirstErr()
}

// expectCreated creates the ACLs b builds and expects each to be stored.
func expectCreated(ctx context.Context, adm *kadm.Client, b *kadm.ACLBuilder) kadm.CreateACLsResults {
	GinkgoHelper()
	res, err := adm.CreateACLs(ctx, b)
	Expect(err).NotTo(HaveOccurred(), "CreateAcls")
	Expect(res).NotTo(BeEmpty())
	for _, r := range res {
		Expect(r.Err).NotTo(HaveOccurred(), "CreateAcls of %s %v %s %s: %s", r.Principal, r.Type, r.Name, r.Operation, r.ErrMessage)
	}
	return res
}

// partitionAnswer is what one broker answers for one partition in
// Metadata: its leader and error code.
type partitionAnswer struct {
	leader int32
	code   int16
}

// metadataFrom asks exactly the broker at addr, as user, for the metadata
// of topics, and returns by topic its error code and its partitions'
// answers (partition 0 first).
func metadataFrom(ctx context.Context, user, addr string, topics ...string) (map[string]int16, map[string][]partitionAnswer, error) {
	cl, err := kgo.NewClient(scramOpts(user, addr)...)
	if err != nil {
		return nil, nil, err
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := req.RequestWith(rctx, cl.SeedBrokers()[0])
	if err != nil {
		return nil, nil, err
	}
	codes, parts := map[string]int16{}, map[string][]partitionAnswer{}
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		codes[*t.Topic] = t.ErrorCode
		for _, p := range t.Partitions {
			parts[*t.Topic] = append(parts[*t.Topic], partitionAnswer{leader: p.Leader, code: p.ErrorCode})
		}
	}
	return codes, parts, nil
}

// errName names a Kafka error code for a failure message.
func errName(code int16) string {
	if err := kerr.ErrorForCode(code); err != nil {
		return err.Error()
	}
	return "NONE"
}

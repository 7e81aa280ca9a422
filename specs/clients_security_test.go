package specs

// The client matrix on secure listeners: librdkafka (kcat and
// confluent-kafka-python), franz-go, sarama, segmentio/kafka-go and kafkajs
// each produce records and consume them back as a consumer group, on
// SASL_SSL with SCRAM-SHA-512 and on SSL with a client certificate (mTLS),
// against one broker. The user is created offline with kaasctl before the
// broker starts; the certificates come from a test CA, as PEM files.

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/IBM/sarama"
	"github.com/segmentio/kafka-go"
	kafkasasl "github.com/segmentio/kafka-go/sasl"
	kafkascram "github.com/segmentio/kafka-go/sasl/scram"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kaas-dev/kaas/wire/tlsfiles/tlstest"
)

// secureRecords is how many records each client produces and consumes on
// each listener.
const secureRecords = 200

// secureBroker is the shared broker of the matrix and what a client needs
// to reach its secure listeners.
type secureBroker struct {
	b                  *Broker
	saslAddr, sslAddr  string
	caFile             string // the test CA, PEM
	certFile, keyFile  string // the mTLS client's certificate and key, PEM
	tlsSASL, tlsMutual *tls.Config
	user, password     string
}

// secureListener is one of the two listeners a client runs on.
type secureListener struct {
	name string // SASL_SSL or SSL
	sasl bool
}

func (s *secureBroker) addr(l secureListener) string {
	if l.sasl {
		return s.saslAddr
	}
	return s.sslAddr
}

func (s *secureBroker) tlsConfig(l secureListener) *tls.Config {
	if l.sasl {
		return s.tlsSASL.Clone()
	}
	return s.tlsMutual.Clone()
}

// librdkafka is the configuration kcat and confluent-kafka-python share.
func (s *secureBroker) librdkafka(l secureListener) []string {
	props := []string{"ssl.ca.location=" + s.caFile}
	if l.sasl {
		return append(props, "security.protocol=SASL_SSL", "sasl.mechanisms=SCRAM-SHA-512",
			"sasl.username="+s.user, "sasl.password="+s.password)
	}
	return append(props, "security.protocol=SSL",
		"ssl.certificate.location="+s.certFile, "ssl.key.location="+s.keyFile)
}

// startSecureBroker writes the certificates and the SCRAM-SHA-512 user,
// then starts a broker with PLAINTEXT (for the spec's own admin client),
// SASL_SSL and SSL (client certificates required) listeners.
func startSecureBroker(ctx context.Context) *secureBroker {
	GinkgoHelper()
	dir := GinkgoT().TempDir()
	data := filepath.Join(dir, "data")
	s := &secureBroker{saslAddr: freeAddr(), sslAddr: freeAddr(), user: "matrix-app", password: "s3cret-matrix-pw"}

	By("making a test CA, a server certificate for 127.0.0.1 and a client certificate")
	ca := tlstest.NewCA(GinkgoTB(), "kaas-specs-ca")
	serverCert, serverKey, caFile := ca.ServerFiles(GinkgoTB(), dir)
	s.caFile = caFile
	certPEM, keyPEM := ca.Issue(GinkgoTB(), pkix.Name{CommonName: "matrix-client"}, true)
	s.certFile, s.keyFile = filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key")
	Expect(os.WriteFile(s.certFile, certPEM, 0o600)).To(Succeed())
	Expect(os.WriteFile(s.keyFile, keyPEM, 0o600)).To(Succeed())
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	Expect(err).NotTo(HaveOccurred())
	s.tlsSASL = &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}
	s.tlsMutual = &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}

	By("creating the SCRAM-SHA-512 user offline with kaasctl users set")
	pwFile := filepath.Join(dir, "password")
	Expect(os.WriteFile(pwFile, []byte(s.password+"\n"), 0o600)).To(Succeed())
	out, err := Kaasctl(ctx, "users", "set", s.user, "--mechanism", "SCRAM-SHA-512", "--password-file", pwFile, "--data", data)
	Expect(err).NotTo(HaveOccurred())
	Expect(out).To(ContainSubstring("SCRAM-SHA-512 credential set"))

	listeners := func(b *Broker) {
		b.ExtraArgs = append(b.ExtraArgs,
			"--listeners", "PLAINTEXT://"+b.Addr+",SASL_SSL://"+s.saslAddr+",SSL://"+s.sslAddr,
			"--tls-cert-file", serverCert, "--tls-key-file", serverKey,
			"--tls-client-ca-file", caFile, "--tls-client-auth", "required",
			"--sasl-mechanisms", "SCRAM-SHA-512",
			"--v", "1") // V 1 logs every failed authentication with its reason
	}
	s.b = StartBroker(data, listeners, withGroupFlags())
	return s
}

// matrixValues are the values a client's run produces: prefix-0000...
func matrixValues(prefix string) []string {
	out := make([]string, secureRecords)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%04d", prefix, i)
	}
	return out
}

// clientRun produces matrixValues(prefix) to topic through listener l, then
// consumes them back as group, commits and leaves; it returns every value
// it consumed.
type clientRun func(ctx context.Context, s *secureBroker, l secureListener, topic, group, prefix string) []string

var _ = Describe("real clients on SASL_SSL (SCRAM-SHA-512) and SSL (mTLS)", Ordered, ContinueOnFailure, Label("clients", "security"), func() {
	var s *secureBroker

	BeforeAll(func(ctx SpecContext) {
		kcatPath() // fail early when kcat is missing
		s = startSecureBroker(ctx)
	}, NodeTimeout(2*time.Minute))

	clients := []struct {
		name, tag string // tag names the run's topic, group and values
		installed func() // skips (fails in CI) when the client is missing; nil: a Go module or kcat
		run       clientRun
	}{
		{"librdkafka via kcat (-P, then -G)", "kcat", nil, runKcatSecure},
		{"librdkafka via confluent-kafka-python (Producer, Consumer group)", "confluent", confluentInstalled, runConfluentSecure},
		{"franz-go (ProduceSync, ConsumerGroup)", "franz", nil, runFranzSecure},
		{"sarama (SyncProducer, ConsumerGroup)", "sarama", nil, runSaramaSecure},
		{"segmentio/kafka-go (Writer, Reader with GroupID)", "kafkago", nil, runKafkaGoSecure},
		{"kafkajs (producer, consumer group)", "kafkajs", kafkajsInstalled, runKafkajsSecure},
	}
	for _, l := range []secureListener{{name: "SASL_SSL", sasl: true}, {name: "SSL"}} {
		for _, c := range clients {
			It(fmt.Sprintf("%s produces and consumes back on %s", c.name, l.name), func(ctx SpecContext) {
				if c.installed != nil {
					c.installed()
				}
				tag := c.tag + "-" + strings.ToLower(strings.ReplaceAll(l.name, "_", ""))
				topic, group := UniqueName("sec-"+tag), UniqueName("sec-"+tag)
				adm := NewAdmin(s.b)
				CreateTopic(ctx, adm, topic, 2)
				prefix := UniqueName(tag)
				By(fmt.Sprintf("producing %d records and consuming them back as group %s on %s", secureRecords, group, l.name))
				expectExactlyOnce(c.run(ctx, s, l, topic, group, prefix), matrixValues(prefix))
				expectCommittedToEnd(ctx, adm, group, topic)
			}, SpecTimeout(time.Minute))
		}
	}
})

// expectCommittedToEnd checks that group committed the end offset of every
// partition of topic that holds records; a client may commit nothing for
// an empty one.
func expectCommittedToEnd(ctx context.Context, adm *kadm.Client, group, topic string) {
	GinkgoHelper()
	ends, err := topicEnds(ctx, adm, topic)
	Expect(err).NotTo(HaveOccurred(), "ListOffsets of %s", topic)
	got, err := committed(ctx, adm, group, topic)
	Expect(err).NotTo(HaveOccurred(), "OffsetFetch of group %s", group)
	for p, end := range ends {
		if end == 0 {
			delete(ends, p)
			delete(got, p)
		}
	}
	Expect(got).To(Equal(ends), "group %s: committed offsets (OffsetFetch) against end offsets (ListOffsets) of the partitions with records", group)
}

// ---------------------------------------------------------------------------
// librdkafka

func runKcatSecure(ctx context.Context, s *secureBroker, l secureListener, topic, group, prefix string) []string {
	GinkgoHelper()
	var conf []string
	for _, p := range s.librdkafka(l) {
		conf = append(conf, "-X", p)
	}
	// Keyed (key:value), so that the partitioner spreads them.
	var lines strings.Builder
	for _, v := range matrixValues(prefix) {
		fmt.Fprintf(&lines, "%s:%s\n", v, v)
	}
	runKcat(ctx, strings.NewReader(lines.String()),
		append([]string{"-b", s.addr(l), "-P", "-K", ":", "-t", topic, "-X", "acks=all"}, conf...)...)
	// As runKcatGroup: no -o, a new group starts at the beginning, -e ends
	// at every assigned partition's end, closing commits.
	out := runKcat(ctx, nil, append([]string{"-b", s.addr(l), "-G", group, "-e", "-q", "-f", `%s\n`,
		"-X", "auto.offset.reset=earliest",
		"-X", "enable.auto.commit=true", "-X", "auto.commit.interval.ms=100",
		"-X", "session.timeout.ms=6000", "-X", "heartbeat.interval.ms=500"}, append(conf, topic)...)...)
	return strings.Fields(out)
}

// systemPython is the Debian python3 that python3-confluent-kafka installs into.
const systemPython = "/usr/bin/python3"

func confluentInstalled() {
	GinkgoHelper()
	if err := exec.Command(systemPython, "-c", "import confluent_kafka").Run(); err != nil {
		skipOrFailInCI(fmt.Sprintf("%s cannot import confluent_kafka (%v): apt-get install -y python3-confluent-kafka (.ci/run does)", systemPython, err))
	}
}

func runConfluentSecure(ctx context.Context, s *secureBroker, l secureListener, topic, group, prefix string) []string {
	GinkgoHelper()
	args := append([]string{filepath.Join("testdata", "confluent_roundtrip.py"),
		s.addr(l), topic, group, prefix, fmt.Sprint(secureRecords)}, s.librdkafka(l)...)
	return strings.Fields(runScript(ctx, "confluent-kafka-python", exec.CommandContext(ctx, systemPython, args...)))
}

// ---------------------------------------------------------------------------
// kafkajs

// kafkajsEnv names the node_modules directory holding kafkajs; .ci/run
// installs it with npm and exports it.
const kafkajsEnv = "KAAS_NODE_MODULES"

func kafkajsInstalled() {
	GinkgoHelper()
	modules := os.Getenv(kafkajsEnv)
	if modules == "" {
		skipOrFailInCI(kafkajsEnv + " is not set: it names a node_modules directory holding kafkajs " +
			"(npm install --prefix DIR kafkajs@2.2.4, then " + kafkajsEnv + "=DIR/node_modules; .ci/run does)")
	}
	if _, err := os.Stat(filepath.Join(modules, "kafkajs", "package.json")); err != nil {
		Fail(fmt.Sprintf("%s=%s holds no kafkajs: %v", kafkajsEnv, modules, err))
	}
	if _, err := exec.LookPath("node"); err != nil {
		skipOrFailInCI("node is not installed: apt-get install -y nodejs (.ci/run does)")
	}
}

func runKafkajsSecure(ctx context.Context, s *secureBroker, l secureListener, topic, group, prefix string) []string {
	GinkgoHelper()
	cfg := map[string]any{"broker": s.addr(l), "topic": topic, "group": group, "prefix": prefix,
		"count": secureRecords, "caFile": s.caFile}
	if l.sasl {
		cfg["username"], cfg["password"] = s.user, s.password
	} else {
		cfg["certFile"], cfg["keyFile"] = s.certFile, s.keyFile
	}
	js, err := json.Marshal(cfg)
	Expect(err).NotTo(HaveOccurred())
	cmd := exec.CommandContext(ctx, "node", filepath.Join("testdata", "kafkajs_roundtrip.js"), string(js))
	cmd.Env = append(os.Environ(), "NODE_PATH="+os.Getenv(kafkajsEnv), "KAFKAJS_NO_PARTITIONER_WARNING=1")
	return strings.Fields(runScript(ctx, "kafkajs", cmd))
}

// skipOrFailInCI skips the spec with reason on a developer machine; in CI,
// where .ci/run installs every client, a missing one is a failure.
func skipOrFailInCI(reason string) {
	GinkgoHelper()
	if os.Getenv("CI") == "true" {
		Fail(reason)
	}
	Skip(reason)
}

// runScript runs a client script, bounded to 50 s, and returns its stdout;
// its stderr goes to GinkgoWriter and into the failure.
func runScript(ctx context.Context, name string, cmd *exec.Cmd) string {
	GinkgoHelper()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	fmt.Fprintf(GinkgoWriter, "$ %s\n", strings.Join(cmd.Args, " "))
	done := make(chan error, 1)
	Expect(cmd.Start()).To(Succeed(), "starting %s", name)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(50 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		err = fmt.Errorf("killed after 50 s")
	}
	if stderr.Len() > 0 {
		fmt.Fprintf(GinkgoWriter, "%s stderr:\n%.4000s\n", name, stderr.String())
	}
	Expect(err).NotTo(HaveOccurred(), "%s failed; stderr:\n%.4000s", name, stderr.String())
	return stdout.String()
}

// ---------------------------------------------------------------------------
// Go clients

func runFranzSecure(ctx context.Context, s *secureBroker, l secureListener, topic, group, prefix string) []string {
	GinkgoHelper()
	opts := []kgo.Opt{kgo.SeedBrokers(s.addr(l)), kgo.ClientID("kaas-specs-franz"),
		kgo.WithLogger(kgo.BasicLogger(GinkgoWriter, kgo.LogLevelWarn, func() string { return "[kgo] " })),
		kgo.DialTLSConfig(s.tlsConfig(l))}
	if l.sasl {
		opts = append(opts, kgo.SASL(scram.Auth{User: s.user, Pass: s.password}.AsSha512Mechanism()))
	}
	prod, err := kgo.NewClient(append(opts, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))...)
	Expect(err).NotTo(HaveOccurred())
	defer prod.Close()
	var rs []*kgo.Record
	for _, v := range matrixValues(prefix) {
		rs = append(rs, &kgo.Record{Key: []byte(v), Value: []byte(v)})
	}
	Expect(prod.ProduceSync(ctx, rs...).FirstErr()).To(Succeed(), "franz-go ProduceSync")
	prod.Close()

	return runFranzGroupWith(ctx, opts, group, topic, secureRecords)
}

// saramaSCRAM is sarama's SCRAM client, made of kafka-go's SCRAM-SHA-512
// mechanism: sarama asks for the first message with Step("").
type saramaSCRAM struct {
	mech kafkasasl.Mechanism
	sm   kafkasasl.StateMachine
	done bool
}

func (c *saramaSCRAM) Begin(user, password, _ string) error {
	m, err := kafkascram.Mechanism(kafkascram.SHA512, user, password)
	c.mech, c.sm, c.done = m, nil, false
	return err
}

func (c *saramaSCRAM) Step(challenge string) (string, error) {
	if c.sm == nil {
		sm, first, err := c.mech.Start(context.Background())
		c.sm = sm
		return string(first), err
	}
	done, resp, err := c.sm.Next(context.Background(), []byte(challenge))
	c.done = done
	return string(resp), err
}

func (c *saramaSCRAM) Done() bool { return c.done }

func saramaSecureConfig(s *secureBroker, l secureListener) *sarama.Config {
	GinkgoHelper()
	cfg := sarama.NewConfig()
	cfg.ClientID = "kaas-specs-sarama"
	cfg.Version = sarama.V2_1_0_0
	cfg.Net.TLS.Enable = true
	cfg.Net.TLS.Config = s.tlsConfig(l)
	if l.sasl {
		cfg.Net.SASL.Enable = true
		cfg.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA512
		cfg.Net.SASL.Version = sarama.SASLHandshakeV1
		cfg.Net.SASL.User, cfg.Net.SASL.Password = s.user, s.password
		cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &saramaSCRAM{} }
	}
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Consumer.Return.Errors = true
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	cfg.Consumer.Group.Session.Timeout = groupSession
	cfg.Consumer.Group.Heartbeat.Interval = groupHeartbeat
	cfg.Consumer.MaxWaitTime = 200 * time.Millisecond
	Expect(cfg.Validate()).To(Succeed())
	return cfg
}

func runSaramaSecure(ctx context.Context, s *secureBroker, l secureListener, topic, group, prefix string) []string {
	GinkgoHelper()
	cfg := saramaSecureConfig(s, l)
	prod, err := sarama.NewSyncProducer([]string{s.addr(l)}, cfg)
	Expect(err).NotTo(HaveOccurred(), "sarama NewSyncProducer")
	var msgs []*sarama.ProducerMessage
	for _, v := range matrixValues(prefix) {
		msgs = append(msgs, &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(v), Value: sarama.StringEncoder(v)})
	}
	Expect(prod.SendMessages(msgs)).To(Succeed(), "sarama SendMessages")
	Expect(prod.Close()).To(Succeed())

	cg, err := sarama.NewConsumerGroup([]string{s.addr(l)}, group, cfg)
	Expect(err).NotTo(HaveOccurred(), "sarama NewConsumerGroup")
	defer cg.Close()
	errs := make(chan error, 16)
	go func() {
		for err := range cg.Errors() {
			select {
			case errs <- err:
			default:
			}
		}
	}()
	got := make(chan string)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	consumed := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(consumed)
		for cctx.Err() == nil {
			if err := cg.Consume(cctx, []string{topic}, saramaHandler{got: got}); err != nil && cctx.Err() == nil {
				fmt.Fprintf(GinkgoWriter, "[sarama] Consume: %v\n", err)
				time.Sleep(100 * time.Millisecond)
			}
		}
	}()
	vals := collect(ctx, secureRecords, func(ctx context.Context) (string, error) {
		select {
		case v := <-got:
			return v, nil
		case err := <-errs:
			return "", fmt.Errorf("sarama consumer group: %w", err)
		case <-ctx.Done():
			return "", ctx.Err()
		}
	})
	cancel() // ends the session: saramaHandler's Cleanup commits
	Eventually(consumed).WithTimeout(30 * time.Second).Should(BeClosed())
	Expect(cg.Close()).To(Succeed())
	Expect(errs).NotTo(Receive(), "sarama consumer group errors (commits included)")
	return vals
}

func runKafkaGoSecure(ctx context.Context, s *secureBroker, l secureListener, topic, group, prefix string) []string {
	GinkgoHelper()
	var mech kafkasasl.Mechanism
	if l.sasl {
		m, err := kafkascram.Mechanism(kafkascram.SHA512, s.user, s.password)
		Expect(err).NotTo(HaveOccurred())
		mech = m
	}
	logf := kafka.LoggerFunc(func(format string, args ...any) {
		fmt.Fprintf(GinkgoWriter, "[kafka-go] "+format+"\n", args...)
	})
	transport := &kafka.Transport{TLS: s.tlsConfig(l), SASL: mech, ClientID: "kaas-specs-kafka-go"}
	defer transport.CloseIdleConnections()
	w := &kafka.Writer{Addr: kafka.TCP(s.addr(l)), Topic: topic, Transport: transport,
		RequiredAcks: kafka.RequireAll, BatchSize: secureRecords, BatchTimeout: 10 * time.Millisecond,
		WriteTimeout: 30 * time.Second, ReadTimeout: 30 * time.Second, ErrorLogger: logf}
	var msgs []kafka.Message
	for _, v := range matrixValues(prefix) {
		msgs = append(msgs, kafka.Message{Key: []byte(v), Value: []byte(v)})
	}
	Expect(w.WriteMessages(ctx, msgs...)).To(Succeed(), "kafka-go WriteMessages")
	Expect(w.Close()).To(Succeed())

	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers:           []string{s.addr(l)},
		Dialer:            &kafka.Dialer{Timeout: 10 * time.Second, DualStack: true, TLS: s.tlsConfig(l), SASLMechanism: mech, ClientID: "kaas-specs-kafka-go"},
		GroupID:           group,
		Topic:             topic,
		StartOffset:       kafka.FirstOffset,
		CommitInterval:    0, // CommitMessages commits synchronously
		SessionTimeout:    groupSession,
		HeartbeatInterval: groupHeartbeat,
		RebalanceTimeout:  10 * time.Second,
		JoinGroupBackoff:  200 * time.Millisecond,
		MaxWait:           200 * time.Millisecond,
		ErrorLogger:       logf,
	})
	defer r.Close()
	var fetched []kafka.Message
	vals := collect(ctx, secureRecords, func(ctx context.Context) (string, error) {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			return "", err
		}
		fetched = append(fetched, m)
		return string(m.Value), nil
	})
	Expect(r.CommitMessages(ctx, fetched...)).To(Succeed(), "kafka-go CommitMessages")
	Expect(r.Close()).To(Succeed()) // leaves the group
	return vals
}

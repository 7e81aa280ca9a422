package specs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kaasv1 "github.com/kaas-dev/kaas/cmd/kaas-operator/api/v1alpha1"
)

// Topic resources against a real kube-apiserver and etcd (envtest), a real
// kaas-operator process and a real broker on a local directory: what the
// resource says reaches the desired-state files, the brokers open and
// delete directories, and the status says what the engine did.
var _ = Describe("Topic resources on a real API server", Ordered, Label("k8s", "operator"), func() {
	const ns = "default"
	var (
		api    *apiServer
		broker *Broker
		op     *operatorProcess
		adm    *kadm.Client
		k8s    client.Client
	)

	BeforeAll(func(ctx SpecContext) {
		api = startAPIServer()
		k8s = api.client
		broker = StartBroker(GinkgoT().TempDir(), WithBrokerArgs("--auto-create-topics=false"))
		op = startOperator(ctx, api, broker.Dir)
		adm = NewAdmin(broker)
	}, NodeTimeout(3*time.Minute))

	topicKey := func(name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }

	getTopic := func(ctx context.Context, name string) *kaasv1.Topic {
		GinkgoHelper()
		t := &kaasv1.Topic{}
		Expect(k8s.Get(ctx, topicKey(name), t)).To(Succeed())
		return t
	}

	// waitReady waits for Ready=True at the resource's current generation
	// with every partition serving, and returns the resource.
	waitReady := func(ctx context.Context, name string, partitions int32) *kaasv1.Topic {
		GinkgoHelper()
		var t *kaasv1.Topic
		Eventually(func(g Gomega) {
			t = &kaasv1.Topic{}
			g.Expect(k8s.Get(ctx, topicKey(name), t)).To(Succeed())
			ready := meta.FindStatusCondition(t.Status.Conditions, "Ready")
			g.Expect(ready).NotTo(BeNil(), "no Ready condition: %+v", t.Status)
			g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), "Ready: %s: %s", ready.Reason, ready.Message)
			g.Expect(ready.ObservedGeneration).To(Equal(t.Generation))
			g.Expect(t.Status.ObservedGeneration).To(Equal(t.Generation))
			g.Expect(t.Status.PartitionsServing).To(Equal(fmt.Sprintf("%d/%d", partitions, partitions)))
			g.Expect(t.Status.Partitions).To(HaveLen(int(partitions)))
			for _, p := range t.Status.Partitions {
				g.Expect(p.State).To(Equal("serving"), "partition %d", p.Partition)
			}
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
		return t
	}

	// kafkaTopicID returns the topic ID Metadata gives, or "" if the topic
	// is unknown.
	kafkaTopicID := func(ctx context.Context, name string) string {
		GinkgoHelper()
		md, err := adm.Metadata(ctx, name)
		Expect(err).NotTo(HaveOccurred())
		td := md.Topics[name]
		if td.Err != nil {
			Expect(td.Err).To(MatchError(kerr.UnknownTopicOrPartition))
			return ""
		}
		return uuid.UUID(td.ID).String()
	}

	newTopic := func(name string, partitions int32, config map[string]string) *kaasv1.Topic {
		return &kaasv1.Topic{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       kaasv1.TopicSpec{Partitions: partitions, Config: config},
		}
	}

	It("creates a topic under a new topic ID, Ready only once every partition serves, and Kafka clients see it", func(ctx SpecContext) {
		name := UniqueName("orders")
		created := time.Now()
		Expect(k8s.Create(ctx, newTopic(name, 3, map[string]string{"retention.ms": "86400000"}))).To(Succeed())
		t := waitReady(ctx, name, 3)
		reportLatency("Topic create → Ready (3 partitions)", time.Since(created))

		d, ok := readDesired(broker.Dir, name)
		Expect(ok).To(BeTrue(), "no desired-state file for %s", name)
		Expect(d.ID).To(Equal(t.Status.TopicID))
		Expect(d.Partitions).To(Equal(int32(3)))
		Expect(d.Configs).To(Equal(map[string]string{"retention.ms": "86400000"}))
		Expect(d.ManagedBy).To(Equal(fmt.Sprintf("kubernetes/%s/%s/%s", ns, name, t.UID)))
		Expect(t.Status.TopicName).To(Equal(name))
		Expect(t.Finalizers).To(ContainElement("kaas.io/topic-deletion"))
		for p := range 3 {
			Expect(filepath.Join(broker.Dir, "topics", name, fmt.Sprint(p))).To(BeADirectory())
		}
		Expect(kafkaTopicID(ctx, name)).To(Equal(t.Status.TopicID), "Metadata's topic ID")

		By("producing and consuming through the topic")
		cl := NewClient(broker, kgo.ConsumeTopics(name), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		Expect(cl.ProduceSync(ctx, &kgo.Record{Topic: name, Value: []byte("hello")}).FirstErr()).To(Succeed())
		Eventually(func() int { return cl.PollFetches(ctx).NumRecords() }).WithContext(ctx).Should(Equal(1))

		By("DescribeConfigs shows the resource's retention.ms")
		rcs, err := adm.DescribeTopicConfigs(ctx, name)
		Expect(err).NotTo(HaveOccurred())
		rc, err := rcs.On(name, nil)
		Expect(err).NotTo(HaveOccurred())
		found := false
		for _, c := range rc.Configs {
			if c.Key == "retention.ms" {
				found = true
				Expect(c.MaybeValue()).To(Equal("86400000"))
			}
		}
		Expect(found).To(BeTrue())

		By("the Kafka admin APIs refuse to change or delete a topic the resource declares")
		alter, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: kadm.StringPtr("1000")}}, name)
		Expect(err).NotTo(HaveOccurred())
		Expect(alter[0].Err).To(MatchError(kerr.PolicyViolation))
		Expect(alter[0].ErrMessage).To(ContainSubstring("kubernetes/"))
		del, err := adm.DeleteTopics(ctx, name)
		Expect(err).NotTo(HaveOccurred())
		Expect(del[name].Err).To(MatchError(kerr.PolicyViolation))
		Expect(kafkaTopicID(ctx, name)).To(Equal(t.Status.TopicID))
	})

	It("raises partitions and changes configs when the resource changes, and the API server refuses a decrease or an unknown config", func(ctx SpecContext) {
		name := UniqueName("grow")
		Expect(k8s.Create(ctx, newTopic(name, 2, nil))).To(Succeed())
		first := waitReady(ctx, name, 2)

		t := getTopic(ctx, name)
		t.Spec.Partitions = 4
		t.Spec.Config = map[string]string{"retention.bytes": "1048576", "cleanup.policy": "delete"}
		Expect(k8s.Update(ctx, t)).To(Succeed())
		t = waitReady(ctx, name, 4)
		Expect(t.Status.TopicID).To(Equal(first.Status.TopicID), "a change keeps the topic ID")
		d, _ := readDesired(broker.Dir, name)
		Expect(d.Partitions).To(Equal(int32(4)))
		Expect(d.Configs).To(Equal(map[string]string{"retention.bytes": "1048576", "cleanup.policy": "delete"}))
		Eventually(func(g Gomega) {
			md, err := adm.Metadata(ctx, name)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(md.Topics[name].Partitions).To(HaveLen(4))
		}).WithContext(ctx).WithTimeout(15 * time.Second).Should(Succeed())

		t = getTopic(ctx, name)
		t.Spec.Partitions = 3
		err := k8s.Update(ctx, t)
		Expect(err).To(HaveOccurred(), "a partition decrease must be refused")
		Expect(err.Error()).To(ContainSubstring("partitions can be added, not removed"))

		t = getTopic(ctx, name)
		t.Spec.Config = map[string]string{"segment.jitter.ms": "1"}
		err = k8s.Update(ctx, t)
		Expect(err).To(HaveOccurred(), "an unknown config key must be refused by the schema")
		Expect(err.Error()).To(ContainSubstring("retention.ms"), "the message lists the keys kaas knows")

		Expect(k8s.Create(ctx, newTopic(UniqueName("zero"), 0, nil))).NotTo(Succeed(), "partitions must be at least 1")
	})

	It("leaves a paused resource alone until the pause is lifted", func(ctx SpecContext) {
		name := UniqueName("paused")
		Expect(k8s.Create(ctx, newTopic(name, 1, nil))).To(Succeed())
		waitReady(ctx, name, 1)

		t := getTopic(ctx, name)
		t.Annotations = map[string]string{"kaas.io/paused": "true"}
		Expect(k8s.Update(ctx, t)).To(Succeed())
		Eventually(func(g Gomega) {
			t := getTopic(ctx, name)
			rc := meta.FindStatusCondition(t.Status.Conditions, "Reconciling")
			g.Expect(rc).NotTo(BeNil())
			g.Expect(rc.Reason).To(Equal("Paused"))
			g.Expect(rc.Status).To(Equal(metav1.ConditionFalse))
		}).WithContext(ctx).WithTimeout(10 * time.Second).Should(Succeed())

		t = getTopic(ctx, name)
		t.Spec.Partitions = 2
		Expect(k8s.Update(ctx, t)).To(Succeed())
		Consistently(func() int32 {
			d, _ := readDesired(broker.Dir, name)
			return d.Partitions
		}).WithContext(ctx).WithTimeout(2 * time.Second).WithPolling(100 * time.Millisecond).Should(Equal(int32(1)))

		t = getTopic(ctx, name)
		delete(t.Annotations, "kaas.io/paused")
		Expect(k8s.Update(ctx, t)).To(Succeed())
		waitReady(ctx, name, 2)
	})

	It("holds a deleted resource until the topic's data is gone, and gives the recreated resource a new topic ID", func(ctx SpecContext) {
		name := UniqueName("recreated")
		Expect(k8s.Create(ctx, newTopic(name, 2, nil))).To(Succeed())
		old := waitReady(ctx, name, 2)
		cl := NewClient(broker)
		Expect(cl.ProduceSync(ctx, &kgo.Record{Topic: name, Partition: 0, Value: []byte("old incarnation")}).FirstErr()).To(Succeed())

		deleted := time.Now()
		Expect(k8s.Delete(ctx, getTopic(ctx, name))).To(Succeed())
		Eventually(func(g Gomega) {
			err := k8s.Get(ctx, topicKey(name), &kaasv1.Topic{})
			g.Expect(isNotFound(err)).To(BeTrue(), "resource still there: %v", err)
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(50 * time.Millisecond).Should(Succeed())
		reportLatency("Topic delete → resource gone, data purged (2 partitions)", time.Since(deleted))
		// The finalizer is removed only after the topic-delete machine's
		// last step: the data must be gone the moment the resource is.
		_, ok := readDesired(broker.Dir, name)
		Expect(ok).To(BeFalse(), "desired state outlived the resource")
		_, err := os.Stat(filepath.Join(broker.Dir, "topics", name))
		Expect(os.IsNotExist(err)).To(BeTrue(), "topic directory outlived the resource: %v", err)
		Eventually(func() string { return kafkaTopicID(ctx, name) }).WithContext(ctx).WithTimeout(10 * time.Second).Should(BeEmpty())

		By("recreating the resource under the same name")
		recreated := time.Now()
		Expect(k8s.Create(ctx, newTopic(name, 2, nil))).To(Succeed())
		again := waitReady(ctx, name, 2)
		reportLatency("Topic recreate → Ready under a new topic ID (2 partitions)", time.Since(recreated))
		Expect(again.Status.TopicID).NotTo(Equal(old.Status.TopicID), "a recreated resource is a new incarnation")
		// The record says serving a moment before the broker routes it.
		Eventually(func() string { return kafkaTopicID(ctx, name) }).WithContext(ctx).WithTimeout(5 * time.Second).Should(Equal(again.Status.TopicID))
		offs, err := adm.ListEndOffsets(ctx, name)
		Expect(err).NotTo(HaveOccurred())
		offs.Each(func(o kadm.ListedOffset) {
			Expect(o.Err).NotTo(HaveOccurred())
			Expect(o.Offset).To(BeZero(), "partition %d of the new incarnation has records", o.Partition)
		})
	})

	It("never deletes a topic created through the Kafka API, and adopts one only when asked", func(ctx SpecContext) {
		name := UniqueName("kafkamade")
		CreateTopic(ctx, adm, name, 2)
		kafkaID := kafkaTopicID(ctx, name)

		Expect(k8s.Create(ctx, newTopic(name, 2, nil))).To(Succeed())
		Eventually(func(g Gomega) {
			t := getTopic(ctx, name)
			f := meta.FindStatusCondition(t.Status.Conditions, "Failed")
			g.Expect(f).NotTo(BeNil())
			g.Expect(f.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(f.Reason).To(Equal("TopicExists"))
			g.Expect(f.Message).To(ContainSubstring("kaas.io/adopt"))
		}).WithContext(ctx).WithTimeout(10 * time.Second).Should(Succeed())
		Expect(k8s.Delete(ctx, getTopic(ctx, name))).To(Succeed())
		Eventually(func() bool { return isNotFound(k8s.Get(ctx, topicKey(name), &kaasv1.Topic{})) }).
			WithContext(ctx).WithTimeout(10 * time.Second).Should(BeTrue())
		Expect(kafkaTopicID(ctx, name)).To(Equal(kafkaID), "the Kafka topic outlives a resource that never managed it")

		By("adopting it with kaas.io/adopt")
		t := newTopic(name, 3, nil)
		t.Annotations = map[string]string{"kaas.io/adopt": "true"}
		Expect(k8s.Create(ctx, t)).To(Succeed())
		t = waitReady(ctx, name, 3)
		Expect(t.Status.TopicID).To(Equal(kafkaID), "adoption keeps the topic's identity")
	})

	It("converges after the operator is killed in the middle of a delete", func(ctx SpecContext) {
		name := UniqueName("opkill")
		Expect(k8s.Create(ctx, newTopic(name, 2, nil))).To(Succeed())
		waitReady(ctx, name, 2)
		Expect(k8s.Delete(ctx, getTopic(ctx, name))).To(Succeed())
		Eventually(func() bool { d, ok := readDesired(broker.Dir, name); return !ok || d.Deleted }).
			WithContext(ctx).WithTimeout(10 * time.Second).WithPolling(10 * time.Millisecond).Should(BeTrue())
		op.kill()
		op = startOperator(ctx, api, broker.Dir)
		Eventually(func() bool { return isNotFound(k8s.Get(ctx, topicKey(name), &kaasv1.Topic{})) }).
			WithContext(ctx).WithTimeout(30 * time.Second).Should(BeTrue())
		_, err := os.Stat(filepath.Join(broker.Dir, "topics", name))
		Expect(os.IsNotExist(err)).To(BeTrue(), "topic directory outlived the resource: %v", err)
	})

	It("renders a chart that helm lint passes and the API server accepts in a server-side dry run", func(ctx SpecContext) {
		helmLint(ctx)
		Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kaas"}})).To(Succeed())
		for _, values := range [][]string{
			nil,
			{"--set", "storage.controlPlane.enabled=true", "--set", "exampleTopic.enabled=true",
				"--set", "operator.watchNamespace=kaas", "--set", "broker.replicas=5"},
		} {
			objs := decodeManifests(helmTemplate(ctx, append([]string{"--namespace", "kaas"}, values...)...))
			kinds := map[string]int{}
			for _, o := range objs {
				kinds[o.GetKind()]++
			}
			fmt.Fprintf(GinkgoWriter, "helm template %v: %v\n", values, kinds)
			for _, k := range []string{"StatefulSet", "Service", "PersistentVolumeClaim", "Deployment", "PodDisruptionBudget", "ServiceAccount"} {
				Expect(kinds).To(HaveKey(k), "the chart renders a %s", k)
			}
			Expect(dryRunApply(ctx, k8s, "kaas", objs)).To(BeEmpty(), "objects the API server refused")
		}
	})

	It("renders listeners, TLS from a Secret and cert-manager, SASL, the broker credential and a secured admin port that the API server accepts", func(ctx SpecContext) {
		// A stand-in for cert-manager's Certificate CRD (no schema), so the
		// server judges the rendered Certificate's shape too.
		Expect(k8s.Create(ctx, certificateCRD())).To(Succeed())
		Eventually(func() error {
			return k8s.List(ctx, certificateList(), client.InNamespace("default"))
		}).WithContext(ctx).WithTimeout(30*time.Second).Should(Succeed(), "the Certificate CRD is not served")
		Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kaas-secure"}})).To(Succeed())
		values := filepath.Join(GinkgoT().TempDir(), "secure.yaml")
		Expect(os.WriteFile(values, []byte(secureValues), 0o600)).To(Succeed())
		objs := decodeManifests(helmTemplate(ctx, "--namespace", "kaas-secure", "-f", values))

		var sts, cert *unstructured.Unstructured
		for _, o := range objs {
			switch o.GetKind() {
			case "StatefulSet":
				sts = o
			case "Certificate":
				cert = o
			}
		}
		Expect(sts).NotTo(BeNil())
		Expect(cert).NotTo(BeNil(), "tls.certManager.enabled renders a Certificate")
		secretName, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
		Expect(secretName).To(Equal("kaas-tls"))
		containers, _, _ := unstructured.NestedSlice(sts.Object, "spec", "template", "spec", "containers")
		env := map[string]string{}
		for _, e := range containers[0].(map[string]any)["env"].([]any) {
			m := e.(map[string]any)
			v, _ := m["value"].(string)
			env[m["name"].(string)] = v
		}
		Expect(env).To(HaveKeyWithValue("KAAS_LISTENERS", "PLAINTEXT://0.0.0.0:9092,CLIENTS://0.0.0.0:9093"))
		Expect(env).To(HaveKeyWithValue("KAAS_LISTENER_SECURITY_PROTOCOL_MAP", "PLAINTEXT:PLAINTEXT,CLIENTS:SASL_SSL"))
		Expect(env).To(HaveKeyWithValue("KAAS_ADVERTISED_LISTENERS", ContainSubstring("CLIENTS://$(POD_NAME).kaas-broker-headless.$(POD_NAMESPACE).svc.cluster.local:9093")))
		Expect(env).To(HaveKeyWithValue("KAAS_TLS_CERT_FILE", "/etc/kaas/tls/tls.crt"))
		Expect(env).To(HaveKeyWithValue("KAAS_SASL_MECHANISMS", "SCRAM-SHA-512"))
		Expect(env).To(HaveKeyWithValue("KAAS_ADMIN_AUTH_TOKEN_FILE", "/etc/kaas/admin-token/token"))
		Expect(env).To(HaveKey("KAAS_ADMIN_TLS_CERT_FILE"))
		Expect(env).NotTo(HaveKey("KAAS_ADMIN_PPROF"))
		Expect(env).NotTo(HaveKey("KAAS_LISTEN"))

		Expect(dryRunApply(ctx, k8s, "kaas-secure", objs)).To(BeEmpty(), "objects the API server refused")

		By("values that cannot work are refused at render time")
		for _, c := range []struct{ set, says string }{
			{"broker.listeners[0].name=PLAINTEXT,broker.listeners[0].port=9092,broker.listeners[0].protocol=PLAINTEXT," +
				"broker.listeners[1].name=SSL,broker.listeners[1].port=9093,broker.listeners[1].protocol=SSL", "needs tls.secretName"},
			{"broker.listeners[0].name=PLAINTEXT,broker.listeners[0].port=9644,broker.listeners[0].protocol=PLAINTEXT", "used twice"},
			{"broker.listeners[0].name=PLAIN,broker.listeners[0].port=9092,broker.listeners[0].protocol=PLAINTEXT", "not one of broker.listeners"},
			{"broker.adminTLS=true", "broker.adminTLS needs"},
			{"tls.certManager.enabled=true", "issuerRef.name"},
			{"broker.listeners[0].name=PLAINTEXT,broker.listeners[0].port=9092,broker.listeners[0].protocol=TLS", "protocol"},
		} {
			Expect(helmTemplateRefused(ctx, "--set", c.set)).To(ContainSubstring(c.says), "--set %s", c.set)
		}
	})

	It("renders brokers that reach each other over SASL_SSL, which the API server accepts, and refuses a SASL inter-broker listener without a credential", func(ctx SpecContext) {
		if err := k8s.Create(ctx, certificateCRD()); err != nil && !apierrors.IsAlreadyExists(err) {
			Expect(err).NotTo(HaveOccurred())
		}
		Eventually(func() error {
			return k8s.List(ctx, certificateList(), client.InNamespace("default"))
		}).WithContext(ctx).WithTimeout(30*time.Second).Should(Succeed(), "the Certificate CRD is not served")
		Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kaas-ib"}})).To(Succeed())
		values := filepath.Join(GinkgoT().TempDir(), "interbroker.yaml")
		Expect(os.WriteFile(values, []byte(interBrokerValues), 0o600)).To(Succeed())
		objs := decodeManifests(helmTemplate(ctx, "--namespace", "kaas-ib", "-f", values))

		var sts, cert *unstructured.Unstructured
		for _, o := range objs {
			switch o.GetKind() {
			case "StatefulSet":
				sts = o
			case "Certificate":
				cert = o
			}
		}
		Expect(sts).NotTo(BeNil())
		Expect(cert).NotTo(BeNil())
		usages, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "usages")
		Expect(usages).To(ContainElements("server auth", "client auth"), "a broker's certificate authenticates it to the others too")
		containers, _, _ := unstructured.NestedSlice(sts.Object, "spec", "template", "spec", "containers")
		broker := containers[0].(map[string]any)
		env := map[string]string{}
		for _, e := range broker["env"].([]any) {
			m := e.(map[string]any)
			v, _ := m["value"].(string)
			env[m["name"].(string)] = v
		}
		Expect(env).To(HaveKeyWithValue("KAAS_INTER_BROKER_LISTENER", "BROKERS"))
		Expect(env).To(HaveKeyWithValue("KAAS_LISTENER_SECURITY_PROTOCOL_MAP", "BROKERS:SASL_SSL,CLIENTS:SSL"))
		Expect(env).To(HaveKeyWithValue("KAAS_INTER_BROKER_TLS_CA_FILE", "/etc/kaas/tls/ca.crt"))
		Expect(env).To(HaveKeyWithValue("KAAS_SUPER_USERS", "User:ops;User:admin"))
		Expect(env).To(HaveKeyWithValue("KAAS_TLS_CLIENT_AUTH", "required"))
		Expect(env).To(HaveKey("BROKER_CREDENTIAL_USERNAME"))
		Expect(broker["args"]).To(ContainElements(
			"--inter-broker-sasl-mechanism=SCRAM-SHA-256",
			"--inter-broker-username=$(BROKER_CREDENTIAL_USERNAME)",
			"--inter-broker-password-file=/etc/kaas/broker-credential/pass"))
		var mounts []string
		for _, m := range broker["volumeMounts"].([]any) {
			mounts = append(mounts, m.(map[string]any)["mountPath"].(string))
		}
		Expect(mounts).To(ContainElements("/etc/kaas/tls", "/etc/kaas/broker-credential"))

		Expect(dryRunApply(ctx, k8s, "kaas-ib", objs)).To(BeEmpty(), "objects the API server refused")

		By("an SSL inter-broker listener with client certificates names the broker by the certificate's CN")
		objs = decodeManifests(helmTemplate(ctx, "--namespace", "kaas-ib", "-f", values, "--set", "broker.interBrokerListener=CLIENTS"))
		for _, o := range objs {
			if o.GetKind() == "Certificate" {
				cn, _, _ := unstructured.NestedString(o.Object, "spec", "commonName")
				Expect(cn).To(Equal("kaas-broker"))
			}
		}
		Expect(dryRunApply(ctx, k8s, "kaas-ib", objs)).To(BeEmpty(), "objects the API server refused")

		By("a SASL inter-broker listener without the brokers' credential, or with a mechanism no listener offers, is refused")
		for _, c := range []struct{ set, says string }{
			{"broker.interBrokerCredential.secretName=", "BROKERS is SASL_SSL: it needs broker.interBrokerCredential.secretName"},
			{"broker.interBrokerCredential.mechanism=PLAIN", "is not one of broker.sasl.mechanisms"},
			{"broker.superUsers=ops", "superUsers"},
		} {
			Expect(helmTemplateRefused(ctx, "-f", values, "--set", c.set)).To(ContainSubstring(c.says), "--set %s", c.set)
		}
		Expect(helmTemplateRefused(ctx, "--set", "broker.listeners[0].name=SASL_PLAINTEXT,broker.listeners[0].port=9092,"+
			"broker.listeners[0].protocol=SASL_PLAINTEXT,broker.interBrokerListener=SASL_PLAINTEXT")).
			To(ContainSubstring("SASL_PLAINTEXT is SASL_PLAINTEXT: it needs broker.interBrokerCredential.secretName"))
	})
})

// interBrokerValues: brokers reach each other over SASL_SSL with their own
// SCRAM credential; clients use SSL with certificates.
const interBrokerValues = `
broker:
  listeners:
    - {name: BROKERS, port: 9092, protocol: SASL_SSL}
    - {name: CLIENTS, port: 9093, protocol: SSL}
  interBrokerListener: BROKERS
  sasl:
    mechanisms: SCRAM-SHA-512,SCRAM-SHA-256
  interBrokerCredential:
    secretName: kaas-broker-credential
    passwordKey: pass
    mechanism: SCRAM-SHA-256
  superUsers: "User:ops;User:admin"
tls:
  clientAuth: required
  certManager:
    enabled: true
    issuerRef: {name: kaas-ca}
`

// secureValues turn on every security value of the chart.
const secureValues = `
broker:
  listeners:
    - {name: PLAINTEXT, port: 9092, protocol: PLAINTEXT}
    - {name: CLIENTS, port: 9093, protocol: SASL_SSL}
  interBrokerListener: PLAINTEXT
  sasl:
    mechanisms: SCRAM-SHA-512
  interBrokerCredential:
    secretName: kaas-broker-credential
  adminTLS: true
  adminAuthTokenSecret:
    name: kaas-admin-token
tls:
  certManager:
    enabled: true
    issuerRef: {name: kaas-ca}
`

// certificateCRD is cert-manager's Certificate kind with no schema of its
// own.
func certificateCRD() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": "certificates.cert-manager.io"},
		"spec": map[string]any{
			"group": "cert-manager.io",
			"names": map[string]any{"kind": "Certificate", "listKind": "CertificateList", "plural": "certificates", "singular": "certificate"},
			"scope": "Namespaced",
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
			}},
		},
	}}
}

func certificateList() *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{}
	l.SetAPIVersion("cert-manager.io/v1")
	l.SetKind("CertificateList")
	return l
}

// reportLatency prints one of the operator's end-to-end latencies (as
// seen through the API server, polled every 100 ms or less) for the notes.
func reportLatency(what string, d time.Duration) {
	fmt.Printf("OPERATOR %s: %v\n", what, d.Round(time.Millisecond))
	AddReportEntry(what, d)
}

package specs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kaasv1 "github.com/kaas-dev/kaas/cmd/kaas-operator/api/v1alpha1"
	"github.com/kaas-dev/kaas/engine/auth"
	"github.com/kaas-dev/kaas/volume"
)

// User resources against a real kube-apiserver and etcd (envtest), a real
// kaas-operator process and a real broker with a SASL_PLAINTEXT listener
// on the same directory: the credential a User declares is the one the
// broker authenticates franz-go against, a changed password replaces it,
// and a deleted User takes it away. The broker runs the ACL authorizer with
// super user admin, the operator logs in as admin to keep each User's ACLs
// and quotas on the broker through the Kafka APIs.
var _ = Describe("User resources on a real API server", Ordered, Label("k8s", "operator"), func() {
	const ns = "default"
	var (
		api      *apiServer
		broker   *Broker
		k8s      client.Client
		saslAddr string
		admin    *kgo.Client // the super user, on the SASL listener
	)

	BeforeAll(func(ctx SpecContext) {
		api = startAPIServer()
		k8s = api.client
		saslAddr = freeAddr()
		broker = StartBroker(GinkgoT().TempDir(), func(b *Broker) {
			b.ExtraArgs = append(b.ExtraArgs,
				"--listeners", "PLAINTEXT://"+b.Addr+",SASL_PLAINTEXT://"+saslAddr,
				"--sasl-mechanisms", "SCRAM-SHA-512,SCRAM-SHA-256",
				"--authorizer", "acl", "--super-users", "User:admin")
		})
		adminPassword := filepath.Join(GinkgoT().TempDir(), "admin-password")
		Expect(os.WriteFile(adminPassword, []byte("admin-secret\n"), 0o600)).To(Succeed())
		cred, err := auth.ScramSHA512.FromPassword("admin", "admin-secret", auth.DefaultIterations)
		Expect(err).NotTo(HaveOccurred())
		Expect(auth.SaveCredential(volume.OS(), filepath.Join(broker.Dir, "__cluster"), cred)).To(Succeed())
		admin, err = kgo.NewClient(kgo.SeedBrokers(saslAddr),
			kgo.SASL(scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha512Mechanism()))
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(admin.Close)
		startOperator(ctx, api, broker.Dir, "--bootstrap", saslAddr, "--sasl-mechanism", "SCRAM-SHA-512",
			"--sasl-username", "admin", "--sasl-password-file", adminPassword)
	}, NodeTimeout(3*time.Minute))

	credentialFile := func(user, mechanism string) string {
		return filepath.Join(broker.Dir, "__cluster", "users", user+"."+mechanism+".json")
	}

	// authenticates reports whether the broker's SASL listener accepts
	// user:password over SCRAM-SHA-512 (a Metadata request after it).
	authenticates := func(ctx context.Context, user, password string) error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(saslAddr),
			kgo.SASL(scram.Auth{User: user, Pass: password}.AsSha512Mechanism()),
			kgo.RequestRetries(0), kgo.RetryTimeout(2*time.Second))
		Expect(err).NotTo(HaveOccurred())
		defer cl.Close()
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return cl.Ping(pctx)
	}

	waitUserReady := func(ctx context.Context, name string) *kaasv1.User {
		GinkgoHelper()
		var u *kaasv1.User
		Eventually(func(g Gomega) {
			u = &kaasv1.User{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u)).To(Succeed())
			ready := meta.FindStatusCondition(u.Status.Conditions, "Ready")
			g.Expect(ready).NotTo(BeNil(), "no Ready condition: %+v", u.Status)
			g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), "Ready: %s: %s", ready.Reason, ready.Message)
			g.Expect(ready.ObservedGeneration).To(Equal(u.Generation))
			g.Expect(u.Status.ObservedGeneration).To(Equal(u.Generation))
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
		return u
	}

	It("writes a User's credential from its Secret, rewrites it when the password changes, and deletes it with the User", func(ctx SpecContext) {
		name := UniqueName("alice")
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-pw"},
			Data: map[string][]byte{"password": []byte("first-password")}}
		Expect(k8s.Create(ctx, secret)).To(Succeed())

		By("a User naming a Secret that does not exist yet is not Ready")
		missing := UniqueName("nobody")
		Expect(k8s.Create(ctx, &kaasv1.User{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: missing},
			Spec: kaasv1.UserSpec{PasswordSecretRef: &kaasv1.SecretKeyRef{Name: missing + "-pw"}}})).To(Succeed())
		Eventually(func(g Gomega) {
			u := &kaasv1.User{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: missing}, u)).To(Succeed())
			ready := meta.FindStatusCondition(u.Status.Conditions, "Ready")
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(ready.Reason).To(Equal("SecretNotFound"))
			g.Expect(ready.Message).To(ContainSubstring(missing + "-pw"))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())

		By("creating the User")
		created := time.Now()
		Expect(k8s.Create(ctx, &kaasv1.User{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: kaasv1.UserSpec{PasswordSecretRef: &kaasv1.SecretKeyRef{Name: secret.Name}}})).To(Succeed())
		u := waitUserReady(ctx, name)
		reportLatency("User create → Ready (credential on the volume)", time.Since(created))
		Expect(u.Spec.Mechanism).To(Equal("SCRAM-SHA-512"), "the API server defaults the mechanism")
		Expect(u.Status.UserName).To(Equal(name))
		Expect(u.Status.Mechanism).To(Equal("SCRAM-SHA-512"))
		Expect(u.Status.SecretName).To(Equal(secret.Name))
		Expect(u.Finalizers).To(ContainElement(kaasv1.UserFinalizer))
		b, err := os.ReadFile(credentialFile(name, "SCRAM-SHA-512"))
		Expect(err).NotTo(HaveOccurred(), "no credential file on the volume")
		Expect(string(b)).NotTo(ContainSubstring("first-password"), "the file holds a credential, never the password")

		By("the broker authenticates the password, and refuses another")
		Expect(authenticates(ctx, name, "first-password")).To(Succeed())
		Expect(authenticates(ctx, name, "guess")).NotTo(Succeed())

		By("changing the password in the Secret")
		changed := time.Now()
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(secret), secret)).To(Succeed())
		secret.Data["password"] = []byte("second-password")
		Expect(k8s.Update(ctx, secret)).To(Succeed())
		Eventually(func() error { return authenticates(ctx, name, "second-password") }).
			WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
		reportLatency("Secret password change → broker accepts the new password", time.Since(changed))
		Expect(authenticates(ctx, name, "first-password")).NotTo(Succeed(), "the old password still works")

		By("deleting the User")
		deleted := time.Now()
		Expect(k8s.Delete(ctx, u)).To(Succeed())
		Eventually(func() bool {
			return isNotFound(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &kaasv1.User{}))
		}).
			WithContext(ctx).WithTimeout(30*time.Second).WithPolling(50*time.Millisecond).Should(BeTrue(), "the finalizer was not removed")
		reportLatency("User delete → resource gone, credential deleted", time.Since(deleted))
		// The finalizer goes only after the file: it must be gone the
		// moment the resource is.
		_, err = os.Stat(credentialFile(name, "SCRAM-SHA-512"))
		Expect(os.IsNotExist(err)).To(BeTrue(), "credential file outlived the User: %v", err)
		Expect(authenticates(ctx, name, "second-password")).NotTo(Succeed())
	})

	It("generates a password into a Secret the User owns when it names none", func(ctx SpecContext) {
		name := UniqueName("bob")
		Expect(k8s.Create(ctx, &kaasv1.User{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: kaasv1.UserSpec{Mechanism: "SCRAM-SHA-256"}})).To(Succeed())
		u := waitUserReady(ctx, name)
		Expect(u.Status.SecretName).To(Equal(name + "-kaas-password"))
		s := &corev1.Secret{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: u.Status.SecretName}, s)).To(Succeed())
		Expect(metav1.IsControlledBy(s, u)).To(BeTrue(), "owner references %+v", s.OwnerReferences)
		password := string(s.Data["password"])
		Expect(len(password)).To(BeNumerically(">=", 40))
		_, err := os.Stat(credentialFile(name, "SCRAM-SHA-256"))
		Expect(err).NotTo(HaveOccurred())

		cl, err := kgo.NewClient(kgo.SeedBrokers(saslAddr), kgo.SASL(scram.Auth{User: name, Pass: password}.AsSha256Mechanism()))
		Expect(err).NotTo(HaveOccurred())
		defer cl.Close()
		Expect(cl.Ping(ctx)).To(Succeed())

		Expect(k8s.Delete(ctx, u)).To(Succeed())
		Eventually(func() bool {
			return isNotFound(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &kaasv1.User{}))
		}).
			WithContext(ctx).WithTimeout(30 * time.Second).Should(BeTrue())
		_, err = os.Stat(credentialFile(name, "SCRAM-SHA-256"))
		Expect(os.IsNotExist(err)).To(BeTrue(), "credential file outlived the User: %v", err)
	})

	// aclsOf lists principal's bindings as "PERMISSION OPERATION HOST
	// PATTERN TYPE:NAME", asked with DescribeAcls as admin.
	aclsOf := func(ctx context.Context, principal string) func(Gomega) []string {
		return func(g Gomega) []string {
			req := kmsg.NewPtrDescribeACLsRequest()
			req.ResourceType, req.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
			req.Operation, req.PermissionType, req.Principal = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny, &principal
			resp, err := req.RequestWith(ctx, admin)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(resp.ErrorCode).To(BeZero(), "DescribeAcls: %v", resp.ErrorMessage)
			var out []string
			for _, r := range resp.Resources {
				for _, a := range r.ACLs {
					out = append(out, fmt.Sprintf("%s %s %s %s %s:%s", a.PermissionType, a.Operation, a.Host, r.ResourcePatternType, r.ResourceType, r.ResourceName))
				}
			}
			return out
		}
	}
	// quotasOf is user's quotas, asked with DescribeClientQuotas as admin.
	quotasOf := func(ctx context.Context, user string) func(Gomega) map[string]float64 {
		return func(g Gomega) map[string]float64 {
			req := kmsg.NewPtrDescribeClientQuotasRequest()
			c := kmsg.NewDescribeClientQuotasRequestComponent()
			c.EntityType, c.MatchType, c.Match = "user", kmsg.QuotasMatchTypeExact, &user
			req.Components, req.Strict = []kmsg.DescribeClientQuotasRequestComponent{c}, true
			resp, err := req.RequestWith(ctx, admin)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(resp.ErrorCode).To(BeZero(), "DescribeClientQuotas: %v", resp.ErrorMessage)
			out := map[string]float64{}
			for _, e := range resp.Entries {
				for _, v := range e.Values {
					out[v.Key] = v.Value
				}
			}
			return out
		}
	}
	waitUserGone := func(ctx context.Context, name string) {
		GinkgoHelper()
		Eventually(func() bool {
			return isNotFound(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &kaasv1.User{}))
		}).WithContext(ctx).WithTimeout(30*time.Second).Should(BeTrue(), "the finalizer was not removed")
	}

	It("keeps a User's ACLs on the broker, follows a changed spec, and removes them with the User", func(ctx SpecContext) {
		name := UniqueName("carol")
		principal := "User:" + name
		acls := aclsOf(ctx, principal)

		By("a binding of the principal the spec does not name, made beforehand")
		create := kmsg.NewPtrCreateACLsRequest()
		stray := kmsg.NewCreateACLsRequestCreation()
		stray.Principal, stray.Host, stray.ResourceType, stray.ResourceName = principal, "*", kmsg.ACLResourceTypeTopic, "stray"
		stray.ResourcePatternType, stray.Operation, stray.PermissionType = kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLOperationWrite, kmsg.ACLPermissionTypeAllow
		create.Creations = append(create.Creations, stray)
		createdACL, err := create.RequestWith(ctx, admin)
		Expect(err).NotTo(HaveOccurred())
		Expect(createdACL.Results).To(HaveLen(1))
		Expect(createdACL.Results[0].ErrorCode).To(BeZero(), "CreateAcls: %v", createdACL.Results[0].ErrorMessage)
		Expect(acls(Default)).To(ConsistOf("ALLOW WRITE * LITERAL TOPIC:stray"))

		By("creating a User with ACLs")
		created := time.Now()
		u := &kaasv1.User{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: kaasv1.UserSpec{
			Authorization: &kaasv1.UserAuthorization{Type: "simple", ACLs: []kaasv1.ACLRule{
				{Resource: kaasv1.ACLRuleResource{Type: "topic", Name: "orders"}, Operations: []string{"Read", "Describe"}},
				{Resource: kaasv1.ACLRuleResource{Type: "group", Name: "billing-", PatternType: "prefix"}, Operations: []string{"Read"}},
				{Resource: kaasv1.ACLRuleResource{Type: "topic", Name: "orders"}, Operations: []string{"Write"}, Host: "10.0.0.9", Type: "deny"},
			}},
		}}
		Expect(k8s.Create(ctx, u)).To(Succeed())
		u = waitUserReady(ctx, name)
		reportLatency("User with ACLs create → Ready (bindings on the broker)", time.Since(created))
		Expect(u.Status.ACLPrincipal).To(Equal(principal))
		Expect(u.Status.ACLs).To(Equal(int32(4)))
		Expect(u.Spec.Authorization.ACLs[0].Host).To(Equal("*"), "the API server defaults the host")
		// Ready comes only after CreateAcls answered, and an answer means
		// every broker has the bindings.
		Expect(acls(Default)).To(ConsistOf(
			"ALLOW READ * LITERAL TOPIC:orders", "ALLOW DESCRIBE * LITERAL TOPIC:orders", "ALLOW READ * PREFIXED GROUP:billing-",
			"DENY WRITE 10.0.0.9 LITERAL TOPIC:orders",
		), "the stray binding is deleted, the spec's created")

		By("changing the spec: two rules dropped")
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(u), u)).To(Succeed())
			u.Spec.Authorization.ACLs = u.Spec.Authorization.ACLs[:1]
			g.Expect(k8s.Update(ctx, u)).To(Succeed())
		}).WithContext(ctx).WithTimeout(10 * time.Second).Should(Succeed())
		Eventually(acls).WithContext(ctx).WithTimeout(30 * time.Second).Should(ConsistOf(
			"ALLOW READ * LITERAL TOPIC:orders", "ALLOW DESCRIBE * LITERAL TOPIC:orders"))

		By("deleting the User")
		Expect(k8s.Delete(ctx, u)).To(Succeed())
		waitUserGone(ctx, name)
		// The finalizer goes only after the ACLs.
		Expect(acls(Default)).To(BeEmpty(), "ACLs outlived the User")
	})

	It("keeps a User's quotas on the broker, follows a changed spec, and removes them with the User", func(ctx SpecContext) {
		name := UniqueName("dave")
		quotas := quotasOf(ctx, name)
		u := &kaasv1.User{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: kaasv1.UserSpec{
			Quotas: &kaasv1.UserQuotas{ProducerByteRate: ptrInt64(1048576), ConsumerByteRate: ptrInt64(2097152)},
		}}
		Expect(k8s.Create(ctx, u)).To(Succeed())
		u = waitUserReady(ctx, name)
		Expect(u.Status.QuotaUser).To(Equal(name))
		Expect(quotas(Default)).To(Equal(map[string]float64{"producer_byte_rate": 1048576, "consumer_byte_rate": 2097152}))

		By("changing the spec: a quota dropped, another added")
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(u), u)).To(Succeed())
			u.Spec.Quotas.ConsumerByteRate, u.Spec.Quotas.RequestPercentage = nil, ptrInt64(25)
			g.Expect(k8s.Update(ctx, u)).To(Succeed())
		}).WithContext(ctx).WithTimeout(10 * time.Second).Should(Succeed())
		Eventually(quotas).WithContext(ctx).WithTimeout(30 * time.Second).Should(Equal(map[string]float64{
			"producer_byte_rate": 1048576, "request_percentage": 25}))

		By("deleting the User")
		Expect(k8s.Delete(ctx, u)).To(Succeed())
		waitUserGone(ctx, name)
		Expect(quotas(Default)).To(BeEmpty(), "quotas outlived the User")
	})
})

func ptrInt64(v int64) *int64 { return &v }

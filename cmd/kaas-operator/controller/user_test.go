package controller

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/kaas-dev/kaas/cmd/kaas-operator/api/v1alpha1"
	"github.com/kaas-dev/kaas/engine/auth"
	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/memfs"
)

// userFixture is a UserReconciler against a fake API server and an
// in-memory volume.
type userFixture struct {
	t    *testing.T
	ctx  context.Context
	fsys volume.FS
	c    client.Client
	r    *UserReconciler
}

func newUserFixture(t *testing.T, objs ...client.Object) *userFixture {
	t.Helper()
	fsys := memfs.New()
	if err := volume.MkdirAllSync(fsys, clusterDir); err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithStatusSubresource(&v1alpha1.User{}).Build()
	r := &UserReconciler{Client: c, Recorder: events.NewFakeRecorder(20), FS: fsys, ClusterDir: clusterDir,
		RetryInterval: time.Second, ResyncInterval: time.Minute}
	return &userFixture{t: t, ctx: context.Background(), fsys: fsys, c: c, r: r}
}

// reconcile runs one reconcile of ns/name, checks its requeue, and returns
// the resource after it (nil once gone).
func (f *userFixture) reconcile(name string, wantAfter time.Duration) *v1alpha1.User {
	f.t.Helper()
	key := types.NamespacedName{Namespace: "ns", Name: name}
	res, err := f.r.Reconcile(f.ctx, ctrl.Request{NamespacedName: key})
	if err != nil || res.RequeueAfter != wantAfter {
		f.t.Fatalf("reconcile: %+v, %v; want requeue after %v", res, err, wantAfter)
	}
	var got v1alpha1.User
	if err := f.c.Get(f.ctx, key, &got); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		f.t.Fatal(err)
	}
	return &got
}

// credential returns user's stored credential for m (ok false if none).
func (f *userFixture) credential(user string, m auth.Mechanism) (auth.Credential, bool) {
	f.t.Helper()
	c, ok, err := auth.LoadCredential(f.fsys, clusterDir, user, m)
	if err != nil {
		f.t.Fatal(err)
	}
	return c, ok
}

func (f *userFixture) wantPassword(user string, m auth.Mechanism, password string) auth.Credential {
	f.t.Helper()
	c, ok := f.credential(user, m)
	if !ok || !m.VerifyPassword(c, password) {
		f.t.Fatalf("the %s credential of %s (present %v) does not verify %q", m.Name, user, ok, password)
	}
	return c
}

func (f *userFixture) setSecret(name, key, password string) {
	f.t.Helper()
	var s corev1.Secret
	err := f.c.Get(f.ctx, client.ObjectKey{Namespace: "ns", Name: name}, &s)
	if apierrors.IsNotFound(err) {
		s = corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Data: map[string][]byte{key: []byte(password)}}
		if err := f.c.Create(f.ctx, &s); err != nil {
			f.t.Fatal(err)
		}
		return
	}
	s.Data = map[string][]byte{key: []byte(password)}
	if err := f.c.Update(f.ctx, &s); err != nil {
		f.t.Fatal(err)
	}
}

func wantUserReady(t *testing.T, u *v1alpha1.User, status metav1.ConditionStatus, reason string) {
	t.Helper()
	c := meta.FindStatusCondition(u.Status.Conditions, v1alpha1.ConditionReady)
	if c == nil || c.Status != status || c.Reason != reason || c.ObservedGeneration != u.Generation || c.Message == "" {
		t.Fatalf("Ready = %+v, want %s/%s", c, status, reason)
	}
	if u.Status.ObservedGeneration != u.Generation {
		t.Fatalf("observedGeneration %d, generation %d", u.Status.ObservedGeneration, u.Generation)
	}
}

func newUser(name string, spec v1alpha1.UserSpec) *v1alpha1.User {
	return &v1alpha1.User{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), Generation: 1}, Spec: spec}
}

// TestUserFromSecret: a User's life with its password in a Secret it
// names: the Secret missing, present, its password changed, the mechanism
// changed, the resource deleted.
func TestUserFromSecret(t *testing.T) {
	ref := &v1alpha1.SecretKeyRef{Name: "alice-pw", Key: "pw"}
	f := newUserFixture(t, newUser("alice", v1alpha1.UserSpec{PasswordSecretRef: ref}))

	got := f.reconcile("alice", time.Second)
	wantUserReady(t, got, metav1.ConditionFalse, ReasonSecretNotFound)
	if !slices.Contains(got.Finalizers, v1alpha1.UserFinalizer) {
		t.Fatalf("finalizers %v", got.Finalizers)
	}
	if _, ok := f.credential("alice", auth.ScramSHA512); ok {
		t.Fatal("a credential without a password")
	}

	f.setSecret("alice-pw", "password", "wrong key")
	wantUserReady(t, f.reconcile("alice", time.Second), metav1.ConditionFalse, ReasonSecretKeyMissing)

	f.setSecret("alice-pw", "pw", "first")
	got = f.reconcile("alice", time.Minute)
	wantUserReady(t, got, metav1.ConditionTrue, ReasonCredentialWritten)
	if got.Status.UserName != "alice" || got.Status.Mechanism != "SCRAM-SHA-512" || got.Status.SecretName != "alice-pw" {
		t.Fatalf("status %+v", got.Status)
	}
	first := f.wantPassword("alice", auth.ScramSHA512, "first")

	// Nothing changed: neither the status nor the credential is rewritten.
	again := f.reconcile("alice", time.Minute)
	if again.ResourceVersion != got.ResourceVersion {
		t.Fatalf("status rewritten without a change: %s -> %s", got.ResourceVersion, again.ResourceVersion)
	}
	if c := f.wantPassword("alice", auth.ScramSHA512, "first"); string(c.Salt) != string(first.Salt) {
		t.Fatal("credential rewritten without a change")
	}

	f.setSecret("alice-pw", "pw", "second")
	f.reconcile("alice", time.Minute)
	c := f.wantPassword("alice", auth.ScramSHA512, "second")
	if auth.ScramSHA512.VerifyPassword(c, "first") {
		t.Fatal("the old password still verifies")
	}

	got.Spec.Mechanism = "SCRAM-SHA-256"
	if err := f.c.Update(f.ctx, got); err != nil {
		t.Fatal(err)
	}
	got = f.reconcile("alice", time.Minute)
	if got.Status.Mechanism != "SCRAM-SHA-256" {
		t.Fatalf("status %+v", got.Status)
	}
	f.wantPassword("alice", auth.ScramSHA256, "second")
	if _, ok := f.credential("alice", auth.ScramSHA512); ok {
		t.Fatal("the SCRAM-SHA-512 credential outlived the mechanism change")
	}

	if err := f.c.Delete(f.ctx, got); err != nil {
		t.Fatal(err)
	}
	if got := f.reconcile("alice", 0); got != nil {
		t.Fatalf("still there: %+v", got.ObjectMeta)
	}
	for _, m := range auth.Mechanisms {
		if _, ok := f.credential("alice", m); ok {
			t.Fatalf("the %s credential outlived the resource", m.Name)
		}
	}
}

// TestUserGeneratedPassword: without passwordSecretRef the operator
// generates a password into a Secret the User controls, and keeps it.
func TestUserGeneratedPassword(t *testing.T) {
	f := newUserFixture(t, newUser("bob", v1alpha1.UserSpec{UserName: "svc.bob"}))
	got := f.reconcile("bob", time.Minute)
	wantUserReady(t, got, metav1.ConditionTrue, ReasonCredentialWritten)
	if got.Status.SecretName != "bob-kaas-password" || got.Status.UserName != "svc.bob" {
		t.Fatalf("status %+v", got.Status)
	}
	var s corev1.Secret
	if err := f.c.Get(f.ctx, client.ObjectKey{Namespace: "ns", Name: "bob-kaas-password"}, &s); err != nil {
		t.Fatal(err)
	}
	if !metav1.IsControlledBy(&s, got) {
		t.Fatalf("owner references %+v", s.OwnerReferences)
	}
	password := string(s.Data["password"])
	if len(password) < 40 || string(s.Data["username"]) != "svc.bob" {
		t.Fatalf("secret data %q", s.Data)
	}
	f.wantPassword("svc.bob", auth.ScramSHA512, password)

	f.reconcile("bob", time.Minute)
	var s2 corev1.Secret
	if err := f.c.Get(f.ctx, client.ObjectKey{Namespace: "ns", Name: "bob-kaas-password"}, &s2); err != nil {
		t.Fatal(err)
	}
	if string(s2.Data["password"]) != password {
		t.Fatal("the generated password changed on a resync")
	}
}

// TestUserRefusals: what keeps a User from Ready, each with its reason.
func TestUserRefusals(t *testing.T) {
	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "carol-kaas-password"},
		Data: map[string][]byte{"password": []byte("not yours")}}
	cases := []struct {
		name   string
		user   *v1alpha1.User
		reason string
	}{
		{"generated name taken", newUser("carol", v1alpha1.UserSpec{}), ReasonSecretConflict},
		{"unknown mechanism", newUser("dave", v1alpha1.UserSpec{Mechanism: "MD5"}), ReasonInvalidSpec},
		{"empty password", newUser("erin", v1alpha1.UserSpec{PasswordSecretRef: &v1alpha1.SecretKeyRef{Name: "empty"}}), ReasonSecretKeyMissing},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			empty := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "empty"}, Data: map[string][]byte{"password": nil}}
			f := newUserFixture(t, c.user, foreign.DeepCopy(), empty)
			wantUserReady(t, f.reconcile(c.user.Name, time.Second), metav1.ConditionFalse, c.reason)
			creds, err := auth.ListCredentials(f.fsys, clusterDir)
			if err != nil || len(creds) != 0 {
				t.Fatalf("credentials %+v, %v", creds, err)
			}
		})
	}
}

// TestUsersOfSecret: a Secret's change reaches exactly the Users that
// read it.
func TestUsersOfSecret(t *testing.T) {
	f := newUserFixture(t,
		newUser("a", v1alpha1.UserSpec{PasswordSecretRef: &v1alpha1.SecretKeyRef{Name: "shared"}}),
		newUser("b", v1alpha1.UserSpec{PasswordSecretRef: &v1alpha1.SecretKeyRef{Name: "shared"}}),
		newUser("c", v1alpha1.UserSpec{}),
		newUser("d", v1alpha1.UserSpec{PasswordSecretRef: &v1alpha1.SecretKeyRef{Name: "other"}}))
	for _, tc := range []struct {
		secret string
		want   []string
	}{{"shared", []string{"a", "b"}}, {"c-kaas-password", []string{"c"}}, {"unrelated", nil}} {
		var names []string
		for _, req := range f.r.usersOfSecret(f.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: tc.secret}}) {
			names = append(names, req.Name)
		}
		slices.Sort(names)
		if !slices.Equal(names, tc.want) {
			t.Errorf("Secret %s: Users %v, want %v", tc.secret, names, tc.want)
		}
	}
}

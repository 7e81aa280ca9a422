package controller

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kaas-dev/kaas/cmd/internal/kafkaadmin"
	"github.com/kaas-dev/kaas/cmd/kaas-operator/api/v1alpha1"
	"github.com/kaas-dev/kaas/engine/auth"
	"github.com/kaas-dev/kaas/volume"
)

// UserReconciler writes User resources' SCRAM credentials into the
// credential files on the brokers' shared volume (engine/auth's store,
// the same files kaasctl users set writes), keeps their ACLs and quotas on
// the cluster through the Kafka APIs, and deletes all of them when the
// resource is deleted.
type UserReconciler struct {
	Client client.Client
	// Secrets reads Secrets straight from the API server (the manager's
	// APIReader): the operator caches only Secrets' metadata, not every
	// Secret's data. Nil means Client.
	Secrets  client.Reader
	Recorder events.EventRecorder
	// FS and ClusterDir are the volume and the cluster directory the
	// brokers share.
	FS         volume.FS
	ClusterDir string
	// RetryInterval is how soon a User that is not Ready (its Secret
	// missing, say) is looked at again; ResyncInterval how soon a Ready
	// one is (a credential file removed by hand is written again).
	RetryInterval, ResyncInterval time.Duration
	// Iterations of the SCRAM credentials written (default
	// auth.DefaultIterations).
	Iterations int
	// Kafka reaches the cluster's Kafka APIs, as a super user, for the
	// Users' ACLs and quotas; nil when the operator has no --bootstrap
	// (a User that asks for ACLs or quotas is then not Ready).
	Kafka kafkaadmin.Requester
}

// Reasons of a User's Ready condition.
const (
	ReasonCredentialWritten = "CredentialWritten"
	ReasonSecretNotFound    = "SecretNotFound"
	ReasonSecretKeyMissing  = "SecretKeyMissing"
	ReasonSecretConflict    = "SecretConflict"
	ReasonInvalidSpec       = "InvalidSpec"
	ReasonVolumeError       = "VolumeError"
)

// generatedSecretSuffix names the Secret a User without passwordSecretRef
// owns: <resource name>-kaas-password.
const generatedSecretSuffix = "-kaas-password"

// UserName is the Kafka user a resource declares: spec.userName, or the
// resource's name.
func UserName(u *v1alpha1.User) string {
	if u.Spec.UserName != "" {
		return u.Spec.UserName
	}
	return u.Name
}

// GeneratedSecretName is the Secret the operator generates a password
// into for u.
func GeneratedSecretName(u *v1alpha1.User) string { return u.Name + generatedSecretSuffix }

func mechanismOf(u *v1alpha1.User) (auth.Mechanism, bool) {
	name := u.Spec.Mechanism
	if name == "" {
		name = v1alpha1.DefaultUserMechanism
	}
	return auth.MechanismNamed(name)
}

// notReady is why a User cannot be made Ready; err, when set, is retried
// with backoff rather than after RetryInterval.
type notReady struct {
	reason, message string
	err             error
}

// Reconcile looks at one User resource once.
func (r *UserReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logf.FromContext(ctx)
	var u v1alpha1.User
	if err := r.Client.Get(ctx, req.NamespacedName, &u); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !u.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, &u)
	}
	if controllerutil.AddFinalizer(&u, v1alpha1.UserFinalizer) {
		if err := r.Client.Update(ctx, &u); err != nil {
			return r.retryOnConflict(fmt.Errorf("add finalizer: %w", err))
		}
	}
	secretName, nr := r.ensure(ctx, &u)
	next := *u.Status.DeepCopy()
	next.ObservedGeneration = u.Generation
	var applied string
	if nr == nil {
		applied, nr = r.ensureKafka(ctx, &u, &next)
	}
	cond := metav1.Condition{Type: v1alpha1.ConditionReady, ObservedGeneration: u.Generation}
	if nr != nil {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, nr.reason, truncate(nr.message, maxConditionMessage)
		if nr.err != nil {
			log.Error(nr.err, "user reconcile failed", "user", UserName(&u))
		}
	} else {
		m, _ := mechanismOf(&u)
		next.UserName, next.Mechanism, next.SecretName = UserName(&u), m.Name, secretName
		cond.Status, cond.Reason = metav1.ConditionTrue, ReasonCredentialWritten
		cond.Message = fmt.Sprintf("the %s credential of %s is on the volume", m.Name, UserName(&u))
		if applied != "" {
			cond.Message += "; the cluster holds its " + applied
		}
	}
	meta.SetStatusCondition(&next.Conditions, cond)
	if !equality.Semantic.DeepEqual(next, u.Status) {
		u.Status = next
		if err := r.Client.Status().Update(ctx, &u); err != nil {
			return r.retryOnConflict(fmt.Errorf("update status: %w", err))
		}
	}
	switch {
	case nr != nil && nr.err != nil:
		return ctrl.Result{}, nr.err // backoff
	case nr != nil:
		return ctrl.Result{RequeueAfter: r.RetryInterval}, nil
	}
	return ctrl.Result{RequeueAfter: r.ResyncInterval}, nil
}

// ensure makes the volume hold u's credential for its current password,
// and returns the Secret the password came from.
func (r *UserReconciler) ensure(ctx context.Context, u *v1alpha1.User) (string, *notReady) {
	m, ok := mechanismOf(u)
	if !ok {
		return "", &notReady{reason: ReasonInvalidSpec, message: fmt.Sprintf("mechanism %q: SCRAM-SHA-512 or SCRAM-SHA-256", u.Spec.Mechanism)}
	}
	secretName, password, nr := r.password(ctx, u)
	if nr != nil {
		return "", nr
	}
	user := UserName(u)
	// A changed mechanism leaves no credential of the old one behind.
	if old, ok := auth.MechanismNamed(u.Status.Mechanism); ok && old.Name != m.Name {
		if _, err := auth.DeleteCredential(r.FS, r.ClusterDir, user, old); err != nil {
			return "", volumeError(err)
		}
	}
	have, ok, err := auth.LoadCredential(r.FS, r.ClusterDir, user, m)
	if err != nil {
		return "", volumeError(err)
	}
	// Verifying costs one key derivation; it spares a rewrite (and a new
	// salt) on every resync, and keeps no hash of the password anywhere
	// but the credential file.
	if ok && m.VerifyPassword(have, password) {
		return secretName, nil
	}
	iterations := r.Iterations
	if iterations == 0 {
		iterations = auth.DefaultIterations
	}
	c, err := m.FromPassword(user, password, iterations)
	if err != nil {
		return "", &notReady{reason: ReasonInvalidSpec, message: err.Error()}
	}
	if err := auth.SaveCredential(r.FS, r.ClusterDir, c); err != nil {
		return "", volumeError(err)
	}
	what := "written"
	if ok {
		what = "rewritten for a new password"
	}
	r.event(u, corev1.EventTypeNormal, ReasonCredentialWritten, "Update", fmt.Sprintf("%s credential of %s %s", m.Name, user, what))
	return secretName, nil
}

func volumeError(err error) *notReady {
	return &notReady{reason: ReasonVolumeError, message: err.Error(), err: err}
}

// password reads u's password from its Secret, generating the Secret
// first when u names none.
func (r *UserReconciler) password(ctx context.Context, u *v1alpha1.User) (secretName, password string, nr *notReady) {
	if ref := u.Spec.PasswordSecretRef; ref != nil {
		key := ref.Key
		if key == "" {
			key = v1alpha1.DefaultPasswordKey
		}
		var s corev1.Secret
		err := r.secrets().Get(ctx, client.ObjectKey{Namespace: u.Namespace, Name: ref.Name}, &s)
		if apierrors.IsNotFound(err) {
			return "", "", &notReady{reason: ReasonSecretNotFound, message: fmt.Sprintf("Secret %s/%s does not exist", u.Namespace, ref.Name)}
		}
		if err != nil {
			return "", "", &notReady{reason: ReasonSecretNotFound, message: err.Error(), err: err}
		}
		p := string(s.Data[key])
		if p == "" {
			return "", "", &notReady{reason: ReasonSecretKeyMissing, message: fmt.Sprintf("Secret %s/%s has no (or an empty) key %q", u.Namespace, ref.Name, key)}
		}
		return ref.Name, p, nil
	}
	name := GeneratedSecretName(u)
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return "", "", &notReady{reason: ReasonInvalidSpec, message: fmt.Sprintf("the generated Secret's name %s: %v; name a Secret in spec.passwordSecretRef", name, errs)}
	}
	var s corev1.Secret
	err := r.secrets().Get(ctx, client.ObjectKey{Namespace: u.Namespace, Name: name}, &s)
	switch {
	case apierrors.IsNotFound(err):
		return r.generate(ctx, u, name)
	case err != nil:
		return "", "", &notReady{reason: ReasonSecretNotFound, message: err.Error(), err: err}
	case !metav1.IsControlledBy(&s, u):
		return "", "", &notReady{reason: ReasonSecretConflict, message: fmt.Sprintf("Secret %s/%s exists and is not this User's: name it in spec.passwordSecretRef or remove it", u.Namespace, name)}
	}
	p := string(s.Data[v1alpha1.DefaultPasswordKey])
	if p == "" {
		return "", "", &notReady{reason: ReasonSecretKeyMissing, message: fmt.Sprintf("Secret %s/%s has no (or an empty) key %q", u.Namespace, name, v1alpha1.DefaultPasswordKey)}
	}
	return name, p, nil
}

// generate creates the Secret u owns, with a random password: 32 bytes
// from crypto/rand, base64url, so it survives any client's config file.
func (r *UserReconciler) generate(ctx context.Context, u *v1alpha1.User, name string) (string, string, *notReady) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", "", &notReady{reason: ReasonSecretNotFound, message: err.Error(), err: err}
	}
	password := base64.RawURLEncoding.EncodeToString(raw)
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: u.Namespace, Name: name,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "kaas-operator", "kaas.io/user": u.Name}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{v1alpha1.DefaultPasswordKey: []byte(password), "username": []byte(UserName(u))},
	}
	if err := controllerutil.SetControllerReference(u, s, r.Client.Scheme()); err != nil {
		return "", "", &notReady{reason: ReasonSecretNotFound, message: err.Error(), err: err}
	}
	if err := r.Client.Create(ctx, s); err != nil {
		// A create that lost a race is looked at again with the winner's
		// Secret.
		return "", "", &notReady{reason: ReasonSecretNotFound, message: fmt.Sprintf("create Secret %s/%s: %v", u.Namespace, name, err), err: err}
	}
	r.event(u, corev1.EventTypeNormal, "SecretGenerated", "Create", fmt.Sprintf("password generated into Secret %s", name))
	return name, password, nil
}

// finalize deletes u's credentials (of the mechanism asked for and of the
// one last written) and then lets the resource go.
func (r *UserReconciler) finalize(ctx context.Context, u *v1alpha1.User) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(u, v1alpha1.UserFinalizer) {
		return ctrl.Result{}, nil
	}
	user := UserName(u)
	if u.Status.UserName != "" {
		user = u.Status.UserName
	}
	var mechs []auth.Mechanism
	if m, ok := mechanismOf(u); ok {
		mechs = append(mechs, m)
	}
	if m, ok := auth.MechanismNamed(u.Status.Mechanism); ok && (len(mechs) == 0 || m.Name != mechs[0].Name) {
		mechs = append(mechs, m)
	}
	for _, m := range mechs {
		existed, err := auth.DeleteCredential(r.FS, r.ClusterDir, user, m)
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("delete the %s credential of %s: %w", m.Name, user, err)
		}
		if existed {
			r.event(u, corev1.EventTypeNormal, "CredentialDeleted", "Delete", fmt.Sprintf("%s credential of %s deleted", m.Name, user))
		}
	}
	if err := r.removeKafka(ctx, u); err != nil {
		return ctrl.Result{}, err
	}
	controllerutil.RemoveFinalizer(u, v1alpha1.UserFinalizer)
	if err := r.Client.Update(ctx, u); err != nil {
		return r.retryOnConflict(fmt.Errorf("remove finalizer: %w", err))
	}
	logf.FromContext(ctx).Info("finalizer removed", "user", user)
	return ctrl.Result{}, nil
}

func (r *UserReconciler) secrets() client.Reader {
	if r.Secrets != nil {
		return r.Secrets
	}
	return r.Client
}

func (r *UserReconciler) event(u *v1alpha1.User, typ, reason, action, note string) {
	if r.Recorder != nil {
		r.Recorder.Eventf(u, nil, typ, reason, action, "%s", truncate(note, maxEventNote))
	}
}

func (r *UserReconciler) retryOnConflict(err error) (ctrl.Result, error) {
	return retryOnConflict(err, r.RetryInterval)
}

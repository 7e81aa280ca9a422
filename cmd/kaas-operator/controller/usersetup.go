package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kaas-dev/kaas/cmd/kaas-operator/api/v1alpha1"
)

// SetupWithManager watches User resources (spec changes and deletion, not
// the operator's own status writes) and Secrets: a Secret's change
// reconciles every User of its namespace that reads its password from it,
// so a new password reaches the volume without waiting for a resync. Only
// the Secrets' metadata is watched and cached; their data is read when a
// User needs it.
func (r *UserReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("user").
		For(&v1alpha1.User{}, builder.WithPredicates(predicate.Or[client.Object](
			predicate.GenerationChangedPredicate{},
			deletionStarted(),
		))).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.usersOfSecret), builder.OnlyMetadata).
		WithOptions(controller.Options{MaxConcurrentReconciles: 2}).
		Complete(r)
}

// usersOfSecret lists the Users whose password lives in s.
func (r *UserReconciler) usersOfSecret(ctx context.Context, s client.Object) []reconcile.Request {
	var users v1alpha1.UserList
	if err := r.Client.List(ctx, &users, client.InNamespace(s.GetNamespace())); err != nil {
		log.FromContext(ctx).Error(err, "list Users for a Secret change", "secret", s.GetName())
		return nil
	}
	var out []reconcile.Request
	for i := range users.Items {
		if SecretOf(&users.Items[i]) == s.GetName() {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&users.Items[i])})
		}
	}
	return out
}

// SecretOf is the Secret u's password is read from.
func SecretOf(u *v1alpha1.User) string {
	if u.Spec.PasswordSecretRef != nil {
		return u.Spec.PasswordSecretRef.Name
	}
	return GeneratedSecretName(u)
}

package controller

import (
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/kaas-dev/kaas/cmd/kaas-operator/api/v1alpha1"
)

// SetupWithManager watches Topic resources. An update is reconciled when
// the spec changes (generation), an annotation changes (kaas.io/paused,
// kaas.io/adopt) or deletion starts, not for the operator's own status
// writes; the status is kept current by requeueing instead.
func (r *TopicReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("topic").
		For(&v1alpha1.Topic{}, builder.WithPredicates(predicate.Or[client.Object](
			predicate.GenerationChangedPredicate{},
			predicate.AnnotationChangedPredicate{},
			deletionStarted(),
		))).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Complete(r)
}

// deletionStarted passes the update that sets deletionTimestamp.
func deletionStarted() predicate.Funcs {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectOld.GetDeletionTimestamp().IsZero() && !e.ObjectNew.GetDeletionTimestamp().IsZero()
		},
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

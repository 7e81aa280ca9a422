// Package controller is the Kubernetes side of kaas-operator: it watches
// Topic resources and applies what topicstate decides (finalizer, status,
// events). Everything that needs no Kubernetes types lives in topicstate.
package controller

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kaas-dev/kaas/cmd/kaas-operator/api/v1alpha1"
	"github.com/kaas-dev/kaas/cmd/kaas-operator/topicstate"
	"github.com/kaas-dev/kaas/volume"
)

// TopicReconciler drives Topic resources into the desired state on the
// brokers' shared volume.
type TopicReconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	// FS and ClusterDir are the volume and the cluster directory the
	// brokers share.
	FS         volume.FS
	ClusterDir string
	// PollInterval is how soon a resource is looked at again while the
	// brokers are still moving (opening, deleting, failing);
	// ResyncInterval how soon once it is settled.
	PollInterval, ResyncInterval time.Duration
}

// Reconcile looks at one Topic resource once.
func (r *TopicReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logf.FromContext(ctx)
	var t v1alpha1.Topic
	if err := r.Client.Get(ctx, req.NamespacedName, &t); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	d := declaration(&t)
	deleting := !t.DeletionTimestamp.IsZero()
	var res topicstate.Result
	switch {
	case deleting && !controllerutil.ContainsFinalizer(&t, v1alpha1.Finalizer):
		return ctrl.Result{}, nil // not ours to hold
	case t.Annotations[v1alpha1.AnnotationPaused] == "true":
		res = topicstate.Paused(d, deleting)
		if deleting {
			log.Info("paused Topic deleted: its topic is left on the volume", "topic", d.TopicName)
		}
	case deleting:
		res = topicstate.Delete(r.FS, r.ClusterDir, d)
	default:
		if controllerutil.AddFinalizer(&t, v1alpha1.Finalizer) {
			if err := r.Client.Update(ctx, &t); err != nil {
				return r.retryOnConflict(fmt.Errorf("add finalizer: %w", err))
			}
		}
		res = topicstate.Ensure(r.FS, r.ClusterDir, d)
	}
	r.record(&t, res.Events)
	if res.Err != nil {
		log.Error(res.Err, "topic reconcile failed", "topic", d.TopicName)
	}
	if res.RemoveFinalizer {
		controllerutil.RemoveFinalizer(&t, v1alpha1.Finalizer)
		if err := r.Client.Update(ctx, &t); err != nil {
			return r.retryOnConflict(fmt.Errorf("remove finalizer: %w", err))
		}
		log.Info("finalizer removed", "topic", d.TopicName)
		return ctrl.Result{}, nil
	}
	if next, changed := nextStatus(&t, res); changed {
		t.Status = next
		if err := r.Client.Status().Update(ctx, &t); err != nil {
			return r.retryOnConflict(fmt.Errorf("update status: %w", err))
		}
	}
	if res.Err != nil {
		return ctrl.Result{}, res.Err // backoff
	}
	return ctrl.Result{RequeueAfter: r.after(res.Requeue)}, nil
}

func (r *TopicReconciler) after(q topicstate.Requeue) time.Duration {
	switch q {
	case topicstate.RequeuePoll:
		return r.PollInterval
	case topicstate.RequeueResync:
		return r.ResyncInterval
	}
	return 0
}

func (r *TopicReconciler) retryOnConflict(err error) (ctrl.Result, error) {
	return retryOnConflict(err, r.PollInterval)
}

// retryOnConflict treats a stale read (the resource changed meanwhile) as
// routine: look again after soon, without an error in the log. A resource
// gone meanwhile needs nothing.
func retryOnConflict(err error, soon time.Duration) (ctrl.Result, error) {
	switch {
	case apierrors.IsConflict(err):
		return ctrl.Result{RequeueAfter: soon}, nil
	case apierrors.IsNotFound(err):
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, err
}

// declaration is the resource in topicstate's terms.
func declaration(t *v1alpha1.Topic) topicstate.Declaration {
	d := topicstate.Declaration{
		Namespace: t.Namespace, Name: t.Name, UID: string(t.UID),
		TopicName:  TopicName(t),
		Partitions: t.Spec.Partitions,
		Configs:    t.Spec.Config,
		Adopt:      t.Annotations[v1alpha1.AnnotationAdopt] == "true",
		TopicID:    t.Status.TopicID,
	}
	for _, c := range t.Status.Conditions {
		d.Conditions = append(d.Conditions, topicstate.Condition{Type: c.Type, Status: string(c.Status), Reason: c.Reason, Message: c.Message})
	}
	return d
}

// TopicName is the Kafka topic a resource declares: spec.topicName, or
// the resource's name.
func TopicName(t *v1alpha1.Topic) string {
	if t.Spec.TopicName != "" {
		return t.Spec.TopicName
	}
	return t.Name
}

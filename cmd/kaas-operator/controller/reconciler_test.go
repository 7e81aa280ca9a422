package controller

import (
	"context"
	"path"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/kaas-dev/kaas/cmd/kaas-operator/api/v1alpha1"
	"github.com/kaas-dev/kaas/engine/desired"
	"github.com/kaas-dev/kaas/states"
	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/memfs"
)

const clusterDir = "data/__cluster"

// The glue only: a Topic's life against a fake API server and an
// in-memory volume. topicstate's tests cover the decisions, the specs the
// real API server.
func TestReconcileLifecycle(t *testing.T) {
	ctx := context.Background()
	fsys := memfs.New()
	if err := volume.MkdirAllSync(fsys, path.Join(clusterDir, "topics")); err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	topic := &v1alpha1.Topic{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "orders", UID: "u1", Generation: 1},
		Spec:       v1alpha1.TopicSpec{Partitions: 2, Config: map[string]string{"retention.ms": "1000"}},
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(topic).WithStatusSubresource(&v1alpha1.Topic{}).Build()
	rec := events.NewFakeRecorder(10)
	r := &TopicReconciler{Client: c, Recorder: rec, FS: fsys, ClusterDir: clusterDir,
		PollInterval: time.Second, ResyncInterval: time.Minute}
	key := types.NamespacedName{Namespace: "ns", Name: "orders"}
	reconcile := func(wantAfter time.Duration) *v1alpha1.Topic {
		t.Helper()
		res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
		if err != nil || res.RequeueAfter != wantAfter {
			t.Fatalf("reconcile: %+v, %v; want requeue after %v", res, err, wantAfter)
		}
		var got v1alpha1.Topic
		if err := c.Get(ctx, key, &got); apierrors.IsNotFound(err) {
			return nil
		} else if err != nil {
			t.Fatal(err)
		}
		return &got
	}

	// Created: finalizer, status naming the new topic, an event.
	got := reconcile(time.Second)
	spec, err := desired.ReadTopicSpec(fsys, clusterDir, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if spec.ManagedBy != "kubernetes/ns/orders/u1" || spec.Partitions != 2 {
		t.Fatalf("spec %+v", spec)
	}
	if !strings.Contains(strings.Join(got.Finalizers, ","), v1alpha1.Finalizer) {
		t.Fatalf("finalizers %v", got.Finalizers)
	}
	st := got.Status
	if st.TopicID != spec.ID || st.TopicName != "orders" || st.PartitionsServing != "0/2" || st.ObservedGeneration != 1 || len(st.Partitions) != 2 {
		t.Fatalf("status %+v", st)
	}
	wantCondition(t, got, v1alpha1.ConditionReady, metav1.ConditionFalse, "Opening")
	if e := <-rec.Events; !strings.Contains(e, "Created") {
		t.Fatalf("event %q", e)
	}

	// Serving: ready, settled, resynced later.
	for p := int32(0); p < 2; p++ {
		if err := states.Save(fsys, clusterDir, &states.Record{Kind: states.PartitionOpen.Kind,
			Object: states.PartitionObject("orders", p), State: "serving", TopicID: spec.ID, Epoch: 1, Owner: "broker-0"}); err != nil {
			t.Fatal(err)
		}
	}
	got = reconcile(time.Minute)
	wantCondition(t, got, v1alpha1.ConditionReady, metav1.ConditionTrue, "Serving")
	wantCondition(t, got, v1alpha1.ConditionReconciling, metav1.ConditionFalse, "Settled")
	failedSince := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionFailed).LastTransitionTime

	// Nothing changed: nothing written.
	again := reconcile(time.Minute)
	if again.ResourceVersion != got.ResourceVersion {
		t.Fatalf("status rewritten without a change: resourceVersion %s -> %s", got.ResourceVersion, again.ResourceVersion)
	}
	if f := meta.FindStatusCondition(again.Status.Conditions, v1alpha1.ConditionFailed); !f.LastTransitionTime.Equal(&failedSince) {
		t.Fatal("lastTransitionTime moved without a transition")
	}

	// Deleted: the topic is marked, the finalizer holds until it is gone.
	if err := c.Delete(ctx, got); err != nil {
		t.Fatal(err)
	}
	got = reconcile(time.Second)
	wantCondition(t, got, v1alpha1.ConditionReady, metav1.ConditionFalse, "Deleting")
	if spec, _ := desired.ReadTopicSpec(fsys, clusterDir, "orders"); !spec.Deleted {
		t.Fatalf("not marked deleted: %+v", spec)
	}
	if err := desired.RemoveTopicSpec(fsys, clusterDir, "orders", spec.ID); err != nil { // the machine's last step
		t.Fatal(err)
	}
	if got = reconcile(0); got != nil {
		t.Fatalf("still there: %+v", got.ObjectMeta)
	}
}

func wantCondition(t *testing.T, topic *v1alpha1.Topic, typ string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	c := meta.FindStatusCondition(topic.Status.Conditions, typ)
	if c == nil || c.Status != status || c.Reason != reason || c.ObservedGeneration != topic.Generation || c.Message == "" {
		t.Fatalf("condition %s = %+v, want %s/%s", typ, c, status, reason)
	}
}

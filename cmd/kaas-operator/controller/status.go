package controller

import (
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kaas-dev/kaas/cmd/kaas-operator/api/v1alpha1"
	"github.com/kaas-dev/kaas/cmd/kaas-operator/topicstate"
)

// nextStatus is t's status after res, and whether it differs from the
// one t has (only a change is written: no update, no watch event, no hot
// loop). Conditions keep their lastTransitionTime unless their status
// changes (meta.SetStatusCondition), and each carries the generation it
// describes.
func nextStatus(t *v1alpha1.Topic, res topicstate.Result) (v1alpha1.TopicStatus, bool) {
	next := *t.Status.DeepCopy()
	next.ObservedGeneration = t.Generation
	if o := res.Observed; o != nil {
		next.TopicID = o.TopicID
		next.TopicName = o.TopicName
		next.PartitionsServing = o.PartitionsServing
		next.Partitions = nil
		for _, p := range o.Partitions {
			next.Partitions = append(next.Partitions, v1alpha1.PartitionStatus{
				Partition: p.Partition, State: p.State, LeaderEpoch: p.LeaderEpoch, Owner: p.Owner, LastError: p.LastError,
			})
		}
	}
	for _, c := range res.Conditions {
		meta.SetStatusCondition(&next.Conditions, metav1.Condition{
			Type: c.Type, Status: metav1.ConditionStatus(c.Status), Reason: c.Reason,
			Message: truncate(c.Message, maxConditionMessage), ObservedGeneration: t.Generation,
		})
	}
	return next, !equality.Semantic.DeepEqual(next, t.Status)
}

// maxConditionMessage is metav1.Condition's limit on message.
const maxConditionMessage = 32768

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-len("...")] + "..."
}

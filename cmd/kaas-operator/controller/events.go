package controller

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/kaas-dev/kaas/cmd/kaas-operator/api/v1alpha1"
	"github.com/kaas-dev/kaas/cmd/kaas-operator/topicstate"
)

// maxEventNote is the events.k8s.io/v1 limit on an event's note.
const maxEventNote = 1024

// actions name what the operator did, for each event reason (events.k8s.io/v1
// requires an action).
var actions = map[string]string{
	topicstate.EventCreated:  "Create",
	topicstate.EventAdopted:  "Adopt",
	topicstate.EventUpdated:  "Update",
	topicstate.EventReplaced: "Delete",
	topicstate.EventDeleted:  "Delete",
	topicstate.EventReleased: "Release",
}

func (r *TopicReconciler) record(t *v1alpha1.Topic, evs []topicstate.Event) {
	if r.Recorder == nil {
		return
	}
	for _, e := range evs {
		typ := corev1.EventTypeNormal
		if e.Warning {
			typ = corev1.EventTypeWarning
		}
		action, ok := actions[e.Reason]
		if !ok {
			action = "Reconcile"
		}
		r.Recorder.Eventf(t, nil, typ, e.Reason, action, "%s", truncate(e.Message, maxEventNote))
	}
}

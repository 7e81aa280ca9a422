package topicstate

import (
	"errors"
	"fmt"

	"github.com/kaas-dev/kaas/engine/desired"
	"github.com/kaas-dev/kaas/states"
	"github.com/kaas-dev/kaas/volume"
)

// Delete asks for the resource's topic to be deleted and reports whether
// the finalizer can go: once the topic-delete machine has purged the data
// and removed the desired state, or at once if the resource never had a
// topic or another declaration has it now. The topic of a resource is the
// incarnation its ManagedBy names, found on the volume, else the one its
// status names (a status write lost after the create does not orphan the
// topic).
func Delete(fsys volume.FS, clusterDir string, d Declaration) Result {
	cur, err := readSpec(fsys, clusterDir, d.TopicName)
	if err != nil {
		return d.volumeError(nil, err)
	}
	id := d.TopicID
	if cur.ID != "" && cur.ManagedBy == d.ManagedBy() {
		id = cur.ID
	}
	if id == "" {
		return Result{RemoveFinalizer: true} // never created: nothing to delete
	}
	gone, err := desired.DeleteManagedTopic(fsys, clusterDir, d.TopicName, id, d.ManagedBy())
	switch {
	case errors.Is(err, desired.ErrTopicManaged):
		return Result{RemoveFinalizer: true, Events: []Event{{Reason: EventReleased, Message: fmt.Sprintf(
			"Left topic %s in place: it is declared by %s now.", d.TopicName, describeManagedBy(cur.ManagedBy))}}}
	case err != nil:
		return d.volumeError(nil, fmt.Errorf("delete topic %s: %w", d.TopicName, err))
	case gone:
		return Result{RemoveFinalizer: true, Events: []Event{{Reason: EventDeleted, Message: fmt.Sprintf(
			"Deleted topic %s (topic ID %s) and its data.", d.TopicName, id)}}}
	}
	msg := fmt.Sprintf("Deleting topic %s (topic ID %s): %s.", d.TopicName, id, deleteProgress(fsys, clusterDir, d.TopicName, id))
	return Result{
		Conditions: []Condition{
			condition(Ready, False, ReasonDeleting, msg),
			condition(Reconciling, True, ReasonDeleting, msg),
			notFailed,
		},
		Requeue: RequeuePoll,
	}
}

// deleteProgress describes the topic-delete record of incarnation id.
func deleteProgress(fsys volume.FS, clusterDir, name, id string) string {
	rec, err := states.Load(fsys, clusterDir, states.TopicDelete.Kind, name)
	switch {
	case err != nil:
		return "its progress could not be read: " + err.Error()
	case rec == nil || rec.TopicID != id:
		return "waiting for a broker to start the topic-delete machine"
	case rec.LastError != "":
		return fmt.Sprintf("topic-delete is at step %s on %s, last error: %s", rec.State, rec.Owner, rec.LastError)
	}
	return fmt.Sprintf("topic-delete is at step %s on %s", rec.State, rec.Owner)
}

// Paused: the kaas.io/paused annotation keeps the operator off the volume.
// A paused resource being deleted lets go of its topic, which stays.
func Paused(d Declaration, deleting bool) Result {
	if deleting {
		return Result{RemoveFinalizer: true, Events: []Event{{Reason: EventReleased, Message: fmt.Sprintf(
			"The resource was paused when deleted: topic %s is left on the volume.", d.TopicName)}}}
	}
	msg := "Reconciling is paused by the annotation kaas.io/paused: \"true\"; the topic on the volume is left as it is."
	return Result{Conditions: []Condition{
		condition(Ready, False, ReasonPaused, msg),
		condition(Reconciling, False, ReasonPaused, msg),
	}}
}

package topicstate

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"

	"github.com/kaas-dev/kaas/engine/desired"
	"github.com/kaas-dev/kaas/volume"
)

// Ensure makes the topic's desired state say what the resource says and
// reports how far the brokers are with it.
func Ensure(fsys volume.FS, clusterDir string, d Declaration) Result {
	before, err := readSpec(fsys, clusterDir, d.TopicName)
	if err != nil {
		return d.volumeError(nil, err)
	}
	spec, err := desired.EnsureTopic(fsys, clusterDir, desired.ManagedTopic{
		Name: d.TopicName, Partitions: d.Partitions, Configs: d.Configs,
		ManagedBy: d.ManagedBy(), Adopt: d.Adopt,
	})
	if err != nil {
		return d.ensureFailed(fsys, clusterDir, before, spec, err)
	}
	prog, err := loadProgress(fsys, clusterDir, spec)
	if err != nil {
		return d.volumeError(nil, err)
	}
	events := d.changeEvents(before, spec)
	applied := len(events) > 0
	r := Result{Observed: prog.observed(spec), Events: events, Requeue: RequeuePoll}
	switch {
	case prog.allServing():
		r.Conditions = []Condition{condition(Ready, True, ReasonServing,
			fmt.Sprintf("All %d partitions of topic %s are serving.", len(prog.all), spec.Name))}
		if applied {
			r.Conditions = append(r.Conditions, condition(Reconciling, True, ReasonApplying,
				fmt.Sprintf("Wrote generation %d of topic %s; the brokers are applying it.", spec.Generation, spec.Name)))
		} else {
			r.Conditions = append(r.Conditions, condition(Reconciling, False, ReasonSettled,
				fmt.Sprintf("Topic %s is as the resource declares it.", spec.Name)))
			r.Requeue = RequeueResync
		}
	default:
		msg := fmt.Sprintf("%d of %d partitions of topic %s are serving; waiting for %s.",
			prog.serving, len(prog.all), spec.Name, prog.waitingFor())
		r.Conditions = []Condition{condition(Ready, False, ReasonOpening, msg)}
		if applied {
			r.Conditions = append(r.Conditions, condition(Reconciling, True, ReasonApplying,
				fmt.Sprintf("Wrote generation %d of topic %s; the brokers are applying it.", spec.Generation, spec.Name)))
		} else {
			r.Conditions = append(r.Conditions, condition(Reconciling, True, ReasonOpening, msg))
		}
	}
	r.Conditions = append(r.Conditions, notFailed)
	return r
}

// readSpec reads a topic's desired state; absent is the zero spec.
func readSpec(fsys volume.FS, clusterDir, name string) (desired.TopicSpec, error) {
	if desired.ValidTopicName(name) != nil {
		return desired.TopicSpec{}, nil // EnsureTopic says what is wrong
	}
	spec, err := desired.ReadTopicSpec(fsys, clusterDir, name)
	if errors.Is(err, fs.ErrNotExist) {
		return desired.TopicSpec{}, nil
	}
	return spec, err
}

// owns reports whether spec is a live incarnation this resource declares.
func (d Declaration) owns(spec desired.TopicSpec) bool {
	return spec.ID != "" && !spec.Deleted && spec.ManagedBy == d.ManagedBy()
}

// changeEvents announces what EnsureTopic did, judged from the spec before
// and after it.
func (d Declaration) changeEvents(before, after desired.TopicSpec) []Event {
	switch {
	case before.ID != after.ID:
		return []Event{{Reason: EventCreated, Message: fmt.Sprintf("Created topic %s with %d partitions (topic ID %s).",
			after.Name, after.Partitions, after.ID)}}
	case before.ManagedBy == "" && after.ManagedBy != "":
		return []Event{{Reason: EventAdopted, Message: fmt.Sprintf("Took over topic %s (topic ID %s), which was created through the Kafka API.",
			after.Name, after.ID)}}
	case before.Generation != after.Generation:
		return []Event{{Reason: EventUpdated, Message: fmt.Sprintf("Changed topic %s to %d partitions and configs %s (generation %d).",
			after.Name, after.Partitions, describeConfigs(after.Configs), after.Generation)}}
	}
	return nil
}

func describeConfigs(c map[string]string) string {
	if len(c) == 0 {
		return "{} (all defaults)"
	}
	keys := slices.Sorted(maps.Keys(c))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + c[k]
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// ensureFailed turns an EnsureTopic error into conditions. found is the
// spec EnsureTopic returned with it (the existing one, for conflicts),
// before the one read ahead of the call.
func (d Declaration) ensureFailed(fsys volume.FS, clusterDir string, before, found desired.TopicSpec, err error) Result {
	// What the status shows while failing: the incarnation this resource
	// still owns, which keeps serving its last good spec.
	var obs *Observed
	owned := before
	if d.owns(found) {
		owned = found
	}
	if d.owns(owned) {
		prog, perr := loadProgress(fsys, clusterDir, owned)
		if perr != nil {
			return d.volumeError(nil, perr)
		}
		obs = prog.observed(owned)
	} else {
		obs = &Observed{TopicName: d.TopicName}
	}
	switch {
	case errors.Is(err, desired.ErrTopicDeleting):
		return d.waitingForDelete(obs, found)
	case errors.Is(err, desired.ErrTopicManaged) && strings.HasPrefix(found.ManagedBy, d.resourcePrefix()):
		return d.replaceStale(fsys, clusterDir, obs, found)
	case errors.Is(err, desired.ErrTopicManaged):
		return d.failure(obs, ReasonTopicClaimed, fmt.Sprintf(
			"Topic %s (topic ID %s) is declared by %s; a topic can be declared by one resource only.",
			found.Name, found.ID, describeManagedBy(found.ManagedBy)), nil)
	case errors.Is(err, desired.ErrTopicUnmanaged):
		return d.failure(obs, ReasonTopicExists, fmt.Sprintf(
			"Topic %s (topic ID %s) was created through the Kafka API; set the annotation kaas.io/adopt: \"true\" on this resource to take it over.",
			found.Name, found.ID), nil)
	case errors.Is(err, desired.ErrInvalidTopic), errors.Is(err, desired.ErrInvalidConfig):
		return d.failure(obs, ReasonInvalidSpec, "The spec is not valid: "+err.Error()+".", nil)
	case errors.Is(err, desired.ErrInvalidPartitions):
		return d.failure(obs, ReasonInvalidPartitions, "The partition count is not valid: "+err.Error()+".", nil)
	}
	return d.volumeError(obs, err)
}

func (d Declaration) volumeError(obs *Observed, err error) Result {
	return d.failure(obs, ReasonVolumeError, "The cluster directory could not be read or written: "+err.Error()+".", err)
}

// describeManagedBy names a declaration for a human: a Topic resource
// (kubernetes/<namespace>/<name>/<uid>) by its namespace and name.
func describeManagedBy(managedBy string) string {
	if managedBy == "" {
		return "the Kafka API"
	}
	parts := strings.Split(managedBy, "/")
	if len(parts) == 4 && parts[0] == "kubernetes" {
		return fmt.Sprintf("the Topic resource %s/%s (uid %s)", parts[1], parts[2], parts[3])
	}
	return managedBy
}

// waitingForDelete: the name's previous incarnation is being deleted; the
// topic is created once it is gone.
func (d Declaration) waitingForDelete(obs *Observed, old desired.TopicSpec) Result {
	msg := fmt.Sprintf("The previous incarnation of topic %s (topic ID %s) is being deleted; the topic is created once it is gone.",
		old.Name, old.ID)
	return Result{
		Observed: obs,
		Conditions: []Condition{
			condition(Ready, False, ReasonOpening, msg),
			condition(Reconciling, True, ReasonWaitingForDelete, msg),
			notFailed,
		},
		Requeue: RequeuePoll,
	}
}

// replaceStale deletes an incarnation left by an earlier resource of the
// same namespace and name (its finalizer was removed by force, so it never
// deleted it): this resource is a new declaration and gets a new topic ID.
func (d Declaration) replaceStale(fsys volume.FS, clusterDir string, obs *Observed, stale desired.TopicSpec) Result {
	if _, err := desired.DeleteManagedTopic(fsys, clusterDir, stale.Name, stale.ID, stale.ManagedBy); err != nil {
		return d.volumeError(obs, fmt.Errorf("delete stale incarnation %s of topic %s: %w", stale.ID, stale.Name, err))
	}
	r := d.waitingForDelete(obs, stale)
	r.Events = []Event{{Reason: EventReplaced, Message: fmt.Sprintf(
		"Deleting topic %s (topic ID %s), left by an earlier resource of this name (%s); this resource gets a new topic.",
		stale.Name, stale.ID, stale.ManagedBy)}}
	return r
}

// Package topicstate decides what kaas-operator does for one Topic
// resource and what its status says, in plain types: it drives the volume
// through desired.EnsureTopic and desired.DeleteManagedTopic and reads the
// partition-open and topic-delete records, but knows nothing of
// Kubernetes. The controller package translates to and from the API
// objects.
package topicstate

// Declaration is one Topic resource as the operator sees it.
type Declaration struct {
	Namespace, Name, UID string
	// TopicName is the Kafka topic: spec.topicName, or metadata.name.
	TopicName  string
	Partitions int32
	Configs    map[string]string
	// Adopt lets the resource take over a topic created through the
	// Kafka API (the kaas.io/adopt annotation).
	Adopt bool
	// TopicID is the one the resource's status names, if any.
	TopicID string
	// Conditions are the status's conditions as they are, so that a
	// failure is announced (an event) once, not at every poll.
	Conditions []Condition
}

// ManagedBy names the resource and its incarnation in the topic's
// desired state: kubernetes/<namespace>/<name>/<uid>.
func (d Declaration) ManagedBy() string { return d.resourcePrefix() + d.UID }

// resourcePrefix is what every incarnation of the resource's name shares:
// a spec managed by another UID under it was left by an earlier resource
// of the same name (its finalizer removed by force).
func (d Declaration) resourcePrefix() string {
	return "kubernetes/" + d.Namespace + "/" + d.Name + "/"
}

// Condition types and statuses, as in metav1.Condition.
const (
	Ready       = "Ready"
	Reconciling = "Reconciling"
	Failed      = "Failed"

	True  = "True"
	False = "False"
)

// Condition reasons.
const (
	ReasonServing           = "Serving"           // Ready
	ReasonOpening           = "Opening"           // Ready False, Reconciling True
	ReasonDeleting          = "Deleting"          // Ready False, Reconciling True
	ReasonPaused            = "Paused"            // Ready False, Reconciling False
	ReasonFailed            = "Failed"            // Ready False, Reconciling False
	ReasonApplying          = "Applying"          // Reconciling True: a change was just written
	ReasonWaitingForDelete  = "WaitingForDelete"  // Reconciling True: the name's previous incarnation is being deleted
	ReasonSettled           = "Settled"           // Reconciling False
	ReasonNone              = "None"              // Failed False
	ReasonInvalidSpec       = "InvalidSpec"       // Failed: bad topic name or config
	ReasonInvalidPartitions = "InvalidPartitions" // Failed: out of range, or fewer than the topic has
	ReasonTopicExists       = "TopicExists"       // Failed: created through the Kafka API, not adopted
	ReasonTopicClaimed      = "TopicClaimed"      // Failed: another resource declares the topic
	ReasonVolumeError       = "VolumeError"       // Failed: reading or writing the volume failed; retried with backoff
)

// Event reasons (besides the Failed reasons, which failures are announced
// with).
const (
	EventCreated  = "Created"
	EventAdopted  = "Adopted"
	EventUpdated  = "Updated"
	EventReplaced = "ReplacingStaleTopic"
	EventDeleted  = "Deleted"
	EventReleased = "Released"
)

// Condition is a metav1.Condition without its bookkeeping (time,
// generation), which the controller adds.
type Condition struct {
	Type, Status, Reason, Message string
}

// Partition is one partition's progress, from its partition-open record.
type Partition struct {
	Partition   int32
	State       string
	LeaderEpoch int32
	Owner       string
	LastError   string
}

// Observed is what the status says about the topic on the volume.
type Observed struct {
	TopicID   string
	TopicName string
	// Partitions is every partition's progress, or for topics of more than
	// MaxListedPartitions the partitions not serving, up to that many (a
	// status must stay far below the API server's object size limit).
	Partitions        []Partition
	PartitionsServing string
}

// MaxListedPartitions bounds Observed.Partitions.
const MaxListedPartitions = 500

// Event is a Kubernetes event to record on the resource.
type Event struct {
	Warning bool
	Reason  string
	Message string
}

// Requeue says when to look at the resource again.
type Requeue int

const (
	// RequeueNone: only a change to the resource brings it back.
	RequeueNone Requeue = iota
	// RequeuePoll: soon (the status poll interval): the volume is moving.
	RequeuePoll
	// RequeueResync: later (the resync interval): settled.
	RequeueResync
)

// Result is what to do after one look at a resource.
type Result struct {
	// Observed replaces the status's topic fields; nil leaves them.
	Observed *Observed
	// Conditions are set on the status (others are left as they are).
	Conditions []Condition
	Events     []Event
	// RemoveFinalizer lets the resource go.
	RemoveFinalizer bool
	Requeue         Requeue
	// Err is a volume error, returned to the controller for backoff.
	Err error
}

func condition(typ, status, reason, message string) Condition {
	return Condition{Type: typ, Status: status, Reason: reason, Message: message}
}

// previous returns the declaration's condition of type typ.
func (d Declaration) previous(typ string) (Condition, bool) {
	for _, c := range d.Conditions {
		if c.Type == typ {
			return c, true
		}
	}
	return Condition{}, false
}

// failure is the result of a failed reconcile: the Failed condition says
// why, and a Warning event announces it when it is new.
func (d Declaration) failure(obs *Observed, reason, message string, err error) Result {
	r := Result{
		Observed: obs,
		Conditions: []Condition{
			condition(Ready, False, ReasonFailed, message),
			condition(Reconciling, False, ReasonFailed, retryNote(reason)),
			condition(Failed, True, reason, message),
		},
		Requeue: RequeuePoll,
		Err:     err,
	}
	if prev, ok := d.previous(Failed); !ok || prev.Status != True || prev.Reason != reason || prev.Message != message {
		r.Events = append(r.Events, Event{Warning: true, Reason: reason, Message: message})
	}
	return r
}

func retryNote(reason string) string {
	if reason == ReasonVolumeError {
		return "The volume could not be read or written; retrying with backoff."
	}
	return "Stopped until the cause in the Failed condition is fixed."
}

var notFailed = condition(Failed, False, ReasonNone, "No failure.")

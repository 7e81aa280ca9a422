package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// Finalizer holds a Topic resource until its topic is deleted from the
	// volume.
	Finalizer = "kaas.io/topic-deletion"
	// AnnotationPaused set to "true" stops the operator from touching the
	// volume for this resource; deleting it then leaves the topic.
	AnnotationPaused = "kaas.io/paused"
	// AnnotationAdopt set to "true" lets the resource take over a topic
	// created through the Kafka API.
	AnnotationAdopt = "kaas.io/adopt"
)

// Condition types of a Topic.
const (
	ConditionReady       = "Ready"
	ConditionReconciling = "Reconciling"
	ConditionFailed      = "Failed"
)

// Topic is a Kafka topic served by kaas.
type Topic struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   TopicSpec   `json:"spec"`
	Status TopicStatus `json:"status,omitempty"`
}

// TopicSpec is what the resource asks for.
type TopicSpec struct {
	// Partitions can be raised, never lowered.
	Partitions int32 `json:"partitions"`
	// Config holds topic configs (retention.ms, ...); keys not given take
	// their defaults.
	Config map[string]string `json:"config,omitempty"`
	// TopicName is the Kafka topic's name; empty means metadata.name.
	// It cannot change after creation.
	TopicName string `json:"topicName,omitempty"`
}

// TopicStatus is what the operator observed on the volume.
type TopicStatus struct {
	// TopicID is the ID of the topic incarnation this resource owns.
	TopicID string `json:"topicID,omitempty"`
	// TopicName is the Kafka topic's name.
	TopicName string `json:"topicName,omitempty"`
	// ObservedGeneration is the resource generation this status describes.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready, Reconciling, Failed.
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Partitions lists each partition's progress (every partition for
	// topics of up to 500 partitions; for larger ones the partitions not
	// serving, up to 500).
	Partitions []PartitionStatus `json:"partitions,omitempty"`
	// PartitionsServing is "<serving>/<partitions>", e.g. "3/3".
	PartitionsServing string `json:"partitionsServing,omitempty"`
}

// PartitionStatus is one partition's state in the partition-open machine
// ("pending" until a broker records progress for this topic ID).
type PartitionStatus struct {
	Partition   int32  `json:"partition"`
	State       string `json:"state"`
	LeaderEpoch int32  `json:"leaderEpoch,omitempty"`
	Owner       string `json:"owner,omitempty"`
	LastError   string `json:"lastError,omitempty"`
}

// TopicList is a list of Topics.
type TopicList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Topic `json:"items"`
}

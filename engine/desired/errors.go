package desired

import "errors"

// Errors of the desired state; the front end maps them to Kafka error codes.
var (
	ErrTopicDeleting     = errors.New("topic is marked for deletion")
	ErrInvalidTopic      = errors.New("invalid topic")
	ErrInvalidPartitions = errors.New("invalid number of partitions")
	ErrInvalidConfig     = errors.New("invalid config")
)

// MaxPartitions bounds a topic's partition count (CreateTopics and
// CreatePartitions).
const MaxPartitions = 100000

// Package quota keeps the client quotas (Kafka's DescribeClientQuotas and
// AlterClientQuotas) and resolves the one that applies to a client with
// Kafka's precedence.
package quota

// Key is a quota's name, as Kafka spells it.
type Key string

// The quotas a broker enforces.
const (
	ProducerByteRate  Key = "producer_byte_rate"
	ConsumerByteRate  Key = "consumer_byte_rate"
	RequestPercentage Key = "request_percentage"
)

// Package desired is the desired state of topics: one small file per topic
// under <cluster>/topics/, written atomically by the Kafka admin APIs and by
// the Kubernetes operator, with the rules a topic's name, partition count
// and configs must follow and the catalog of topic configs kaas
// understands. It knows nothing of partitions, brokers or the reconciler
// that turns desired state into directories (docs/design.md §2: only the
// engine touches data directories), so the operator links this package
// and nothing else of the engine.
package desired

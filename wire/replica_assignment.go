package wire

import (
	"fmt"
	"slices"
)

// Manual replica assignments (CreateTopics, CreatePartitions) are a hint
// kaas ignores: it places every partition itself and keeps one copy on the
// shared volume. Clients and tools send one routinely, so an assignment is
// accepted as long as it is well formed, with Kafka's checks: partitions a
// contiguous 0-based run (CreateTopics), each with a non-empty list of
// distinct, non-negative broker IDs. Broker IDs are not checked against
// the live brokers: none of them is used.

// checkReplicaLists checks one partition's replica list (what names it in
// the message).
func checkReplicaLists(what string, replicas []int32) string {
	if len(replicas) == 0 {
		return "empty replica list specified in " + what
	}
	for i, b := range replicas {
		if b < 0 {
			return fmt.Sprintf("invalid broker ID %d in the replica list of %s", b, what)
		}
		if slices.Contains(replicas[:i], b) {
			return fmt.Sprintf("duplicate brokers not allowed in replica assignment: %v for %s", replicas, what)
		}
	}
	return ""
}

// createTopicsAssignment returns the partition count a CreateTopics
// assignment describes, or a message saying why it is malformed.
func createTopicsAssignment(partitions []int32, replicas func(i int) []int32) (int32, string) {
	seen := make(map[int32]bool, len(partitions))
	for i, p := range partitions {
		if seen[p] {
			return 0, fmt.Sprintf("partition %d is assigned more than once", p)
		}
		seen[p] = true
		if msg := checkReplicaLists(fmt.Sprintf("partition %d", p), replicas(i)); msg != "" {
			return 0, msg
		}
	}
	for p := range int32(len(partitions)) {
		if !seen[p] {
			return 0, "partitions should be a consecutive 0-based integer sequence"
		}
	}
	return int32(len(partitions)), ""
}

// Package cluster holds the pure building blocks of a multi-broker kaas:
// membership, controller election and partition assignment, all through
// the volume seam and the three promises of the shared volume (docs/design.md
// §1: atomic rename within a directory, atomic exclusive create,
// close-to-open). It imports only volume and the standard library (plus
// logr). Producer IDs are allocated here too, in blocks no broker reserves
// twice (producerids.go). The engine drives it (engine/membership.go): one
// round per heartbeat interval, the first at start-up, so a lone broker
// elects itself and assigns everything to itself within a round.
//
// How the pieces fit, each round (every DefaultHeartbeatInterval):
//
//  1. Heartbeat. Each broker rewrites its own <cluster>/brokers/<id>.json
//     atomically with a higher counter (Heartbeater.Beat; one writer per
//     file, rule 3). The file carries addresses, zone and incarnation, and
//     no timestamp.
//  2. Observe. Every broker reads all heartbeats through Open
//     (ReadHeartbeats; an ENOENT or ESTALE on a listed file is retried, as
//     §2 requires of a file known to exist) and feeds them to its Observer.
//     A broker is live while its counter advances within the lease on the
//     observer's own monotonic clock; no time written by another host is
//     ever compared (§2, "liveness is observed progress"). The directory
//     listing only names the files; it decides nothing.
//  3. Elect. Every broker runs Elector.Campaign. The controller is the
//     holder of the highest claim file <cluster>/controller/<epoch>.json,
//     created exclusively (promise 2) and never rewritten; the next epoch
//     is claimed only when the holder is not live or its claim has stayed
//     unreadable past a timeout (§2: EEXIST is not proof of a claim). Claim
//     epochs only grow, and a controller that sees any higher claim steps
//     down at once.
//  4. Assign. The controller computes NextAssignment from the previous
//     assignment, the complete topic list and Observer.Live, calls
//     Elector.Verify, and writes <cluster>/assignment.json atomically
//     (WriteAssignment, rule 1), stamped with its controller epoch. Owners
//     come from rendezvous hashing of (topic ID, partition) over the live
//     brokers (§5), so a membership change moves only the partitions it
//     must; a partition's leader epoch grows by one exactly when its owner
//     changes (rule 3).
//  5. Obey. Every broker reads the assignment with an AssignmentReader,
//     which refuses one older than the highest controller epoch it has
//     seen, and opens the partitions it now owns (takeover at the new
//     leader epoch: fence first, then the old tail) and closes those it no
//     longer owns. An entry names the owner's incarnation: a broker
//     restarted under the same ID is a new owner with a new leader epoch.
//     Each heartbeat lists the partitions its broker holds open, which the
//     controller's topic delete waits on before it removes anything.
//
// Three fences stay distinct (§5): the controller epoch fences routing
// decisions (which broker should serve), the leader epoch in each
// partition's fence file fences the log, and neither replaces the
// lifecycle rule that a partition is not deleted while a leader holds it.
// A deposed controller or a zombie owner can act late; what keeps that
// harmless is the epoch check by readers, never the timing of this package.
package cluster

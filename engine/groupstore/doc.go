// Package groupstore is the durable storage of one group-coordinator shard
// (engine/groups): an append-only log on the cluster volume (a partlog,
// fenced by the shard's leader epoch like a partition) holding records in
// the format of Kafka's __consumer_offsets topic, the compacted table of
// those records in memory, and periodic snapshots of that table so that a
// new owner loads a snapshot and replays only the tail after it.
//
// Layout of one shard, <cluster>/groups/<shard>/ (states.ShardDir):
//
//	fence, manifest-e<epoch>.json, <base>-e<epoch>.log/.index/.timeindex
//	                                   the partlog (volume/partlog)
//	<offset:%020d>-e<epoch>.snapshot   the table as of offset, written by
//	                                   epoch's owner (snapshot_format.go)
//
// The four questions (docs/design.md §1):
//
//   - Atomic? Appends are partlog's (one writer per epoch-named segment,
//     acknowledged after fsync and a fence re-read). A snapshot is one
//     atomic write (temp file, fsync, rename, directory fsync); a crash
//     leaves the old set of snapshots plus at worst a temp file, which
//     partlog.Open sweeps.
//   - Idempotent? Open re-derives everything from the volume: snapshot
//     choice, replay, and the removal of snapshots rejected for good.
//     Snapshot retention (keep the newest two) is best effort: a leftover
//     older snapshot is never chosen over a newer valid one.
//   - One writer, fenced by epoch? Only the shard's owner at its epoch
//     appends and writes snapshots named with that epoch. A fenced owner's
//     late snapshot is not prevented (the volume has no conditional write)
//     but rejected at load by the version-conditional rule
//     (partlog.CheckSnapshot): a snapshot is used only if its offset lies within
//     its writer's epoch in the recovered log.
//   - Names as identities? A snapshot's name is checked against its header
//     (offset, epoch, shard); the epoch in the name is a version, and the
//     log's epoch history, not the name, decides whether it is valid.
package groupstore

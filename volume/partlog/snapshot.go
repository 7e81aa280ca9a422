package partlog

// SnapshotVerdict is what CheckSnapshot says of a snapshot written beside a
// log (a coordinator shard's table, a partition's producer state).
type SnapshotVerdict int

const (
	// SnapshotUsable: within its writer's epoch and the log.
	SnapshotUsable SnapshotVerdict = iota
	// SnapshotBeyondEpoch: it covers offsets its writer's epoch does not
	// own in the recovered log (a fenced writer's late snapshot, or one
	// of data lost with a torn tail). Never usable again.
	SnapshotBeyondEpoch
	// SnapshotBelowStart: the log no longer starts at or before it.
	SnapshotBelowStart
	// SnapshotFutureEpoch: written by an epoch newer than the opener's,
	// which is then itself fenced; left alone.
	SnapshotFutureEpoch
)

// CheckSnapshot applies the version-conditional rule to a snapshot as of
// offset written by epoch's owner, against the log as recovered now
// (CheckSnapshotAgainst with the log's start and epoch history).
func (l *Log) CheckSnapshot(offset int64, epoch int32) SnapshotVerdict {
	return CheckSnapshotAgainst(offset, epoch, l.LogStartOffset(), l.EndOffsetForEpoch)
}

// CheckSnapshotAgainst is the version-conditional rule for a snapshot as
// of offset written by epoch's owner:
//
//	logStart <= offset <= end of epoch in the recovered log
//
// where the end of an epoch is where the next epoch starts in the log's
// leader-epoch history (endOfEpoch, as Log.EndOffsetForEpoch), and for the
// opener's own epoch the log end. Bytes an epoch wrote beyond its end were
// sealed away by the next owner's recovery: they are not in the log, so a
// snapshot covering them describes records that were never acknowledged
// and that later offsets now name differently. A zombie owner can write
// such a snapshot after the takeover (the fence stops its
// acknowledgements, not its file writes). Comparing the offset with the
// log end alone would catch that only while the new owner's log is
// shorter; once the new owner has appended past it, only the epoch's end
// tells the snapshot apart from a valid one. This is the
// "version-conditional snapshot" of the seed document (004), done by a
// check at load instead of a conditional write, since the volume has no
// compare-and-swap: the writer's epoch in the snapshot's name and content
// is the version, the epoch history is the condition.
func CheckSnapshotAgainst(offset int64, epoch int32, logStart int64, endOfEpoch func(int32) (int32, int64)) SnapshotVerdict {
	_, end := endOfEpoch(epoch)
	switch {
	case end < 0:
		return SnapshotFutureEpoch
	case offset > end:
		return SnapshotBeyondEpoch
	case offset < logStart:
		return SnapshotBelowStart
	}
	return SnapshotUsable
}

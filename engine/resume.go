package engine

// stillFenced reports whether this process still holds the fence claim a
// record at recEpoch names for the open called key, at the epoch it drives
// now: the claim states.Claimed states describe. A record fenced at another
// epoch, or by another process (this one never claimed it: a restart, or
// another broker), does not hold.
func (e *Engine) stillFenced(key string, recEpoch, epoch int32) bool {
	if recEpoch != epoch {
		return false
	}
	return e.opens.fencedAt(key) == epoch
}

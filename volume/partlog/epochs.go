package partlog

// EndOffsetForEpoch answers KIP-320's question "where did leader epoch e
// end?" from the epoch history, as Kafka's leader-epoch cache does: the
// largest epoch at or below e and the start offset of the first epoch after
// it; for the current epoch, the high watermark (the durable end: a
// consumer never holds an offset beyond it). An epoch older than the whole
// history answers e with the first epoch's start offset; -1 or an epoch
// newer than the current one answers (-1, -1).
func (l *Log) EndOffsetForEpoch(e int32) (epoch int32, endOffset int64) {
	return endOffsetForEpoch(l.EpochHistory(), l.Epoch(), l.HighWatermark(), e)
}

func endOffsetForEpoch(history []EpochEntry, current int32, hw int64, e int32) (int32, int64) {
	switch {
	case e < 0 || e > current:
		return -1, -1
	case e == current:
		return current, hw
	}
	// history is ascending by epoch; find the first entry above e.
	for i, h := range history {
		if h.Epoch > e {
			if i == 0 {
				return e, h.StartOffset
			}
			return history[i-1].Epoch, h.StartOffset
		}
	}
	// Every recorded epoch is at or below e, and e is not current: the
	// current epoch (which starts after them) ends them at the log end.
	if n := len(history); n > 0 {
		return history[n-1].Epoch, hw
	}
	return -1, -1
}

package partlog

import "time"

// SyncRound describes one group-commit round of a log (sync.go), for
// metrics: one report per round, never per batch or record.
type SyncRound struct {
	// Synced says the round fsynced the active segment; a round that found
	// nothing new appended since the last one checks the fence only.
	Synced bool
	// Fsync is how long the segment's fsync took (zero when not Synced).
	Fsync time.Duration
	// Bytes is how many bytes of the active segment the fsync made durable:
	// those appended since the previous round (the whole segment after a
	// roll; the sealed segment's tail was fsynced by the roll itself).
	Bytes int64
	// FenceChecked says the round re-read the fence; Fence is how long that
	// took.
	FenceChecked bool
	Fence        time.Duration
}

// RoundObserver is told about every sync round that succeeded as far as
// its fence check, on the SyncPool worker that ran the round: it must not
// block.
type RoundObserver interface {
	ObserveSyncRound(SyncRound)
}

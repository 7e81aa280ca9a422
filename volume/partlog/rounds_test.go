package partlog

import (
	"sync"
	"testing"
	"time"
)

// steppingClock advances by step at every reading, so that a duration
// measured between two readings with nothing else reading is one step.
type steppingClock struct {
	mu   sync.Mutex
	now  time.Time
	step time.Duration
}

func (c *steppingClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.now
	c.now = c.now.Add(c.step)
	return t
}

type roundRecorder struct {
	mu     sync.Mutex
	rounds []SyncRound
}

func (r *roundRecorder) ObserveSyncRound(s SyncRound) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rounds = append(r.rounds, s)
}

func (r *roundRecorder) take() []SyncRound {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.rounds
	r.rounds = nil
	return out
}

func TestSyncRoundsObserved(t *testing.T) {
	fsys := newMemFS(t)
	clock := &steppingClock{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC), step: time.Millisecond}
	rec := &roundRecorder{}
	cfg := testConfig(t, 1, newFakeClock())
	cfg.Now, cfg.Rounds = clock.Now, rec
	cfg.CheckpointInterval = time.Hour // no checkpoint reads the clock between the timings
	l := mustOpen(t, fsys, cfg)
	defer mustClose(t, l)

	b1, b2 := batch(3, 100, 1), batch(2, 50, 2)
	steps := []struct {
		name    string
		batches [][]byte
		want    SyncRound
	}{
		{"one batch", [][]byte{b1}, SyncRound{Synced: true, Fsync: time.Millisecond, Bytes: int64(len(b1)),
			FenceChecked: true, Fence: time.Millisecond}},
		{"two batches share a round", [][]byte{b1, b2}, SyncRound{Synced: true, Fsync: time.Millisecond,
			Bytes: int64(len(b1) + len(b2)), FenceChecked: true, Fence: time.Millisecond}},
	}
	for _, st := range steps {
		var last int64
		for _, b := range st.batches {
			last = mustAppend(t, l, append([]byte(nil), b...)).LastOffset
		}
		mustSync(t, l, last)
		got := rec.take()
		if len(got) != 1 || got[0] != st.want {
			t.Fatalf("%s: rounds %+v, want one %+v", st.name, got, st.want)
		}
	}
}

package txns

import (
	"maps"
	"testing"
	"time"
)

// Counts count each end once it is durable: commits, aborts, and the
// timeouts among the aborts; StateCounts counts the IDs by state.
func TestCountsAndStateCounts(t *testing.T) {
	counts := &Counts{}
	h := newHarness(t, nil, withConfig(func(c *Config) { c.Counts = counts }))

	committed, ce := h.init("committed")
	h.add("committed", committed, ce, tp("t", 0))
	if code := h.c.EndTxn(ctx, "committed", committed, ce, true); code != 0 {
		t.Fatal(codeName(code))
	}
	aborted, ae := h.init("aborted")
	h.add("aborted", aborted, ae, tp("t", 1))
	if code := h.c.EndTxn(ctx, "aborted", aborted, ae, false); code != 0 {
		t.Fatal(codeName(code))
	}
	slow, se := h.init("slow") // one-minute timeout
	h.add("slow", slow, se, tp("t", 2))
	h.init("idle")
	ongoing, oe := h.init("ongoing")
	h.settle()

	if got, want := h.c.StateCounts(), map[string]int{"CompleteCommit": 1, "CompleteAbort": 1, "Ongoing": 1, "Empty": 2}; !maps.Equal(got, want) {
		t.Fatalf("state counts %v, want %v", got, want)
	}
	h.add("ongoing", ongoing, oe, tp("t", 3))
	h.clock.Advance(time.Minute + testAbortCheck)
	h.settle()
	for name, c := range map[string]struct{ got, want int64 }{
		"committed": {counts.Committed.Load(), 1},
		"aborted":   {counts.Aborted.Load(), 3}, // one asked for, two timed out
		"timed out": {counts.TimedOut.Load(), 2},
	} {
		if c.got != c.want {
			t.Errorf("%s: %d, want %d", name, c.got, c.want)
		}
	}
	if got, want := h.c.StateCounts(), map[string]int{"CompleteCommit": 1, "CompleteAbort": 3, "Empty": 1}; !maps.Equal(got, want) {
		t.Fatalf("state counts after the timeouts %v, want %v", got, want)
	}
	h.c.Close()
	if got := h.c.StateCounts(); got != nil {
		t.Fatalf("a closed coordinator counts %v", got)
	}
}

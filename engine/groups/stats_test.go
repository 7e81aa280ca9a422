package groups

import (
	"context"
	"slices"
	"testing"
)

func TestStats(t *testing.T) {
	h := newHarness(t)
	h.stableGroup("stable", "")
	if codes := commitCodes(h.c.OffsetCommit(context.Background(), commitReq("simple", "", -1, "t1", map[int32]int64{0: 10, 1: 20}))); codes[0] != 0 || codes[1] != 0 {
		t.Fatalf("commit: %v", codes)
	}
	byName := func(withOffsets func(string) bool) map[string]GroupStats {
		out := map[string]GroupStats{}
		for _, s := range h.c.Stats(withOffsets) {
			out[s.Group] = s
		}
		return out
	}

	got := byName(nil)
	if len(got) != 2 || got["stable"].State != "Stable" || got["stable"].Members != 2 ||
		got["simple"].State != "Empty" || got["simple"].Members != 0 {
		t.Fatalf("stats without offsets: %+v", got)
	}
	if got["simple"].Offsets != nil || got["stable"].Offsets != nil {
		t.Fatalf("offsets copied though none were asked for: %+v", got)
	}

	got = byName(func(g string) bool { return g == "simple" })
	offs := got["simple"].Offsets
	slices.SortFunc(offs, func(a, b CommittedOffset) int { return int(a.Partition - b.Partition) })
	want := []CommittedOffset{{"t1", 0, 10}, {"t1", 1, 20}}
	if !slices.Equal(offs, want) {
		t.Fatalf("offsets of simple: %+v, want %+v", offs, want)
	}
	if got["stable"].Offsets != nil {
		t.Fatalf("offsets of a group not asked for: %+v", got["stable"].Offsets)
	}

	h.c.Close()
	if s := h.c.Stats(func(string) bool { return true }); s != nil {
		t.Fatalf("a closed coordinator reports %+v", s)
	}
}

func TestStatsLeavesPendingTransactionalCommitsOut(t *testing.T) {
	h := newHarness(t)
	h.txnCommit(simpleTxn("g", 7, "t1", map[int32]int64{0: 5}))
	stats := h.c.Stats(func(string) bool { return true })
	if len(stats) != 1 {
		t.Fatalf("stats %+v, want the one group", stats)
	}
	for _, s := range stats {
		if len(s.Offsets) != 0 {
			t.Fatalf("a commit of a running transaction is visible: %+v", s)
		}
		if s.State != "Empty" {
			t.Fatalf("state %q", s.State)
		}
	}
}

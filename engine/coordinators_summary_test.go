package engine

import (
	"errors"
	"testing"
)

// TestSummarizeShardPass: the one start-up line counts the shards a pass
// opened, released and left not ready.
func TestSummarizeShardPass(t *testing.T) {
	boom := errors.New("boom")
	cases := []struct {
		name     string
		opened   []bool
		released []bool
		errs     []error
		want     shardPassSummary
	}{
		{"nothing changed", []bool{false, false}, []bool{false, false}, []error{nil, nil}, shardPassSummary{}},
		{"start", []bool{true, true, false}, []bool{false, false, false}, []error{nil, nil, boom}, shardPassSummary{opened: 2, notReady: 1}},
		{"moved away", []bool{false, true}, []bool{true, false}, []error{nil, nil}, shardPassSummary{opened: 1, released: 1}},
	}
	for _, c := range cases {
		if got := summarizeShardPass(c.opened, c.released, c.errs); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

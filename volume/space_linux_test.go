package volume

import (
	"math"
	"testing"
)

func TestClampBytes(t *testing.T) {
	for _, tc := range []struct {
		blocks, bsize uint64
		want          int64
	}{
		{0, 4096, 0},
		{10, 4096, 40960},
		{math.MaxInt64 / 4096, 4096, math.MaxInt64 / 4096 * 4096},
		{math.MaxInt64/4096 + 1, 4096, math.MaxInt64},
		{math.MaxUint64, 1, math.MaxInt64},
		{5, 0, 0},
	} {
		if got := clampBytes(tc.blocks, tc.bsize); got != tc.want {
			t.Errorf("clampBytes(%d, %d) = %d, want %d", tc.blocks, tc.bsize, got, tc.want)
		}
	}
}

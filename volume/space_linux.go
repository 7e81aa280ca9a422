package volume

import (
	"fmt"
	"math"
	"syscall"
)

// Space implements Spacer with statfs(2).
func (osFS) Space(dir string) (Space, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return Space{}, fmt.Errorf("statfs %s: %w", dir, err)
	}
	bsize := uint64(st.Bsize)
	return Space{Total: clampBytes(st.Blocks, bsize), Usable: clampBytes(st.Bavail, bsize)}, nil
}

// clampBytes is blocks*bsize, capped at the largest int64 (as Kafka caps a
// file store's size that overflows a long).
func clampBytes(blocks, bsize uint64) int64 {
	if bsize != 0 && blocks > math.MaxInt64/bsize {
		return math.MaxInt64
	}
	return int64(blocks * bsize)
}

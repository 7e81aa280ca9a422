package partlog

import "testing"

// TestCheckSnapshotAgainst is the version-conditional rule on its own,
// against the epoch history [(1, 0), (2, 10), (4, 25)] with the log at
// epoch 4, end 40, start 5.
func TestCheckSnapshotAgainst(t *testing.T) {
	ends := map[int32]int64{0: 0, 1: 10, 2: 25, 3: 25, 4: 40}
	endOf := func(e int32) (int32, int64) {
		end, ok := ends[e]
		if !ok {
			return -1, -1
		}
		return e, end
	}
	cases := []struct {
		name   string
		offset int64
		epoch  int32
		want   SnapshotVerdict
	}{
		{"inside its epoch", 8, 1, SnapshotUsable},
		{"at its epoch's end", 10, 1, SnapshotUsable},
		{"zombie: past its epoch's end, below the log end", 12, 1, SnapshotBeyondEpoch},
		{"zombie: past the log end", 50, 1, SnapshotBeyondEpoch},
		{"epoch without data of its own", 25, 3, SnapshotUsable},
		{"current epoch at the log end", 40, 4, SnapshotUsable},
		{"current epoch past the log end", 41, 4, SnapshotBeyondEpoch},
		{"below log start", 4, 1, SnapshotBelowStart},
		{"future epoch", 30, 5, SnapshotFutureEpoch},
	}
	for _, tc := range cases {
		if got := CheckSnapshotAgainst(tc.offset, tc.epoch, 5, endOf); got != tc.want {
			t.Errorf("%s: (%d, e%d) = %d, want %d", tc.name, tc.offset, tc.epoch, got, tc.want)
		}
	}
}

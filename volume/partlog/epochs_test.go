package partlog

import "testing"

func TestEndOffsetForEpoch(t *testing.T) {
	history := []EpochEntry{{Epoch: 2, StartOffset: 0}, {Epoch: 5, StartOffset: 100}, {Epoch: 7, StartOffset: 250}}
	const current, hw = 7, 400
	tests := []struct {
		name      string
		requested int32
		epoch     int32
		end       int64
	}{
		{"undefined", -1, -1, -1},
		{"newer than current", 8, -1, -1},
		{"current epoch ends at the high watermark", 7, 7, 400},
		{"a recorded epoch ends where the next starts", 5, 5, 250},
		{"the first recorded epoch", 2, 2, 100},
		{"an epoch between recorded ones maps to the one below", 3, 2, 100},
		{"another gap", 6, 5, 250},
		{"older than the history", 1, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, end := endOffsetForEpoch(history, current, hw, tt.requested)
			if e != tt.epoch || end != tt.end {
				t.Fatalf("endOffsetForEpoch(%d) = (%d, %d), want (%d, %d)", tt.requested, e, end, tt.epoch, tt.end)
			}
		})
	}
	if e, end := endOffsetForEpoch(nil, 0, 0, 0); e != 0 || end != 0 {
		t.Fatalf("empty log at epoch 0: (%d, %d)", e, end)
	}
}

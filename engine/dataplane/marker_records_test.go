package dataplane

import (
	"testing"

	"github.com/kaas-dev/kaas/volume/records"
)

// TestMarkerBatchDecodes: the transaction markers kaas writes are control
// batches volume/records accepts (ListOffsets decodes stored batches with
// it; produced batches are validated with it).
func TestMarkerBatchDecodes(t *testing.T) {
	v := records.Acquire()
	defer v.Release()
	for _, commit := range []bool{false, true} {
		b := appendMarkerBatch(nil, 7, 3, commit, 12, 1700000000000)
		if err := v.Validate(b, 1<<20); err != nil {
			t.Fatalf("commit=%v: %v", commit, err)
		}
	}
}

package dataplane

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kaas-dev/kaas/volume/memfs"
	"github.com/kaas-dev/kaas/volume/partlog"
	"github.com/kaas-dev/kaas/volume/partlog/partlogtest"
)

// TestPartitionReconfigure: new log limits apply to the appends after
// them (a lower segment.bytes rolls, LogAppendTime stamps, a lower
// max.message.bytes refuses), and invalid limits are refused.
func TestPartitionReconfigure(t *testing.T) {
	ctx := context.Background()
	p, _ := openTestPartition(t, memfs.New(), 1, 0)
	b := func() []byte { return partlogtest.MakeBatch(1, 1500, 1, -1, -1, -1) }
	for i := 0; i < 3; i++ {
		if _, err := p.Produce(ctx, b()); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(p.Log().Segments()); n != 1 {
		t.Fatalf("%d segments", n)
	}
	if err := p.Reconfigure(partlog.Limits{SegmentBytes: 2048, LogAppendTime: true, MaxBatchBytes: 1600}); err != nil {
		t.Fatal(err)
	}
	res, err := p.Produce(ctx, b())
	if err != nil {
		t.Fatal(err)
	}
	if n := len(p.Log().Segments()); n != 2 {
		t.Fatalf("%d segments after lowering segment.bytes, want 2", n)
	}
	got, err := p.Log().Read(res.BaseOffset, 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := partlog.ParseBatchHeader(got)
	if err != nil || !h.LogAppendTime() || h.MaxTimestamp < time.Now().Add(-time.Minute).UnixMilli() {
		t.Fatalf("batch after LogAppendTime: %+v, %v", h, err)
	}
	if _, err := p.Produce(ctx, partlogtest.MakeBatch(2, 1500, 1, -1, -1, -1)); !errors.Is(err, partlog.ErrBatchTooLarge) {
		t.Fatalf("batch above the new max.message.bytes: %v", err)
	}
	if err := p.Reconfigure(partlog.Limits{SegmentBytes: -5}); err == nil {
		t.Fatal("a negative segment.bytes was applied")
	}
}

package dataplane

import (
	"context"
	"encoding/binary"

	"github.com/kaas-dev/kaas/volume/partlog"
)

// WriteCleaned pins the group of segments g of lg and writes what f keeps
// of them into one cleaned segment, finished (durable, not yet named by
// the manifest). The caller swaps it in (partlog.Log.SwapCleaned) and
// then releases the set. throttle (nil: none) is charged with what is
// read and written. On error nothing is left pinned or written.
func WriteCleaned(ctx context.Context, lg *partlog.Log, f *Filter, g []partlog.SegmentInfo, throttle partlog.Throttle) (*partlog.SegmentSet, *partlog.CleanedWriter, error) {
	set, err := lg.PinSealed(g[0].Base, g[len(g)-1].EndOffset)
	if err != nil {
		return nil, nil, err
	}
	w, err := lg.NewCleanedWriter(g[0].Base)
	if err != nil {
		set.Release()
		return nil, nil, err
	}
	var buf []byte
	err = set.Walk(ctx, throttle, func(b []byte) error {
		var err error
		buf, _, err = f.Batch(buf[:0], int64(binary.BigEndian.Uint64(b)), b)
		if err != nil || len(buf) == 0 {
			return err
		}
		if throttle != nil {
			if err := throttle(ctx, len(buf)); err != nil {
				return err
			}
		}
		return w.Append(buf)
	})
	if err == nil {
		err = w.Finish()
	}
	if err != nil {
		w.Abort()
		set.Release()
		return nil, nil, err
	}
	return set, w, nil
}

package groupstore

import (
	"bytes"
	"fmt"

	"github.com/kaas-dev/kaas/volume/partlog"
)

// replayChunk is how much of the log one Read asks for during load.
const replayChunk = 1 << 20

// replay applies every record of lg from offset from up to the high
// watermark to tbl and returns how many records and log bytes it read.
// Values are copied: the read buffer is reused.
func replay(lg *partlog.Log, from int64, tbl *table) (records int, n int64, err error) {
	var buf []byte
	hw := lg.HighWatermark()
	for off := from; off < hw; {
		buf, err = lg.Read(off, replayChunk, buf[:0])
		if err != nil {
			return records, n, fmt.Errorf("replay at offset %d: %w", off, err)
		}
		if len(buf) == 0 {
			return records, n, fmt.Errorf("replay at offset %d: nothing read below the high watermark %d", off, hw)
		}
		for b := buf; len(b) > 0; {
			h, err := partlog.ParseBatchHeader(b)
			if err != nil || h.Size() > int64(len(b)) {
				return records, n, fmt.Errorf("replay at offset %d: %w: %v", off, errBadBatch, err)
			}
			err = decodeBatch(b[:h.Size()], func(offset int64, key, value []byte) {
				if offset < from {
					return // the first batch may start before from
				}
				if value != nil {
					value = bytes.Clone(value)
				}
				tbl.put(key, value, offset)
				records++
			})
			if err != nil {
				return records, n, fmt.Errorf("replay batch at offset %d: %w", h.BaseOffset, err)
			}
			n += h.Size()
			off = h.NextOffset()
			b = b[h.Size():]
		}
	}
	return records, n, nil
}

package dataplane

import (
	"errors"
	"time"

	"github.com/kaas-dev/kaas/volume/partlog"
)

// enforceRetention deletes the segments pol expires from the partition's
// log and then the producer snapshots the new log start leaves behind
// (all below it but the newest: Kafka keeps the producer state). A
// released (closed) partition is skipped; a log that fails or finds itself
// fenced is reported like a failed append, so the reconciler reopens it.
func (p *Partition) EnforceRetention(now time.Time, pol partlog.RetentionPolicy) (partlog.RetentionResult, error) {
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return partlog.RetentionResult{}, nil
	}
	res, err := p.log.EnforceRetention(now, pol)
	switch {
	case errors.Is(err, partlog.ErrClosed):
		return res, nil // released meanwhile
	case err != nil:
		if p.log.Err() != nil {
			if p.onFailure != nil {
				p.onFailure(p)
			}
		} else {
			p.logger.Error(err, "retention pass failed; the next one retries")
		}
		return res, err
	}
	if res.Segments == 0 {
		return res, nil
	}
	p.logger.V(1).Info("retention deleted segments", "segments", res.Segments, "bytes", res.Bytes,
		"logStartOffset", res.LogStartOffset, "retentionMs", pol.Ms, "retentionBytes", pol.Bytes)
	p.logStartMoved(res.LogStartOffset)
	if err := pruneSnapshots(p.fsys, p.dir, res.LogStartOffset); err != nil {
		// A leftover snapshot below the log start is never used; the next
		// pass or snapshot removes it.
		p.logger.V(1).Info("pruning producer snapshots below the log start failed", "err", err.Error())
	}
	return res, nil
}

package engine

import (
	"context"
	"slices"
	"time"

	"github.com/kaas-dev/kaas/engine/desired"
	"github.com/kaas-dev/kaas/volume/partlog"
)

// DefaultRetentionCheckInterval is Kafka's log.retention.check.interval.ms.
const DefaultRetentionCheckInterval = 5 * time.Minute

// Retention (cleanup.policy=delete). Every RetentionCheckInterval each
// broker runs one pass over the partitions it serves: the owner of a
// partition is its only writer, so it is also the only one that deletes its
// segments (partlog.Log.EnforceRetention: the manifest first, fenced, then
// the files, handles closed first). Nothing here touches a partition this
// broker does not hold open; a pass that races a release finds the log
// closed and skips it.

// retentionLoop runs a retention pass every RetentionCheckInterval until
// ctx ends.
func (e *Engine) retentionLoop(ctx context.Context) {
	t := time.NewTicker(e.cfg.RetentionCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			e.retentionPass(ctx)
		}
	}
}

// RetentionStats sums what one retention pass deleted.
type RetentionStats struct {
	Partitions int   // partitions checked
	Segments   int   // segments deleted
	Bytes      int64 // their bytes
	Failed     int   // partitions whose pass failed
}

// retentionPolicyOf returns the topic's retention policy, and false when
// its cleanup.policy does not include delete.
func retentionPolicyOf(spec desired.TopicSpec) (partlog.RetentionPolicy, bool) {
	return partlog.RetentionPolicy{Ms: spec.ConfigInt("retention.ms"), Bytes: spec.ConfigInt("retention.bytes")}, slices.Contains(desired.SplitConfigList(spec.ConfigValue("cleanup.policy")), "delete")
}

// retentionPass enforces retention once on every partition this broker
// serves, at the engine clock's now.
func (e *Engine) retentionPass(ctx context.Context) RetentionStats {
	var st RetentionStats
	now := e.cfg.Now()
	for _, sp := range e.routes.served() {
		if ctx.Err() != nil {
			break
		}
		pol, ok := retentionPolicyOf(sp.spec)
		if !ok {
			continue
		}
		st.Partitions++
		res, err := sp.p.EnforceRetention(now, pol)
		st.Segments += res.Segments
		st.Bytes += res.Bytes
		if err != nil {
			st.Failed++
		}
	}
	if st.Segments > 0 || st.Failed > 0 {
		e.log.V(1).Info("retention pass", "partitions", st.Partitions, "deletedSegments", st.Segments,
			"deletedBytes", st.Bytes, "failed", st.Failed)
	}
	return st
}

// logLimits returns the log limits a topic's configs set. Retention
// configs are not among them: the retention pass reads them from the spec
// each time.
// A compacted topic rolls by max.compaction.lag.ms too, as Kafka's
// maxSegmentMs: the active segment is never cleaned.
func logLimits(spec desired.TopicSpec) partlog.Limits {
	age := msDuration(spec.ConfigInt("segment.ms"))
	if pol, ok := compactPolicyOf(spec); ok {
		age = pol.segmentAge
	}
	return partlog.Limits{
		SegmentBytes:  spec.ConfigInt("segment.bytes"),
		SegmentAge:    age,
		MaxBatchBytes: int32(spec.ConfigInt("max.message.bytes")),
		LogAppendTime: spec.ConfigValue("message.timestamp.type") == "LogAppendTime",
	}
}

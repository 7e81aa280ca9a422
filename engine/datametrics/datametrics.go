// Package datametrics holds the data path's Prometheus collectors that need
// no engine state: the group-commit rounds of partition logs and the
// volume's operations and space. Observations are atomics on histograms
// created once; nothing is looked up per call.
package datametrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kaas-dev/kaas/volume/partlog"
	"github.com/kaas-dev/kaas/volume/timedfs"
)

// latencyBuckets span a local SSD's fsync to a struggling NFS server's.
var latencyBuckets = prometheus.ExponentialBuckets(0.0001, 2, 17) // 100µs .. 6.5s

// SyncRounds observes every partition log's group-commit rounds
// (partlog.Config.Rounds) and collects them.
type SyncRounds struct {
	fsync, bytes, fence prometheus.Histogram
}

// NewSyncRounds returns the collector of kaas_produce_fsync_duration_seconds,
// kaas_produce_fsync_batch_bytes and kaas_fence_check_duration_seconds.
func NewSyncRounds() *SyncRounds {
	return &SyncRounds{
		fsync: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kaas_produce_fsync_duration_seconds",
			Help: "Duration of each group-commit fsync round of a partition log.", Buckets: latencyBuckets}),
		bytes: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kaas_produce_fsync_batch_bytes",
			Help:    "Bytes made durable by each group-commit fsync round of a partition log.",
			Buckets: prometheus.ExponentialBuckets(256, 4, 10)}), // 256 B .. 64 MiB
		fence: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kaas_fence_check_duration_seconds",
			Help: "Duration of the fence re-check of each group-commit round.", Buckets: latencyBuckets}),
	}
}

// ObserveSyncRound implements partlog.RoundObserver.
func (s *SyncRounds) ObserveSyncRound(r partlog.SyncRound) {
	if r.Synced {
		s.fsync.Observe(r.Fsync.Seconds())
		s.bytes.Observe(float64(r.Bytes))
	}
	if r.FenceChecked {
		s.fence.Observe(r.Fence.Seconds())
	}
}

// Describe implements prometheus.Collector.
func (s *SyncRounds) Describe(ch chan<- *prometheus.Desc) {
	for _, h := range []prometheus.Histogram{s.fsync, s.bytes, s.fence} {
		h.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (s *SyncRounds) Collect(ch chan<- prometheus.Metric) {
	for _, h := range []prometheus.Histogram{s.fsync, s.bytes, s.fence} {
		h.Collect(ch)
	}
}

// VolumeOps observes a timedfs-wrapped filesystem's calls and collects
// kaas_volume_op_duration_seconds{op}.
type VolumeOps struct {
	vec *prometheus.HistogramVec
	by  [timedfs.NumOps]prometheus.Observer
}

// NewVolumeOps returns the collector; every op's series exists from the
// start.
func NewVolumeOps() *VolumeOps {
	v := &VolumeOps{vec: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kaas_volume_op_duration_seconds",
		Help: "Duration of each call into the volume, by operation.", Buckets: latencyBuckets}, []string{"op"})}
	for op := timedfs.Op(0); op < timedfs.NumOps; op++ {
		v.by[op] = v.vec.WithLabelValues(op.String())
	}
	return v
}

// ObserveOp implements timedfs.Observer.
func (v *VolumeOps) ObserveOp(op timedfs.Op, d time.Duration) {
	if op >= 0 && op < timedfs.NumOps {
		v.by[op].Observe(d.Seconds())
	}
}

// Describe implements prometheus.Collector.
func (v *VolumeOps) Describe(ch chan<- *prometheus.Desc) { v.vec.Describe(ch) }

// Collect implements prometheus.Collector.
func (v *VolumeOps) Collect(ch chan<- prometheus.Metric) { v.vec.Collect(ch) }

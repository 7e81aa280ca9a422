package main

import (
	"flag"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kaas-dev/kaas/engine"
	"github.com/kaas-dev/kaas/engine/datametrics"
	"github.com/kaas-dev/kaas/volume/partlog"
	"github.com/kaas-dev/kaas/wire"
)

// volumeSpaceEvery bounds how often a scrape asks the volumes their size
// (statfs; on a shared volume a call to the server).
const volumeSpaceEvery = 5 * time.Second

// metricsOptions are the flags of /metrics.
type metricsOptions struct {
	enabled                        bool
	maxTopicSeries, maxGroupSeries int
}

func (m *metricsOptions) register(fs *flag.FlagSet) {
	fs.BoolVar(&m.enabled, "metrics", true, "serve Prometheus metrics at /metrics on the admin address and count what they report; false leaves the data path without a single metrics observation (KAAS_METRICS)")
	fs.IntVar(&m.maxTopicSeries, "metrics-max-topic-series", 1000, "topics with series of their own in /metrics' per-topic families; the rest are summed into topic=\"other\" (KAAS_METRICS_MAX_TOPIC_SERIES)")
	fs.IntVar(&m.maxGroupSeries, "metrics-max-group-series", 1000, "consumer groups with series of their own in /metrics' per-group families; the rest are summed into group=\"other\" (KAAS_METRICS_MAX_GROUP_SERIES)")
}

// newRegistry is the one list of what /metrics serves (docs/metrics.md):
// add a package's collector here. m caps the per-topic and per-group
// series; volOps times the volume seam (timedfs, wrapped around the
// broker's filesystem); volumes are the directories whose free space is
// reported, by volume label; checked are the start-up volume check's
// outcomes (nil when it was off).
func newRegistry(srv *wire.Server, eng *engine.Engine, m metricsOptions, volOps *datametrics.VolumeOps, volumes map[string]string, checked volumeChecks) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		eng.ControlPlaneCollector(),
		eng.CleanerCollector(),
		eng.PartitionMetrics(m.maxTopicSeries),
		eng.CoordinatorMetrics(m.maxGroupSeries, m.maxTopicSeries),
		datametrics.NewVolumeSpace(volumes, volumeSpaceEvery, nil, nil),
		datametrics.NewWriteSlots(partlog.DefaultWriteSlots()),
	)
	if r := eng.SyncRoundMetrics(); r != nil {
		reg.MustRegister(r)
	}
	if volOps != nil {
		reg.MustRegister(volOps)
	}
	if c := srv.Collector(m.maxTopicSeries); c != nil {
		reg.MustRegister(c)
	}
	if checked != nil {
		g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kaas_volume_check_passed",
			Help: "1 if the start-up volume check passed on the volume (data or control), 0 if it failed and the broker started anyway (--check-volume=warn); absent with --check-volume=off."},
			[]string{"volume"})
		for vol, ok := range checked {
			v := 0.0
			if ok {
				v = 1
			}
			g.WithLabelValues(vol).Set(v)
		}
		reg.MustRegister(g)
	}
	return reg
}

// metricsHandler serves reg in Prometheus's exposition formats.
func metricsHandler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
}

// metricVolumes are the volumes kaas_volume_free_bytes reports: the data
// directory and the control plane's (the cluster directory).
func metricVolumes(data, clusterDir string) map[string]string {
	return map[string]string{"data": data, "control": clusterDir}
}

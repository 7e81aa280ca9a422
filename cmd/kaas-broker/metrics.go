package main

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kaas-dev/kaas/engine"
	"github.com/kaas-dev/kaas/engine/datametrics"
	"github.com/kaas-dev/kaas/wire"
)

// volumeSpaceEvery bounds how often a scrape asks the volumes their size
// (statfs; on a shared volume a call to the server).
const volumeSpaceEvery = 5 * time.Second

// newRegistry is the one list of what /metrics serves (docs/metrics.md):
// add a package's collector here. maxTopicSeries caps the per-topic
// series (--metrics-max-topic-series); volOps times the volume seam
// (timedfs, wrapped around the broker's filesystem); volumes are the
// directories whose free space is reported, by volume label.
func newRegistry(srv *wire.Server, eng *engine.Engine, maxTopicSeries int, volOps *datametrics.VolumeOps, volumes map[string]string) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		eng.ControlPlaneCollector(),
		eng.SyncRoundMetrics(),
		eng.PartitionMetrics(maxTopicSeries),
		datametrics.NewVolumeSpace(volumes, volumeSpaceEvery, nil, nil),
	)
	if volOps != nil {
		reg.MustRegister(volOps)
	}
	if c := srv.Collector(maxTopicSeries); c != nil {
		reg.MustRegister(c)
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

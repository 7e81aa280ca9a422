package main

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kaas-dev/kaas/engine"
	"github.com/kaas-dev/kaas/wire"
)

// newRegistry is the one list of what /metrics serves (docs/metrics.md):
// add a package's collector here. maxTopicSeries caps the per-topic
// series (--metrics-max-topic-series).
func newRegistry(srv *wire.Server, eng *engine.Engine, maxTopicSeries int) *prometheus.Registry {
	_ = eng // engine collectors come here
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	if c := srv.Collector(maxTopicSeries); c != nil {
		reg.MustRegister(c)
	}
	return reg
}

// metricsHandler serves reg in Prometheus's exposition formats.
func metricsHandler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
}

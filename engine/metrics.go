package engine

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics of the control plane (issue 19), read at scrape time from what
// the engine keeps in memory: no scrape reads the volume, and the counters
// are atomics added to where their events happen (machinebook.go).

var (
	descMachineRecords = prometheus.NewDesc("kaas_machine_records",
		"State machine records as this broker's reconciler last wrote or drove them, by kind and current state; kind \"reconcile\" counts the reconcile keys whose last pass did not succeed, by outcome.",
		[]string{"kind", "state"}, nil)
	descReconcileTotal = prometheus.NewDesc("kaas_reconcile_total",
		"Reconcile steps run: each state machine step under its machine's kind, each reconcile key pass under the key's kind (topic, groups, trash), by result.",
		[]string{"kind", "result"}, nil)
	descReconcileAttempts = prometheus.NewDesc("kaas_reconcile_attempts",
		"Highest attempt count of a machine record of this kind not at its end state (or of a reconcile key of this kind whose last pass failed); 0 when none.",
		[]string{"kind"}, nil)
	descHeartbeatAge = prometheus.NewDesc("kaas_heartbeat_age_seconds",
		"Seconds since this broker last saw the broker's heartbeat advance (brokers that left are not listed).",
		[]string{"broker"}, nil)
	descLeaseRemaining = prometheus.NewDesc("kaas_lease_remaining_seconds",
		"Seconds this broker may still serve on its last successful heartbeat (the serving lease: lease minus a quarter of margin); 0 when expired or before the first beat.",
		nil, nil)
	descControllerEpoch = prometheus.NewDesc("kaas_controller_epoch",
		"Highest controller epoch this broker has seen a claim for.", nil, nil)
	descIsController = prometheus.NewDesc("kaas_is_controller",
		"1 if this broker holds the current controller claim, else 0.", nil, nil)
	descProducerIDs = prometheus.NewDesc("kaas_producer_ids_total",
		"Producer IDs issued by this broker.", nil, nil)
	descAssignmentVersion = prometheus.NewDesc("kaas_assignment_version",
		"Version of the partition assignment this broker last read (the controller raises it with each change it writes); 0 before the first.", nil, nil)
	descClusterPartitions = prometheus.NewDesc("kaas_cluster_partitions",
		"Topic partitions in the assignment this broker last read: every partition the cluster should serve (coordinator shards not counted).", nil, nil)
)

// controlCollector is the control plane's prometheus.Collector.
type controlCollector struct{ e *Engine }

// ControlPlaneCollector returns the collector of the control plane's
// families: machine records, reconcile steps and attempts, heartbeat ages,
// the lease, the controller, producer IDs issued.
func (e *Engine) ControlPlaneCollector() prometheus.Collector { return controlCollector{e} }

func (c controlCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descMachineRecords, descReconcileTotal, descReconcileAttempts,
		descHeartbeatAge, descLeaseRemaining, descControllerEpoch, descIsController, descProducerIDs,
		descAssignmentVersion, descClusterPartitions} {
		ch <- d
	}
}

func (c controlCollector) Collect(ch chan<- prometheus.Metric) {
	e := c.e
	counts, attempts := e.machines.tally()
	for _, st := range e.queue.Statuses() {
		counts[machineCount{ReconcileKind, st.Outcome.String()}]++
		attempts[string(st.Key.Kind)] = max(attempts[string(st.Key.Kind)], st.Attempts)
	}
	for mc, n := range counts {
		ch <- prometheus.MustNewConstMetric(descMachineRecords, prometheus.GaugeValue, float64(n), mc.kind, mc.state)
	}
	for _, kind := range e.reconciles.kinds {
		n := e.reconciles.by[kind]
		for r := range resultCount {
			ch <- prometheus.MustNewConstMetric(descReconcileTotal, prometheus.CounterValue, float64(n[r].Load()), kind, resultNames[r])
		}
		ch <- prometheus.MustNewConstMetric(descReconcileAttempts, prometheus.GaugeValue, float64(attempts[kind]), kind)
	}
	for _, a := range e.obs.ProgressAges() {
		ch <- prometheus.MustNewConstMetric(descHeartbeatAge, prometheus.GaugeValue, a.Age.Seconds(), strconv.Itoa(int(a.ID)))
	}
	remaining := 0.0
	if from := e.leaseFrom.Load(); from != 0 {
		left := e.cfg.Lease - e.cfg.Lease/4 - (e.obs.Now() - time.Duration(from-1))
		remaining = max(left.Seconds(), 0)
	}
	ch <- prometheus.MustNewConstMetric(descLeaseRemaining, prometheus.GaugeValue, remaining)
	st := e.elector.Status()
	ch <- prometheus.MustNewConstMetric(descControllerEpoch, prometheus.GaugeValue, float64(st.Epoch))
	is := 0.0
	if st.IsController {
		is = 1
	}
	ch <- prometheus.MustNewConstMetric(descIsController, prometheus.GaugeValue, is)
	ch <- prometheus.MustNewConstMetric(descProducerIDs, prometheus.CounterValue, float64(e.pids.Issued()))
	var version int64
	partitions := 0
	if a := e.clusterView().assign; a != nil {
		version = a.Version
		for _, ps := range a.Topics {
			partitions += len(ps)
		}
	}
	ch <- prometheus.MustNewConstMetric(descAssignmentVersion, prometheus.GaugeValue, float64(version))
	ch <- prometheus.MustNewConstMetric(descClusterPartitions, prometheus.GaugeValue, float64(partitions))
}

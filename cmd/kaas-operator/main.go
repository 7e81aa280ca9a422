// Command kaas-operator is the Kubernetes operator for kaas Topic and User
// resources (kaas.io/v1alpha1): it writes each resource's topic into the
// desired state on the brokers' shared volume, reports the brokers'
// progress in the resource's status, and deletes the topic when the
// resource is deleted; it writes each User's SCRAM credential into the
// credential files there, and deletes it with the resource. It needs the
// volume mounted, not a running broker; a User's ACLs and quotas it
// applies through the Kafka APIs of the cluster --bootstrap names.
//
//	kaas-operator --data /var/lib/kaas --kubeconfig ~/.kube/config
package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kgo"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/kaas-dev/kaas/cmd/internal/kafkaadmin"
	"github.com/kaas-dev/kaas/cmd/kaas-operator/api/v1alpha1"
	"github.com/kaas-dev/kaas/cmd/kaas-operator/controller"
	"github.com/kaas-dev/kaas/volume"
)

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kaas-operator:", err)
		os.Exit(2)
	}
	hopts := &slog.HandlerOptions{Level: slog.Level(-o.verbosity)}
	var h slog.Handler = slog.NewTextHandler(os.Stderr, hopts)
	if o.logFormat == "json" {
		h = slog.NewJSONHandler(os.Stderr, hopts)
	}
	log := logr.FromSlogHandler(h)
	ctrl.SetLogger(log)
	if err := run(o, log.WithName("kaas-operator")); err != nil {
		log.Error(err, "operator stopped")
		os.Exit(1)
	}
}

func run(o options, log logr.Logger) error {
	if err := checkClusterDir(o.clusterDir); err != nil {
		return err
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("find the Kubernetes API (--kubeconfig, KUBECONFIG or in-cluster): %w", err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	mopts := ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: o.metricsAddr},
		HealthProbeBindAddress:  o.probeAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        "kaas-operator",
		LeaderElectionNamespace: o.leaderElectionNamespace,
		// Step down at once on SIGTERM so a replacement need not wait out
		// the lease; safe because nothing runs after the manager stops.
		LeaderElectionReleaseOnCancel: true,
	}
	if o.namespace != "" {
		mopts.Cache = cache.Options{DefaultNamespaces: map[string]cache.Config{o.namespace: {}}}
	}
	mgr, err := ctrl.NewManager(cfg, mopts)
	if err != nil {
		return fmt.Errorf("start the controller manager: %w", err)
	}
	r := &controller.TopicReconciler{
		Client:         mgr.GetClient(),
		Recorder:       mgr.GetEventRecorder("kaas-operator"),
		FS:             volume.OS(),
		ClusterDir:     o.clusterDir,
		PollInterval:   o.pollInterval,
		ResyncInterval: o.resync,
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the Topic controller: %w", err)
	}
	var kafka *kgo.Client
	if o.kafka.Bootstrap != "" {
		if kafka, err = kafkaadmin.NewClient(o.kafka); err != nil {
			return fmt.Errorf("--bootstrap: %w", err)
		}
		defer kafka.Close()
	}
	ur := &controller.UserReconciler{
		Client:         mgr.GetClient(),
		Secrets:        mgr.GetAPIReader(),
		Recorder:       mgr.GetEventRecorder("kaas-operator"),
		FS:             volume.OS(),
		ClusterDir:     o.clusterDir,
		RetryInterval:  o.pollInterval,
		ResyncInterval: o.resync,
	}
	if kafka != nil {
		ur.Kafka = kafka // a nil *kgo.Client must not become a non-nil interface
	}
	if err := ur.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the User controller: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	log.Info("starting", "clusterDir", o.clusterDir, "namespace", o.namespace, "leaderElect", o.leaderElect,
		"statusPollInterval", o.pollInterval.String(), "resyncInterval", o.resync.String(), "bootstrap", o.kafka.Bootstrap)
	// SetupSignalHandler: SIGTERM or SIGINT stops the manager cleanly.
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		return fmt.Errorf("run the controller manager: %w", err)
	}
	log.Info("stopped")
	return nil
}

package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client/config"

	"github.com/kaas-dev/kaas/cmd/internal/envdefault"
	"github.com/kaas-dev/kaas/cmd/internal/kafkaadmin"
)

// operatorEnv names the environment variable of each flag that has one
// (envdefault.Parse: a malformed value is an error naming it).
var operatorEnv = envdefault.Vars{
	"data":                      "KAAS_DATA_DIR",
	"cluster-dir":               "KAAS_CLUSTER_DIR",
	"leader-election-namespace": "POD_NAMESPACE",
	"log-format":                "KAAS_LOG_FORMAT",
	"v":                         "KAAS_V",
	"bootstrap":                 "KAAS_BOOTSTRAP",
	"tls":                       "KAAS_TLS",
	"tls-ca-file":               "KAAS_TLS_CA_FILE",
	"sasl-mechanism":            "KAAS_SASL_MECHANISM",
	"sasl-username":             "KAAS_SASL_USERNAME",
	"sasl-password-file":        "KAAS_SASL_PASSWORD_FILE",
}

type options struct {
	data, clusterDir        string
	metricsAddr, probeAddr  string
	leaderElect             bool
	leaderElectionNamespace string
	namespace               string
	pollInterval, resync    time.Duration
	logFormat               string
	verbosity               int
	// kafka reaches the cluster's Kafka APIs for Users' ACLs and quotas
	// (no bootstrap: not at all).
	kafka kafkaadmin.Conn
}

// parseFlags reads the command line. --kubeconfig is controller-runtime's
// (with KUBECONFIG and the in-cluster config as fallbacks).
func parseFlags(args []string, out io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("kaas-operator", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&o.data, "data", "./kaas-data", "the brokers' data directory (KAAS_DATA_DIR)")
	fs.StringVar(&o.clusterDir, "cluster-dir", "", "the brokers' cluster directory (KAAS_CLUSTER_DIR; default <data>/__cluster)")
	config.RegisterFlags(fs)
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "address of the Prometheus metrics endpoint; \"0\" disables it")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "elect one active operator among replicas (lease kaas-operator)")
	fs.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader election lease (POD_NAMESPACE; default the pod's own namespace in a cluster)")
	fs.StringVar(&o.namespace, "namespace", "", "watch Topic resources in this namespace only (default: all namespaces)")
	fs.DurationVar(&o.pollInterval, "status-poll-interval", time.Second, "how often a Topic or User that is not ready (opening, deleting, failing, its Secret missing) is looked at again")
	fs.DurationVar(&o.resync, "resync-interval", 30*time.Second, "how often a settled Topic or User is checked against the volume")
	fs.StringVar(&o.logFormat, "log-format", "text", "log format: text or json (KAAS_LOG_FORMAT)")
	fs.IntVar(&o.verbosity, "v", 0, "log verbosity (logr V level; KAAS_V)")
	fs.StringVar(&o.kafka.Bootstrap, "bootstrap", "", "Kafka listener(s) the Users' ACLs and quotas are applied through, HOST:PORT[,HOST:PORT] (KAAS_BOOTSTRAP; default none: a User with spec.authorization or spec.quotas is not Ready)")
	fs.BoolVar(&o.kafka.TLS, "tls", false, "the --bootstrap listener speaks TLS (KAAS_TLS; implied by --tls-ca-file)")
	fs.StringVar(&o.kafka.CAFile, "tls-ca-file", "", "PEM CAs the listener's certificate is verified against (KAAS_TLS_CA_FILE; default the system's)")
	fs.StringVar(&o.kafka.SASLMechanism, "sasl-mechanism", "", "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512: how the operator logs in, as a super user (KAAS_SASL_MECHANISM)")
	fs.StringVar(&o.kafka.SASLUser, "sasl-username", "", "the operator's SASL user (KAAS_SASL_USERNAME)")
	fs.StringVar(&o.kafka.SASLPasswordFile, "sasl-password-file", "", "file holding its password (KAAS_SASL_PASSWORD_FILE)")
	src, err := envdefault.Parse(fs, args, operatorEnv)
	if err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	switch {
	case o.logFormat != "text" && o.logFormat != "json":
		return o, src.Invalid("log-format", "must be text or json")
	case o.verbosity < 0:
		return o, src.Invalid("v", "must not be negative")
	case o.pollInterval <= 0:
		return o, src.Invalid("status-poll-interval", "must be positive")
	case o.resync <= 0:
		return o, src.Invalid("resync-interval", "must be positive")
	case o.kafka.Bootstrap == "" && (o.kafka.SASLMechanism != "" || o.kafka.TLS || o.kafka.CAFile != ""):
		return o, src.Invalid("bootstrap", "is needed by --sasl-mechanism, --tls and --tls-ca-file")
	}
	o.kafka.ClientID = "kaas-operator"
	if o.clusterDir == "" {
		o.clusterDir = filepath.Join(o.data, "__cluster")
	}
	abs, err := filepath.Abs(o.clusterDir)
	if err != nil {
		return o, err
	}
	o.clusterDir = abs
	return o, nil
}

// checkClusterDir fails early, and says why, when the cluster directory is
// not there: the volume is not mounted, or no broker has started on it.
func checkClusterDir(dir string) error {
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("cluster directory %s does not exist: mount the brokers' volume and point --cluster-dir (or --data) at it; a broker creates it on its first start", dir)
	case err != nil:
		return fmt.Errorf("cluster directory %s: %w", dir, err)
	case !st.IsDir():
		return fmt.Errorf("cluster directory %s is not a directory", dir)
	}
	return nil
}

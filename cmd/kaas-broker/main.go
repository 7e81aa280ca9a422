// Command kaas-broker runs one kaas broker: a Kafka-protocol server whose
// partitions live on a (possibly shared) volume.
//
//	kaas-broker --data ./kaas-data --listen 127.0.0.1:9092
//
// Every flag has an environment equivalent (KAAS_DATA_DIR, KAAS_CLUSTER_DIR,
// KAAS_BROKER_ID, KAAS_LISTEN, KAAS_ADVERTISE, KAAS_ADMIN, KAAS_ZONE,
// KAAS_AUTO_CREATE_TOPICS, KAAS_DEFAULT_PARTITIONS, KAAS_HEARTBEAT_INTERVAL,
// KAAS_LEASE, KAAS_LOG_FORMAT, KAAS_V, KAAS_CHECK_VOLUME);
// a flag given on the command line wins. A malformed value, or a value out
// of its flag's range, stops the broker at start (exit status 2), naming
// the variable or flag (env.go, validate.go).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"

	"github.com/kaas-dev/kaas/cmd/internal/envdefault"
	"github.com/kaas-dev/kaas/engine"
	"github.com/kaas-dev/kaas/engine/cluster"
	"github.com/kaas-dev/kaas/engine/datametrics"
	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/timedfs"
	"github.com/kaas-dev/kaas/wire"
)

type options struct {
	data, clusterDir, listen, advertise, admin, zone, logFormat, faults string
	crashAtStep                                                         string
	id, defaultPartitions, verbosity                                    int
	autoCreate                                                          bool
	maxRequestBytes                                                     int
	maxQueuedBytes                                                      int64
	shutdownTimeout                                                     time.Duration
	heartbeatInterval, lease                                            time.Duration
	groups                                                              groupOptions
	txns                                                                txnOptions
	retention                                                           retentionOptions
	cleaner                                                             cleanerOptions
	volumeCheck                                                         volumeCheckOptions
	unsafe                                                              unsafeOptions
	budgets                                                             budgetOptions
	conns                                                               connOptions
	listeners                                                           listenerOptions
	adminSec                                                            adminOptions
	authz                                                               authzOptions
	metrics                                                             metricsOptions
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("kaas-broker", flag.ContinueOnError)
	fs.StringVar(&o.data, "data", "./kaas-data", "data directory (KAAS_DATA_DIR)")
	fs.StringVar(&o.clusterDir, "cluster-dir", "", "cluster directory (KAAS_CLUSTER_DIR; default <data>/__cluster)")
	fs.IntVar(&o.id, "id", 0, "broker ID (KAAS_BROKER_ID)")
	fs.StringVar(&o.listen, "listen", "127.0.0.1:9092", "Kafka listener address (KAAS_LISTEN)")
	fs.StringVar(&o.advertise, "advertise", "", "address advertised to clients (KAAS_ADVERTISE; default the listener's)")
	fs.StringVar(&o.admin, "admin", "127.0.0.1:9644", "admin HTTP address for /healthz, /readyz, /status, /reconcile-status, /metrics (KAAS_ADMIN; empty disables)")
	o.metrics.register(fs)
	fs.StringVar(&o.zone, "zone", "", "this broker's zone, advertised as its rack (KAAS_ZONE)")
	fs.BoolVar(&o.autoCreate, "auto-create-topics", true, "create unknown topics on Metadata and Produce (KAAS_AUTO_CREATE_TOPICS)")
	fs.IntVar(&o.defaultPartitions, "default-partitions", 1, "partitions of auto-created topics (KAAS_DEFAULT_PARTITIONS)")
	fs.IntVar(&o.maxRequestBytes, "max-request-bytes", 100<<20, "largest request frame accepted (socket.request.max.bytes; KAAS_MAX_REQUEST_BYTES)")
	fs.Int64Var(&o.maxQueuedBytes, "max-queued-request-bytes", 512<<20, "memory budget shared by all request frames being read, at least --max-request-bytes (queued.max.request.bytes; KAAS_MAX_QUEUED_REQUEST_BYTES)")
	fs.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 20*time.Second, "how long SIGTERM waits for in-flight requests (no environment equivalent)")
	fs.DurationVar(&o.heartbeatInterval, "heartbeat-interval", cluster.DefaultHeartbeatInterval, "how often the broker writes its heartbeat and reads the others' and the assignment (KAAS_HEARTBEAT_INTERVAL)")
	fs.DurationVar(&o.lease, "lease", cluster.DefaultLease, "a broker whose heartbeat does not advance for this long is dead (KAAS_LEASE)")
	fs.IntVar(&o.verbosity, "v", 0, "log verbosity (logr V level; KAAS_V)")
	o.groups.register(fs)
	o.txns.register(fs)
	o.retention.register(fs)
	o.cleaner.register(fs)
	o.volumeCheck.register(fs)
	fs.StringVar(&o.faults, "inject-faults", "", "for tests only: fail, delay or stall volume operations or kill the process at one, [OP:GLOB[:N]>]...OP:GLOB:ERRNO|KILL|DELAY=D|STALL=D[:COUNT[@FIRST][:before|after]],... (see volume/faultfs/spec.go; KAAS_INJECT_FAULTS)")
	fs.StringVar(&o.crashAtStep, "crash-at-step", "", "for tests only: exit with status 2 right after a machine step is recorded, KIND:STEP[:OBJECT] (see crashstep.go; KAAS_CRASH_AT_STEP)")
	o.unsafe.register(fs)
	o.budgets.register(fs)
	o.conns.register(fs)
	o.listeners.register(fs)
	o.adminSec.register(fs)
	o.authz.register(fs)
	fs.StringVar(&o.logFormat, "log-format", "text", "log format: text or json (KAAS_LOG_FORMAT)")
	src, err := envdefault.Parse(fs, args, brokerEnv)
	if err != nil {
		return o, withHint(err)
	}
	return o, o.validate(src)
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "kaas-broker:", err)
		os.Exit(2)
	}
	hopts := &slog.HandlerOptions{Level: slog.Level(-o.verbosity)}
	var h slog.Handler = slog.NewTextHandler(os.Stderr, hopts)
	if o.logFormat == "json" {
		h = slog.NewJSONHandler(os.Stderr, hopts)
	}
	log := logr.FromSlogHandler(h).WithName("kaas-broker").WithValues("broker", o.id)
	if err := run(o, log); err != nil {
		log.Error(err, "broker stopped")
		os.Exit(1)
	}
}

func run(o options, log logr.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	data, err := filepath.Abs(o.data)
	if err != nil {
		return err
	}
	clusterDir := o.clusterDir
	if clusterDir != "" {
		if clusterDir, err = filepath.Abs(clusterDir); err != nil {
			return err
		}
	}
	fsys, err := withFaults(volume.OS(), o.faults)
	if err != nil {
		return err
	}
	if o.faults != "" {
		log.Info("volume fault injection is on: this broker is for tests", "faults", o.faults)
	}
	if fsys, err = withCrashAtStep(fsys, o.crashAtStep, exitAtStep); err != nil {
		return err
	}
	if o.crashAtStep != "" {
		log.Info("crash at a machine step is on: this broker is for tests", "crashAtStep", o.crashAtStep)
	}
	negative, err := o.unsafe.controls()
	if err != nil {
		return err
	}
	if len(negative) > 0 {
		log.Info("UNSAFE: negative controls are on; this broker loses acknowledged data by design and is for chaos tests only", "controls", o.unsafe.negative)
	}
	if negative[noFsync] {
		fsys = noSyncFS{fsys}
	}
	clock := &jumpClock{}
	now := time.Now
	if o.unsafe.debugClock {
		now = clock.Now
		log.Info("debug clock is on: POST /debug/clock?jump=D moves this broker's wall clock; for tests only")
	}
	volumeChecked, err := o.volumeCheck.check(ctx, log, data, clusterDir, int32(o.id), o.lease)
	if err != nil {
		return err
	}
	credentialsDir := clusterDir
	if credentialsDir == "" {
		credentialsDir = filepath.Join(data, "__cluster") // the engine's default
	}
	setup, err := o.listeners.listen(o, log, fsys, credentialsDir)
	if err != nil {
		return err
	}
	bound, advertise, listenerAddrs := setup.bound, setup.interBroker, setup.byName
	closeListeners := func() {
		for _, b := range bound {
			_ = b.ln.Close()
		}
	}
	// The fd limit, raised to the hard limit, divided between the control
	// plane, connections and partitions (fdbudget.go).
	fds := o.budgets.startFDBudget(log, o.conns.maxConnections)
	// Brokers reach each other for transactions (markers, verification),
	// on the inter-broker listener.
	peers := wire.NewPeers(fmt.Sprintf("kaas-broker-%d", o.id), setup.peers)
	defer peers.Close()
	acls, err := o.authz.config(o.listeners.interBrokerAuth.superUsers)
	if err != nil {
		closeListeners()
		return err
	}
	// Every volume call is timed (kaas_volume_op_duration_seconds), so a
	// slow shared filesystem shows.
	var volOps *datametrics.VolumeOps
	if o.metrics.enabled {
		volOps = datametrics.NewVolumeOps()
		fsys = timedfs.Wrap(fsys, volOps, time.Now)
	}
	eng, err := engine.New(engine.Config{
		FS: fsys, DataDir: data, ClusterDir: clusterDir, BrokerID: int32(o.id),
		AutoCreateTopics: o.autoCreate, DefaultPartitions: int32(o.defaultPartitions),
		Logger:    log.WithName("engine"),
		KafkaAddr: advertise, Listeners: listenerAddrs, AdminAddr: o.admin, Zone: o.zone,
		HeartbeatInterval: o.heartbeatInterval, Lease: o.lease, Now: now,
		Groups: o.groups.config(), Txns: o.txns.config(), Peers: peers,
		ProducerIDExpiration:   o.txns.producerIDExpiration,
		MaxPartitionsPerBroker: fds.Partitions, MaxProducersPerPartition: o.budgets.maxProducersPerPartition,
		ParallelOpens:          fds.OpenParallel,
		RetentionCheckInterval: o.retention.checkInterval,
		Cleaner:                o.cleaner.config(),
		ACLs:                   acls,
		DisableMetrics:         !o.metrics.enabled,
	}, engine.WithNegativeControls(engineControls(negative)))
	if err != nil {
		closeListeners()
		return fmt.Errorf("start engine: %w", err)
	}
	// Before serving anything: one process per broker ID.
	if err := eng.StartCheck(ctx); err != nil {
		closeListeners()
		var running *cluster.AlreadyRunningError
		if errors.As(err, &running) {
			return fmt.Errorf("%w; refusing to start a second process with --id %d", err, o.id)
		}
		return fmt.Errorf("start check: %w", err)
	}
	srv, err := wire.NewServer(wire.Config{Engine: eng, Logger: log.WithName("wire"), Advertise: advertise,
		Rack: o.zone, MaxFrameBytes: int32(o.maxRequestBytes), MaxQueuedBytes: o.maxQueuedBytes,
		MaxConnections: fds.Connections, MaxConnectionsPerIP: o.conns.maxConnectionsPerIP, FetchMaxBytes: int32(o.conns.fetchMaxBytes),
		MaxProduceBytesPerSecond: float64(o.conns.maxProduceBytesPerSecond),
		BrokerPrincipals:         setup.brokerPrincipals, DisableMetrics: !o.metrics.enabled})
	if err != nil {
		closeListeners()
		return err
	}

	engCtx, stopEngine := context.WithCancel(context.Background())
	defer stopEngine()
	engDone := make(chan error, 1)
	go func() { engDone <- eng.Run(engCtx) }()

	var admin *http.Server
	if o.admin != "" {
		aln, err := net.Listen("tcp", o.admin)
		if err != nil {
			stopEngine()
			<-engDone
			return fmt.Errorf("admin listen on %s: %w", o.admin, err)
		}
		var metrics http.Handler
		if o.metrics.enabled {
			metrics = metricsHandler(newRegistry(srv, eng, o.metrics, volOps, metricVolumes(data, credentialsDir), volumeChecked))
		}
		mux := adminMux(eng, srv, o.adminSec.pprof, metrics)
		if o.unsafe.debugClock {
			clock.serve(mux)
		}
		if admin, err = o.adminSec.serve(aln, mux, log.WithName("admin")); err != nil {
			_ = aln.Close()
			stopEngine()
			<-engDone
			return err
		}
	}
	srvDone := make(chan error, len(bound))
	var addrs []string
	for _, b := range bound {
		go func() { srvDone <- b.srv(srv) }()
		addrs = append(addrs, b.wl.Name+"://"+b.ln.Addr().String())
	}
	log.Info("kaas broker started", "listeners", strings.Join(addrs, ","), "advertised", listenerAddrs, "admin", o.admin,
		"data", data, "clusterID", eng.ClusterID())

	select {
	case <-ctx.Done():
		log.Info("shutting down: finishing in-flight requests")
	case err := <-srvDone:
		stopEngine()
		<-engDone
		return err
	case err := <-engDone:
		return fmt.Errorf("engine stopped: %w", err)
	}
	sctx, cancel := context.WithTimeout(context.Background(), o.shutdownTimeout)
	defer cancel()
	if err := eng.ResignCoordinators(); err != nil {
		log.Error(err, "closing group coordinators")
	}
	srv.Shutdown(sctx)
	if admin != nil {
		_ = admin.Shutdown(sctx)
	}
	stopEngine() // releases every partition: fsync, producer snapshot, handles closed
	if err := <-engDone; err != nil {
		return fmt.Errorf("release partitions: %w", err)
	}
	log.Info("stopped cleanly")
	return nil
}

func advertisedFrom(a *net.TCPAddr) string {
	host := a.IP.String()
	if a.IP.IsUnspecified() {
		if h, err := os.Hostname(); err == nil {
			host = h
		}
	}
	return net.JoinHostPort(host, strconv.Itoa(a.Port))
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

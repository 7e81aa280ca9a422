package main

import (
	"errors"

	"github.com/kaas-dev/kaas/cmd/internal/envdefault"
)

// brokerEnv names the environment variable of each flag that has one. A
// set variable is the flag's default, parsed by the flag itself
// (envdefault.Parse); --shutdown-timeout has none.
var brokerEnv = envdefault.Vars{
	"data":        "KAAS_DATA_DIR",
	"cluster-dir": "KAAS_CLUSTER_DIR",
	"id":          "KAAS_BROKER_ID",
	"listen":      "KAAS_LISTEN",

	"listeners":                      "KAAS_LISTENERS",
	"listener-security-protocol-map": "KAAS_LISTENER_SECURITY_PROTOCOL_MAP",
	"advertised-listeners":           "KAAS_ADVERTISED_LISTENERS",
	"inter-broker-listener":          "KAAS_INTER_BROKER_LISTENER",
	"tls-cert-file":                  "KAAS_TLS_CERT_FILE",
	"tls-key-file":                   "KAAS_TLS_KEY_FILE",
	"tls-client-ca-file":             "KAAS_TLS_CLIENT_CA_FILE",
	"tls-client-auth":                "KAAS_TLS_CLIENT_AUTH",
	"tls-principal-mapping-rules":    "KAAS_TLS_PRINCIPAL_MAPPING_RULES",
	"sasl-mechanisms":                "KAAS_SASL_MECHANISMS",
	"connections-max-reauth":         "KAAS_CONNECTIONS_MAX_REAUTH",
	"oauth-jwks-file":                "KAAS_OAUTH_JWKS_FILE",
	"oauth-issuer":                   "KAAS_OAUTH_ISSUER",
	"oauth-audience":                 "KAAS_OAUTH_AUDIENCE",
	"inter-broker-sasl-mechanism":    "KAAS_INTER_BROKER_SASL_MECHANISM",
	"inter-broker-username":          "KAAS_INTER_BROKER_USERNAME",
	"inter-broker-password-file":     "KAAS_INTER_BROKER_PASSWORD_FILE",
	"inter-broker-tls-ca-file":       "KAAS_INTER_BROKER_TLS_CA_FILE",
	"super-users":                    "KAAS_SUPER_USERS",
	"authorizer":                     "KAAS_AUTHORIZER",
	"allow-everyone-if-no-acl-found": "KAAS_ALLOW_EVERYONE_IF_NO_ACL_FOUND",

	"advertise":                    "KAAS_ADVERTISE",
	"admin":                        "KAAS_ADMIN",
	"admin-tls-cert-file":          "KAAS_ADMIN_TLS_CERT_FILE",
	"admin-tls-key-file":           "KAAS_ADMIN_TLS_KEY_FILE",
	"admin-auth-token-file":        "KAAS_ADMIN_AUTH_TOKEN_FILE",
	"admin-pprof":                  "KAAS_ADMIN_PPROF",
	"metrics":                      "KAAS_METRICS",
	"metrics-max-topic-series":     "KAAS_METRICS_MAX_TOPIC_SERIES",
	"metrics-max-group-series":     "KAAS_METRICS_MAX_GROUP_SERIES",
	"zone":                         "KAAS_ZONE",
	"auto-create-topics":           "KAAS_AUTO_CREATE_TOPICS",
	"default-partitions":           "KAAS_DEFAULT_PARTITIONS",
	"max-request-bytes":            "KAAS_MAX_REQUEST_BYTES",
	"max-queued-request-bytes":     "KAAS_MAX_QUEUED_REQUEST_BYTES",
	"max-connections":              "KAAS_MAX_CONNECTIONS",
	"max-connections-per-ip":       "KAAS_MAX_CONNECTIONS_PER_IP",
	"fetch-max-bytes":              "KAAS_FETCH_MAX_BYTES",
	"max-produce-bytes-per-second": "KAAS_MAX_PRODUCE_BYTES_PER_SECOND",
	"heartbeat-interval":           "KAAS_HEARTBEAT_INTERVAL",
	"lease":                        "KAAS_LEASE",
	"v":                            "KAAS_V",
	"log-format":                   "KAAS_LOG_FORMAT",
	"check-volume":                 "KAAS_CHECK_VOLUME",

	"max-partitions-per-broker":   "KAAS_MAX_PARTITIONS_PER_BROKER",
	"max-producers-per-partition": "KAAS_MAX_PRODUCERS_PER_PARTITION",
	"sync-workers":                "KAAS_SYNC_WORKERS",
	"handle-idle":                 "KAAS_HANDLE_IDLE",

	"group-initial-rebalance-delay":       "KAAS_GROUP_INITIAL_REBALANCE_DELAY",
	"group-min-session-timeout":           "KAAS_GROUP_MIN_SESSION_TIMEOUT",
	"group-max-session-timeout":           "KAAS_GROUP_MAX_SESSION_TIMEOUT",
	"offsets-retention":                   "KAAS_OFFSETS_RETENTION",
	"offsets-retention-check-interval":    "KAAS_OFFSETS_RETENTION_CHECK_INTERVAL",
	"group-max-size":                      "KAAS_GROUP_MAX_SIZE",
	"transaction-max-timeout":             "KAAS_TRANSACTION_MAX_TIMEOUT",
	"transaction-abort-check-interval":    "KAAS_TRANSACTION_ABORT_CHECK_INTERVAL",
	"transactional-id-expiration":         "KAAS_TRANSACTIONAL_ID_EXPIRATION",
	"producer-id-expiration":              "KAAS_PRODUCER_ID_EXPIRATION",
	"retention-check-interval":            "KAAS_RETENTION_CHECK_INTERVAL",
	"log-cleaner-enable":                  "KAAS_LOG_CLEANER_ENABLE",
	"log-cleaner-threads":                 "KAAS_LOG_CLEANER_THREADS",
	"log-cleaner-dedupe-buffer-size":      "KAAS_LOG_CLEANER_DEDUPE_BUFFER_SIZE",
	"log-cleaner-io-max-bytes-per-second": "KAAS_LOG_CLEANER_IO_MAX_BYTES_PER_SECOND",
	"log-cleaner-backoff":                 "KAAS_LOG_CLEANER_BACKOFF",

	"inject-faults":           "KAAS_INJECT_FAULTS",
	"crash-at-step":           "KAAS_CRASH_AT_STEP",
	"unsafe-negative-control": "KAAS_UNSAFE_NEGATIVE_CONTROL",
	"debug-clock":             "KAAS_DEBUG_CLOCK",
}

// withHint adds what usually causes an empty KAAS_BROKER_ID: the chart
// takes it from the pod-index label through the downward API, which gives
// the empty string when the label is missing.
func withHint(err error) error {
	var ee *envdefault.Error
	if errors.As(err, &ee) && ee.Var == "KAAS_BROKER_ID" && ee.Value == "" {
		return errors.New(err.Error() + "; in Kubernetes the chart sets it from the pod label apps.kubernetes.io/pod-index, " +
			"which StatefulSet pods carry from Kubernetes 1.28 (PodIndexLabel): is the label missing?")
	}
	return err
}

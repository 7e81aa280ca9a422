package main

import (
	"io"
	"path/filepath"
	"testing"
	"time"
)

func TestParseFlags(t *testing.T) {
	t.Setenv("KAAS_DATA_DIR", "/vol/kaas")
	t.Setenv("KAAS_CLUSTER_DIR", "") // unset and empty both mean <data>/__cluster
	o, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.clusterDir != "/vol/kaas/__cluster" || o.metricsAddr != ":8080" || o.probeAddr != ":8081" || o.leaderElect ||
		o.namespace != "" || o.pollInterval != time.Second || o.resync != 30*time.Second || o.logFormat != "text" {
		t.Fatalf("defaults: %+v", o)
	}
	o, err = parseFlags([]string{"--cluster-dir", "cl", "--namespace", "apps", "--status-poll-interval", "200ms", "--log-format", "json"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if abs, _ := filepath.Abs("cl"); o.clusterDir != abs || o.namespace != "apps" || o.pollInterval != 200*time.Millisecond || o.logFormat != "json" {
		t.Fatalf("flags: %+v", o)
	}
	t.Setenv("KAAS_SASL_MECHANISM", "SCRAM-SHA-512")
	o, err = parseFlags([]string{"--bootstrap", "kaas:9092", "--sasl-username", "admin", "--sasl-password-file", "/pw"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if k := o.kafka; k.Bootstrap != "kaas:9092" || k.SASLMechanism != "SCRAM-SHA-512" || k.SASLUser != "admin" || k.SASLPasswordFile != "/pw" || k.ClientID != "kaas-operator" {
		t.Fatalf("Kafka flags: %+v", k)
	}
	for _, bad := range [][]string{{"--log-format", "xml"}, {"--resync-interval", "0s"}, {"stray"}, {"--tls"}} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	if err := checkClusterDir(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("a missing cluster directory passed")
	}
}

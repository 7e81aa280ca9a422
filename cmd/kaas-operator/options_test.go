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
	for _, bad := range [][]string{{"--log-format", "xml"}, {"--resync-interval", "0s"}, {"stray"}} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	if err := checkClusterDir(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("a missing cluster directory passed")
	}
}

package main

import (
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/kaas-dev/kaas/engine/cluster"

	"github.com/kaas-dev/kaas/volume/memfs"
)

func TestFlagsAndEnvironment(t *testing.T) {
	t.Setenv("KAAS_DATA_DIR", "/env/data")
	t.Setenv("KAAS_BROKER_ID", "7")
	o, err := parseFlags([]string{"--listen", "127.0.0.1:19092"})
	if err != nil {
		t.Fatal(err)
	}
	if o.data != "/env/data" || o.id != 7 || o.listen != "127.0.0.1:19092" || o.admin != "127.0.0.1:9644" || !o.autoCreate {
		t.Fatalf("options %+v", o)
	}
	o, err = parseFlags([]string{"--data", "/flag/data"})
	if err != nil || o.data != "/flag/data" {
		t.Fatalf("a flag must win over the environment: %+v, %v", o, err)
	}
	if o.heartbeatInterval != cluster.DefaultHeartbeatInterval || o.lease != cluster.DefaultLease {
		t.Fatalf("cluster timings %v/%v, want the defaults", o.heartbeatInterval, o.lease)
	}
	t.Setenv("KAAS_LEASE", "3s")
	o, err = parseFlags([]string{"--heartbeat-interval", "100ms"})
	if err != nil || o.heartbeatInterval != 100*time.Millisecond || o.lease != 3*time.Second {
		t.Fatalf("cluster timings from flag and environment: %+v, %v", o, err)
	}
	for _, bad := range [][]string{{"--log-format", "xml"}, {"--default-partitions", "0"}, {"--nope"},
		{"--heartbeat-interval", "0s"}, {"--lease", "100ms", "--heartbeat-interval", "200ms"}} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

func TestInjectFaults(t *testing.T) {
	for _, bad := range []string{"Remove", "Frob:/x:EIO", "Remove:/x:EWHAT", "Remove:/x:EIO:many"} {
		if _, err := withFaults(memfs.New(), bad); err == nil {
			t.Errorf("fault spec %q accepted", bad)
		}
	}
	fsys, err := withFaults(memfs.New(), "Remove:/d/*:EBUSY:1")
	if err != nil {
		t.Fatal(err)
	}
	if err := fsys.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := fsys.Create("/d/f")
	if err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	if err := fsys.Remove("/d/f"); !errors.Is(err, syscall.EBUSY) {
		t.Fatalf("first remove: %v, want EBUSY", err)
	}
	if err := fsys.Remove("/d/f"); err != nil {
		t.Fatalf("second remove (fault used up): %v", err)
	}
}

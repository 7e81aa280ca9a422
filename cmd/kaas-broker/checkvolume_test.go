package main

import (
	"context"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"

	"github.com/kaas-dev/kaas/engine/cluster"
	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/memfs"
	"github.com/kaas-dev/kaas/volume/probe/probetest"
)

func TestCheckVolumeFlag(t *testing.T) {
	o, err := parseFlags(nil)
	if err != nil || o.volumeCheck.mode != checkRefuse {
		t.Fatalf("default: %q, %v", o.volumeCheck.mode, err)
	}
	for _, m := range []string{checkWarn, checkOff, checkRefuse} {
		if o, err := parseFlags([]string{"--check-volume=" + m}); err != nil || o.volumeCheck.mode != m {
			t.Fatalf("%s: %q, %v", m, o.volumeCheck.mode, err)
		}
	}
	if _, err := parseFlags([]string{"--check-volume=maybe"}); err == nil {
		t.Fatal("--check-volume=maybe accepted")
	}
	t.Setenv("KAAS_CHECK_VOLUME", "warn")
	if o, _ := parseFlags(nil); o.volumeCheck.mode != checkWarn {
		t.Fatalf("env: %q", o.volumeCheck.mode)
	}
}

// logSink collects log lines.
type logSink struct {
	mu    sync.Mutex
	lines []string
}

func (l *logSink) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, args)
	}, funcr.Options{})
}

func (l *logSink) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// A lone broker on a local disk passes and skips the cross-host check.
func TestCheckVolumeLocal(t *testing.T) {
	var logs logSink
	v := volumeCheckOptions{mode: checkRefuse}
	data := t.TempDir()
	passed, err := v.check(context.Background(), logs.logger(), data, "", 0, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if want := (volumeChecks{"data": true, "control": true}); !maps.Equal(passed, want) {
		t.Errorf("outcomes %v, want %v", passed, want)
	}
	for _, want := range []string{"volume check passed", "cross-host close-to-open check skipped", "no other broker"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
}

// peer runs broker 1's heartbeat and probe responder over view until the
// test ends.
func peer(t *testing.T, m, view volume.FS, clusterDir string) {
	t.Helper()
	hb := cluster.NewHeartbeater(m, clusterDir, cluster.Heartbeat{BrokerID: 1, Incarnation: "one"})
	if err := hb.Beat(); err != nil {
		t.Fatal(err)
	}
	resp := cluster.NewProbeResponder(view, clusterDir, 1, time.Second, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for ctx.Err() == nil {
			_ = hb.Beat()
			resp.Round()
			<-t.C
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// With a live peer whose client serves stale contents, refuse fails
// naming close-to-open, and warn logs it and goes on.
func TestCheckVolumeStalePeer(t *testing.T) {
	for _, mode := range []string{checkRefuse, checkWarn} {
		t.Run(mode, func(t *testing.T) {
			m := memfs.New()
			view := probetest.NewStaleView(m)
			view.SetStale(true)
			peer(t, m, view, "/data/__cluster")
			var logs logSink
			v := volumeCheckOptions{mode: mode, fsys: m}
			passed, err := v.check(context.Background(), logs.logger(), "/data", "", 2, time.Second)
			// The cluster directory lies in the data volume: both failed.
			if want := (volumeChecks{"data": false, "control": false}); !maps.Equal(passed, want) {
				t.Errorf("outcomes %v, want %v", passed, want)
			}
			if mode == checkRefuse {
				if err == nil || !strings.Contains(err.Error(), "close-to-open across hosts") || !strings.Contains(err.Error(), "refusing to start") {
					t.Fatalf("refuse: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("warn: %v", err)
			}
			if !strings.Contains(logs.String(), "close-to-open across hosts") || !strings.Contains(logs.String(), "starting anyway") {
				t.Fatalf("warn log:\n%s", logs.String())
			}
		})
	}
}

// An honest peer passes, and a separate cluster directory is probed too.
func TestCheckVolumeHonestPeer(t *testing.T) {
	m := memfs.New()
	peer(t, m, m, "/cluster")
	var logs logSink
	v := volumeCheckOptions{mode: checkRefuse, fsys: m}
	passed, err := v.check(context.Background(), logs.logger(), "/data", "/cluster", 2, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if want := (volumeChecks{"data": true, "control": true}); !maps.Equal(passed, want) {
		t.Errorf("outcomes %v, want %v", passed, want)
	}
	s := logs.String()
	if !strings.Contains(s, `"dir"="/cluster"`) || !strings.Contains(s, "cross-host close-to-open check passed") {
		t.Fatalf("log:\n%s", s)
	}
}

func TestCheckVolumeOff(t *testing.T) {
	v := volumeCheckOptions{mode: checkOff, fsys: memfs.New()}
	passed, err := v.check(context.Background(), logr.Discard(), "/nowhere", "", 0, time.Second)
	if err != nil || passed != nil {
		t.Fatalf("off: %v, %v; want no outcomes", passed, err)
	}
}

// A stale peer on a separate cluster directory fails the control volume
// only: the data volume's own probe passed.
func TestCheckVolumeStalePeerSeparateCluster(t *testing.T) {
	m := memfs.New()
	view := probetest.NewStaleView(m)
	view.SetStale(true)
	peer(t, m, view, "/cluster")
	v := volumeCheckOptions{mode: checkWarn, fsys: m}
	passed, err := v.check(context.Background(), logr.Discard(), "/data", "/cluster", 2, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if want := (volumeChecks{"data": true, "control": false}); !maps.Equal(passed, want) {
		t.Fatalf("outcomes %v, want %v", passed, want)
	}
}

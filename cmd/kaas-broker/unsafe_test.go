package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kaas-dev/kaas/engine"
	"github.com/kaas-dev/kaas/volume/memfs"
)

func TestNegativeControlsParse(t *testing.T) {
	cases := []struct {
		in      unsafeOptions
		want    []string
		wantErr string
	}{
		{in: unsafeOptions{}},
		{in: unsafeOptions{negative: "no-fsync, no-fence-recheck"}, want: []string{noFsync, noFenceRecheck}},
		{in: unsafeOptions{negative: "wall-clock-lease", debugClock: true}, want: []string{wallClockLease}},
		{in: unsafeOptions{negative: "wall-clock-lease"}, wantErr: "needs --debug-clock"},
		{in: unsafeOptions{negative: "no-acks"}, wantErr: "unknown control"},
	}
	for _, c := range cases {
		got, err := c.in.controls()
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%+v: error %v, want one containing %q", c.in, err, c.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%+v: %v", c.in, err)
		}
		if len(got) != len(c.want) {
			t.Errorf("%+v: got %v, want %v", c.in, got, c.want)
		}
		for _, w := range c.want {
			if !got[w] {
				t.Errorf("%+v: %s not set", c.in, w)
			}
		}
	}
}

// TestEngineControls: each flag value turns on its engine control, and
// no-fsync (this command's own) none.
func TestEngineControls(t *testing.T) {
	for control, want := range map[string]engine.NegativeControls{
		noFsync:           {},
		noFenceRecheck:    {SkipFenceRecheck: true},
		wallClockLease:    {CompareWallClocks: true},
		inPlaceAssignment: {InPlaceAssignment: true},
		noServingLease:    {IgnoreServingLease: true},
	} {
		if got := engineControls(map[string]bool{control: true}); got != want {
			t.Errorf("%s: got %+v, want %+v", control, got, want)
		}
	}
	if got := engineControls(nil); got != (engine.NegativeControls{}) {
		t.Errorf("none: got %+v, want all off", got)
	}
}

func TestJumpClockMovesWall(t *testing.T) {
	var c jumpClock
	mux := http.NewServeMux()
	c.serve(mux)
	before := c.Now()
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("POST", "/debug/clock?jump=-10m", nil))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "-10m0s") {
		t.Fatalf("jump answered %d %q", rec.Code, rec.Body.String())
	}
	if d := c.Now().Sub(before); d > -9*time.Minute {
		t.Errorf("after a -10m jump the clock moved %v", d)
	}
	rec = httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("POST", "/debug/clock?jump=soon", nil))
	if rec.Code != http.StatusBadRequest {
		t.Errorf("bad jump answered %d", rec.Code)
	}
}

func TestNoSyncFSDropsSyncs(t *testing.T) {
	inner := memfs.New()
	fsys := noSyncFS{inner}
	if err := fsys.MkdirAll("d", 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := fsys.Create("d/a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("acked")); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := fsys.SyncDir("d"); err != nil {
		t.Fatal(err)
	}
	// A crash keeps only what was really synced: nothing.
	if _, err := inner.CrashClone().Stat("d/a"); err == nil {
		t.Error("the file survived a crash although no sync reached the volume")
	}
}

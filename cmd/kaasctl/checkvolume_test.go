package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kaas-dev/kaas/volume/probe"
)

func TestCheckVolumeTable(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	if err := run([]string{"check-volume", "--data", dir}, &out); err != nil {
		t.Fatalf("check-volume: %v\n%s", err, out.String())
	}
	s := out.String()
	for _, want := range []string{"CHECK", probe.CheckRename, probe.CheckExclusive, probe.CheckCloseToOpen, probe.CheckDirSync, "pass"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "FAIL") || strings.Contains(s, "no child") {
		t.Errorf("unexpected output:\n%s", s)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 0 {
		t.Errorf("left %d entries in %s", len(ents), dir)
	}
}

func TestCheckVolumeJSONWithPeer(t *testing.T) {
	dir := t.TempDir()
	peer := filepath.Join(t.TempDir(), "peer")
	if err := os.Symlink(dir, peer); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run([]string{"check-volume", "--data", dir, "--peer", peer, "--json"}, &out); err != nil {
		t.Fatalf("check-volume: %v\n%s", err, out.String())
	}
	var res probe.Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("decode: %v\n%s", err, out.String())
	}
	if !res.OK() || res.PeerDir != peer || len(res.Checks) != 5 {
		t.Fatalf("result: %+v", res)
	}
}

// A --peer that is not the same volume fails, non-zero, naming it.
func TestCheckVolumeFails(t *testing.T) {
	var out bytes.Buffer
	err := run([]string{"check-volume", "--data", t.TempDir(), "--peer", t.TempDir(), "--no-child"}, &out)
	if err == nil || !strings.Contains(err.Error(), "same volume") || !strings.Contains(out.String(), "FAIL") {
		t.Fatalf("err = %v\n%s", err, out.String())
	}
}

func TestCheckVolumeUsage(t *testing.T) {
	t.Setenv("KAAS_DATA_DIR", "")
	if err := run([]string{"check-volume"}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "usage") {
		t.Fatalf("err = %v", err)
	}
}

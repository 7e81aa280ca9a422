package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryCommandHasHelp: kaasctl COMMAND --help (and -h) describes that
// command and succeeds, whatever else is on the line.
func TestEveryCommandHasHelp(t *testing.T) {
	cmds := []string{"reconcile-status", "topics", "brokers", "top", "assignment", "check-volume", "groups",
		"transactions", "users", "acls", "quotas", "machines"}
	for _, cmd := range cmds {
		for _, args := range [][]string{{cmd, "--help"}, {cmd, "-h"}, {cmd, "list", "--data", "/nowhere", "--help"}} {
			var out bytes.Buffer
			if err := run(args, &out); err != nil {
				t.Errorf("kaasctl %v: %v", args, err)
				continue
			}
			if !strings.HasPrefix(out.String(), "kaasctl "+cmd+"\n\n  "+cmd) {
				t.Errorf("kaasctl %v does not describe %s:\n%s", args, cmd, out.String())
			}
		}
	}
	if err := run([]string{"frobnicate", "--help"}, &bytes.Buffer{}); err == nil {
		t.Error("help for an unknown command must be an error")
	}
}

// TestDataThatDoesNotExist: a --data or --cluster-dir that does not exist,
// or holds no cluster, is an error, never an empty table.
func TestDataThatDoesNotExist(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	empty := t.TempDir()
	file := filepath.Join(empty, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"reconcile-status", "--data", missing},
		{"topics", "--data", missing},
		{"topics", "describe", "orders", "--data", missing},
		{"brokers", "--data", missing, "--window", "0s"},
		{"assignment", "--data", missing},
		{"top", "--data", missing},
		{"reconcile-status", "--data", empty},
		{"reconcile-status", "--data", file},
		{"reconcile-status", "--cluster-dir", missing},
	} {
		var out bytes.Buffer
		if err := run(args, &out); err == nil {
			t.Errorf("kaasctl %v succeeded:\n%s", args, out.String())
		}
	}
}

// TestTopicsDescribeFromTheVolumeSaysCheckpoint: offsets read from the
// volume are the last checkpoint's, and kaasctl says so.
func TestTopicsDescribeFromTheVolumeSaysCheckpoint(t *testing.T) {
	data := volumeWithStatus(t)
	var out bytes.Buffer
	if err := run([]string{"topics", "describe", "orders", "--data", data}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "offsets as of each partition's last checkpoint") {
		t.Errorf("table does not say where its offsets come from:\n%s", out.String())
	}
	out.Reset()
	if err := run([]string{"topics", "describe", "orders", "--data", data, "-o", "json"}, &out); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got["offsetsFrom"] != "checkpoint" || got["name"] != "orders" {
		t.Errorf("json: %v", got)
	}
}

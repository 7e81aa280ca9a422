package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kaas-dev/kaas/engine/desired"
	"github.com/kaas-dev/kaas/states"
	"github.com/kaas-dev/kaas/volume"
)

// volumeWithStatus lays out a cluster directory as a broker leaves it: two
// desired topics and three machine records, one of them failing.
func volumeWithStatus(t *testing.T) string {
	t.Helper()
	data := t.TempDir()
	cluster := filepath.Join(data, "__cluster")
	fsys := volume.OS()
	for _, s := range []desired.TopicSpec{
		{Name: "orders", ID: "11111111-1111-1111-1111-111111111111", Partitions: 2, Generation: 1},
		{Name: "gone", ID: "22222222-2222-2222-2222-222222222222", Partitions: 1, Deleted: true, Generation: 2},
	} {
		if err := volume.MkdirAllSync(fsys, filepath.Join(cluster, "topics")); err != nil {
			t.Fatal(err)
		}
		if err := desired.WriteTopicSpec(fsys, cluster, s); err != nil {
			t.Fatal(err)
		}
	}
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, r := range []states.Record{
		{Kind: "partition-open", Object: "orders/0", Desired: "serving", State: "serving", Since: since, Owner: "broker-0"},
		{Kind: "partition-open", Object: "orders/1", Desired: "serving", State: "serving", Since: since, Owner: "broker-0"},
		{Kind: "topic-delete", Object: "gone", Desired: "deleted", State: "renamed", Attempts: 3, LastError: "purge: device or resource busy", Since: since, Owner: "broker-0"},
	} {
		if err := states.Save(fsys, cluster, &r); err != nil {
			t.Fatal(err)
		}
	}
	return data
}

func TestReconcileStatusFromTheVolume(t *testing.T) {
	data := volumeWithStatus(t)
	var out bytes.Buffer
	if err := run([]string{"reconcile-status", "--data", data, "-o", "json"}, &out); err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil {
		t.Fatalf("not a JSON array: %v\n%s", err, out.String())
	}
	if len(rows) != 3 {
		t.Fatalf("%d rows, want 3:\n%s", len(rows), out.String())
	}
	for _, key := range []string{"kind", "object", "desired", "state", "attempts", "lastError", "since", "owner"} {
		if _, ok := rows[2][key]; !ok {
			t.Errorf("row has no %q: %v", key, rows[2])
		}
	}
	if rows[2]["since"] != "2026-01-02T03:04:05Z" || rows[2]["attempts"] != float64(3) {
		t.Errorf("failing row = %v", rows[2])
	}

	out.Reset()
	if err := run([]string{"reconcile-status", "--data", data}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"KIND", "topic-delete", "renamed", "purge: device or resource busy", "orders/1"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}

func TestTopicsListFromTheVolume(t *testing.T) {
	data := volumeWithStatus(t)
	var out bytes.Buffer
	if err := run([]string{"topics", "--data", data}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"orders", "live", "gone", "deleting"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("list lacks %q:\n%s", want, out.String())
		}
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"reconcile-status"},                              // no source
		{"reconcile-status", "--data", "x", "-o", "yaml"}, // bad output
		{"frobnicate"},
		{"topics", "describe"},
	} {
		if err := run(args, &bytes.Buffer{}); err == nil {
			t.Errorf("kaasctl %v succeeded, want an error", args)
		}
	}
}

// TestClusterToWrite: users are set before the first broker start, into a
// --data that does not exist yet; a --data that is a file is an error.
func TestClusterToWrite(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "data")
	if got, err := (source{data: missing}).clusterToWrite(); err != nil || got != filepath.Join(missing, "__cluster") {
		t.Fatalf("clusterToWrite of a missing --data = %q, %v; want its __cluster", got, err)
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := (source{data: file}).clusterToWrite(); err == nil {
		t.Fatal("clusterToWrite of a --data that is a file: no error")
	}
}

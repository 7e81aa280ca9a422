package groupstore

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/memfs"
	"github.com/kaas-dev/kaas/volume/partlog"
)

const testDir = "cluster/groups/3"

func testNow() time.Time { return time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC) }

// newVolume is a memfs with the shard directory made durable.
func newVolume(t testing.TB) *memfs.FS {
	t.Helper()
	m := memfs.New()
	if err := volume.MkdirAllSync(m, testDir); err != nil {
		t.Fatal(err)
	}
	return m
}

// openAt opens the shard at epoch (partlog.Open claims the fence itself).
func openAt(t testing.TB, fsys volume.FS, epoch int32, mods ...func(*Config)) (*Store, LoadStats) {
	t.Helper()
	return openWith(t, fsys, epoch, nil, mods...)
}

// openWith is openAt with options for the shard's partition log.
func openWith(t testing.TB, fsys volume.FS, epoch int32, logOpts []partlog.Option, mods ...func(*Config)) (*Store, LoadStats) {
	t.Helper()
	cfg := Config{FS: fsys, Dir: testDir, Index: 3, Epoch: epoch, Now: testNow, Logger: logr.Discard()}
	for _, m := range mods {
		m(&cfg)
	}
	s, st, err := Open(cfg, logOpts...)
	if err != nil {
		t.Fatalf("open at epoch %d: %v", epoch, err)
	}
	return s, st
}

func put(k, v string) Record { return Record{Key: []byte(k), Value: []byte(v)} }
func tomb(k string) Record   { return Record{Key: []byte(k)} }

// model is the expected table: key -> value, deletions removed.
type model map[string]string

func (m model) apply(recs ...Record) {
	for _, r := range recs {
		if r.Value == nil {
			delete(m, string(r.Key))
		} else {
			m[string(r.Key)] = string(r.Value)
		}
	}
}

// appendAcked appends recs as one batch and waits for the acknowledgement.
func appendAcked(t testing.TB, s *Store, m model, recs ...Record) int64 {
	t.Helper()
	base, wait, err := s.Append(recs)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	if err := wait(context.Background()); err != nil {
		t.Fatalf("wait: %v", err)
	}
	if m != nil {
		m.apply(recs...)
	}
	return base
}

// tableOf reads the store's live records and their order.
func tableOf(t testing.TB, s *Store) (model, []string) {
	t.Helper()
	got := model{}
	var order []string
	err := s.Records(func(r Record) error {
		if r.Value == nil {
			t.Errorf("Records returned a tombstone for %q", r.Key)
		}
		if _, dup := got[string(r.Key)]; dup {
			t.Errorf("Records returned %q twice", r.Key)
		}
		got[string(r.Key)] = string(r.Value)
		order = append(order, string(r.Key))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got, order
}

func checkTable(t testing.TB, s *Store, want model) {
	t.Helper()
	got, _ := tableOf(t, s)
	if !maps.Equal(got, want) {
		t.Fatalf("table = %v\nwant    %v", got, want)
	}
}

func closeOK(t testing.TB, s *Store) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
}

// snapshotNames lists the snapshot files in the shard directory, newest first.
func snapshotNames(t testing.TB, fsys volume.FS) []snapshotFile {
	t.Helper()
	files, err := listSnapshots(fsys, testDir)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

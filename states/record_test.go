package states_test

import (
	"testing"
	"time"

	"github.com/kaas-dev/kaas/states"
	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/memfs"
)

func TestNewRecord(t *testing.T) {
	now := time.Date(2025, 3, 4, 5, 6, 7, 0, time.FixedZone("x", 3600))
	got := states.PartitionOpen.NewRecord("orders/0", "id-1", "broker-0", now)
	want := states.Record{Kind: "partition-open", Object: "orders/0", Desired: "serving", State: "pending",
		TopicID: "id-1", Since: now.UTC(), Owner: "broker-0"}
	if got.Kind != want.Kind || got.Object != want.Object || got.Desired != want.Desired || got.State != want.State ||
		got.TopicID != want.TopicID || got.Owner != want.Owner || got.Attempts != 0 || got.LastError != "" ||
		got.Epoch != 0 || got.FencedFrom != nil {
		t.Fatalf("NewRecord = %+v, want %+v", *got, want)
	}
	if !got.Since.Equal(now) || got.Since.Location() != time.UTC {
		t.Fatalf("Since = %v, want %v in UTC", got.Since, now)
	}
}

// TestStatusOnlyRecords: a machine that saves only at its stops writes its
// record without fsync, so a crash may lose it or leave it torn, and both
// read as no record; a progress record is durable once saved, and a torn
// one is an error.
func TestStatusOnlyRecords(t *testing.T) {
	const cluster = "cluster"
	fsys := memfs.New()
	now := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	open := states.PartitionOpen.NewRecord("orders/0", "id-1", "broker-0", now)
	del := states.TopicDelete.NewRecord("orders", "id-1", "broker-0", now)
	for _, rec := range []*states.Record{open, del} {
		if err := states.Save(fsys, cluster, rec); err != nil {
			t.Fatalf("Save %s: %v", rec.Kind, err)
		}
	}

	crashed := fsys.CrashClone()
	if got, err := states.Load(crashed, cluster, open.Kind, open.Object); err != nil || got != nil {
		t.Fatalf("status record after a crash: %+v, %v; want none (saved without fsync)", got, err)
	}
	if got, err := states.Load(crashed, cluster, del.Kind, del.Object); err != nil || got == nil {
		t.Fatalf("progress record after a crash: %+v, %v; want it (saved durably)", got, err)
	}

	for _, rec := range []*states.Record{open, del} {
		p := states.RecordPath(cluster, rec.Kind, rec.Object)
		if err := volume.WriteFileAtomic(fsys, p, []byte(`{"kind":"`)); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := states.Load(fsys, cluster, open.Kind, open.Object); err != nil || got != nil {
		t.Fatalf("torn status record: %+v, %v; want none", got, err)
	}
	if recs, err := states.LoadKind(fsys, cluster, open.Kind); err != nil || len(recs) != 0 {
		t.Fatalf("LoadKind over a torn status record: %+v, %v; want none", recs, err)
	}
	if _, err := states.Load(fsys, cluster, del.Kind, del.Object); err == nil {
		t.Fatal("torn progress record read without an error")
	}
}
